// The decode matmul (1-64 tokens): a memory-streaming kernel. Each block owns kRows weight rows
// and walks all of K; its warps take the 256-element chunks of K in turn (chunk c goes to warp
// c % kWarps), so even a 4096-row matrix keeps every SM busy. Each warp streams its rows' raw
// blocks through a private two-deep cp.async ring, decodes A fragments straight from shared
// memory and runs the chunk's mma chains for kNT token tiles of 8 (one for 1-8 tokens, eight for
// batched decode of up to 64 sequences, each decoded fragment feeding every tile); the block then
// adds the chunk partials in chunk order (matmul.cu).
#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/decode_common.cuh"
#include "kernels/matmul/fold.cuh"
#include "kernels/matmul/weight_frag.cuh"

namespace memra::kernels::matmul_detail {
namespace {

template <DType D, int kNT>
struct DecodeCfg {
  // 16 rows (one m16 tile) per block: a warp's chunk is short (the kernel is bound by each warp's
  // serial decode latency, not by issue slots: 32-row blocks measured ~2x slower per byte on the
  // H200), and small matrices still make ~3 blocks per SM. One or two token tiles: 8 warps; eight
  // token tiles: 4 warps, so the accumulators and the partials fit.
  static constexpr int kWarps = kNT <= 2 ? 8 : 4;
  static constexpr int kRows = 16;
  static constexpr int kTiles = kRows / 16;
  static constexpr int kTokens = 8 * kNT;
  static constexpr int kSlot = raw_slot_bytes<D>(kChunk);
  static constexpr int kPieces = kSlot / 16;
  static constexpr int kRawBytes = 2 * kWarps * kRows * kSlot;  // [ring 2][warp][row][slot]
  using Sum = ChunkSum<kWarps, kRows, kTokens>;
  static constexpr int kSmem = kRawBytes + Sum::kSmemFloats * 4;
  static constexpr int kThreads = kWarps * 32;
};

// Byte offset of chunk c's first block within a row, and where row `row` of the tile starts
// reading it (rows need not be 16-byte aligned: the copy starts at the aligned address below).
template <DType D>
__device__ __forceinline__ int64_t chunk_start(const MatmulArgs& a, int row, int c) {
  using W = Weight<D>;
  return static_cast<int64_t>(row) * a.row_bytes +
         static_cast<int64_t>(c * kChunk / W::kBlock) * W::kBytes;
}

// Copies this warp's kRows rows of chunk c into dst ([row][slot]), 16-byte pieces over the lanes.
template <DType D, int kNT>
__device__ __forceinline__ void copy_chunk(const MatmulArgs& a, int row0, int c, uint8_t* dst,
                                           int lane) {
  using C = DecodeCfg<D, kNT>;
  using W = Weight<D>;
  const int bytes = min(kChunk, a.n_in - c * kChunk) / W::kBlock * W::kBytes;
#pragma unroll
  for (int i = 0; i < (C::kRows * C::kPieces + 31) / 32; ++i) {
    const int idx = lane + 32 * i;
    const int rr = idx / C::kPieces, p = idx % C::kPieces;
    if (rr < C::kRows) {
      const int64_t start = chunk_start<D>(a, min(row0 + rr, a.n_out - 1), c);
      const int lead = static_cast<int>(start & 15);
      // The last piece may read up to 15 bytes past the row's data; an aligned 16-byte piece that
      // holds a weight byte never crosses a page, so this stays inside the allocation's pages.
      if (p * 16 < lead + bytes)
        cp_async16(dst + rr * C::kSlot + p * 16, a.w + start - lead + p * 16);
    }
  }
}

// acc[n] += one k16 step of an m16 tile for each token tile n: rows[0] / rows[1] are this lane's
// rows g and g + 8; the A fragment is decoded once for all tiles.
template <DType D, int kNT>
__device__ __forceinline__ void mma_step(float (&acc)[kNT][4], const uint8_t* const (&rows)[2],
                                         int s, int t, const uint2 (&b)[kNT]) {
  const uint2 lo = weight_frag<D>(rows[0], s, t);
  const uint2 hi = weight_frag<D>(rows[1], s, t);
  const uint32_t af[4] = {lo.x, hi.x, lo.y, hi.y};
#pragma unroll
  for (int n = 0; n < kNT; ++n) mma_f16(acc[n], af, b[n].x, b[n].y);
}

// Row tiles a packed one-token block takes for K of n_chunks chunks (host and device agree): as
// many as keep its warps busy where K gives each tile at most half of them (Gemma 4 26B-A4B's
// 704-wide down experts: 3 chunks, 2 tiles, 6 warps busy instead of 3), else one.
__host__ __device__ constexpr int packed_tiles(int n_chunks) {
  return n_chunks <= DecodeCfg<DType::f16, 1>::kWarps / 2
             ? DecodeCfg<DType::f16, 1>::kWarps / n_chunks
             : 1;
}

// One block's kRows rows (from row0) over a's tokens (at most 8 kNT): the chunk partials in
// rounds, summed in chunk order (matmul.cu's canonical order), written to a.y. kTrigger: let the
// next kernel's blocks start before the writes (Trigger::late). kPacked (one token only): the
// block owns packed_tiles() row tiles from row0, warp w running chunk w % n_chunks of tile
// w / n_chunks; a tile's partials and their sum are the unpacked block's, so are its bits.
template <DType D, int kNT, bool kTrigger, bool kPacked = false>
__device__ __forceinline__ void decode_rows(const MatmulArgs& a, uint8_t* smem, int row0) {
  using C = DecodeCfg<D, kNT>;
  using W = Weight<D>;
  static_assert(!W::kBias || W::kGroup == 32, "bias groups use the 32-element sums of x");
  constexpr int kWarps = C::kWarps;
  typename C::Sum sum{reinterpret_cast<float*>(smem + C::kRawBytes)};
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n_chunks = (a.n_in + kChunk - 1) / kChunk;
  static_assert(!kPacked || kNT == 1, "packed tiles are a one-token block's");
  const int pack = kPacked ? packed_tiles(n_chunks) : 1;
  const int stride = pack > 1 ? n_chunks : kWarps;      // the warps of a tile (unpacked: all)
  const int first = pack > 1 ? warp % n_chunks : warp;  // this warp's first chunk
  const int wrow0 = row0 + (pack > 1 ? warp / n_chunks * 16 : 0);  // its tile's first row
  const bool active = warp < pack * stride;                        // unpacked: every warp
  const int n_rounds = (n_chunks + stride - 1) / stride;
  auto ring = [&](int slot) { return smem + (slot * kWarps + warp) * C::kRows * C::kSlot; };
  auto x_frag = [&](int n, int k0, int s, int steps) {
    return matmul_detail::x_frag(a, n, g, t, k0, s, steps);
  };

  if (active && first < n_chunks) copy_chunk<D, kNT>(a, wrow0, first, ring(0), lane);
  cp_async_commit();
  for (int r = 0; r < n_rounds; ++r) {
    const int c = r * stride + first;
    if (active && c + stride < n_chunks)
      copy_chunk<D, kNT>(a, wrow0, c + stride, ring((r + 1) & 1), lane);
    cp_async_commit();
    if (active && c < n_chunks) {
      const int k0 = c * kChunk;
      const int steps = min(kChunk, a.n_in - k0) / 16;
      // One token tile: the whole chunk's B fragments, issued before waiting on the weights.
      uint2 b1[kNT == 1 ? kChunk / 16 : 1];
      if constexpr (kNT == 1) {
#pragma unroll
        for (int s = 0; s < kChunk / 16; ++s) b1[s] = x_frag(0, k0, s, steps);
      }
      auto b_step = [&](int s, uint2(&b)[kNT]) {
        if constexpr (kNT == 1) {
          b[0] = b1[s];
        } else {
#pragma unroll
          for (int n = 0; n < kNT; ++n) b[n] = x_frag(n, k0, s, steps);
        }
      };
      const uint8_t* rows[C::kTiles][2];  // this lane's rows g and g + 8 of each m16 tile
#pragma unroll
      for (int m = 0; m < C::kTiles; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int rr = 16 * m + 8 * h + g;
          const int64_t start = chunk_start<D>(a, min(wrow0 + rr, a.n_out - 1), c);
          rows[m][h] = ring(r & 1) + rr * C::kSlot + (start & 15);
        }
      }
      cp_async_wait<1>();  // this chunk's group; the prefetch just issued may still fly
      __syncwarp();
      float acc[C::kTiles][kNT][4] = {};  // the chunk partial p_c (matmul.cu)
      if constexpr (!W::kScaled) {
#pragma unroll
        for (int s = 0; s < kChunk / 16; ++s) {
          if (s < steps) {
            uint2 b[kNT];
            b_step(s, b);
#pragma unroll
            for (int m = 0; m < C::kTiles; ++m) mma_step<D, kNT>(acc[m], rows[m], s, t, b);
          }
        }
      } else if constexpr (kFold<D>) {  // fold.cuh: one chain, then the mins' step
        static_assert(W::kBlock == kChunk, "a chunk is one block");
        FoldRow fr[C::kTiles][2];
#pragma unroll
        for (int m = 0; m < C::kTiles; ++m) {
#pragma unroll
          for (int h = 0; h < 2; ++h) fr[m][h] = fold_row(rows[m][h]);
        }
#pragma unroll
        for (int s = 0; s < kChunk / 16; ++s) {
          uint2 b[kNT];
          b_step(s, b);
#pragma unroll
          for (int m = 0; m < C::kTiles; ++m) {
            const uint2 lo =
                fold_half(weight_frag<D>(rows[m][0], s, t), fold_scale(fr[m][0], s >> 1));
            const uint2 hi =
                fold_half(weight_frag<D>(rows[m][1], s, t), fold_scale(fr[m][1], s >> 1));
            const uint32_t af[4] = {lo.x, hi.x, lo.y, hi.y};
#pragma unroll
            for (int n = 0; n < kNT; ++n) mma_f16(acc[m][n], af, b[n].x, b[n].y);
          }
        }
        uint2 bb[kNT];
        bias_b_tiles(a, 0, c, g, t, bb);
        fold_tiles(acc, fr, bb, t);
      } else {
        constexpr int kGroupSteps = W::kGroup / 16;
        constexpr int kGroups = kChunk / W::kGroup;  // 8 or 16 per chunk
        // The four lanes of a row pair need the same group scales: lane t decodes groups
        // t, t + 4, ... of its rows and the others read them by shuffle.
        float2 own[C::kTiles][2][kGroups / 4];
#pragma unroll
        for (int m = 0; m < C::kTiles; ++m) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int i = 0; i < kGroups / 4; ++i)
              own[m][h][i] = weight_scale<D>(rows[m][h], (4 * i + t) * kGroupSteps);
          }
        }
#pragma unroll
        for (int j = 0; j < kGroups; ++j) {
          const int s0 = j * kGroupSteps;
          const int src = (lane & ~3) | (j & 3);
          float2 sc[C::kTiles][2];
#pragma unroll
          for (int m = 0; m < C::kTiles; ++m) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              sc[m][h].x = __shfl_sync(0xffffffffu, own[m][h][j >> 2].x, src);
              sc[m][h].y = W::kBias ? __shfl_sync(0xffffffffu, own[m][h][j >> 2].y, src) : 0.0f;
            }
          }
          if (s0 < steps) {       // groups never straddle K's end: K is a multiple of the block
            float2 xs[kNT] = {};  // group sums of each tile's tokens 2t, 2t + 1
            if constexpr (W::kBias) {
#pragma unroll
              for (int n = 0; n < kNT; ++n) xs[n] = group_sums(a, n, t, (k0 >> 5) + j);
            }
#pragma unroll
            for (int m = 0; m < C::kTiles; ++m) {
              float grp[kNT][4] = {};
#pragma unroll
              for (int u = 0; u < kGroupSteps; ++u) {
                uint2 b[kNT];
                b_step(s0 + u, b);
                mma_step<D, kNT>(grp, rows[m], s0 + u, t, b);
              }
#pragma unroll
              for (int n = 0; n < kNT; ++n)
                apply_group<W::kBias>(acc[m][n], grp[n], sc[m][0], sc[m][1], xs[n]);
            }
          }
        }
      }
      sum.store(acc, r, warp, g, t);
    }
    __syncthreads();  // round r's partials are all written
    if (pack == 1) sum.fold(r, n_chunks);
  }
  if constexpr (kTrigger) detail::let_dependents_start();  // only the writes are left
  if (pack > 1)
    sum.fold_write_packed(a, row0, pack, n_chunks);
  else
    sum.write(a, row0);
}

