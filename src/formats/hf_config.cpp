// config.json -> GGUF metadata (see hf_config.h for the key list and the conventions): the class
// pick, the shapes every architecture shares, the token ids, and the helpers the architectures'
// own readers (formats/arch/<family>.cpp, hf_config_reader.h) share. Reads both config styles
// transformers has written: legacy top-level rope_theta / rope_scaling / rope_local_base_freq /
// sliding_window_pattern, and transformers 5's rope_parameters (per layer type for gemma3) and
// layer_types.
#include "formats/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <numbers>
#include <optional>

#include "core/error.h"
#include "formats/arch/arch.h"
#include "formats/hf_config_reader.h"
#include "formats/hf_json.h"

namespace memra {
namespace {

using gguf::Value;
using nlohmann::json;

constexpr int kMaxConfigDepth = 16;

// The architecture config.json names and the class it names, from the descriptors' class lists.
struct ArchEntry {
  const ArchDescriptor* arch = nullptr;
  const HfClass* hf = nullptr;
};

// "(supported: <text classes>, and the text model of <wrappers>)", in the registry's order.
std::string supported_classes() {
  std::string text, wrappers;
  for (const ArchDescriptor* d : arch_all()) {
    for (const HfClass& c : d->hf_classes) {
      std::string& list = c.text_model_type.empty() ? text : wrappers;
      list += (list.empty() ? "" : ", ") + std::string(c.hf_architecture);
    }
  }
  return text + ", and the text model of " + wrappers;
}

ArchEntry pick_architecture(const HfConfigReader& r) {
  const json* list = r.find("architectures");
  std::string name;
  if (list != nullptr) {
    if (!list->is_array() || list->size() != 1 || !(*list)[0].is_string())
      fail(ErrorCode::malformed_file, "{}: architectures must list exactly one name, got {}",
           r.file, list->dump());
    name = (*list)[0].get<std::string>();
  }
  const auto model_type = r.opt_string("model_type");
  for (const ArchDescriptor* d : arch_all()) {
    for (const HfClass& e : d->hf_classes) {
      const bool by_name = !name.empty() && name == e.hf_architecture;
      const bool by_type = name.empty() && model_type && *model_type == e.model_type;
      if (!by_name && !by_type) continue;
      if (model_type && *model_type != e.model_type)
        fail(ErrorCode::malformed_file, "{}: model_type '{}' does not match architecture {}",
             r.file, *model_type, e.hf_architecture);
      return {d, &e};
    }
  }
  fail(ErrorCode::unsupported,
       "{}: architecture '{}' (model_type '{}') is not supported (supported: {})", r.file,
       name.empty() ? "<none>" : name, model_type.value_or("<none>"), supported_classes());
}

// A wrapper's text_config, checked to be the text model the wrapper names.
HfConfigReader wrapper_text_config(const HfConfigReader& r, const HfClass& entry) {
  const json* text = r.find("text_config");
  if (text == nullptr || !text->is_object())
    fail(ErrorCode::malformed_file, "{}: {} lacks an object text_config", r.file,
         entry.hf_architecture);
  const HfConfigReader t{*text, "config.json text_config"};
  const auto type = t.opt_string("model_type");
  if (type && *type != entry.text_model_type)
    fail(ErrorCode::unsupported,
         "{}: model_type '{}' is not supported in {} (only its text model, {})", t.file, *type,
         entry.hf_architecture, entry.text_model_type);
  return t;
}

// Shapes shared by every supported architecture, with the class defaults of arch.
void read_shapes(HfModelConfig& out, const HfConfigReader& r, const ArchDescriptor& arch) {
  out.n_embd = r.req_int("hidden_size", 1, 1 << 20);
  out.n_layer = r.req_int("num_hidden_layers", 1, 1 << 12);
  out.n_head = r.req_int("num_attention_heads", 1, 1 << 12);
  out.n_head_kv = r.opt_int("num_key_value_heads", 1, out.n_head).value_or(out.n_head);
  if (out.n_head % out.n_head_kv != 0)
    fail(ErrorCode::malformed_file,
         "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", r.file,
         out.n_head, out.n_head_kv);
  const int64_t fallback_head_dim = out.n_embd / out.n_head;
  out.head_dim = r.opt_int("head_dim", 1, 1 << 14).value_or(fallback_head_dim);
  if (out.head_dim < 2 || out.head_dim % 2 != 0)
    fail(ErrorCode::malformed_file, "{}: head_dim {} must be even (rope rotates pairs)", r.file,
         out.head_dim);
  out.vocab_size = r.req_int("vocab_size", 1, 1 << 24);
  out.tied_embeddings = r.opt_bool("tie_word_embeddings", arch.tied_by_default);

  gguf::Metadata& md = out.metadata;
  const std::string& a = out.arch;
  hf_set_u32(md, a + ".vocab_size", out.vocab_size);
  hf_set_u32(
      md, a + ".context_length",
      r.opt_int("max_position_embeddings", 1, kHfU32Max).value_or(arch.default_context_length));
  hf_set_u32(md, a + ".embedding_length", out.n_embd);
  hf_set_u32(md, a + ".block_count", out.n_layer);
  // Where every layer routes to experts (qwen35moe) there is no intermediate_size.
  if (arch.dense_ffn)
    hf_set_u32(md, a + ".feed_forward_length", r.req_int("intermediate_size", 1, 1 << 22));
  hf_set_u32(md, a + ".attention.head_count", out.n_head);
  hf_set_u32(md, a + ".attention.head_count_kv", out.n_head_kv);
  hf_set_u32(md, a + ".attention.key_length", out.head_dim);
  hf_set_u32(md, a + ".attention.value_length", out.head_dim);
  const double eps = r.positive_float("rms_norm_eps", 1e-6);
  if (eps >= 1) fail(ErrorCode::malformed_file, "{}: rms_norm_eps {} must be < 1", r.file, eps);
  hf_set_f32(md, a + ".attention.layer_norm_rms_epsilon", eps);
}

// bos/eos/pad ids from the first of `sources` that has each (generation_config.json, then
// config.json, then a wrapper's text_config); eos may be a list.
void read_token_ids(HfModelConfig& out, std::initializer_list<HfConfigReader> sources) {
  for (const auto& [hf_key, gguf_key] :
       {std::pair{"bos_token_id", "tokenizer.ggml.bos_token_id"},
        std::pair{"eos_token_id", "tokenizer.ggml.eos_token_id"},
        std::pair{"pad_token_id", "tokenizer.ggml.padding_token_id"}}) {
    const auto it = std::find_if(sources.begin(), sources.end(), [&](const HfConfigReader& c) {
      return c.find(hf_key) != nullptr;
    });
    if (it == sources.end()) continue;
    const HfConfigReader& r = *it;
    const json* v = r.find(hf_key);
    std::vector<Value> ids;
    for (const json& id : v->is_array() ? *v : json::array({*v})) {
      const bool non_negative = id.is_number_unsigned() || (id.is_number_integer() && id >= 0);
      if (!non_negative || id.get<uint64_t>() >= uint64_t(out.vocab_size))
        fail(ErrorCode::malformed_file, "{}: {} entry {} is not a token id below vocab_size {}",
             r.file, hf_key, id.dump(), out.vocab_size);
      ids.push_back(Value::make_u32(id.get<uint32_t>()));
    }
    if (ids.empty()) continue;
    out.metadata.set(gguf_key, ids.front());
    if (ids.size() > 1 && std::string_view(hf_key) == "eos_token_id")
      out.metadata.set("tokenizer.ggml.eos_token_ids",
                       Value::make_array(gguf::ValueType::u32, std::move(ids)));
  }
}

}  // namespace

HfRope hf_rope_from(const json* params, double theta, std::string_view where,
                    std::string_view file) {
  HfRope rope;
  rope.theta = theta;
  if (params == nullptr) return rope;
  if (!params->is_object())
    fail(ErrorCode::malformed_file, "{}: {} must be an object, got {}", file, where,
         params->dump());
  const HfConfigReader p{*params, file};
  rope.theta = p.positive_float("rope_theta", theta);
  auto type = p.opt_string("rope_type");
  if (!type) type = p.opt_string("type");
  rope.type = type.value_or("default");
  rope.params = params;
  if (rope.type != "default" && rope.type != "linear" && rope.type != "llama3")
    fail(ErrorCode::unsupported,
         "{}: {} rope type '{}' is not supported (supported: default, linear, llama3)", file, where,
         rope.type);
  return rope;
}

HfRope hf_read_rope(const HfConfigReader& r, const json* params, double default_theta) {
  if (params != nullptr) return hf_rope_from(params, default_theta, "rope_parameters", r.file);
  return hf_rope_from(r.find("rope_scaling"), r.positive_float("rope_theta", default_theta),
                      "rope_scaling", r.file);
}

void hf_write_rope_scaling(HfModelConfig& out, const HfRope& rope, std::string_view file) {
  if (rope.type == "default") return;
  const HfConfigReader p{*rope.params, file};
  const std::string& a = out.arch;
  const double factor = p.positive_float("factor", std::nullopt);
  if (rope.type == "linear") {
    out.metadata.set(a + ".rope.scaling.type", Value::make_string("linear"));
    hf_set_f32(out.metadata, a + ".rope.scaling.factor", factor);
    return;
  }
  const double low = p.positive_float("low_freq_factor", 1.0);
  const double high = p.positive_float("high_freq_factor", 4.0);
  const int64_t original = p.req_int("original_max_position_embeddings", 1, kHfU32Max);
  if (!(high > low))
    fail(ErrorCode::malformed_file, "{}: llama3 rope high_freq_factor {} must exceed {}", file,
         high, low);
  hf_set_f32(out.metadata, a + ".rope.scaling.llama3.factor", factor);
  hf_set_f32(out.metadata, a + ".rope.scaling.llama3.low_freq_factor", low);
  hf_set_f32(out.metadata, a + ".rope.scaling.llama3.high_freq_factor", high);
  hf_set_u32(out.metadata, a + ".rope.scaling.llama3.original_context_length", original);
  out.rope_freqs = hf_llama3_rope_factors(rope.theta, out.head_dim, factor, low, high,
                                          static_cast<double>(original));
}

std::vector<bool> hf_gemma3_sliding_layers(const HfConfigReader& r, int64_t n_layer) {
  std::vector<bool> sliding(static_cast<size_t>(n_layer));
  if (const json* types = r.find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != n_layer)
      fail(ErrorCode::malformed_file, "{}: layer_types must list {} entries (num_hidden_layers)",
           r.file, n_layer);
    for (size_t i = 0; i < sliding.size(); ++i) {
      const json& t = (*types)[i];
      const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
      if (s != "sliding_attention" && s != "full_attention")
        fail(ErrorCode::unsupported, "{}: layer_types[{}] = '{}' is not supported", r.file, i, s);
      sliding[i] = s == "sliding_attention";
    }
    return sliding;
  }
  const int64_t pattern = r.opt_int("sliding_window_pattern", 1, 1 << 12).value_or(6);
  for (size_t i = 0; i < sliding.size(); ++i) sliding[i] = (int64_t(i) + 1) % pattern != 0;
  return sliding;
}

