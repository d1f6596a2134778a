// The experts' matmuls of a mixture-of-experts layer with the routing in device memory
// (kernels.h matmul_experts), so a decode step needs no host read and replays as a graph.
// - Few pairs (kExpertPairsPerPair): a block per (pair, row tile), each pair reading its
//   expert's matrix: the one-token decode kernel's expert mode for tiled matrices
//   (matmul_decode_single.cu), the decode kernel's pair mode for the file's layout
//   (matmul_decode.cu; MEMRA_MOE_GGML_PAIRS=0 sorts those instead, the A/B).
// - More: the pairs sorted by expert (group_kernel below, a stable counting sort), x's rows
//   gathered in that order as they are made f16, and the tiled decode kernel's grouped mode
//   (matmul_decode_tiled.cu), a block per (row tile, expert) over the expert's rows, so each
//   chosen expert's matrix is read once for all its tokens; the rows are then gathered back into
//   pair order.
// Both compute each row with the canonical order's instructions (matmul.cu), so every output is
// bit-identical to matmul() of that row, whatever else the step holds.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "core/env.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/matmul_launch.cuh"

namespace memra::kernels {
namespace {

using matmul_detail::MatmulArgs;

constexpr int kGroupThreads = 1024;
constexpr int kGroupWarps = kGroupThreads / 32;
static_assert(kMoeMaxExperts <= kGroupThreads, "a thread per expert in group_kernel's offsets");
static_assert(kExpertPairsMax <= 65536, "group_kernel keeps sorted positions in 16 bits");

// One block, a stable counting sort of the pairs by expert (a pure function of ids: ties keep pair
// order). counts[e] by shared-memory atomics (integer counts: any order gives the same), begin =
// their exclusive scan. Then the pairs in chunks of kGroupThreads, in order, a thread a pair: a
// warp's lanes with the same expert find each other (__match_any_sync), the lowest of them (the
// leader) posts their count in s_at[warp][e], one thread per expert turns its column into where
// each warp's first pair of it lands (the expert's running offset plus the earlier warps' counts),
// and each pair lands there plus the number of lower lanes with its expert. rows[i] = the x row of
// the i-th sorted pair; place[p] = where pair p landed. ids must lie in [0, n_expert).
__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* __restrict__ ids, int n_pairs, int n_expert, int x_div,
                 int32_t* __restrict__ begin, int32_t* __restrict__ rows,
                 int32_t* __restrict__ place) {
  detail::wait_for_inputs();
  __shared__ int32_t s_scan[2][kMoeMaxExperts + 1];
  __shared__ int32_t s_next[kMoeMaxExperts];  // expert e's next free position
  // A warp's count of expert e in the chunk, then where its first one lands; 0 outside a chunk.
  __shared__ uint16_t s_at[kGroupWarps][kMoeMaxExperts];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  for (int e = threadIdx.x; e <= n_expert; e += kGroupThreads) s_scan[0][e] = 0;
  for (int i = threadIdx.x; i < kGroupWarps * kMoeMaxExperts; i += kGroupThreads)
    s_at[i / kMoeMaxExperts][i % kMoeMaxExperts] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < n_pairs; p += kGroupThreads) atomicAdd(&s_scan[0][ids[p] + 1], 1);
  __syncthreads();
  // Inclusive scan of s_scan[0][1..n_expert] (Hillis-Steele, ping-pong): begin[e] = s_scan[e].
  int src = 0;
  for (int off = 1; off <= n_expert; off <<= 1) {
    for (int e = threadIdx.x; e <= n_expert; e += kGroupThreads)
      s_scan[1 - src][e] = s_scan[src][e] + (e >= off ? s_scan[src][e - off] : 0);
    __syncthreads();
    src = 1 - src;
  }
  for (int e = threadIdx.x; e <= n_expert; e += kGroupThreads) {
    begin[e] = s_scan[src][e];
    if (e < n_expert) s_next[e] = s_scan[src][e];
  }
  __syncthreads();
  const unsigned lower = (1u << lane) - 1u;  // the lanes before this one
  for (int c0 = 0; c0 < n_pairs; c0 += kGroupThreads) {
    const int p = c0 + static_cast<int>(threadIdx.x);
    const int e = p < n_pairs ? ids[p] : -1;  // past the end: -1, matching no expert
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const bool leader = (same & lower) == 0;
    if (e >= 0 && leader) s_at[warp][e] = static_cast<uint16_t>(__popc(same));
    __syncthreads();  // every warp's counts are posted
    if (static_cast<int>(threadIdx.x) < n_expert) {
      const int x = static_cast<int>(threadIdx.x);
      int at = s_next[x];
      for (int w = 0; w < kGroupWarps; ++w) {
        const int count = s_at[w][x];
        if (count == 0) continue;  // stays 0: only leaders set entries, and they clear them
        s_at[w][x] = static_cast<uint16_t>(at);
        at += count;
      }
      s_next[x] = at;
    }
    __syncthreads();  // every warp's first positions are set
    if (e >= 0) {
      const int at = s_at[warp][e] + __popc(same & lower);
      place[p] = at;
      rows[at] = p / x_div;
    }
    __syncwarp();  // the warp's lanes have read their leaders' entries
    if (e >= 0 && leader) s_at[warp][e] = 0;
    // The next chunk's posts follow this warp's own clears (program order, the __syncwarp), and
    // the offsets step reads other warps' entries only after the next chunk's first __syncthreads.
  }
}