template <DType D, int kNT>
__global__ void __launch_bounds__(DecodeCfg<D, kNT>::kThreads, kNT == 1 ? 3 : 2)
    decode_kernel(const MatmulArgs a) {
  detail::wait_for_inputs(detail::Trigger::late);
  extern __shared__ __align__(16) uint8_t smem[];
  decode_rows<D, kNT, true>(a, smem, static_cast<int>(blockIdx.x) * DecodeCfg<D, kNT>::kRows);
}

// Expert blockIdx.y's rows, 8 kNT at a time, over its matrix in the file's layout (each pass the
// same instructions as a decode of those rows alone: the outputs are matmul's bits for each row).
// The ggml-layout form of tiled_decode_grouped_kernel (matmul_decode_tiled.cu), for expert
// matrices the tiled layout cannot hold (K no multiple of 256: Gemma 4 26B-A4B's 704-wide down).
// The pass loop is tiled_decode_grouped_kernel's, written out again on purpose: sharing it (a
// lambda, or a function returning the pass's args) made ptxas spill more in both kernels, up to
// 380 bytes per instantiation more.
// (Two blocks a SM, not the plain kernel's three at one token tile: the passes' state on top of
// its 80 registers spilled 80-200 bytes; at 128 a few types still spill 12-90 bytes, at one
// block a SM none, which halves the warps in flight. Not measured yet.)
template <DType D, int kNT>
__global__ void __launch_bounds__(DecodeCfg<D, kNT>::kThreads, 2)
    decode_grouped_kernel(const MatmulArgs x, const ExpertRows rows) {
  detail::wait_for_inputs(detail::Trigger::late);
  extern __shared__ __align__(16) uint8_t smem[];
  const int e = static_cast<int>(blockIdx.y);
  const int begin = rows.begin[e], end = rows.begin[e + 1];
  for (int r0 = begin; r0 < end; r0 += 8 * kNT) {
    MatmulArgs a = x;
    a.w += static_cast<int64_t>(e) * rows.expert_bytes;
    a.xh += static_cast<int64_t>(r0) * a.n_in;
    a.xsum += static_cast<int64_t>(r0) * a.xsum_stride;
    a.xinv += r0;
    a.y += static_cast<int64_t>(r0) * a.ldy;
    a.n_tokens = min(8 * kNT, end - r0);
    __syncthreads();  // the previous pass's last fold has read the partials
    decode_rows<D, kNT, false>(a, smem, static_cast<int>(blockIdx.x) * DecodeCfg<D, kNT>::kRows);
  }
}

