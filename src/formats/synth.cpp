// The synth writer: a counter-based generator (each value a pure function of seed, tensor and
// element index, so any split of rows over threads gives the same bytes), rows drawn and
// quantized in parallel one tensor at a time, and --fast-quant's direct K-quant blocks (random
// levels under scales chosen for the same element spread, skipping the slow reference encoder).
#include "formats/synth.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/half.h"
#include "formats/quant.h"
#include "formats/row_workers.h"

namespace memra::synth {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr float kNormStd = 0.1f;  // RMSNorm weights 1 + 0.1 N(0, 1): near 1, not all equal

// splitmix64's output function: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline uint64_t stream_key(uint64_t seed, uint64_t stream) {
  return mix64(mix64(seed + kGolden) ^ stream);
}

// Value number i of a keyed stream, ~N(0, 1): the sum of four 16-bit uniforms, centred and scaled
// (mean 4 * 32767.5, standard deviation sqrt(4 * (65536^2 - 1) / 12)). Cheap and exact in float.
inline float normal_at(uint64_t key, uint64_t i) {
  const uint64_t z = mix64(key + (i + 1) * kGolden);
  const uint32_t sum =
      static_cast<uint32_t>((z & 0xFFFF) + ((z >> 16) & 0xFFFF) + ((z >> 32) & 0xFFFF) + (z >> 48));
  return (static_cast<float>(sum) - 131070.0f) * (1.0f / 37837.2273f);
}

bool is_k_quant(DType t) {
  return t == DType::q4_k || t == DType::q5_k || t == DType::q6_k;
}

// One K-quant type's fast block recipe: where d, dmin and the scales live, the range of the
// (small, so 6-bit packing needs no high bits) sub-block scales, and the level spread.
struct FastK {
  int block_bytes;
  int n_scales;  // sub-blocks per 256-element super-block
  int scale_lo;  // scales drawn uniformly from scale_lo .. scale_lo + scale_span - 1
  int scale_span;
  float level_mean;  // mean of the uniform levels: the min that centres them (q6_k: 32, signed)
  float level_rms;   // RMS of the centred levels
};

const FastK& fast_k(DType t) {
  // q4_k levels 0..15, q5_k 0..31, q6_k 0..63 centred at 32 (mean -0.5 after centring).
  static const FastK q4{144, 8, 8, 8, 7.5f, 4.6098f};
  static const FastK q5{176, 8, 4, 4, 15.5f, 9.2331f};
  static const FastK q6{210, 16, 2, 4, 32.0f, 18.4797f};
  return t == DType::q4_k ? q4 : t == DType::q5_k ? q5 : q6;
}

// One super-block of random levels whose dequantized values have RMS ~std and mean ~0:
// x = d * sc * (q - mean) with d = std / (rms(sc) * level_rms). d stays a normal f16 for the
// std of any fan-in below ~30000.
void fast_k_block(DType type, uint64_t key, uint64_t block, float std, uint8_t* dst) {
  const FastK& f = fast_k(type);
  uint64_t words[27];  // 216 bytes >= the largest block (q6_k, 210)
  for (int w = 0; w < 27; ++w) words[w] = mix64(key + (block * 27 + w + 1) * kGolden);
  std::memcpy(dst, words, f.block_bytes);
  uint8_t sc[16];
  const uint64_t pick = mix64(key ^ (block * kGolden + 0x5CA1E));
  double sum_sq = 0;
  for (int j = 0; j < f.n_scales; ++j) {
    sc[j] = static_cast<uint8_t>(f.scale_lo + ((pick >> (4 * j)) % f.scale_span));
  }
  for (int v = f.scale_lo; v < f.scale_lo + f.scale_span; ++v) sum_sq += double(v) * v;
  const float rms_sc = static_cast<float>(std::sqrt(sum_sq / f.scale_span));
  const uint16_t d = f32_to_f16(std / (rms_sc * f.level_rms));
  if (type == DType::q6_k) {
    for (int j = 0; j < 16; ++j) dst[192 + j] = sc[j];  // int8 scales, positive
    std::memcpy(dst + 208, &d, 2);
    return;
  }
  // q4_k / q5_k: d, dmin = mean * d, then 12 bytes of 6-bit scales and mins (ggml's
  // get_scale_min_k4 layout); with every scale and min below 16 the high-bit fields are zero.
  const uint16_t dmin = f32_to_f16(f16_to_f32(d) * f.level_mean);
  std::memcpy(dst, &d, 2);
  std::memcpy(dst + 2, &dmin, 2);
  uint8_t* s = dst + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = sc[j];
    s[j + 4] = sc[j];
    s[j + 8] = static_cast<uint8_t>(sc[j + 4] | (sc[j + 4] << 4));
  }
}

