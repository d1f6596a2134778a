// The streaming decode matmul (1-8 tokens) over tiled K-quant weights: one launch for every
// output of a shared x with the same dtype (q, k and v; gate and up), as one stream of records.
//
// Why. The tile-per-block kernel (matmul_decode_tiled.cu) loads a chunk, computes it, loads the
// next: at K = 4096 a warp does two such rounds and the GPU two waves of blocks, so each SM spends
// most of the matmul waiting for loads with nothing to compute, or computing with nothing in flight
// (Q4_K at 30% of copy bandwidth, an 8B model's k and v projections filling half the SMs). Here
// the grid is as many blocks as stay resident, and the records of all outputs (tile after tile,
// each tile's chunks in order) are cut into one contiguous range per warp. A warp keeps kStages
// records in flight in its own shared-memory ring (cp.async) while it computes the oldest, so
// loads and compute overlap in every warp, for every shape.
//
// Bits. Each chunk partial p_c is computed by chunk_partial (tiled_chunk.cuh), the tiled decode
// kernel's code, and folded in chunk order from p_0: y = (((p_0 + p_1) + p_2) ...) * xinv, the
// canonical order of matmul.cu. A warp that owns a whole tile folds in registers. A tile cut by a
// range boundary has its partials stored to scratch by the warps that compute them; each warp then
// adds its count of the tile's chunks to the tile's counter, and the warp that completes it folds
// all partials in chunk order. Who folds never changes the order, so outputs are bit-identical to
// the other decode kernels (kernel-check compares them with the ggml layout's kernels).
//
// Scratch (after matmul.cu's x regions): a counter per slot (zeroed by x_to_f16 before every
// call, reset by each folding warp so the next launch of the same call finds them zero) and the
// partials [slot][chunk][token][16 rows]. A cut tile's slot is the index of the warp that owns its
// chunk 0: distinct for distinct cut tiles, since a warp that owns chunk 0 of two tiles owns all of
// the first.
#include "kernels/launch.cuh"
#include "kernels/matmul/tiled_chunk.cuh"