// Pair blockIdx.y of a decode step's (token, expert) pairs: expert ids[pair]'s matrix in the
// file's layout times x row pair / x_div into y row pair. The one-token decode kernel's
// instructions on those operands (each token column of a pass is independent of its batch mates,
// so these are the grouped kernel's bits too), without the expert sort, the gather of y and
// the grouped grid's empty blocks: at one token that grid is 128 experts x every row block, of
// which 8 experts have work. kPacked: packed_tiles() row tiles a block (MEMRA_MOE_GGML_PACK=0:
// one).
template <DType D, bool kPacked>
__global__ void __launch_bounds__(DecodeCfg<D, 1>::kThreads, 2)
    decode_pairs_kernel(const MatmulArgs x, const ExpertPairs pairs) {
  detail::wait_for_inputs(detail::Trigger::late);
  extern __shared__ __align__(16) uint8_t smem[];
  const int pair = static_cast<int>(blockIdx.y);
  const int64_t row = pair / pairs.x_div;
  MatmulArgs a = x;
  a.w += static_cast<int64_t>(__ldg(pairs.ids + pair)) * pairs.expert_bytes;
  a.xh += row * a.n_in;
  a.xsum += row * a.xsum_stride;
  a.xinv += row;
  a.y += static_cast<int64_t>(pair) * a.ldy;
  a.n_tokens = 1;
  const int tiles = kPacked ? packed_tiles((a.n_in + kChunk - 1) / kChunk) : 1;
  decode_rows<D, 1, true, kPacked>(a, smem,
                                   static_cast<int>(blockIdx.x) * tiles * DecodeCfg<D, 1>::kRows);
}

