// The shapes `memra synth` knows, each as the fields of its public config.json that memra reads,
// and the plan built from one: metadata through hf_config (so keys, types and llama3 rope_freqs
// are exactly what `memra convert` writes for the real checkpoint), the tensor list in llama.cpp's
// names, and each tensor's type from convert's mix policy.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/hf_config.h"
#include "formats/synth.h"
#include "formats/synth_vocab.h"

namespace memra::synth {
namespace {

struct ShapeDef {
  ShapeInfo info;
  VocabKind vocab;
  const char* config;  // config.json of the public checkpoint (the fields memra reads)
};

const ShapeDef kShapes[] = {
    {{"qwen3-0.6b", "Qwen3-0.6B: hidden 1024, 28 layers, 16/8 heads, ffn 3072, tied"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
         "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
         "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
         "tie_word_embeddings": true})"},
    {{"qwen3-8b", "Qwen3-8B: hidden 4096, 36 layers, 32/8 heads, ffn 12288, untied"},
     VocabKind::qwen,
     R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
         "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
         "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000,
         "tie_word_embeddings": false})"},
    {{"llama3-8b", "Llama-3.1-8B: hidden 4096, 32 layers, 32/8 heads, ffn 14336, llama3 rope"},
     VocabKind::llama3,
     R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
         "tie_word_embeddings": false})"},
    {{"gemma3-270m", "Gemma-3-270M: hidden 640, 18 layers, 4/1 heads, head_dim 256, window 512"},
     VocabKind::gemma,
     R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 640,
         "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
         "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
         "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
         "rope_local_base_freq": 10000.0, "rope_scaling": null, "sliding_window": 512,
         "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
         "final_logit_softcapping": null, "attn_logit_softcapping": null,
         "tie_word_embeddings": true})"},
    {{"gemma3-12b", "Gemma-3-12B: hidden 3840, 48 layers, 16/8 heads, head_dim 256, window 1024"},
     VocabKind::gemma,
     R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 3840,
         "intermediate_size": 15360, "num_hidden_layers": 48, "num_attention_heads": 16,
         "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 262208,
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
         "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
         "sliding_window": 1024, "sliding_window_pattern": 6, "query_pre_attn_scalar": 256,
         "final_logit_softcapping": null, "attn_logit_softcapping": null,
         "tie_word_embeddings": true})"},
};

const ShapeDef& find_shape(const std::string& name) {
  for (const ShapeDef& s : kShapes)
    if (s.info.name == name) return s;
  fail(ErrorCode::invalid_argument, "unknown shape '{}' (known: {})", name, shape_names());
}

// FNV-1a: the tensor's RNG stream follows its name, not its position in the file.
uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ULL;
  return h;
}

// Scales. A matrix of fan-in n draws N(0, 1/n): a unit-RMS input gives a unit-RMS output, so
// activations neither grow nor vanish with depth (pre-norm blocks renormalize each input anyway).
// token_embd / output draw N(0, s^2/n_embd) with s = sqrt(2 ln V) + 2: after the final norm the
// logits are ~N(0, s^2), and once s exceeds sqrt(2 ln V) (the expected maximum of V standard
// normals) the largest logit stands clear of the rest, giving peaked next-token distributions
// like the fixtures' (scripts/gen_model_fixtures.py, MATRIX_STD) rather than a flat softmax.
float logit_std(int64_t n_vocab) {
  return static_cast<float>(std::sqrt(2.0 * std::log(static_cast<double>(n_vocab))) + 2.0);
}

struct TensorListBuilder {
  std::vector<TensorPlan>& out;

  void add(std::string name, std::initializer_list<uint64_t> ne, Init init, float std) {
    TensorPlan t;
    t.view.name = std::move(name);
    t.view.n_dims = static_cast<int>(ne.size());
    std::copy(ne.begin(), ne.end(), t.view.ne.begin());
    t.init = init;
    t.std = std;
    t.stream = name_hash(t.view.name);
    out.push_back(std::move(t));
  }
  // A weight applied as y = W x with x of `in` features: ne = {in, out}.
  void matrix(std::string name, uint64_t in, uint64_t rows) {
    add(std::move(name), {in, rows}, Init::matrix, 1.0f / std::sqrt(static_cast<float>(in)));
  }
  void norm(std::string name, uint64_t n) { add(std::move(name), {n}, Init::norm, 0.0f); }
};

