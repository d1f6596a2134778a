// memra-kernel-bench's attention timings: kernels::attention on the Qwen3-8B shape (32 query / 8
// kv heads, head_dim 128, block size 16) for decode (1, 8 and 64 sequences, short and long
// contexts, a grid sized for a 16k capacity as a CUDA graph would), prefill (512 and 2048
// tokens, a chunk after a long prefix) and a step mixing 63 decodes with a prefill chunk. The paged
// cache is rotated over enough copies that L2 cannot serve it; each figure is the median of 20
// event-timed calls after warm-up, with KV bytes / time against the copy bandwidth measured in the
// same run, and FLOP/s for prefill. Every case runs with the tensor-core kernel, then with the
// CUDA-core one (rows marked "fma"); the F8_E4M3 cases ("fp8", half the bytes) have the CUDA-core
// kernel only and run once. The "prologue" rows time a one-token step's attention with its
// prologue (q and k's norms and RoPE, the KV write: kernels::AttentionPrologue), as its own launch
// before the attention or inside the decode kernel's blocks (the tensor-core kernel only).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_runtime.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/half.h"
#include "kernel_bench/bench.h"
#include "kernels/kernels.h"

namespace memra::bench {
namespace {

using cuda::check;
using kernels::AttentionPlan;

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlock = 16;
constexpr size_t kRotateBytes = size_t{256} << 20;

// Where a case's attention prologue runs: none (q as given), qk_prologue's launch before the
// attention, or in the attention's blocks (kernels::AttentionPrologue handed in).
enum class Prologue { none, own_launch, inside };

struct AttnCase {
  const char* name;
  int n_seqs;
  int n_past;  // cached keys before this step's tokens, per sequence
  int n_new;   // tokens per sequence in the step
  AttentionPlan plan;
  int capacity;  // max_context the launch is sized for (0: the step's own)
  DType cache;
  int chunk_past = 0, chunk_new = 0;   // one more sequence, a prefill chunk (mixed steps)
  Prologue prologue = Prologue::none;  // one-token steps only
};

const AttnCase kCases[] = {
    {"decode 1x512", 1, 511, 1, AttentionPlan::automatic, 0, DType::bf16},
    {"decode 1x512 f16", 1, 511, 1, AttentionPlan::automatic, 0, DType::f16},
    {"decode 1x512 grid@16k", 1, 511, 1, AttentionPlan::split, 16384, DType::bf16},
    {"decode 1x4096", 1, 4095, 1, AttentionPlan::automatic, 0, DType::bf16},
    {"decode 1x16384", 1, 16383, 1, AttentionPlan::automatic, 0, DType::bf16},
    {"decode 1x16384 f16", 1, 16383, 1, AttentionPlan::automatic, 0, DType::f16},
    {"decode 1x16384 1pass", 1, 16383, 1, AttentionPlan::one_pass, 0, DType::bf16},
    // The prologue before the attention (its own launch) and in its blocks, the same bits.
    {"decode 1x512 f16 prologue", 1, 511, 1, AttentionPlan::automatic, 0, DType::f16, 0, 0,
     Prologue::own_launch},
    {"decode 1x512 f16 prologue inside", 1, 511, 1, AttentionPlan::automatic, 0, DType::f16, 0, 0,
     Prologue::inside},
    // c8's step after a 512-token prompt (8 x 513-640 keys: three splits, the last short).
    {"decode 8x640 f16", 8, 639, 1, AttentionPlan::automatic, 0, DType::f16},
    {"decode 64x640", 64, 639, 1, AttentionPlan::automatic, 0, DType::bf16},
    {"decode 64x640 f16", 64, 639, 1, AttentionPlan::automatic, 0, DType::f16},
    {"decode 64x640 f16 1pass", 64, 639, 1, AttentionPlan::one_pass, 0, DType::f16},
    {"decode 64x4096", 64, 4095, 1, AttentionPlan::automatic, 0, DType::bf16},
    {"decode 64x4096 1pass", 64, 4095, 1, AttentionPlan::one_pass, 0, DType::bf16},
    // Prompts just past the one_pass threshold (~132 tokens at this shape), where the row-owning
    // form runs fewer, larger blocks than the 32-row tiles (PERFORMANCE.md, thirty-third round).
    {"prefill 160", 1, 0, 160, AttentionPlan::automatic, 0, DType::bf16},
    {"prefill 256", 1, 0, 256, AttentionPlan::automatic, 0, DType::bf16},
    {"prefill 384", 1, 0, 384, AttentionPlan::automatic, 0, DType::bf16},
    {"prefill 512", 1, 0, 512, AttentionPlan::automatic, 0, DType::bf16},
    // The split plan's query tiles (one split a block, then the combine) at the same prompts:
    // what the one_pass threshold trades against.
    {"prefill 256 split", 1, 0, 256, AttentionPlan::split, 0, DType::bf16},
    {"prefill 512 split", 1, 0, 512, AttentionPlan::split, 0, DType::bf16},
    {"prefill 512 f16", 1, 0, 512, AttentionPlan::automatic, 0, DType::f16},
    {"prefill 1024", 1, 0, 1024, AttentionPlan::automatic, 0, DType::bf16},
    {"prefill 2048", 1, 0, 2048, AttentionPlan::automatic, 0, DType::bf16},
    {"prefill 2048 f16", 1, 0, 2048, AttentionPlan::automatic, 0, DType::f16},
    {"chunk 512 @ 3584", 1, 3584, 512, AttentionPlan::automatic, 0, DType::bf16},
    {"chunk 64 @ 3584", 1, 3584, 64, AttentionPlan::automatic, 0, DType::bf16},
    {"mixed 63x2048 + 512", 63, 2047, 1, AttentionPlan::automatic, 0, DType::bf16, 0, 512},
    {"decode 1x16384 fp8", 1, 16383, 1, AttentionPlan::automatic, 0, DType::f8_e4m3},
    {"decode 64x4096 fp8", 64, 4095, 1, AttentionPlan::automatic, 0, DType::f8_e4m3},
    {"prefill 512 fp8", 1, 0, 512, AttentionPlan::automatic, 0, DType::f8_e4m3},
};

// Fills n bytes of device memory with random finite cache values (16-bit or e4m3) in about
// [-1, 1].
void fill_random(DType dtype, uint8_t* dst, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> pattern(size_t{8} << 20);  // 16 MiB, repeated
  for (uint16_t& h : pattern) {
    if (dtype == DType::f8_e4m3) {
      h = static_cast<uint16_t>(f32_to_e4m3(u(rng)) | f32_to_e4m3(u(rng)) << 8);
    } else {
      h = dtype == DType::f16 ? f32_to_f16(u(rng)) : f32_to_bf16(u(rng));
    }
  }
  const size_t pb = pattern.size() * 2;
  for (size_t off = 0; off < n; off += pb) {
    check(cudaMemcpy(dst + off, pattern.data(), std::min(pb, n - off), cudaMemcpyHostToDevice),
          "fill kv");
  }
}

// A host vector's bytes into device memory.
template <typename T>
void upload(cuda::DeviceBuffer& dst, const std::vector<T>& host) {
  check(cudaMemcpy(dst.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "upload");
}

// Where the case's last launch took the stamped decode form (MEMRA_DECODE_STAMPS=1; kernels.h:
// decode_phase_stamps): each phase's cycles over its blocks (median and largest), printed under
// the case's line; else nothing (null).
nlohmann::json print_phases(const cuda::Stream& stream) {
  static const char* const kNames[] = {
      // kernels.h: DecodePhase, in its order
      "run read",         "barriers set",          "copies issued",
      "q staged",         "copies after q",        "K landed",
      "scores",           "softmax, V landed",     "values, partial",
      "peers' / arrival", "share merged, written", "merge's end"};
  static_assert(std::size(kNames) == kernels::kDecodePhases, "a name for every phase");
  std::vector<long long> st(size_t{kernels::kDecodeStampBlocks} * kernels::kDecodePhases);
  const int n = kernels::decode_phase_stamps(st.data(), kernels::kDecodeStampBlocks, stream.get());
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < kernels::kDecodePhases; ++i) {
    std::vector<long long> d;
    for (int b = 0; b < n; ++b) {
      const long long* s = st.data() + size_t{kernels::kDecodePhases} * b;
      if (s[0] >= 0) d.push_back(s[i] - (i > 0 ? s[i - 1] : 0));
    }
    if (d.empty()) return nullptr;  // not the stamped form (or no block had keys)
    std::sort(d.begin(), d.end());
    const long long med = d[d.size() / 2], max = d.back();
    std::printf("    phase %d %-24s median %6lld  max %6lld cycles (%zu blocks)\n", i, kNames[i],
                med, max, d.size());
    out.push_back({{"phase", kNames[i]}, {"median_cycles", med}, {"max_cycles", max}});
  }
  return out;
}

nlohmann::json run_case(const cuda::Stream& stream, double copy_tbps, const AttnCase& c,
                        void* scratch, bool tensor_cores) {
  const int ctx = c.n_past + c.n_new, chunk_ctx = c.chunk_past + c.chunk_new;
  const int n_seqs = c.n_seqs + (c.chunk_new > 0 ? 1 : 0);
  const int bps = (std::max(ctx, chunk_ctx) + kBlock - 1) / kBlock;  // blocks per sequence
  const int n_blocks = n_seqs * bps;
  // Bytes per token of K (or V).
  const size_t row = size_t{kKvHeads} * kHeadDim * dtype_traits(c.cache).type_size;
  const size_t bytes = static_cast<size_t>(n_blocks) * kBlock * row;
  const size_t copies = std::clamp<size_t>((kRotateBytes + 2 * bytes - 1) / (2 * bytes), 1, 256);
  std::mt19937 rng(42);
  cuda::DeviceBuffer kbuf(bytes * copies), vbuf(bytes * copies);
  fill_random(c.cache, static_cast<uint8_t*>(kbuf.data()), bytes * copies, rng);
  fill_random(c.cache, static_cast<uint8_t*>(vbuf.data()), bytes * copies, rng);

  std::vector<int32_t> ids(n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> positions, token_seq, tables(ids);
  for (int s = 0; s < n_seqs; ++s) {
    const bool chunk = s == c.n_seqs;
    for (int j = 0; j < (chunk ? c.chunk_new : c.n_new); ++j) {
      positions.push_back((chunk ? c.chunk_past : c.n_past) + j);
      token_seq.push_back(s);
    }
  }
  const int n_tokens = static_cast<int>(positions.size());
  std::vector<float> q(size_t{1} * n_tokens * kHeads * kHeadDim);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (float& v : q) v = u(rng);
  cuda::DeviceBuffer dpos(positions.size() * 4), dseq(token_seq.size() * 4),
      dtab(tables.size() * 4), dq(q.size() * 4), dout(q.size() * 4);
  upload(dpos, positions);
  upload(dseq, token_seq);
  upload(dtab, tables);
  upload(dq, q);

  kernels::StepDev step;
  step.n_tokens = n_tokens;
  step.n_seqs = n_seqs;
  step.max_blocks = bps;
  step.positions = static_cast<const int32_t*>(dpos.data());
  step.slots = nullptr;
  step.token_seq = static_cast<const int32_t*>(dseq.data());
  step.block_tables = static_cast<const int32_t*>(dtab.data());
  step.max_context = std::max({ctx, chunk_ctx, c.capacity});
  kernels::AttentionArgs args;
  args.n_heads = kHeads;
  args.scale = 0.088388f;
  args.plan = c.plan;
  args.tensor_cores = tensor_cores;
  // The prologue's operands (the 8B's norms: weights about 1, the step's angle table, the token's
  // slot in the cache its block table names).
  const size_t kv_floats = size_t{1} * n_tokens * kKvHeads * kHeadDim;
  std::vector<float> kv_rows(2 * kv_floats), weights(2 * kHeadDim);
  for (float& v : kv_rows) v = u(rng);
  std::uniform_real_distribution<float> w(0.5f, 1.5f);
  for (float& v : weights) v = w(rng);
  std::vector<double> inv_freq(kHeadDim / 2);
  for (int i = 0; i < kHeadDim / 2; ++i) inv_freq[i] = std::pow(1000000.0, -2.0 * i / kHeadDim);
  std::vector<int32_t> slots;
  for (int t = 0; t < n_tokens; ++t) {
    const int32_t p = positions[t];
    slots.push_back(tables[size_t{1} * token_seq[t] * bps + p / kBlock] * kBlock + p % kBlock);
  }
  cuda::DeviceBuffer dkv(kv_rows.size() * 4), dw(weights.size() * 4), dfreq(inv_freq.size() * 8),
      dslots(slots.size() * 4),
      dangles(size_t{4} * n_tokens * kernels::qk_angle_table_floats(kHeadDim));
  kernels::AttentionPrologue pro;
  if (c.prologue != Prologue::none) {
    upload(dkv, kv_rows);
    upload(dw, weights);
    upload(dfreq, inv_freq);
    upload(dslots, slots);
    step.slots = static_cast<const int32_t*>(dslots.data());
    auto* f = static_cast<float*>(dkv.data());
    pro = {.q = static_cast<float*>(dq.data()),
           .k = f,
           .v = f + kv_floats,
           .q_norm = static_cast<const float*>(dw.data()),
           .k_norm = static_cast<const float*>(dw.data()) + kHeadDim,
           .eps = 1e-6f,
           .n_rot = kHeadDim,
           .neox = true,
           .inv_freq = static_cast<const double*>(dfreq.data()),
           .angle_table = static_cast<const float*>(dangles.data())};
    kernels::qk_angle_table(step, kHeadDim, pro.inv_freq, static_cast<float*>(dangles.data()),
                            stream.get());
  }
  const double ms = median_ms(stream, [&](int i) {
    kernels::PagedKv kv;
    kv.k = static_cast<uint8_t*>(kbuf.data()) + (i % copies) * bytes;
    kv.v = static_cast<uint8_t*>(vbuf.data()) + (i % copies) * bytes;
    kv.dtype = c.cache;
    kv.block_size = kBlock;
    kv.n_kv_heads = kKvHeads;
    kv.head_dim = kHeadDim;
    kv.n_blocks = n_blocks;
    if (c.prologue == Prologue::own_launch)
      kernels::qk_prologue(kv, step, pro.q, pro.k, pro.v, kHeads, pro.q_norm, pro.k_norm, nullptr,
                           pro.eps, pro.n_rot, pro.neox, pro.inv_freq, stream.get(),
                           pro.angle_table);
    kernels::attention(kv, step, static_cast<const float*>(dq.data()), int64_t{kHeads} * kHeadDim,
                       args, static_cast<float*>(dout.data()), scratch, stream.get(),
                       c.prologue == Prologue::inside ? &pro : nullptr);
  });
  check(cudaGetLastError(), "attention");
  // KV bytes: each sequence's keys once (K and V); FLOPs: q.k and p.v over every query's keys.
  const double kv_bytes =
      2.0 * (double{1} * c.n_seqs * ctx + (c.chunk_new > 0 ? chunk_ctx : 0)) * row;
  double pairs = 0;
  for (int32_t p : positions) pairs += p + 1.0;
  const double flops = pairs * kHeads * kHeadDim * 4.0;
  const double tbps = kv_bytes / (ms * 1e-3) / 1e12;
  const std::string name = std::string(c.name) + (tensor_cores ? "" : " fma");
  std::printf("%-28s %5d tok %9.1f us %7.2f TB/s KV %5.1f%% copy %7.2f TFLOP/s\n", name.c_str(),
              n_tokens, ms * 1e3, tbps, 100.0 * tbps / copy_tbps, flops / (ms * 1e-3) / 1e12);
  nlohmann::json phases = print_phases(stream);
  return {{"kernel", "attention"},
          {"phases", std::move(phases)},
          {"case", name},
          {"tensor_cores", tensor_cores},
          {"n_tokens", n_tokens},
          {"context", ctx},
          {"cache", std::string(dtype_name(c.cache))},
          {"us", ms * 1e3},
          {"kv_tb_per_s", tbps},
          {"pct_of_copy", 100.0 * tbps / copy_tbps},
          {"tflop_per_s", flops / (ms * 1e-3) / 1e12}};
}

}  // namespace

nlohmann::json run_attention(const cuda::Stream& stream, double copy_tbps,
                             const std::vector<std::string>& only) {
  // A row's name: the case's, with " fma" for the CUDA-core kernel. Every name in `only` must be
  // one (a misspelt name is refused, not silently left out of an A/B).
  const auto row_name = [](const AttnCase& c, bool tc) {
    return std::string(c.name) + (tc ? "" : " fma");
  };
  const auto has_fma_twin = [](const AttnCase& c) {
    return c.cache != DType::f8_e4m3 && c.prologue == Prologue::none;
  };
  for (const std::string& name : only) {
    bool known = false;
    for (const AttnCase& c : kCases)
      known = known || name == row_name(c, true) || (has_fma_twin(c) && name == row_name(c, false));
    if (!known) fail(ErrorCode::invalid_argument, "--only: '{}' names no attention case", name);
  }
  std::printf("attention, %d q / %d kv heads, head_dim %d, block %d:\n", kHeads, kKvHeads, kHeadDim,
              kBlock);
  cuda::DeviceBuffer scratch(kernels::attention_scratch_bytes_max(kHeadDim));
  kernels::attention_scratch_clear(scratch.data(), nullptr);
  check(cudaDeviceSynchronize(), "clearing attention's scratch");
  nlohmann::json rows = nlohmann::json::array();
  // Every case with the tensor-core kernel (the default), then with the CUDA-core one ("fma"; the
  // F8_E4M3 cases have one kernel); with `only`, the rows it names (one case: a profiler's
  // launches are then that case's alone).
  for (const bool tc : {true, false})
    for (const AttnCase& c : kCases)
      if ((tc || has_fma_twin(c)) &&
          (only.empty() || std::find(only.begin(), only.end(), row_name(c, tc)) != only.end()))
        rows.push_back(run_case(stream, copy_tbps, c, scratch.data(), tc));
  return rows;
}

}  // namespace memra::bench