// The pair kernel's packed blocks, by default since measured (Gemma 4 26B-A4B's down experts at
// one token 23.5 -> 17.4 us, c1 188.1 -> 193.7 tok/s: docs/PERFORMANCE.md, twenty-first round);
// MEMRA_MOE_GGML_PACK=0 runs one row tile a block.
bool ggml_pairs_packed() {
  static const bool packed = env_switch("MEMRA_MOE_GGML_PACK", true);
  return packed;
}

template <DType D, int kNT>
void launch_grouped_tiles(const MatmulArgs& a, const ExpertRows& rows, cudaStream_t stream) {
  using C = DecodeCfg<D, kNT>;
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(decode_grouped_kernel<D, kNT>, C::kSmem, smem_set);
  const dim3 grid(static_cast<unsigned>((a.n_out + C::kRows - 1) / C::kRows),
                  static_cast<unsigned>(rows.n_expert));
  detail::launch(decode_grouped_kernel<D, kNT>, grid, C::kThreads, C::kSmem, stream, a, rows);
}

}  // namespace

template <DType D>
void launch_decode_grouped(const MatmulArgs& a, const ExpertRows& rows, cudaStream_t stream) {
  // One token tile a pass where the experts average at most 8 rows (decode batches), eight
  // otherwise, as the tiled form.
  if (a.n_tokens <= 8 * rows.n_expert)
    launch_grouped_tiles<D, 1>(a, rows, stream);
  else
    launch_grouped_tiles<D, 8>(a, rows, stream);
}