// Llama / Qwen2 / Qwen3: SiLU-gated MLP, full attention everywhere, one rope setting.
void hf_config_read_dense(HfModelConfig& out, const HfConfigReader& r) {
  const std::string act = r.opt_string("hidden_act").value_or("silu");
  if (act != "silu")
    fail(ErrorCode::unsupported, "{}: hidden_act '{}' is not supported for {} (only silu)", r.file,
         act, out.hf_architecture);
  if (r.opt_bool("mlp_bias", false))
    fail(ErrorCode::unsupported, "{}: mlp_bias = true is not supported", r.file);
  if (r.opt_bool("use_sliding_window", false))
    fail(ErrorCode::unsupported, "{}: use_sliding_window = true is not supported for {}", r.file,
         out.hf_architecture);
  if (const json* types = r.find("layer_types")) {
    if (!types->is_array())
      fail(ErrorCode::malformed_file, "{}: layer_types must be an array", r.file);
    for (const json& t : *types) {
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        fail(ErrorCode::unsupported, "{}: layer_types entry {} is not supported for {}", r.file,
             t.dump(), out.hf_architecture);
    }
  }
  const HfRope rope = hf_read_rope(r, r.find("rope_parameters"), 10000.0);
  hf_set_f32(out.metadata, out.arch + ".rope.freq_base", rope.theta);
  hf_set_u32(out.metadata, out.arch + ".rope.dimension_count", out.head_dim);
  hf_write_rope_scaling(out, rope, r.file);
}

