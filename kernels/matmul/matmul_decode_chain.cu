// The persistent decode chain (kernels.h, decode_chain_run): the one-token products of several
// matmul_shared_x calls run by one resident grid, a grid-wide barrier where the launches have a
// kernel boundary. It measures what a persistent decode step would save before one is written:
// each block of a call runs the one-token kernel's block code (decode_single_block.cuh) on the
// same block indices, so the outputs are the launches' bits, and only the boundaries differ.
//
// Why a barrier might be cheaper than a boundary: under programmatic dependent launch the next
// kernel's blocks are scheduled when the one before triggers (late, for the products) and load
// their first chunk before they wait, and still a small kernel costs a decode step ~3.7 us (the
// twenty-fourth round); in a resident grid a block that finishes its share of one call loads its
// share of the next while it waits at the barrier. Measured on the H200 (docs/PERFORMANCE.md,
// thirtieth round), it is not: a barrier costs 1.25 us where a launch boundary alone costs
// 0.55-0.70 (decode_chain_boundaries), and the grid's products alone take as long as the
// launches with their boundaries (0.6B 15.3 against 14.1 us a layer), so the chain with its
// barriers is slower (20.3). It stays as the instrument that says so.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/cuda_status.h"
#include "kernels/kernels.h"
#include "kernels/matmul/decode_single_block.cuh"
#include "kernels/matmul/prepare_x.cuh"