// Where the parts of the grouped path's scratch sit: x's prepared rows, the three index arrays,
// then each output's rows in expert order.
struct GroupedScratch {
  int64_t x_bytes, index_bytes;
  GroupedScratch(int64_t n_in, int64_t n_pairs, int n_expert)
      : x_bytes(static_cast<int64_t>(matmul_scratch_bytes(n_pairs, n_in))),
        index_bytes((n_expert + 1 + 2 * n_pairs + 3) / 4 * 16) {}
  static int64_t out_bytes(int64_t n_pairs, int64_t n_out) {
    return (n_pairs * n_out * 4 + 15) / 16 * 16;
  }
};

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// The bytes of a row of n_in weights in the file's layout.
int64_t ggml_row_bytes(DType wtype, int64_t n_in) {
  return n_in / dtype_traits(wtype).block_size * dtype_traits(wtype).type_size;
}

// f(std::integral_constant<DType, D>{}) for wtype, one of the types the mma decode kernels take
// in the file's layout (supports_up_to checked it before any launch).
template <typename F>
void with_mma_type(DType wtype, F&& f) {
  switch (wtype) {
#define MEMRA_CASE(D)                      \
  case D:                                  \
    f(std::integral_constant<DType, D>{}); \
    return;
    MEMRA_MATMUL_FOR_EACH_MMA_TYPE(MEMRA_CASE)
#undef MEMRA_CASE
    default:
      fail(ErrorCode::internal, "matmul_experts: ggml-layout {}", dtype_name(wtype));
  }
}

void run_grouped(const ExpertsOut* outs, int n_outs, int64_t n_in, const float* x, int x_div,
                 const int32_t* ids, int64_t n_pairs, int n_expert, void* scratch,
                 cudaStream_t stream) {
  const GroupedScratch layout(n_in, n_pairs, n_expert);
  auto* bytes = static_cast<uint8_t*>(scratch);
  auto* begin = reinterpret_cast<int32_t*>(bytes + layout.x_bytes);
  int32_t* rows = begin + n_expert + 1;
  int32_t* place = rows + n_pairs;
  matmul_experts_group(ids, n_pairs, n_expert, x_div, begin, rows, place, stream);
  const MatmulArgs x_args = matmul_detail::prepare_x_rows(x, n_pairs, n_in, rows, scratch, stream);
  uint8_t* y_sorted = bytes + layout.x_bytes + layout.index_bytes;
  for (int i = 0; i < n_outs; ++i) {
    const ExpertsOut& o = outs[i];
    MatmulArgs a = x_args;
    a.w = static_cast<const uint8_t*>(o.w);
    a.n_out = static_cast<int>(o.n_out);
    a.y = reinterpret_cast<float*>(y_sorted);
    a.ldy = o.n_out;
    a.n_tokens = static_cast<int>(n_pairs);
    const matmul_detail::ExpertRows er{begin, o.expert_bytes, n_expert};
    if (o.layout == WeightLayout::ggml) {
      a.row_bytes = ggml_row_bytes(o.wtype, n_in);
      with_mma_type(o.wtype, [&](auto d) {
        matmul_detail::launch_decode_grouped<decltype(d)::value>(a, er, stream);
      });
    } else if (o.wtype == DType::q4_k) {
      matmul_detail::launch_decode_tiled_grouped<DType::q4_k>(a, er, stream);
    } else if (o.wtype == DType::q6_k) {
      matmul_detail::launch_decode_tiled_grouped<DType::q6_k>(a, er, stream);
    } else if (o.wtype == DType::q8_0) {
      matmul_detail::launch_decode_tiled_grouped<DType::q8_0>(a, er, stream);
    }
    gather_rows(a.y, o.n_out, place, n_pairs, o.y, stream);
    y_sorted += GroupedScratch::out_bytes(n_pairs, o.n_out);
  }
}

