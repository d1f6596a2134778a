// config.json -> GGUF metadata (see hf_config.h for the key list and the conventions). Reads both
// config styles transformers has written: legacy top-level rope_theta / rope_scaling /
// rope_local_base_freq / sliding_window_pattern, and transformers 5's rope_parameters (per layer
// type for gemma3) and layer_types.
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
constexpr int64_t kU32Max = std::numeric_limits<uint32_t>::max();

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

// One rope setting: base frequency plus the scaling type and its parameters.
struct Rope {
  double theta = 10000.0;
  std::string type = "default";
  const json* params = nullptr;  // object holding factor etc. when type != default
};

Rope rope_from(const json* params, double theta, std::string_view where, std::string_view file) {
  Rope rope;
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

// Legacy configs: rope_theta + rope_scaling; transformers 5: rope_parameters.
Rope read_rope(const HfConfigReader& r, const json* params, double default_theta) {
  if (params != nullptr) return rope_from(params, default_theta, "rope_parameters", r.file);
  return rope_from(r.find("rope_scaling"), r.positive_float("rope_theta", default_theta),
                   "rope_scaling", r.file);
}

void set_u32(gguf::Metadata& md, const std::string& key, int64_t v) {
  md.set(key, Value::make_u32(static_cast<uint32_t>(v)));
}
void set_f32(gguf::Metadata& md, const std::string& key, double v) {
  md.set(key, Value::make_f32(static_cast<float>(v)));
}

void write_rope_scaling(HfModelConfig& out, const Rope& rope, std::string_view file) {
  if (rope.type == "default") return;
  const HfConfigReader p{*rope.params, file};
  const std::string& a = out.arch;
  const double factor = p.positive_float("factor", std::nullopt);
  if (rope.type == "linear") {
    out.metadata.set(a + ".rope.scaling.type", Value::make_string("linear"));
    set_f32(out.metadata, a + ".rope.scaling.factor", factor);
    return;
  }
  const double low = p.positive_float("low_freq_factor", 1.0);
  const double high = p.positive_float("high_freq_factor", 4.0);
  const int64_t original = p.req_int("original_max_position_embeddings", 1, kU32Max);
  if (!(high > low))
    fail(ErrorCode::malformed_file, "{}: llama3 rope high_freq_factor {} must exceed {}", file,
         high, low);
  set_f32(out.metadata, a + ".rope.scaling.llama3.factor", factor);
  set_f32(out.metadata, a + ".rope.scaling.llama3.low_freq_factor", low);
  set_f32(out.metadata, a + ".rope.scaling.llama3.high_freq_factor", high);
  set_u32(out.metadata, a + ".rope.scaling.llama3.original_context_length", original);
  out.rope_freqs = hf_llama3_rope_factors(rope.theta, out.head_dim, factor, low, high,
                                          static_cast<double>(original));
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
  set_u32(md, a + ".vocab_size", out.vocab_size);
  set_u32(md, a + ".context_length",
          r.opt_int("max_position_embeddings", 1, kU32Max).value_or(arch.default_context_length));
  set_u32(md, a + ".embedding_length", out.n_embd);
  set_u32(md, a + ".block_count", out.n_layer);
  // Where every layer routes to experts (qwen35moe) there is no intermediate_size.
  if (arch.dense_ffn)
    set_u32(md, a + ".feed_forward_length", r.req_int("intermediate_size", 1, 1 << 22));
  set_u32(md, a + ".attention.head_count", out.n_head);
  set_u32(md, a + ".attention.head_count_kv", out.n_head_kv);
  set_u32(md, a + ".attention.key_length", out.head_dim);
  set_u32(md, a + ".attention.value_length", out.head_dim);
  const double eps = r.positive_float("rms_norm_eps", 1e-6);
  if (eps >= 1) fail(ErrorCode::malformed_file, "{}: rms_norm_eps {} must be < 1", r.file, eps);
  set_f32(md, a + ".attention.layer_norm_rms_epsilon", eps);
}

// Llama / Qwen2 / Qwen3: SiLU-gated MLP, full attention everywhere, one rope setting.
void read_dense(HfModelConfig& out, const HfConfigReader& r) {
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
  const Rope rope = read_rope(r, r.find("rope_parameters"), 10000.0);
  set_f32(out.metadata, out.arch + ".rope.freq_base", rope.theta);
  set_u32(out.metadata, out.arch + ".rope.dimension_count", out.head_dim);
  write_rope_scaling(out, rope, r.file);
}

// Qwen3 MoE: a top-k softmax router over num_experts SiLU-gated experts in the layers that
// decoder_sparse_step selects ((i + 1) % step == 0) minus mlp_only_layers; the other layers keep
// the dense MLP of intermediate_size.
void read_qwen3moe(HfModelConfig& out, const HfConfigReader& r) {
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;
  // Hub checkpoints say num_experts; transformers 5 writes its alias num_local_experts.
  const auto experts = r.opt_int("num_experts", 1, 1 << 16);
  const auto local = r.opt_int("num_local_experts", 1, 1 << 16);
  if (experts && local && *experts != *local)
    fail(ErrorCode::malformed_file, "{}: num_experts {} differs from num_local_experts {}", r.file,
         *experts, *local);
  if (!experts && !local)
    fail(ErrorCode::malformed_file,
         "{}: required field num_experts (or num_local_experts) is "
         "missing",
         r.file);
  const int64_t n_expert = experts ? *experts : *local;
  const int64_t n_used = r.req_int("num_experts_per_tok", 1, n_expert);
  const int64_t step = r.opt_int("decoder_sparse_step", 1, 1 << 12).value_or(1);
  set_u32(md, a + ".expert_count", n_expert);
  set_u32(md, a + ".expert_used_count", n_used);
  set_u32(md, a + ".expert_feed_forward_length", r.req_int("moe_intermediate_size", 1, 1 << 22));
  md.set(a + ".expert_weights_norm", Value::make_bool(r.opt_bool("norm_topk_prob", false)));
  std::vector<bool> dense(static_cast<size_t>(out.n_layer), false);
  if (const json* only = r.find("mlp_only_layers")) {
    if (!only->is_array())
      fail(ErrorCode::malformed_file, "{}: mlp_only_layers must be an array of layer indices",
           r.file);
    for (const json& i : *only) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= out.n_layer)
        fail(ErrorCode::malformed_file, "{}: mlp_only_layers entry {} is not a layer below {}",
             r.file, i.dump(), out.n_layer);
      dense[i.get<size_t>()] = true;
    }
  }
  out.moe_layers.resize(dense.size());
  for (size_t i = 0; i < dense.size(); ++i)
    out.moe_layers[i] = !dense[i] && (int64_t(i) + 1) % step == 0;
}

