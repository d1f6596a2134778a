// The one-token decode matmul over tiled K-quant weights (Q4_K, Q6_K, Q8_0): its kernel, switches
// and launches. A block's code, and why it is shaped so, is decode_single_block.cuh, which the
// persistent chain (matmul_decode_chain.cu) shares.
#include "core/env.h"
#include "kernels/matmul/decode_single_block.cuh"

namespace memra::kernels::matmul_detail {
namespace {

using namespace single_decode;

// MEMRA_SINGLE_PACK=0: one tile a block for any K (the A/B; the same bits).
bool pack_enabled() {
  static const bool enabled = env_switch("MEMRA_SINGLE_PACK", true);
  return enabled;
}

// MEMRA_SINGLE_ROUNDS: how a block of one row tile (K over eight chunks) sums its rounds. "free"
// (the default): each warp walks its chunks c = warp, warp + 8, ... without waiting for the other
// warps, each chunk's partial lands in its own slot of shared memory (n_chunks x 16 floats), and
// after one block barrier 16 threads add them in chunk order. "barrier": a block barrier after
// every round of eight chunks, at which the round's partials join the running sums (ChunkSum,
// two buffers of eight). The same additions in the same order (matmul.cu's canonical one), so the
// same bits. Why: the barrier held every warp of a block in step, loading together and then
// computing together, and the fold behind it ran on warp 0 before that warp's next load.
// Measured on the H200 (docs/PERFORMANCE.md, twenty-sixth round): Q4_K at the 8B shapes q/k/v
// 10.0 -> 9.5 us, gate 15.0 -> 14.4, down 17.6 -> 16.7; 8B Q4_K_M c1 301.5 -> 304.9 tok/s.
bool free_rounds() {
  static const bool free = env_choice("MEMRA_SINGLE_ROUNDS", {"barrier", "free"}, 1) == 1;
  return free;
}

// kExperts: MultiOut's expert mode, where a block first finds its pair's expert matrix, x row and
// y row; the arithmetic after that is the same code. kRawX: x read raw (x.x_raw, one_token_x.cuh:
// XRaw; plain products only), else its prepared form. outs.tile_begin counts blocks here (the
// launchers' pack_blocks), `pack` tiles a block. early: round 0's weights are loaded before the
// wait (EarlyChunk; plain products only). free: free_rounds(), with n_chunks x 16 floats of
// slots (dynamic shared memory where the round buffers are too small). kC0: how x read raw reaches
// column 0's lanes (one_token_x.cuh: Column0).
template <DType D, bool kExperts, bool kRawX, Column0 kC0 = Column0::shuffle>
__global__ void __launch_bounds__(kThreads, 3)
    single_decode_kernel(const MatmulArgs x, const MultiOut outs, int pack, bool early, bool free) {
  const EarlyChunk<D> first =
      early_chunk<D>(x, outs, pack, early && !kExperts, static_cast<int>(blockIdx.x));
  detail::wait_for_inputs(detail::Trigger::late);
  static_assert(!(kExperts && kRawX), "an expert pair's x is a row of a prepared batch");
  MatmulArgs a = x;
  const int o = take_output(outs, outs.tile_begin, static_cast<int>(blockIdx.x), a);
  int block_index = static_cast<int>(blockIdx.x) - outs.tile_begin[o];
  if constexpr (kExperts) {
    const int tiles = (a.n_out + 15) / 16;
    const int blocks = (tiles + pack - 1) / pack;  // a pair's
    const int pair = block_index / blocks;
    block_index -= pair * blocks;
    a.w += static_cast<int64_t>(__ldg(outs.ids + pair)) * outs.expert_bytes[o];
    a.y += static_cast<int64_t>(pair) * a.ldy;
    const int64_t row = pair / outs.x_div;
    a.xh += row * a.n_in;
    a.xsum += row * a.xsum_stride;
    a.xinv += row;
  }
  __shared__ __align__(16) float part[Sum::kSmemFloats];
  extern __shared__ __align__(16) float chunk_slots[];  // free rounds' slots past K = 4,096
  if constexpr (kRawX) {
    __shared__ float inv;  // the row's 2^-shift, for the writes after the block's barrier
    a.xinv = &inv;
    const int n_chunks = a.n_in / kChunk;
    const FirstChunk f = first_chunk(block_index, pack, n_chunks, (a.n_out + 15) / 16,
                                     static_cast<int>(threadIdx.x) >> 5);
    const RawFirst x0 = load_first_x<D>(a.x_raw, f.c * kChunk, a.x_raw_early && f.has);
    uint2* stage = nullptr;
    if constexpr (kC0 == Column0::stage) {
      __shared__ __align__(16) uint2 stages[kWarps * kColumn0StageSlots];
      stage = stages + (threadIdx.x >> 5) * kColumn0StageSlots;
    }
    block_product<D>(a, raw_x<kC0>(a.x_raw, a.x_parts, a.n_parts, &inv, x0, stage), block_index,
                     pack, free, first, part, chunk_slots);
  } else {
    block_product<D>(a, XPrepared{a}, block_index, pack, free, first, part, chunk_slots);
  }
}

template <DType D, bool kExperts>
void launch_single(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  const int n_chunks = static_cast<int>(x.n_in / kChunk);
  const int pack = pack_enabled() ? tiles_per_block(n_chunks) : 1;
  const MultiOut m = pack_blocks(outs, pack);
  const auto blocks = static_cast<unsigned>(m.tile_begin[m.n]);
  // Free rounds' slots: 64 bytes a chunk, in the round buffers up to K = 4,096, past it in
  // dynamic shared memory (K = 12,288: 3 KB; with the static 1 KB the default limit of 48 KB holds
  // K up to 188,416).
  const bool free = free_rounds() && pack == 1 && n_chunks * 64 <= 47 * 1024;
  const int smem = free ? Sum::dynamic_slot_bytes(n_chunks) : 0;
  if (blocks == 0) return;
  if (!kExperts && x.x_raw != nullptr) {
    auto kernel = single_decode_kernel<D, false, true>;
    if constexpr (kFold<D>) {  // (only the folded types read column 0's fragments)
      if (raw_x_column0_staged()) kernel = single_decode_kernel<D, false, true, Column0::stage>;
    }
    return detail::launch(kernel, blocks, kThreads, smem, stream, x, m, pack,
                          early_weights_enabled(), free);
  }
  detail::launch(single_decode_kernel<D, kExperts, false>, blocks, kThreads, smem, stream, x, m,
                 pack, early_weights_enabled(), free);
}

}  // namespace

bool single_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_SINGLE_DECODE", true);
  return enabled;
}