void draw_row(const TensorPlan& t, uint64_t seed, uint64_t row, std::span<float> out) {
  if (t.init == Init::values) {
    std::copy(t.values.begin(), t.values.end(), out.begin());
    return;
  }
  fill_normal(seed, t.stream, row * out.size(), out);
  const float scale = t.init == Init::norm ? kNormStd : t.std;
  const float offset = t.init == Init::norm ? 1.0f : t.init == Init::shifted ? t.mean : 0.0f;
  for (float& v : out) v = offset + scale * v;
}

}  // namespace

void fill_normal(uint64_t seed, uint64_t stream, uint64_t first, std::span<float> out) {
  const uint64_t key = stream_key(seed, stream);
  for (size_t i = 0; i < out.size(); ++i) out[i] = normal_at(key, first + i);
}

void fill_rows(const TensorPlan& t, uint64_t seed, bool fast_quant, std::span<uint8_t> out,
               uint64_t first_row, uint64_t last_row) {
  const uint64_t n = t.view.ne[0];
  const uint64_t row_bytes = dtype_row_bytes(t.type, n, t.view.name);
  if (last_row > t.view.n_rows() || out.size() < last_row * row_bytes)
    fail(ErrorCode::internal, "tensor '{}': rows {}..{} overrun {} bytes", t.view.name, first_row,
         last_row, out.size());
  if (fast_quant && is_k_quant(t.type) && t.init == Init::matrix) {
    const uint64_t key = stream_key(seed, t.stream ^ 0xFA57B10C);
    const uint64_t blocks_per_row = n / 256;
    const int block_bytes = fast_k(t.type).block_bytes;
    for (uint64_t r = first_row; r < last_row; ++r)
      for (uint64_t b = 0; b < blocks_per_row; ++b)
        fast_k_block(t.type, key, r * blocks_per_row + b, t.std,
                     out.data() + r * row_bytes + b * block_bytes);
    return;
  }
  std::vector<float> row(n);
  for (uint64_t r = first_row; r < last_row; ++r) {
    draw_row(t, seed, r, row);
    quant::quantize_row(t.type, row.data(), out.data() + r * row_bytes, static_cast<int64_t>(n));
  }
}

void fill_tensor(const TensorPlan& t, uint64_t seed, bool fast_quant, int threads,
                 std::span<uint8_t> out) {
  row_workers_run(
      t.view.n_rows(), threads,
      [&](uint64_t first, uint64_t last) { fill_rows(t, seed, fast_quant, out, first, last); },
      fmt::format("tensor '{}' ({})", t.view.name, dtype_name(t.type)));
}

convert::Summary write_gguf(const Options& options, const gguf::Writer::ProgressFn& progress) {
  if (options.output_path.empty()) fail(ErrorCode::invalid_argument, "no output path");
  const Plan plan = make_plan(options);
  gguf::Writer writer;
  for (const auto& [key, value] : plan.metadata.entries()) writer.metadata().set(key, value);
  std::map<DType, size_t> per_type;
  const int threads = std::max(1, options.threads);
  for (const TensorPlan& t : plan.tensors) {
    ++per_type[t.type];
    writer.add_tensor(t.view.name, t.type,
                      std::span<const uint64_t>(t.view.ne.data(), t.view.n_dims),
                      [&t, &options, threads](std::span<uint8_t> out) {
                        fill_tensor(t, options.seed, options.fast_quant, threads, out);
                      });
  }
  convert::Summary summary;
  writer.write(options.output_path, [&](size_t done, size_t total, uint64_t written, uint64_t all) {
    summary.n_bytes = written;
    if (progress) progress(done, total, written, all);
  });
  summary.n_tensors = plan.tensors.size();
  summary.tensors_per_type.assign(per_type.begin(), per_type.end());
  return summary;
}

}  // namespace memra::synth