// Qwen3.5 (qwen35): gated delta-net linear-attention layers and gated full-attention layers
// (layer_types), partial rotary on the attention layers. GGUF (llama.cpp) says which layers
// are full attention by one interval, so layer_types must follow that pattern.
void read_qwen35(HfModelConfig& out, const HfConfigReader& r) {
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;
  const std::string act = r.opt_string("hidden_act").value_or("silu");
  if (act != "silu")
    fail(ErrorCode::unsupported, "{}: hidden_act '{}' is not supported for {} (only silu)", r.file,
         act, out.hf_architecture);
  if (r.opt_bool("attention_bias", false))
    fail(ErrorCode::unsupported, "{}: attention_bias = true is not supported for {}", r.file,
         out.hf_architecture);
  const json* params = r.find("rope_parameters");
  const Rope rope = read_rope(r, params, 10000.0);
  if (rope.type != "default")
    fail(ErrorCode::unsupported, "{}: rope type '{}' is not supported for {} (only default)",
         r.file, rope.type, out.hf_architecture);
  // transformers 5 keeps partial_rotary_factor in rope_parameters; older configs at the top.
  std::optional<double> factor;
  if (params != nullptr && params->is_object())
    factor = HfConfigReader{*params, r.file}.opt_float("partial_rotary_factor");
  if (!factor) factor = r.opt_float("partial_rotary_factor");
  const double rot = out.head_dim * factor.value_or(0.25);
  const auto n_rot = static_cast<int64_t>(rot);
  if (rot != static_cast<double>(n_rot) || n_rot < 2 || n_rot % 2 != 0 || n_rot > out.head_dim)
    fail(ErrorCode::unsupported,
         "{}: partial_rotary_factor {} gives {} rotary dims of head_dim {}; an even whole number "
         "is needed",
         r.file, factor.value_or(0.25), rot, out.head_dim);
  set_f32(md, a + ".rope.freq_base", rope.theta);
  set_u32(md, a + ".rope.dimension_count", n_rot);
  // Multimodal rope sections (llama.cpp writes them; text positions make them irrelevant).
  std::vector<Value> sections;
  for (int64_t v : {11, 11, 10, 0}) sections.push_back(Value::make_i32(static_cast<int32_t>(v)));
  md.set(a + ".rope.dimension_sections",
         Value::make_array(gguf::ValueType::i32, std::move(sections)));

  const json* types = r.find("layer_types");
  int64_t interval = r.opt_int("full_attention_interval", 1, out.n_layer).value_or(4);
  if (types != nullptr) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != out.n_layer)
      fail(ErrorCode::malformed_file, "{}: layer_types must list {} entries (num_hidden_layers)",
           r.file, out.n_layer);
    interval = 0;
    for (size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      const std::string s = t.is_string() ? t.get<std::string>() : t.dump();
      if (s != "linear_attention" && s != "full_attention")
        fail(ErrorCode::unsupported, "{}: layer_types[{}] = '{}' is not supported", r.file, i, s);
      if (s == "full_attention" && interval == 0) interval = static_cast<int64_t>(i) + 1;
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const bool full = (*types)[i].get<std::string>() == "full_attention";
      if (interval == 0 || full != ((static_cast<int64_t>(i) + 1) % interval == 0))
        fail(ErrorCode::unsupported,
             "{}: layer_types is not a repeating pattern of linear_attention layers closed by "
             "one full_attention layer (GGUF's full_attention_interval cannot express it)",
             r.file);
    }
  }
  set_u32(md, a + ".full_attention_interval", interval);
  const int64_t nk = r.req_int("linear_num_key_heads", 1, 1024);
  const int64_t nv = r.req_int("linear_num_value_heads", 1, 1024);
  const int64_t dk = r.req_int("linear_key_head_dim", 1, 1024);
  const int64_t dv = r.req_int("linear_value_head_dim", 1, 1024);
  if (nv % nk != 0)
    fail(ErrorCode::unsupported,
         "{}: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}", r.file, nv,
         nk);
  set_u32(md, a + ".ssm.conv_kernel", r.opt_int("linear_conv_kernel_dim", 1, 64).value_or(4));
  set_u32(md, a + ".ssm.state_size", dk);
  set_u32(md, a + ".ssm.group_count", nk);
  set_u32(md, a + ".ssm.time_step_rank", nv);
  set_u32(md, a + ".ssm.inner_size", nv * dv);
  if (!arch_find(out.arch)->routed_experts) return;
  // Every layer: softmax top-k over num_experts (always renormalized) plus a shared expert
  // whose output is gated by sigmoid(shared_expert_gate(h)).
  const int64_t n_expert = r.req_int("num_experts", 1, 1 << 16);
  set_u32(md, a + ".expert_count", n_expert);
  set_u32(md, a + ".expert_used_count", r.req_int("num_experts_per_tok", 1, n_expert));
  set_u32(md, a + ".expert_feed_forward_length", r.req_int("moe_intermediate_size", 1, 1 << 22));
  set_u32(md, a + ".expert_shared_feed_forward_length",
          r.req_int("shared_expert_intermediate_size", 1, 1 << 22));
  md.set(a + ".expert_weights_norm", Value::make_bool(true));
}