void run_per_pair(const ExpertsOut* outs, int n_outs, int64_t n_in, const float* x, int x_div,
                  const int32_t* ids, int64_t n_pairs, void* scratch, cudaStream_t stream) {
  const int64_t n_x = (n_pairs + x_div - 1) / x_div;
  MatmulArgs x_args = matmul_detail::prepare_x_rows(x, n_x, n_in, nullptr, scratch, stream);
  x_args.n_tokens = 1;
  for (int i = 0; i < n_outs; ++i) {  // the file's layout: a launch per output
    const ExpertsOut& o = outs[i];
    if (o.layout != WeightLayout::ggml || o.n_out == 0) continue;
    MatmulArgs a = x_args;
    a.w = static_cast<const uint8_t*>(o.w);
    a.row_bytes = ggml_row_bytes(o.wtype, n_in);
    a.n_out = static_cast<int>(o.n_out);
    a.y = o.y;
    a.ldy = o.n_out;
    const matmul_detail::ExpertPairs pairs{ids, o.expert_bytes, static_cast<int>(n_pairs), x_div};
    with_mma_type(o.wtype, [&](auto d) {
      matmul_detail::launch_decode_pairs<decltype(d)::value>(a, pairs, stream);
    });
  }
  for (DType d : {DType::q4_k, DType::q6_k, DType::q8_0}) {
    matmul_detail::MultiOut m;
    auto flush = [&] {
      if (m.n == 0) return;
      m.ids = ids;
      m.x_div = x_div;
      if (d == DType::q4_k) matmul_detail::launch_decode_experts<DType::q4_k>(x_args, m, stream);
      if (d == DType::q6_k) matmul_detail::launch_decode_experts<DType::q6_k>(x_args, m, stream);
      if (d == DType::q8_0) matmul_detail::launch_decode_experts<DType::q8_0>(x_args, m, stream);
      m = {};
    };
    for (int i = 0; i < n_outs; ++i) {
      const ExpertsOut& o = outs[i];
      if (o.layout != WeightLayout::tiled || o.wtype != d || o.n_out == 0) continue;
      m.w[m.n] = static_cast<const uint8_t*>(o.w);
      m.y[m.n] = o.y;
      m.n_out[m.n] = static_cast<int>(o.n_out);
      m.ldy[m.n] = o.n_out;
      m.expert_bytes[m.n] = o.expert_bytes;
      m.tile_begin[m.n + 1] = m.tile_begin[m.n] + static_cast<int>(n_pairs * ((o.n_out + 15) / 16));
      if (++m.n == matmul_detail::kMultiOuts) flush();
    }
    flush();
  }
}

// Experts in the file's layout on the device: on unless MEMRA_MOE_DEVICE_GGML=0 (routing on the
// host instead). Measured on Gemma 4 26B-A4B Q4_K_M (704-wide experts): decode 112.6 -> 142.7
// tok/s at one sequence, 395 -> 603 at 8, pp512 3,215 -> 3,700.
bool ggml_experts_enabled() {
  static const bool enabled = env_switch("MEMRA_MOE_DEVICE_GGML", true);
  return enabled;
}

// Whether a ggml-layout stack of wtype with rows of n_in takes the mma decode kernel: a quantized
// or half type whose K steps by 16 (F32 and the other exact-path matrices do not).
bool ggml_mma(DType wtype, int64_t n_in) {
  return matmul_supports(wtype) && wtype != DType::f32 && n_in > 0 && n_in % 16 == 0 &&
         n_in % dtype_traits(wtype).block_size == 0 && n_in <= (int64_t{1} << 30);
}

// What the kernels run, up to max_pairs pairs.
bool supports_up_to(DType wtype, WeightLayout layout, int64_t n_in, int64_t n_pairs,
                    int64_t max_pairs) {
  if (n_pairs < 0 || n_pairs > max_pairs) return false;
  if (layout == WeightLayout::ggml) return ggml_experts_enabled() && ggml_mma(wtype, n_in);
  return (wtype == DType::q4_k || wtype == DType::q6_k || wtype == DType::q8_0) &&
         matmul_tiled_supports(wtype, n_in) && matmul_detail::single_decode_enabled();
}

// Whether a step of n_pairs pairs runs a block per pair (else the sort). ggml-layout outputs
// take the pair mode unless MEMRA_MOE_GGML_PAIRS=0 (the A/B against the sort; the same bits).
bool per_pair(const ExpertsOut* outs, int n_outs, int64_t n_pairs) {
  static const bool ggml_pairs = env_switch("MEMRA_MOE_GGML_PAIRS", true);
  if (n_pairs > kExpertPairsPerPair) return false;
  for (int i = 0; i < n_outs; ++i)
    if (outs[i].layout == WeightLayout::ggml && !ggml_pairs) return false;
  return true;
}

}  // namespace