namespace memra::kernels {
namespace matmul_detail {
namespace {

using namespace single_decode;

// One call of the chain: its x (prepared in the call's scratch), its outputs with tile_begin in
// blocks of `pack` tiles (pack_blocks), and its block count.
struct ChainStep {
  MatmulArgs x;
  MultiOut outs;
  int pack = 1;
  int blocks = 0;
};

// The run's counters (decode_chain_run resets them): the barrier's arrivals, then each SM's
// blocks so far (spread_rank).
constexpr int kSmSlots = 128, kSmCap = 896;
static_assert(kSmSlots + kSmCap <= kDecodeChainCounters, "the counters' words");

// A grid-wide barrier in two halves, so a block's loads of the next step's first weights run
// while it waits: arrive() after the step's writes, wait_all() before the next step reads them.
// The block's writes before arrive() are visible to every block after wait_all(): a block
// barrier, thread 0's fence (release) and arrival; its acquiring spin, a block barrier again.
// Measured on the H200 (thirtieth round): 1.26 us a barrier; the whole barrier at once 1.66 us,
// and the next step's loads before it lost what they gain (presumably the fence waiting for
// them); two levels (groups of 16, then a root) 1.98 us.
__device__ __forceinline__ void arrive(unsigned* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
  }
}
__device__ __forceinline__ void wait_all(const unsigned* counter, unsigned target) {
  if (threadIdx.x == 0) {
    unsigned seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

// This block's rank with the grid's blocks spread over the SMs: rank r runs on SM r % n_sms, so
// a step of fewer blocks than the grid uses every SM (measured 1.5-2.3 us a layer faster than
// blockIdx order, which fills SMs several blocks at a time). A permutation of 0..grid - 1 when
// every SM holds grid / n_sms blocks (a cooperative launch of the occupancy's grid) and %smid
// numbers the SMs from 0 (so on the H200; where not, blocks go missing and the bench's bit
// comparison fails). spread false: blockIdx.x.
__device__ __forceinline__ int spread_rank(unsigned* counters, int n_sms, bool spread) {
  __shared__ int rank;
  if (!spread) return static_cast<int>(blockIdx.x);
  if (threadIdx.x == 0) {
    unsigned sm = 0;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    sm = min(sm, static_cast<unsigned>(kSmCap - 1));  // (the counters' bound)
    const unsigned slot = atomicAdd(counters + kSmSlots + sm, 1u);
    rank = static_cast<int>(slot) * n_sms + static_cast<int>(sm);
  }
  __syncthreads();
  return rank;
}

// Asks L2 for `bytes` (a multiple of 16) at p, without waiting (Hopper's bulk prefetch; nothing
// before it).
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

// The record bytes of block b's tiles in step st (contiguous: tiles are in record order).
template <DType D>
__device__ __forceinline__ void prefetch_block(const ChainStep& st, int b) {
  MatmulArgs a = st.x;
  const int o = take_output(st.outs, st.outs.tile_begin, b, a);
  const int n_chunks = a.n_in / kChunk, tiles = (a.n_out + 15) / 16;
  const int first = (b - st.outs.tile_begin[o]) * st.pack;
  const int n = min(st.pack, tiles - first);
  const int64_t tile_bytes = static_cast<int64_t>(n_chunks) * Tiled<D>::kBytes;
  prefetch_l2(a.w + first * tile_bytes, static_cast<uint32_t>(n * tile_bytes));
}

// The steps' products are all of type D (tiled Q4_K: the chain's one instance; a plan has at
// least one step). early: 0,
// every chunk loaded after the barrier; 1, each warp's first chunk of the block's first
// block of the next step loaded while it waits (the launches' EarlyChunk); 2, that block's whole
// tiles also asked of L2 then.
template <DType D>
__global__ void __launch_bounds__(kThreads, 3)
    decode_chain_kernel(const ChainStep* __restrict__ steps, int n_steps, int early,
                        unsigned* counters, int n_sms, bool spread) {
  detail::wait_for_inputs(detail::Trigger::late);
  const int me = spread_rank(counters, n_sms, spread);
  const EarlyChunk<D> first = early_chunk<D>(steps[0].x, steps[0].outs, steps[0].pack,
                                             early > 0 && me < steps[0].blocks, me);
  __shared__ __align__(16) float part[Sum::kSmemFloats];
  extern __shared__ __align__(16) float chunk_slots[];
  const int grid = static_cast<int>(gridDim.x);
  auto block = [&](const ChainStep& st, int b, const EarlyChunk<D>& chunk) {
    MatmulArgs a = st.x;
    const int o = take_output(st.outs, st.outs.tile_begin, b, a);
    block_product<D>(a, XPrepared{a}, b - st.outs.tile_begin[o], st.pack, true, chunk, part,
                     chunk_slots);
    __syncthreads();  // the rounds' shared memory is the next block's
  };
  EarlyChunk<D> next_first = first;
  for (int s = 0; s < n_steps; ++s) {
    const ChainStep& st = steps[s];
    if (me < st.blocks) block(st, me, next_first);
    for (int b = me + grid; b < st.blocks; b += grid) block(st, b, EarlyChunk<D>{});
    if (s + 1 == n_steps) break;
    const ChainStep& next = steps[s + 1];
    arrive(counters);
    next_first = {};
    if (early > 0 && me < next.blocks) {
      if (early > 1 && threadIdx.x == 0) prefetch_block<D>(next, me);
      next_first = early_chunk<D>(next.x, next.outs, next.pack, true, me);
    }
    wait_all(counters, static_cast<unsigned>((s + 1) * grid));
  }
}

// A kernel boundary alone: the products' trigger (late: at exit) and wait, no work.
__global__ void __launch_bounds__(kThreads) boundary_kernel() {
  detail::wait_for_inputs(detail::Trigger::late);
}

void check(cudaError_t status, const char* what) {
  detail::check_cuda(status, "decode_chain_plan", what);
}

// The free rounds' dynamic slots the chain's widest K needs.
int chain_smem(const std::vector<ChainStep>& steps) {
  int bytes = 0;
  for (const ChainStep& st : steps)
    if (st.pack == 1) bytes = std::max(bytes, Sum::dynamic_slot_bytes(st.x.n_in / kChunk));
  return bytes;
}

}  // namespace
}  // namespace matmul_detail

size_t decode_chain_bytes(int n_calls) {
  return static_cast<size_t>(n_calls) * sizeof(matmul_detail::ChainStep);
}

DecodeChain decode_chain_plan(const DecodeChainCall* calls, int n_calls, void* plan) {
  using namespace matmul_detail;
  if (n_calls <= 0 || n_calls > (1 << 20))
    fail(ErrorCode::invalid_argument, "decode_chain_plan: {} calls", n_calls);
  std::vector<ChainStep> steps(n_calls);
  for (int i = 0; i < n_calls; ++i) {
    const DecodeChainCall& c = calls[i];
    if (c.n_outs < 0 || c.n_outs > kMultiOuts || c.n_in % kChunk != 0 || c.n_in <= 0 ||
        c.n_in > 47 * 1024 / 64 * kChunk)
      fail(ErrorCode::invalid_argument,
           "decode_chain_plan: call {} has {} outputs of K {} (at most {} outputs, K a multiple "
           "of {} up to {})",
           i, c.n_outs, c.n_in, kMultiOuts, kChunk, 47 * 1024 / 64 * kChunk);
    const PreparedRows p = prepared_rows("decode_chain_plan", c.scratch, 1, c.n_in, {});
    ChainStep& st = steps[i];
    st.x.xh = p.xh;
    st.x.xsum = p.xsum;
    st.x.xsum_stride = p.xsum_stride;
    st.x.xinv = p.xinv;
    st.x.n_in = static_cast<int>(c.n_in);
    st.x.n_tokens = 1;
    MultiOut m;
    for (int o = 0; o < c.n_outs; ++o) {
      const MatmulOut& out = c.outs[o];
      if (out.wtype != DType::q4_k || out.layout != WeightLayout::tiled || out.n_out <= 0 ||
          out.n_out > (1 << 24))
        fail(ErrorCode::unsupported,
             "decode_chain_plan: call {} output {} is {} {} x {} (the chain takes tiled Q4_K only)",
             i, o, dtype_name(out.wtype), out.n_out, c.n_in);
      m.add(out.w, out.y, out.n_out, out.ldy);
    }
    st.pack = tiles_per_block(static_cast<int>(c.n_in / kChunk));
    st.outs = pack_blocks(m, st.pack);
    st.blocks = st.outs.tile_begin[st.outs.n];
  }
  check(cudaMemcpy(plan, steps.data(), steps.size() * sizeof(ChainStep), cudaMemcpyHostToDevice),
        "the plan's copy");
  const int smem = chain_smem(steps);
  int per_sm = 0, sms = 0, device = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_chain_kernel<DType::q4_k>,
                                                      kThreads, smem),
        "occupancy");
  if (per_sm <= 0) fail(ErrorCode::internal, "decode_chain_plan: no block fits an SM");
  if (sms > kSmCap)
    fail(ErrorCode::unsupported, "decode_chain_plan: {} SMs of {} blocks", sms, per_sm);
  return {plan, n_calls, per_sm * sms, smem, sms};
}