bool early_weights_enabled() {
  static const bool enabled = env_switch("MEMRA_EARLY_WEIGHTS", true);
  return enabled;
}

// MEMRA_RAW_X_EARLY=0: a product reading x raw loads its first chunk of x after the partial maxima,
// as before the sixty-seventh round (the A/B; the same bits). Measured there on an H100 (medians of
// two, `gpu_check.sh rawxearly`): 0.6B Q4_K_M +0.8%, BF16 +1.1%; 8B Q4_K_M +0.1%, BF16 +0.2%,
// Q8_0 flat.
bool raw_x_early_enabled() {
  static const bool enabled = env_switch("MEMRA_RAW_X_EARLY", true);
  return enabled;
}

// MEMRA_RAW_X_STAGE (the default; =0: 32 shuffles a chunk): the one-token kernels reading x raw
// hand column 0's lanes their fragments by a transpose through shared memory (one_token_x.cuh:
// Column0; the same bits). Measured in the seventieth round on an H100 (`gpu_check.sh rawxstage`,
// two runs of two rounds): 8B Q4_K_M +1.3-1.7%, 0.6B Q4_K_M +0.9-1.4%, 0.6B BF16 +0.4-0.8%, 8B
// BF16 flat, 8B Q8_0 (no such fragments) flat.
bool raw_x_column0_staged() {
  static const bool staged = env_switch("MEMRA_RAW_X_STAGE", true);
  return staged;
}

template <DType D>
void launch_decode_single(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  launch_single<D, false>(x, outs, stream);
}

template <DType D>
void launch_decode_experts(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream) {
  launch_single<D, true>(x, outs, stream);
}

#define MEMRA_INSTANTIATE(D)                                                               \
  template void launch_decode_single<D>(const MatmulArgs&, const MultiOut&, cudaStream_t); \
  template void launch_decode_experts<D>(const MatmulArgs&, const MultiOut&, cudaStream_t);
MEMRA_INSTANTIATE(DType::q4_k)
MEMRA_INSTANTIATE(DType::q6_k)
MEMRA_INSTANTIATE(DType::q8_0)
#undef MEMRA_INSTANTIATE

}  // namespace memra::kernels::matmul_detail