std::vector<TensorPlan> tensor_list(const HfModelConfig& c, uint64_t n_ff) {
  std::vector<TensorPlan> out;
  TensorListBuilder b{out};
  const uint64_t e = c.n_embd;
  const uint64_t q = c.n_head * c.head_dim;
  const uint64_t kv = c.n_head_kv * c.head_dim;
  const float embd_std = logit_std(c.vocab_size) / std::sqrt(static_cast<float>(e));
  b.add("token_embd.weight", {e, uint64_t(c.vocab_size)}, Init::matrix, embd_std);
  const bool qk_norm = c.arch == "qwen3" || c.arch == "gemma3";
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    b.norm(p + "attn_norm.weight", e);
    b.matrix(p + "attn_q.weight", e, q);
    b.matrix(p + "attn_k.weight", e, kv);
    b.matrix(p + "attn_v.weight", e, kv);
    b.matrix(p + "attn_output.weight", q, e);
    if (qk_norm) {
      b.norm(p + "attn_q_norm.weight", c.head_dim);
      b.norm(p + "attn_k_norm.weight", c.head_dim);
    }
    b.norm(p + "ffn_norm.weight", e);
    b.matrix(p + "ffn_gate.weight", e, n_ff);
    b.matrix(p + "ffn_up.weight", e, n_ff);
    b.matrix(p + "ffn_down.weight", n_ff, e);
    if (c.arch == "gemma3") {
      b.norm(p + "post_attention_norm.weight", e);
      b.norm(p + "post_ffw_norm.weight", e);
    }
  }
  b.norm("output_norm.weight", e);
  if (!c.tied_embeddings)
    b.add("output.weight", {e, uint64_t(c.vocab_size)}, Init::matrix, embd_std);
  if (!c.rope_freqs.empty()) {
    b.add("rope_freqs.weight", {c.rope_freqs.size()}, Init::values, 0.0f);
    out.back().values = c.rope_freqs;
  }
  return out;
}

}  // namespace

const std::vector<ShapeInfo>& shapes() {
  static const std::vector<ShapeInfo> list = [] {
    std::vector<ShapeInfo> v;
    for (const ShapeDef& s : kShapes) v.push_back(s.info);
    return v;
  }();
  return list;
}

std::string shape_names() {
  std::string out;
  for (const ShapeDef& s : kShapes) out += (out.empty() ? "" : ", ") + std::string(s.info.name);
  return out;
}

Plan make_plan(const Options& options) {
  const ShapeDef& shape = find_shape(options.shape);
  nlohmann::json config = nlohmann::json::parse(shape.config);
  const int64_t own_layers = config["num_hidden_layers"].get<int64_t>();
  if (options.layers < 0 || options.layers > own_layers)
    fail(ErrorCode::invalid_argument, "--layers {} is not in 1..{} (the {} block count)",
         options.layers, own_layers, shape.info.name);
  std::string name = fmt::format("memra synth {} seed {}", shape.info.name, options.seed);
  if (options.layers > 0) {
    config["num_hidden_layers"] = options.layers;
    name += fmt::format(" layers {}", options.layers);
  }
  const HfModelConfig hf = hf_config_from_json(config, nlohmann::json(), name);

  Plan plan;
  plan.n_vocab = hf.vocab_size;
  plan.metadata = hf.metadata;
  // As memra convert writes them (convert.cpp write_gguf).
  plan.metadata.set("general.file_type",
                    gguf::Value::make_u32(convert::llama_file_type(options.mix)));
  plan.metadata.set("general.quantization_version", gguf::Value::make_u32(2));
  vocab_write(shape.vocab, hf.vocab_size, plan.metadata);

  plan.tensors = tensor_list(hf, config["intermediate_size"].get<uint64_t>());
  std::stable_sort(plan.tensors.begin(), plan.tensors.end(),
                   [](const TensorPlan& a, const TensorPlan& b) {
                     return convert::tensor_order_less(a.view, b.view);
                   });
  std::vector<TensorView> views;
  for (const TensorPlan& t : plan.tensors) views.push_back(t.view);
  const convert::PolicyContext policy = convert::make_policy_context(options.mix, views);
  for (TensorPlan& t : plan.tensors) t.type = convert::choose_type(policy, t.view);
  return plan;
}

}  // namespace memra::synth