void decode_chain_run(const DecodeChain& chain, int early, bool spread, unsigned* counters,
                      cudaStream_t stream) {
  using namespace matmul_detail;
  if (early < 0 || early > 2)
    fail(ErrorCode::invalid_argument, "decode_chain_run: early {}", early);
  (void)cudaMemsetAsync(counters, 0, kDecodeChainCounters * sizeof(unsigned), stream);
  // Cooperative: every block resident at once, or the launch fails (the barrier needs them all).
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(chain.grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(chain.smem);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  (void)cudaLaunchKernelEx(&cfg, decode_chain_kernel<DType::q4_k>,
                           static_cast<const ChainStep*>(chain.plan), chain.n_calls, early,
                           counters, chain.n_sms, spread);
}

void decode_chain_boundaries(int n_calls, int blocks, cudaStream_t stream) {
  if (n_calls < 0 || blocks <= 0 || blocks > (1 << 20))
    fail(ErrorCode::invalid_argument, "decode_chain_boundaries: {} calls of {} blocks", n_calls,
         blocks);
  for (int i = 0; i < n_calls; ++i)
    detail::launch(matmul_detail::boundary_kernel, static_cast<unsigned>(blocks),
                   matmul_detail::kThreads, 0, stream);
}

}  // namespace memra::kernels