HfModelConfig hf_config_from_json(const json& config, const json& generation_config,
                                  std::string_view name) {
  if (!config.is_object()) fail(ErrorCode::malformed_file, "config.json must be a JSON object");
  const HfConfigReader r{config, "config.json"};
  if (const json* q = r.find("quantization_config")) {
    const json* method =
        q->is_object() ? HfConfigReader{*q, "config.json"}.find("quant_method") : nullptr;
    fail(ErrorCode::unsupported,
         "config.json: pre-quantized checkpoints (quantization_config, quant_method {}) are not "
         "supported; use a float checkpoint or a GGUF",
         method != nullptr ? method->dump() : "unknown");
  }
  const ArchEntry picked = pick_architecture(r);
  const HfClass& entry = *picked.hf;
  HfModelConfig out;
  out.arch = picked.arch->name;
  out.hf_architecture = entry.hf_architecture;
  out.metadata.set("general.architecture", Value::make_string(out.arch));
  out.metadata.set("general.name", Value::make_string(std::string(name)));
  // A wrapper's text model keys live in text_config; transformers ties the wrapper's lm_head by
  // its top-level tie_word_embeddings (class default when absent), not text_config's.
  const ArchDescriptor& arch = *picked.arch;
  out.multimodal = !entry.text_model_type.empty();
  const HfConfigReader t = out.multimodal ? wrapper_text_config(r, entry) : r;
  read_shapes(out, t, arch);
  if (out.multimodal) out.tied_embeddings = r.opt_bool("tie_word_embeddings", arch.tied_by_default);
  arch.read_hf_config(out, t);
  const json empty = json::object();
  const json& gen = generation_config.is_object() ? generation_config : empty;
  read_token_ids(out, {HfConfigReader{gen, "generation_config.json"}, r, t});
  return out;
}

HfModelConfig hf_config_load(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path))
    fail(ErrorCode::not_found, "'{}' is not a Hugging Face model folder: {} does not exist", folder,
         config_path.string());
  const json config = json_read_file(config_path.string(), kMaxHfConfigBytes, kMaxConfigDepth);
  json generation = json::object();
  const fs::path gen_path = dir / "generation_config.json";
  if (fs::exists(gen_path))
    generation = json_read_file(gen_path.string(), kMaxHfConfigBytes, kMaxConfigDepth);
  fs::path normal = fs::absolute(dir).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  std::string name = normal.filename().string();
  // In the hub cache the folder is snapshots/<commit>: name it after models--org--<name>.
  const std::string repo = normal.parent_path().parent_path().filename().string();
  if (normal.parent_path().filename() == "snapshots" && repo.starts_with("models--"))
    name = repo.substr(repo.rfind("--") + 2);
  return hf_config_from_json(config, generation, name);
}

std::vector<float> hf_llama3_rope_factors(double theta, int64_t head_dim, double factor,
                                          double low_freq_factor, double high_freq_factor,
                                          double original_context) {
  const double low_wavelen = original_context / low_freq_factor;
  const double high_wavelen = original_context / high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      f = 1.0 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

}  // namespace memra