namespace memra::kernels::matmul_detail {
namespace {

template <DType D>
struct StreamCfg {
  using T = Tiled<D>;
  static constexpr int kWarps = 8, kThreads = kWarps * 32;
  // Records in flight per warp, and blocks per SM (shared memory: 72 KB a block for Q4_K, three a
  // SM; 79 and 102 KB for Q6_K and Q8_0, two). Each SM keeps 60-150 KB of loads in flight.
  static constexpr int kStages = D == DType::q4_k ? 4 : 3;
  static constexpr int kMinBlocks = D == DType::q4_k ? 3 : 2;
  static constexpr int kWarpBytes = kStages * T::kBytes;
  static constexpr int kSmem = kWarps * kWarpBytes;
  static_assert(T::kBytes % 16 == 0, "records copy in 16-byte pieces");
};

// The warp whose range holds record r, for ranges [w * n / n_warps, (w + 1) * n / n_warps).
__device__ __forceinline__ int64_t warp_of(int64_t r, int64_t n_warps, int64_t n) {
  return ((r + 1) * n_warps + n - 1) / n - 1;
}

template <DType D>
__global__ void __launch_bounds__(StreamCfg<D>::kThreads, StreamCfg<D>::kMinBlocks)
    stream_decode_kernel(const StreamArgs s) {
  using C = StreamCfg<D>;
  using T = Tiled<D>;
  detail::wait_for_inputs(detail::Trigger::late);
  extern __shared__ __align__(16) uint8_t smem[];
  const MatmulArgs& a = s.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t n_warps = int64_t{gridDim.x} * C::kWarps;
  const int64_t w = int64_t{blockIdx.x} * C::kWarps + warp;
  const int64_t r0 = w * s.n_records / n_warps, r1 = (w + 1) * s.n_records / n_warps;
  const int n_chunks = a.n_in / kChunk;
  uint8_t* const ring = smem + warp * C::kWarpBytes;

  // Output of record r (outputs are few: a linear scan).
  auto out_of = [&](int64_t r) {
    int o = 0;
    while (o + 1 < s.n_outs && r >= s.out[o + 1].rec_begin) ++o;
    return o;
  };
  // Starts the copy of record r into ring stage `stage` (nothing past the range), one group.
  auto issue = [&](int64_t r, int stage) {
    if (r < r1) {
      const StreamOut& o = s.out[out_of(r)];
      const uint8_t* src = o.w + (r - o.rec_begin) * T::kBytes;
      uint8_t* dst = ring + stage * T::kBytes;
#pragma unroll
      for (int i = lane; i < T::kBytes / 16; i += 32) cp_async16(dst + 16 * i, src + 16 * i);
    }
    cp_async_commit();
  };
  // y of one tile: lane (g, t) holds rows g, g + 8 of tokens 2t, 2t + 1 (mma C layout).
  auto write = [&](const StreamOut& o, int64_t tile, const float(&v)[4]) {
    const int row = static_cast<int>(tile) * 16 + g;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int tok = 2 * t + (i & 1), r = row + 8 * (i >> 1);
      if (tok < a.n_tokens && r < o.n_out) o.y[tok * o.ldy + r] = v[i] * a.xinv[tok];
    }
  };

#pragma unroll
  for (int i = 0; i < C::kStages - 1; ++i) issue(r0 + i, i);
  float total[4] = {};  // the running chunk sum of a tile this warp owns whole
  for (int64_t r = r0; r < r1; ++r) {
    const int i = static_cast<int>(r - r0);
    issue(r + C::kStages - 1, (i + C::kStages - 1) % C::kStages);
    cp_async_wait<C::kStages - 1>();  // this lane's part of record r has landed
    __syncwarp();                     // and every other lane's
    LaneChunk<D> cur;
    cur.load(ring + (i % C::kStages) * T::kBytes, lane);
    __syncwarp();  // the stage is read: the next iteration refills it

    const int o = out_of(r);
    const StreamOut& out = s.out[o];
    const int64_t local = r - out.rec_begin;
    const int c = static_cast<int>(local % n_chunks);
    const int64_t tile = local / n_chunks;
    const int k0 = c * kChunk;
    uint2 b1[kChunk / 16];
#pragma unroll
    for (int st = 0; st < kChunk / 16; ++st) b1[st] = x_frag(a, 0, g, t, k0, st, kChunk / 16);
    float acc[1][4] = {};
    chunk_partial<D, 1>(a, cur, b1, lane, k0, acc);

    const int64_t first = r - c, end = first + n_chunks;  // the tile's records
    if (first >= r0 && end <= r1) {
#pragma unroll
      for (int k = 0; k < 4; ++k) total[k] = c == 0 ? acc[0][k] : __fadd_rn(total[k], acc[0][k]);
      if (c == n_chunks - 1) write(out, tile, total);
      continue;
    }
    // A cut tile: this chunk's partial to scratch, [slot][chunk][token][row].
    const int64_t slot = warp_of(first, n_warps, s.n_records);
    float* part = s.partials + (slot * n_chunks + c) * a.n_tokens * 16;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int tok = 2 * t + (k & 1);
      if (tok < a.n_tokens) part[tok * 16 + g + 8 * (k >> 1)] = acc[0][k];
    }
    const int64_t mine_end = end < r1 ? end : r1;
    if (r != mine_end - 1) continue;
    // This warp's last chunk of the tile: count them in; the warp that completes the count folds.
    __threadfence();
    __syncwarp();
    int last = 0;
    if (lane == 0) {
      const int mine = static_cast<int>(mine_end - (first > r0 ? first : r0));
      last = atomicAdd(s.counters + slot, mine) + mine == n_chunks;
    }
    if (!__shfl_sync(0xffffffffu, last, 0)) continue;
    __threadfence();
    const float* parts = s.partials + slot * n_chunks * a.n_tokens * 16;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int idx = lane + 32 * k, tok = idx >> 4, row = static_cast<int>(tile) * 16 + (idx & 15);
      if (tok >= a.n_tokens || row >= out.n_out) continue;
      float sum = __ldcg(parts + idx);
      for (int cc = 1; cc < n_chunks; ++cc)
        sum = __fadd_rn(sum, __ldcg(parts + cc * a.n_tokens * 16 + idx));
      out.y[tok * out.ldy + row] = sum * a.xinv[tok];
    }
    if (lane == 0) s.counters[slot] = 0;  // for the next launch of this call
  }
  detail::let_dependents_start();
}

// Resident blocks per SM of a kernel with its shared memory, read once per device.
template <DType D>
int blocks_per_sm() {
  using C = StreamCfg<D>;
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 1;
  if (dev < kMaxDevices && cache[dev].load(std::memory_order_relaxed) > 0)
    return cache[dev].load(std::memory_order_relaxed);
  cudaFuncSetAttribute(stream_decode_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       C::kSmem);
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, stream_decode_kernel<D>, C::kThreads,
                                                    C::kSmem) != cudaSuccess ||
      blocks < 1)
    blocks = 1;
  blocks = blocks < kStreamMaxBlocksPerSm ? blocks : kStreamMaxBlocksPerSm;
  if (dev < kMaxDevices) cache[dev].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace

template <DType D>
void launch_decode_stream(const StreamArgs& s, int sms, cudaStream_t stream) {
  using C = StreamCfg<D>;
  // At least two records a warp: a tiny matrix gets fewer blocks rather than idle warps.
  const int64_t resident = int64_t{blocks_per_sm<D>()} * sms;
  const int64_t wanted = (s.n_records + 2 * C::kWarps - 1) / (2 * C::kWarps);
  const auto blocks = static_cast<unsigned>(wanted < resident ? wanted : resident);
  if (blocks == 0) return;
  detail::launch(stream_decode_kernel<D>, blocks, C::kThreads, C::kSmem, stream, s);
}

template void launch_decode_stream<DType::q4_k>(const StreamArgs&, int, cudaStream_t);
template void launch_decode_stream<DType::q6_k>(const StreamArgs&, int, cudaStream_t);
template void launch_decode_stream<DType::q8_0>(const StreamArgs&, int, cudaStream_t);

}  // namespace memra::kernels::matmul_detail