int64_t expert_pairs_on_device() {
  static const int64_t limit = [] {
    constexpr const char* kName = "MEMRA_MOE_DEVICE_MAX_PAIRS";
    const char* v = std::getenv(kName);
    if (v == nullptr) return kExpertPairsOnDevice;
    const std::string_view text(v);
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
      fail(ErrorCode::invalid_argument, "{}={} is not an integer", kName, v);
    return std::clamp(n, kExpertPairsPerPair, kExpertPairsMax);
  }();
  return limit;
}

void matmul_experts_group(const int32_t* ids, int64_t n_pairs, int n_expert, int x_div,
                          int32_t* begin, int32_t* rows, int32_t* place, cudaStream_t stream) {
  if (n_pairs < 1 || n_pairs > kExpertPairsMax || n_expert < 1 || n_expert > kMoeMaxExperts ||
      x_div < 1)
    fail(ErrorCode::invalid_argument,
         "matmul_experts_group: {} pairs (1..{}), {} experts (1..{}), x_div {}", n_pairs,
         kExpertPairsMax, n_expert, kMoeMaxExperts, x_div);
  detail::launch(group_kernel, 1u, kGroupThreads, 0, stream, ids, static_cast<int>(n_pairs),
                 n_expert, x_div, begin, rows, place);
}

bool matmul_experts_supports(DType wtype, WeightLayout layout, int64_t n_in, int64_t n_pairs) {
  return supports_up_to(wtype, layout, n_in, n_pairs, expert_pairs_on_device());
}

size_t matmul_experts_scratch_bytes(const ExpertsOut* outs, int n_outs, int64_t n_in, int x_div,
                                    int64_t n_pairs, int n_expert) {
  if (n_pairs <= 0 || x_div < 1) return 0;
  if (per_pair(outs, n_outs, n_pairs))
    return matmul_scratch_bytes((n_pairs + x_div - 1) / x_div, n_in);
  const GroupedScratch layout(n_in, n_pairs, n_expert);
  int64_t total = layout.x_bytes + layout.index_bytes;
  for (int i = 0; i < n_outs; ++i) total += GroupedScratch::out_bytes(n_pairs, outs[i].n_out);
  return static_cast<size_t>(total);
}

void matmul_experts(const ExpertsOut* outs, int n_outs, int64_t n_in, const float* x, int x_div,
                    const int32_t* ids, int64_t n_pairs, int n_expert, void* scratch,
                    cudaStream_t stream) {
  if (x_div < 1 || n_expert < 1 || n_expert > kMoeMaxExperts)
    fail(ErrorCode::invalid_argument, "matmul_experts: x_div {}, {} experts (at most {})", x_div,
         n_expert, kMoeMaxExperts);
  // Any count up to kExpertPairsMax, whatever expert_pairs_on_device() says (the backend's choice).
  if (n_pairs > kExpertPairsMax)
    fail(ErrorCode::invalid_argument, "matmul_experts: {} pairs (at most kExpertPairsMax, {})",
         n_pairs, kExpertPairsMax);
  for (int i = 0; i < n_outs; ++i) {
    const ExpertsOut& o = outs[i];
    if (!supports_up_to(o.wtype, o.layout, n_in, n_pairs, kExpertPairsMax))
      fail(ErrorCode::invalid_argument, "matmul_experts: {} pairs over {} {} with n_in {}", n_pairs,
           o.layout == WeightLayout::tiled ? "tiled" : "ggml-layout", dtype_name(o.wtype), n_in);
    if (o.n_out <= 0 || o.n_out > 65535 * 128 || n_in > (int64_t{1} << 30))
      fail(ErrorCode::invalid_argument, "matmul_experts: sizes n_in {} n_out {}", n_in, o.n_out);
    if (!aligned16(o.w) || o.expert_bytes % 16 != 0 || !aligned16(x) || !aligned16(scratch))
      fail(ErrorCode::invalid_argument, "matmul_experts: w, x and scratch must be 16-byte aligned");
    if (n_pairs * ((o.n_out + 15) / 16) > (int64_t{1} << 29))
      fail(ErrorCode::invalid_argument, "matmul_experts: {} pairs of {} rows", n_pairs, o.n_out);
  }
  if (n_pairs == 0) return;
  if (per_pair(outs, n_outs, n_pairs))
    run_per_pair(outs, n_outs, n_in, x, x_div, ids, n_pairs, scratch, stream);
  else
    run_grouped(outs, n_outs, n_in, x, x_div, ids, n_pairs, n_expert, scratch, stream);
}

}  // namespace memra::kernels
