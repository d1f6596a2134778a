// Typed access to one config.json object, shared by hf_config.cpp and the key readers the
// architecture descriptors (formats/arch/) point at; errors name the file and the field.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

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

// The per-architecture config.json -> GGUF metadata readers (hf_config.h lists their keys). Each
// runs after the shapes every architecture shares (hidden_size, layers, heads, vocab, eps...).
void hf_config_read_dense(HfModelConfig& out, const HfConfigReader& r);     // llama, qwen2, qwen3
void hf_config_read_qwen3moe(HfModelConfig& out, const HfConfigReader& r);  // dense + experts
void hf_config_read_gemma3(HfModelConfig& out, const HfConfigReader& r);
void hf_config_read_gemma4(HfModelConfig& out, const HfConfigReader& r);
void hf_config_read_qwen35(HfModelConfig& out, const HfConfigReader& r);  // and qwen35moe

}  // namespace memra
