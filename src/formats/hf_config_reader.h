// Typed access to one config.json object and the helpers shared by hf_config.cpp and the key
// readers the architecture descriptors (formats/arch/) point at; errors name the file and the
// field.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/hf_config.h"

namespace memra {

// Typed, range-checked access to one config object; errors name file and field.
struct HfConfigReader {
  const nlohmann::json& c;
  std::string_view file;

  const nlohmann::json* find(std::string_view key) const {
    const auto it = c.find(key);
    return it == c.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<int64_t> opt_int(std::string_view key, int64_t lo, int64_t hi) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer())
      fail(ErrorCode::malformed_file, "{}: {} must be an integer, got {}", file, key, v->dump());
    constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
    const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(kI64Max)
                          ? kI64Max
                          : v->get<int64_t>();
    if (x < lo || x > hi)
      fail(ErrorCode::malformed_file, "{}: {} = {} is outside [{}, {}]", file, key, v->dump(), lo,
           hi);
    return x;
  }
  int64_t req_int(std::string_view key, int64_t lo, int64_t hi) const {
    const auto v = opt_int(key, lo, hi);
    if (!v) fail(ErrorCode::malformed_file, "{}: required field {} is missing", file, key);
    return *v;
  }
  std::optional<double> opt_float(std::string_view key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number() || !std::isfinite(v->get<double>()))
      fail(ErrorCode::malformed_file, "{}: {} must be a finite number, got {}", file, key,
           v->dump());
    return v->get<double>();
  }
  double positive_float(std::string_view key, std::optional<double> fallback) const {
    const auto v = opt_float(key);
    if (!v && !fallback)
      fail(ErrorCode::malformed_file, "{}: required field {} is missing", file, key);
    const double x = v ? *v : *fallback;
    if (!(x > 0)) fail(ErrorCode::malformed_file, "{}: {} = {} must be > 0", file, key, x);
    return x;
  }
  std::optional<std::string> opt_string(std::string_view key) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string())
      fail(ErrorCode::malformed_file, "{}: {} must be a string, got {}", file, key, v->dump());
    return v->get<std::string>();
  }
  bool opt_bool(std::string_view key, bool fallback) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean())
      fail(ErrorCode::malformed_file, "{}: {} must be true or false, got {}", file, key, v->dump());
    return v->get<bool>();
  }
};

// GGUF metadata values; callers range-check against kHfU32Max (the u32 keys' bound) first.
inline constexpr int64_t kHfU32Max = std::numeric_limits<uint32_t>::max();

inline void hf_set_u32(gguf::Metadata& md, const std::string& key, int64_t v) {
  md.set(key, gguf::Value::make_u32(static_cast<uint32_t>(v)));
}
inline void hf_set_f32(gguf::Metadata& md, const std::string& key, double v) {
  md.set(key, gguf::Value::make_f32(static_cast<float>(v)));
}

// One rope setting: base frequency plus the scaling type and its parameters.
struct HfRope {
  double theta = 10000.0;
  std::string type = "default";
  const nlohmann::json* params = nullptr;  // object holding factor etc. when type != default
};

// The rope setting in params (an object, or null for theta without scaling) named `where` in
// errors; refuses a type other than default, linear and llama3.
HfRope hf_rope_from(const nlohmann::json* params, double theta, std::string_view where,
                    std::string_view file);
// Legacy configs: rope_theta + rope_scaling; transformers 5: rope_parameters (params).
HfRope hf_read_rope(const HfConfigReader& r, const nlohmann::json* params, double default_theta);
// A.rope.scaling.* for linear, the llama3 keys and out.rope_freqs for llama3 (hf_config.h).
void hf_write_rope_scaling(HfModelConfig& out, const HfRope& rope, std::string_view file);

// Per-layer sliding flags (gemma3, gemma4): layer_types, else the legacy sliding_window_pattern,
// else 6.
std::vector<bool> hf_gemma3_sliding_layers(const HfConfigReader& r, int64_t n_layer);

// The config.json -> GGUF metadata readers the descriptors point at (ArchDescriptor::
// read_hf_config; hf_config.h lists their keys) run after the shapes every architecture shares
// (hidden_size, layers, heads, vocab, eps...). Each family's own reader is in its
// formats/arch/<family>.cpp; this one, Llama's keys, is shared by llama, qwen2 and qwen3, and
// qwen3moe reads it before its experts.
void hf_config_read_dense(HfModelConfig& out, const HfConfigReader& r);

}  // namespace memra