template <DType D, bool kPacked>
void launch_pairs(const MatmulArgs& a, const ExpertPairs& pairs, cudaStream_t stream) {
  using C = DecodeCfg<D, 1>;
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(decode_pairs_kernel<D, kPacked>, C::kSmem, smem_set);
  const int rows = (kPacked ? packed_tiles((a.n_in + kChunk - 1) / kChunk) : 1) * C::kRows;
  const dim3 grid(static_cast<unsigned>((a.n_out + rows - 1) / rows),
                  static_cast<unsigned>(pairs.n_pairs));
  if (pairs.n_pairs > 0)
    detail::launch(decode_pairs_kernel<D, kPacked>, grid, C::kThreads, C::kSmem, stream, a, pairs);
}

template <DType D>
void launch_decode_pairs(const MatmulArgs& a, const ExpertPairs& pairs, cudaStream_t stream) {
  if (ggml_pairs_packed())
    launch_pairs<D, true>(a, pairs, stream);
  else
    launch_pairs<D, false>(a, pairs, stream);
}

template <DType D, int kNT>
void launch_decode_tiles(const MatmulArgs& a, cudaStream_t stream) {
  using C = DecodeCfg<D, kNT>;
  static_assert(C::kSmem <= kMaxSmem, "shared memory over the sm_80 limit");
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(decode_kernel<D, kNT>, C::kSmem, smem_set);
  const unsigned blocks = static_cast<unsigned>((a.n_out + C::kRows - 1) / C::kRows);
  detail::launch(decode_kernel<D, kNT>, blocks, C::kThreads, C::kSmem, stream, a);
}

// 9-16 tokens take two token tiles a block instead of eight with six empty, as the tiled decode
// kernel's form (docs/PERFORMANCE.md, twenty-seventh and twenty-eighth rounds). Measured at 16
// tokens on the 8B shapes, eight tiles -> two (us, receipts/2026-12-03-kernel-bench-16-ggml-two-
// tiles-{0,1}.json): Q4_0 down 86.8 -> 42.0, Q5_K q/k/v 51.6 -> 25.3, down 78.1 -> 41.6, Q4_K
// output 782 -> 336, F16 down 121 -> 103; every dtype and shape faster. The same mma chains for
// each token: the same bits. MEMRA_TWO_TILE_DECODE=0 gives the eight-tile form (the A/B).
template <DType D>
void launch_decode(const MatmulArgs& a, cudaStream_t stream) {
  if (a.n_tokens <= 8) {
    launch_decode_tiles<D, 1>(a, stream);
  } else if (a.n_tokens <= kTwoTileTokens && two_tile_decode_enabled()) {
    launch_decode_tiles<D, 2>(a, stream);
  } else {
    launch_decode_tiles<D, 8>(a, stream);
  }
}

#define MEMRA_INSTANTIATE(D)                                                                  \
  template void launch_decode<D>(const MatmulArgs&, cudaStream_t);                            \
  template void launch_decode_grouped<D>(const MatmulArgs&, const ExpertRows&, cudaStream_t); \
  template void launch_decode_pairs<D>(const MatmulArgs&, const ExpertPairs&, cudaStream_t);
MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_INSTANTIATE)
#undef MEMRA_INSTANTIATE

}  // namespace memra::kernels::matmul_detail