// Per-layer sliding flags: layer_types, else the legacy sliding_window_pattern, else 6.
std::vector<bool> gemma3_sliding_layers(const HfConfigReader& r, int64_t n_layer) {
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

// Gemma 3: GeGLU, sliding-window + global layers with their own rope bases, extra norms.
void read_gemma3(HfModelConfig& out, const HfConfigReader& r) {
  const std::string act = r.opt_string("hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    fail(ErrorCode::unsupported,
         "{}: hidden_activation '{}' is not supported (only "
         "gelu_pytorch_tanh)",
         r.file, act);
  if (r.opt_bool("use_bidirectional_attention", false))
    fail(ErrorCode::unsupported, "{}: use_bidirectional_attention = true is not supported", r.file);
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;

  const json* params = r.find("rope_parameters");
  Rope global;
  Rope local;
  if (params != nullptr && params->is_object() && params->contains("full_attention")) {
    global = rope_from(&(*params)["full_attention"], 1e6, "rope_parameters.full_attention", r.file);
    const auto it = params->find("sliding_attention");
    local = rope_from(it == params->end() ? nullptr : &*it, 10000.0,
                      "rope_parameters.sliding_attention", r.file);
  } else {
    global = read_rope(r, params, 1e6);
    local.theta = r.positive_float("rope_local_base_freq", 10000.0);
  }
  if (local.type != "default")
    fail(ErrorCode::unsupported,
         "{}: rope scaling '{}' on sliding-window layers is not "
         "supported",
         r.file, local.type);
  set_f32(md, a + ".rope.freq_base", global.theta);
  set_f32(md, a + ".rope.freq_base_swa", local.theta);
  write_rope_scaling(out, global, r.file);

  const std::vector<bool> sliding = gemma3_sliding_layers(r, out.n_layer);
  set_u32(md, a + ".attention.sliding_window",
          r.opt_int("sliding_window", 1, kU32Max).value_or(4096));
  std::vector<Value> flags;
  for (bool s : sliding) flags.push_back(Value::make_bool(s));
  md.set(a + ".attention.sliding_window_pattern",
         Value::make_array(gguf::ValueType::boolean, std::move(flags)));
  const double scalar = r.positive_float("query_pre_attn_scalar", 256.0);
  set_f32(md, a + ".attention.scale", 1.0 / std::sqrt(scalar));
  if (const auto cap = r.opt_float("final_logit_softcapping"))
    set_f32(md, a + ".final_logit_softcapping", *cap);
  if (const auto cap = r.opt_float("attn_logit_softcapping"))
    set_f32(md, a + ".attn_logit_softcapping", *cap);
}

// Gemma 4's mixture-of-experts block (enable_moe_block): every layer routes to top_k_experts of
// num_experts GeGLU experts of moe_intermediate_size beside its dense MLP. The keys are
// llama.cpp's (A.expert_count, A.expert_used_count, A.expert_feed_forward_length); like its
// converter we write no A.expert_weights_norm: Gemma 4 always renormalizes the top-k weights.
void read_gemma4_moe(HfModelConfig& out, const HfConfigReader& r) {
  const std::string& a = out.arch;
  const int64_t n_expert = r.req_int("num_experts", 1, 1 << 16);
  set_u32(out.metadata, a + ".expert_count", n_expert);
  set_u32(out.metadata, a + ".expert_used_count", r.req_int("top_k_experts", 1, n_expert));
  set_u32(out.metadata, a + ".expert_feed_forward_length",
          r.req_int("moe_intermediate_size", 1, 1 << 22));
}

// Gemma 4 (text): per-layer head dims and kv heads (per_layer_config, or the older
// global_head_dim / num_global_key_value_heads), proportional partial rotary on full layers,
// KV sharing, double-wide MLP in the sharing layers, per-layer input embeddings, the MoE block
// beside the MLP (enable_moe_block). Keys beyond gemma3's: A.attention.key_length_swa /
// value_length_swa (sliding head dim; key_length is the full layers'), A.attention.head_count_kv
// and A.feed_forward_length as per-layer u32 arrays, A.rope.dimension_count (= key_length; the
// proportional rope's unrotated pairs are in rope_freqs.weight) and dimension_count_swa,
// A.attention.shared_kv_layers,
// A.embedding_length_per_layer_input, and read_gemma4_moe's. attention_k_eq_v has no key: a full
// layer without attn_v.weight takes V from K (the archive checks the config).
void read_gemma4(HfModelConfig& out, const HfConfigReader& r) {
  const std::string act = r.opt_string("hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    fail(ErrorCode::unsupported, "{}: hidden_activation '{}' is not supported (gelu_pytorch_tanh)",
         r.file, act);
  if (const auto bidi = r.opt_string("use_bidirectional_attention"))
    fail(ErrorCode::unsupported, "{}: use_bidirectional_attention = '{}' is not supported", r.file,
         *bidi);
  if (r.opt_bool("attention_bias", false))
    fail(ErrorCode::unsupported, "{}: attention_bias = true is not supported for gemma4", r.file);
  const std::string& a = out.arch;
  gguf::Metadata& md = out.metadata;
  const int64_t L = out.n_layer;
  if (r.opt_bool("enable_moe_block", false)) read_gemma4_moe(out, r);
  const std::vector<bool> sliding = gemma3_sliding_layers(r, L);
  const bool k_eq_v = r.opt_bool("attention_k_eq_v", false);
  out.gemma4_k_eq_v = k_eq_v;
  std::vector<int64_t> head_dim(L), kv_heads(L, out.n_head_kv);
  for (int64_t il = 0; il < L; ++il) head_dim[il] = out.head_dim;
  if (const json* plc = r.find("per_layer_config")) {
    if (!plc->is_object())
      fail(ErrorCode::malformed_file, "{}: per_layer_config must be an object", r.file);
    for (const auto& [key, over] : plc->items()) {
      std::vector<int64_t> layers;
      if (key == "full_attention" || key == "sliding_attention") {
        for (int64_t il = 0; il < L; ++il)
          if (sliding[il] == (key == "sliding_attention")) layers.push_back(il);
      } else {
        size_t used = 0;
        int64_t il = -1;
        try {
          il = std::stoll(key, &used);
        } catch (...) {
        }
        if (used != key.size() || il < 0 || il >= L)
          fail(ErrorCode::unsupported, "{}: per_layer_config key '{}' is not a layer index", r.file,
               key);
        layers.push_back(il);
      }
      if (!over.is_object())
        fail(ErrorCode::malformed_file, "{}: per_layer_config[{}] must be an object", r.file, key);
      const HfConfigReader o{over, r.file};
      for (const auto& [field, value] : over.items())
        if (field != "head_dim" && field != "num_key_value_heads")
          fail(ErrorCode::unsupported, "{}: per_layer_config[{}].{} is not supported", r.file, key,
               field);
      for (int64_t il : layers) {
        head_dim[il] = o.opt_int("head_dim", 2, 1 << 14).value_or(head_dim[il]);
        kv_heads[il] = o.opt_int("num_key_value_heads", 1, out.n_head).value_or(kv_heads[il]);
      }
    }
  } else {
    const int64_t global = r.opt_int("global_head_dim", 2, 1 << 14).value_or(512);
    const auto global_kv = r.opt_int("num_global_key_value_heads", 1, out.n_head);
    for (int64_t il = 0; il < L; ++il) {
      if (sliding[il]) continue;
      head_dim[il] = global;
      if (k_eq_v && global_kv) kv_heads[il] = *global_kv;
    }
  }
  int64_t hd_full = 0, hd_swa = 0;
  for (int64_t il = 0; il < L; ++il) {
    int64_t& hd = sliding[il] ? hd_swa : hd_full;
    if (hd != 0 && hd != head_dim[il])
      fail(ErrorCode::unsupported,
           "{}: per_layer_config gives {} layers different head dims ({} and {})", r.file,
           sliding[il] ? "sliding" : "full", hd, head_dim[il]);
    hd = head_dim[il];
    if (hd % 2 || out.n_head % kv_heads[il])
      fail(ErrorCode::malformed_file, "{}: layer {} has head_dim {} and {} kv heads", r.file, il,
           hd, kv_heads[il]);
  }
  if (hd_full == 0) hd_full = hd_swa;
  if (hd_swa == 0) hd_swa = hd_full;
  set_u32(md, a + ".attention.key_length", hd_full);
  set_u32(md, a + ".attention.value_length", hd_full);
  set_u32(md, a + ".attention.key_length_swa", hd_swa);
  set_u32(md, a + ".attention.value_length_swa", hd_swa);
  const int64_t shared = r.opt_int("num_kv_shared_layers", 0, L - 1).value_or(0);
  set_u32(md, a + ".attention.shared_kv_layers", shared);
  const int64_t ff = r.req_int("intermediate_size", 1, 1 << 22);
  const bool double_wide = r.opt_bool("use_double_wide_mlp", false);
  std::vector<Value> kv_list, ff_list;
  for (int64_t il = 0; il < L; ++il) {
    kv_list.push_back(Value::make_u32(static_cast<uint32_t>(kv_heads[il])));
    const bool wide = double_wide && il >= L - shared && L - shared > 0;
    ff_list.push_back(Value::make_u32(static_cast<uint32_t>(ff * (wide ? 2 : 1))));
  }
  md.set(a + ".attention.head_count_kv", Value::make_array(gguf::ValueType::u32, kv_list));
  md.set(a + ".feed_forward_length", Value::make_array(gguf::ValueType::u32, ff_list));
  const int64_t ple = r.opt_int("hidden_size_per_layer_input", 0, 1 << 16).value_or(256);
  if (ple > 0) {
    const int64_t ple_vocab =
        r.opt_int("vocab_size_per_layer_input", 1, 1 << 24).value_or(out.vocab_size);
    if (ple_vocab != out.vocab_size)
      fail(ErrorCode::unsupported,
           "{}: vocab_size_per_layer_input {} differs from vocab_size {}; not supported", r.file,
           ple_vocab, out.vocab_size);
    set_u32(md, a + ".embedding_length_per_layer_input", ple);
  }
  // Rope per layer type; transformers' defaults when rope_parameters is absent.
  const json* params = r.find("rope_parameters");
  if (params != nullptr && !params->is_object())
    fail(ErrorCode::malformed_file, "{}: rope_parameters must be an object", r.file);
  const json empty = json::object();
  auto rope_of = [&](const char* type) -> const json& {
    if (params == nullptr || !params->contains(type)) return empty;
    return (*params)[type];
  };
  const HfConfigReader full{rope_of("full_attention"), r.file};
  const HfConfigReader swa{rope_of("sliding_attention"), r.file};
  const std::string full_type =
      full.opt_string("rope_type").value_or(params ? "default" : "proportional");
  const std::string swa_type = swa.opt_string("rope_type").value_or("default");
  if (swa_type != "default")
    fail(ErrorCode::unsupported,
         "{}: rope_parameters.sliding_attention rope_type '{}' is not "
         "supported (default)",
         r.file, swa_type);
  if (full_type != "default" && full_type != "proportional")
    fail(ErrorCode::unsupported,
         "{}: rope_parameters.full_attention rope_type '{}' is not "
         "supported (default, proportional)",
         r.file, full_type);
  if (full.positive_float("factor", 1.0) != 1.0)
    fail(ErrorCode::unsupported, "{}: rope_parameters.full_attention.factor != 1 is not supported",
         r.file);
  int64_t n_rot = hd_full;
  if (full_type == "proportional") {
    const double prf = full.positive_float("partial_rotary_factor", params ? 1.0 : 0.25);
    n_rot = 2 * static_cast<int64_t>(std::floor(prf * static_cast<double>(hd_full) / 2));
  }
  set_f32(md, a + ".rope.freq_base", full.positive_float("rope_theta", 1e6));
  set_f32(md, a + ".rope.freq_base_swa", swa.positive_float("rope_theta", 10000.0));
  // As llama.cpp's converter: ggml's neox rope can leave only the tail of a head unrotated, while
  // proportional rope leaves the tail of each half, so the full layers rotate their whole head
  // (A.rope.dimension_count = key_length) with a per-frequency divisor of 1e30 (frequency ~0) on
  // the pairs past n_rot / 2, in rope_freqs.weight.
  set_u32(md, a + ".rope.dimension_count", hd_full);
  if (n_rot < hd_full) {
    out.rope_freqs.assign(static_cast<size_t>(hd_full / 2), 1e30f);
    std::fill_n(out.rope_freqs.begin(), n_rot / 2, 1.0f);
  }
  set_u32(md, a + ".rope.dimension_count_swa", hd_swa);
  set_u32(md, a + ".attention.sliding_window",
          r.opt_int("sliding_window", 1, kU32Max).value_or(512));
  std::vector<Value> flags;
  for (bool s : sliding) flags.push_back(Value::make_bool(s));
  md.set(a + ".attention.sliding_window_pattern",
         Value::make_array(gguf::ValueType::boolean, std::move(flags)));
  if (const auto cap = r.opt_float("final_logit_softcapping"))
    set_f32(md, a + ".final_logit_softcapping", *cap);
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

void hf_config_read_dense(HfModelConfig& out, const HfConfigReader& r) {
  read_dense(out, r);
}
void hf_config_read_qwen3moe(HfModelConfig& out, const HfConfigReader& r) {
  read_dense(out, r);
  read_qwen3moe(out, r);
}
void hf_config_read_gemma3(HfModelConfig& out, const HfConfigReader& r) {
  read_gemma3(out, r);
}
void hf_config_read_gemma4(HfModelConfig& out, const HfConfigReader& r) {
  read_gemma4(out, r);
}
void hf_config_read_qwen35(HfModelConfig& out, const HfConfigReader& r) {
  read_qwen35(out, r);
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
