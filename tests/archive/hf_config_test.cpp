// HF config.json -> GGUF metadata: key names and types per architecture (matching what
// llama.cpp's converter writes), both config styles, and refusals named by field.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/hf_config.h"
#include "formats/hf_names.h"

namespace memra {
namespace {

using nlohmann::json;

json llama_config() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "bos_token_id": 1, "eos_token_id": 2})");
}

std::string message_of(const json& config, const json& gen = json::object()) {
  try {
    hf_config_from_json(config, gen, "m");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(HfConfig, LlamaKeysAndTypes) {
  const HfModelConfig c = hf_config_from_json(llama_config(), json::object(), "tiny");
  const gguf::Metadata& md = c.metadata;
  EXPECT_EQ(md.require_string("general.architecture"), "llama");
  EXPECT_EQ(md.require_string("general.name"), "tiny");
  EXPECT_EQ(md.require_int("llama.embedding_length"), 64);
  EXPECT_EQ(md.require_int("llama.block_count"), 2);
  EXPECT_EQ(md.require_int("llama.context_length"), 256);
  EXPECT_EQ(md.require_int("llama.feed_forward_length"), 128);
  EXPECT_EQ(md.require_int("llama.attention.head_count"), 4);
  EXPECT_EQ(md.require_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(md.require_int("llama.attention.key_length"), 16);
  EXPECT_EQ(md.require_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(md.find("llama.block_count")->type, gguf::ValueType::u32);
  EXPECT_EQ(md.find("llama.rope.freq_base")->type, gguf::ValueType::f32);
  EXPECT_FLOAT_EQ(float(md.require_float("llama.rope.freq_base")), 500000.0f);
  EXPECT_FLOAT_EQ(float(md.require_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(md.require_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(md.require_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_TRUE(c.rope_freqs.empty());
  EXPECT_EQ(md.find("llama.rope.scaling.type"), nullptr);
}

TEST(HfConfig, GenerationConfigEosListWins) {
  const json gen = json::parse(R"({"eos_token_id": [7, 8, 9]})");
  const HfModelConfig c = hf_config_from_json(llama_config(), gen, "m");
  EXPECT_EQ(c.metadata.require_int("tokenizer.ggml.eos_token_id"), 7);
  EXPECT_EQ(c.metadata.get_int_array("tokenizer.ggml.eos_token_ids"),
            (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(c.metadata.require_int("tokenizer.ggml.bos_token_id"), 1);
}

TEST(HfConfig, Llama3RopeScaling) {
  json cfg = llama_config();
  cfg["rope_scaling"] = json::parse(
      R"({"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
          "original_max_position_embeddings":64})");
  const HfModelConfig c = hf_config_from_json(cfg, json::object(), "m");
  ASSERT_EQ(c.rope_freqs.size(), 8u);
  EXPECT_EQ(c.rope_freqs.front(), 1.0f);  // highest frequency untouched
  EXPECT_EQ(c.rope_freqs.back(), 8.0f);   // lowest frequency scaled by the full factor
  EXPECT_EQ(c.metadata.require_int("llama.rope.scaling.llama3.original_context_length"), 64);
  EXPECT_EQ(c.metadata.find("llama.rope.scaling.type"), nullptr);  // as llama.cpp
  // transformers 5 style carries the same in rope_parameters.
  json v5 = llama_config();
  v5.erase("rope_theta");
  v5["rope_parameters"] = cfg["rope_scaling"];
  v5["rope_parameters"]["rope_theta"] = 500000.0;
  EXPECT_EQ(hf_config_from_json(v5, json::object(), "m").rope_freqs, c.rope_freqs);
}

TEST(HfConfig, LinearRopeScaling) {
  json cfg = llama_config();
  cfg["rope_scaling"] = json::parse(R"({"type":"linear","factor":2.0})");
  const HfModelConfig c = hf_config_from_json(cfg, json::object(), "m");
  EXPECT_EQ(c.metadata.require_string("llama.rope.scaling.type"), "linear");
  EXPECT_EQ(c.metadata.require_float("llama.rope.scaling.factor"), 2.0);
}

TEST(HfConfig, Gemma3Specifics) {
  json cfg = json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 7, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 100, "query_pre_attn_scalar": 64,
    "sliding_window": 16, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "sliding_window_pattern": 3, "final_logit_softcapping": null})");
  const HfModelConfig c = hf_config_from_json(cfg, json::object(), "m");
  const gguf::Metadata& md = c.metadata;
  EXPECT_EQ(md.require_string("general.architecture"), "gemma3");
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(md.require_int("gemma3.attention.sliding_window"), 16);
  EXPECT_EQ(md.require_float("gemma3.rope.freq_base"), 1e6);
  EXPECT_EQ(md.require_float("gemma3.rope.freq_base_swa"), 1e4);
  EXPECT_FLOAT_EQ(float(md.require_float("gemma3.attention.scale")), 0.125f);
  EXPECT_EQ(md.find("gemma3.final_logit_softcapping"), nullptr);
  const gguf::Value* pattern = md.find("gemma3.attention.sliding_window_pattern");
  ASSERT_NE(pattern, nullptr);
  const auto& items = std::get<gguf::Array>(pattern->data).items;
  ASSERT_EQ(items.size(), 7u);
  const bool expected[] = {true, true, false, true, true, false, true};
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(std::get<bool>(items[i].data), expected[i]) << i;

  // transformers 5 style: layer_types + per-type rope_parameters.
  json v5 = cfg;
  for (const char* k : {"rope_theta", "rope_local_base_freq", "sliding_window_pattern"})
    v5.erase(k);
  v5["rope_parameters"] = json::parse(
      R"({"full_attention":{"rope_type":"linear","factor":8.0,"rope_theta":1000000.0},
          "sliding_attention":{"rope_type":"default","rope_theta":10000.0}})");
  v5["layer_types"] = json::array();
  for (bool s : expected) v5["layer_types"].push_back(s ? "sliding_attention" : "full_attention");
  v5["final_logit_softcapping"] = 30.0;
  const HfModelConfig c5 = hf_config_from_json(v5, json::object(), "m");
  EXPECT_EQ(c5.metadata.require_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(c5.metadata.require_float("gemma3.final_logit_softcapping"), 30.0);
  EXPECT_EQ(c5.metadata.require_float("gemma3.rope.freq_base_swa"), 1e4);
}

TEST(HfConfig, RefusalsNameTheField) {
  struct Case {
    const char* key;
    json value;
    const char* expect;
  };
  const Case cases[] = {
      {"architectures", json::array({"MistralForCausalLM"}), "'MistralForCausalLM'"},
      {"architectures", json::array({"PaliGemmaForConditionalGeneration"}),
       "'PaliGemmaForConditionalGeneration'"},
      {"architectures", "LlamaForCausalLM", "architectures must list exactly one name"},
      {"model_type", "qwen2", "model_type 'qwen2' does not match"},
      {"hidden_act", "gelu", "hidden_act 'gelu'"},
      {"mlp_bias", true, "mlp_bias"},
      {"use_sliding_window", true, "use_sliding_window"},
      {"rope_scaling", json::parse(R"({"rope_type":"yarn","factor":4})"), "rope type 'yarn'"},
      {"rope_scaling", json::parse(R"({"type":"dynamic","factor":4})"), "'dynamic'"},
      {"rope_scaling", json::parse(R"({"type":"linear"})"), "factor is missing"},
      {"quantization_config", json::parse(R"({"quant_method":"gptq"})"), "gptq"},
      {"hidden_size", -1, "hidden_size = -1"},
      {"hidden_size", "64", "hidden_size must be an integer"},
      {"num_hidden_layers", 1000000, "num_hidden_layers = 1000000"},
      {"num_key_value_heads", 3, "not a multiple of num_key_value_heads 3"},
      {"head_dim", 15, "head_dim 15 must be even"},
      {"rms_norm_eps", 0, "rms_norm_eps = 0"},
      {"rope_theta", "big", "rope_theta must be a finite number"},
      {"eos_token_id", 100, "eos_token_id entry 100"},
      {"eos_token_id", json::array({1, -2}), "eos_token_id entry -2"},
      {"tie_word_embeddings", 1, "tie_word_embeddings must be true or false"},
      {"layer_types", json::array({"sliding_attention"}), "layer_types entry"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    json cfg = llama_config();
    cfg[c.key] = c.value;
    EXPECT_NE(message_of(cfg).find(c.expect), std::string::npos) << message_of(cfg);
  }
  json missing = llama_config();
  missing.erase("vocab_size");
  EXPECT_NE(message_of(missing).find("required field vocab_size"), std::string::npos);
  EXPECT_NE(message_of(json::array()).find("must be a JSON object"), std::string::npos);
}

json qwen3moe_config() {
  return json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "rms_norm_eps": 1e-6,
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [2]})");
}

TEST(HfConfig, Qwen3MoeKeysAndSparseLayers) {
  const HfModelConfig c = hf_config_from_json(qwen3moe_config(), json::object(), "m");
  const gguf::Metadata& md = c.metadata;
  EXPECT_EQ(md.require_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(md.require_int("qwen3moe.expert_count"), 8);
  EXPECT_EQ(md.require_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(md.require_int("qwen3moe.expert_feed_forward_length"), 32);
  EXPECT_EQ(md.require_int("qwen3moe.feed_forward_length"), 128);
  EXPECT_EQ(md.find("qwen3moe.expert_count")->type, gguf::ValueType::u32);
  EXPECT_EQ(md.find("qwen3moe.expert_weights_norm")->type, gguf::ValueType::boolean);
  EXPECT_TRUE(std::get<bool>(md.find("qwen3moe.expert_weights_norm")->data));
  EXPECT_EQ(c.moe_layers, (std::vector<bool>{true, true, false, true}));

  // transformers 5 writes num_local_experts; decoder_sparse_step 2 makes layers 1 and 3 sparse.
  json cfg = qwen3moe_config();
  cfg.erase("num_experts");
  cfg["num_local_experts"] = 8;
  cfg["decoder_sparse_step"] = 2;
  cfg["norm_topk_prob"] = false;
  cfg.erase("mlp_only_layers");
  const HfModelConfig d = hf_config_from_json(cfg, json::object(), "m");
  EXPECT_EQ(d.metadata.require_int("qwen3moe.expert_count"), 8);
  EXPECT_FALSE(std::get<bool>(d.metadata.find("qwen3moe.expert_weights_norm")->data));
  EXPECT_EQ(d.moe_layers, (std::vector<bool>{false, true, false, true}));
}

TEST(HfConfig, Qwen3MoeRefusalsNameTheField) {
  struct Case {
    const char* key;
    json value;
    const char* expect;
  };
  const Case cases[] = {
      {"num_experts", 0, "num_experts = 0"},
      {"num_local_experts", 4, "num_experts 8 differs from num_local_experts 4"},
      {"num_experts_per_tok", 9, "num_experts_per_tok = 9"},
      {"decoder_sparse_step", 0, "decoder_sparse_step = 0"},
      {"mlp_only_layers", json::array({4}), "mlp_only_layers entry 4"},
      {"mlp_only_layers", 1, "mlp_only_layers must be an array"},
      {"norm_topk_prob", "yes", "norm_topk_prob must be true or false"},
      {"hidden_act", "gelu", "hidden_act 'gelu'"},
      {"use_sliding_window", true, "use_sliding_window"},
      {"model_type", "qwen3", "model_type 'qwen3' does not match"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    json cfg = qwen3moe_config();
    cfg[c.key] = c.value;
    EXPECT_NE(message_of(cfg).find(c.expect), std::string::npos) << message_of(cfg);
  }
  for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size"}) {
    json cfg = qwen3moe_config();
    cfg.erase(key);
    EXPECT_NE(message_of(cfg).find("required field " + std::string(key)), std::string::npos)
        << message_of(cfg);
  }
}

json qwen35_config() {
  return json::parse(R"({
    "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 8, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 100,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": true},
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention",
                    "linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 32,
    "linear_num_key_heads": 2, "linear_num_value_heads": 6})");
}

TEST(HfConfig, Qwen35KeysAndLayerPattern) {
  const HfModelConfig c = hf_config_from_json(qwen35_config(), json::object(), "m");
  const gguf::Metadata& md = c.metadata;
  EXPECT_EQ(md.require_string("general.architecture"), "qwen35");
  EXPECT_EQ(md.require_int("qwen35.full_attention_interval"), 4);
  EXPECT_EQ(md.require_int("qwen35.rope.dimension_count"), 16);  // 0.25 of head_dim 64
  EXPECT_EQ(md.require_int("qwen35.ssm.conv_kernel"), 4);
  EXPECT_EQ(md.require_int("qwen35.ssm.state_size"), 16);
  EXPECT_EQ(md.require_int("qwen35.ssm.group_count"), 2);
  EXPECT_EQ(md.require_int("qwen35.ssm.time_step_rank"), 6);
  EXPECT_EQ(md.require_int("qwen35.ssm.inner_size"), 6 * 32);
  EXPECT_EQ(md.require_int("qwen35.feed_forward_length"), 128);
}

TEST(HfConfig, Qwen35RefusalsNameTheField) {
  json irregular = qwen35_config();
  irregular["layer_types"][5] = "full_attention";  // not one interval
  EXPECT_NE(message_of(irregular).find("full_attention_interval"), std::string::npos);
  json unknown = qwen35_config();
  unknown["layer_types"][0] = "sliding_attention";
  EXPECT_NE(message_of(unknown).find("layer_types[0]"), std::string::npos);
  json heads = qwen35_config();
  heads["linear_num_value_heads"] = 5;
  EXPECT_NE(message_of(heads).find("linear_num_value_heads"), std::string::npos);
  json rot = qwen35_config();
  rot["rope_parameters"]["partial_rotary_factor"] = 0.3;
  EXPECT_NE(message_of(rot).find("partial_rotary_factor"), std::string::npos);
  json act = qwen35_config();
  act["hidden_act"] = "gelu";
  EXPECT_NE(message_of(act).find("hidden_act"), std::string::npos);
  json bias = qwen35_config();
  bias["attention_bias"] = true;
  EXPECT_NE(message_of(bias).find("attention_bias"), std::string::npos);
  json yarn = qwen35_config();
  yarn["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_NE(message_of(yarn).find("yarn"), std::string::npos);
}

json gemma4_moe_config() {
  return json::parse(R"({
    "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "global_head_dim": 32,
    "layer_types": ["sliding_attention", "full_attention"], "hidden_size_per_layer_input": 0,
    "enable_moe_block": true, "num_experts": 8, "top_k_experts": 2,
    "moe_intermediate_size": 32})");
}

TEST(HfConfig, Gemma4MoeKeys) {
  const HfModelConfig c = hf_config_from_json(gemma4_moe_config(), json::object(), "m");
  const gguf::Metadata& md = c.metadata;
  EXPECT_EQ(md.require_int("gemma4.expert_count"), 8);
  EXPECT_EQ(md.require_int("gemma4.expert_used_count"), 2);
  EXPECT_EQ(md.require_int("gemma4.expert_feed_forward_length"), 32);
  EXPECT_EQ(md.find("gemma4.expert_count")->type, gguf::ValueType::u32);
  // As llama.cpp's converter: no expert_weights_norm key (Gemma 4 always renormalizes).
  EXPECT_EQ(md.find("gemma4.expert_weights_norm"), nullptr);
  json dense = gemma4_moe_config();
  dense["enable_moe_block"] = false;
  EXPECT_EQ(hf_config_from_json(dense, json::object(), "m").metadata.find("gemma4.expert_count"),
            nullptr);
}

TEST(HfConfig, Gemma4MoeRefusalsNameTheField) {
  for (const char* key : {"num_experts", "top_k_experts", "moe_intermediate_size"}) {
    json cfg = gemma4_moe_config();
    cfg.erase(key);
    EXPECT_NE(message_of(cfg).find("required field " + std::string(key)), std::string::npos)
        << message_of(cfg);
  }
  json top_k = gemma4_moe_config();
  top_k["top_k_experts"] = 9;
  EXPECT_NE(message_of(top_k).find("top_k_experts = 9"), std::string::npos);
  json flag = gemma4_moe_config();
  flag["enable_moe_block"] = "yes";
  EXPECT_NE(message_of(flag).find("enable_moe_block must be true or false"), std::string::npos);
}

// A *ForConditionalGeneration config as transformers writes it: the text model's config under
// text_config, a vision config and image token ids beside it.
json wrapped(const char* architecture, const char* model_type, json text) {
  text.erase("architectures");
  return json{{"architectures", json::array({architecture})},
              {"model_type", model_type},
              {"text_config", std::move(text)},
              {"vision_config", {{"hidden_size", 16}, {"model_type", "siglip_vision_model"}}},
              {"image_token_id", 248056}};
}

bool same_value(const gguf::Value& a, const gguf::Value& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b.data);
        if constexpr (std::is_same_v<T, gguf::Array>) {
          if (x.element_type != y.element_type || x.items.size() != y.items.size()) return false;
          for (size_t i = 0; i < x.items.size(); ++i)
            if (!same_value(x.items[i], y.items[i])) return false;
          return true;
        } else {
          return x == y;
        }
      },
      a.data);
}

void expect_same_metadata(const gguf::Metadata& a, const gguf::Metadata& b) {
  EXPECT_EQ(a.entries().size(), b.entries().size());
  for (const auto& [key, value] : a.entries()) {
    const gguf::Value* other = b.find(key);
    ASSERT_NE(other, nullptr) << key;
    EXPECT_TRUE(same_value(value, *other)) << key;
  }
}

TEST(HfConfig, MultimodalWrappersGiveTheirTextModel) {
  json gemma3 = llama_config();
  gemma3["architectures"] = json::array({"Gemma3ForCausalLM"});
  gemma3["model_type"] = "gemma3_text";
  gemma3.erase("rope_theta");
  gemma3["head_dim"] = 16;
  const struct {
    const char* architecture;
    const char* model_type;
    json text;
  } cases[] = {
      {"Gemma3ForConditionalGeneration", "gemma3", gemma3},
      {"Gemma4ForConditionalGeneration", "gemma4", gemma4_moe_config()},
      {"Qwen3_5ForConditionalGeneration", "qwen3_5", qwen35_config()},
  };
  for (const auto& c : cases) {
    const HfModelConfig plain = hf_config_from_json(c.text, json::object(), "m");
    json cfg = wrapped(c.architecture, c.model_type, c.text);
    cfg["tie_word_embeddings"] = plain.tied_embeddings;
    const HfModelConfig w = hf_config_from_json(cfg, json::object(), "m");
    EXPECT_TRUE(w.multimodal && !plain.multimodal) << c.architecture;
    EXPECT_EQ(w.hf_architecture, c.architecture);
    EXPECT_EQ(w.arch, plain.arch);
    EXPECT_EQ(w.tied_embeddings, plain.tied_embeddings);
    EXPECT_EQ(w.rope_freqs, plain.rope_freqs);
    expect_same_metadata(w.metadata, plain.metadata);
    // By model_type alone, as for the text classes.
    cfg.erase("architectures");
    EXPECT_EQ(hf_config_from_json(cfg, json::object(), "m").hf_architecture, c.architecture);
  }
  // transformers ties the lm_head by the wrapper's top-level flag (class default when absent).
  json qwen = wrapped("Qwen3_5ForConditionalGeneration", "qwen3_5", qwen35_config());
  qwen["text_config"]["tie_word_embeddings"] = true;
  EXPECT_FALSE(hf_config_from_json(qwen, json::object(), "m").tied_embeddings);
  qwen["tie_word_embeddings"] = true;
  EXPECT_TRUE(hf_config_from_json(qwen, json::object(), "m").tied_embeddings);
  json gemma = wrapped("Gemma3ForConditionalGeneration", "gemma3", gemma3);
  gemma["text_config"]["tie_word_embeddings"] = false;
  EXPECT_TRUE(hf_config_from_json(gemma, json::object(), "m").tied_embeddings);
  // eos: generation_config, then the top level, then text_config.
  gemma["eos_token_id"] = json::array({1, 7});
  const HfModelConfig eos = hf_config_from_json(gemma, json::object(), "m");
  EXPECT_EQ(eos.metadata.get_int_array("tokenizer.ggml.eos_token_ids"),
            (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(eos.metadata.require_int("tokenizer.ggml.bos_token_id"), 1);  // from text_config
}

TEST(HfConfig, MultimodalWrapperRefusalsNameTheField) {
  json moe = wrapped("Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", qwen35_config());
  EXPECT_NE(message_of(moe).find("model_type 'qwen3_5_text' is not supported in "
                                 "Qwen3_5MoeForConditionalGeneration"),
            std::string::npos)
      << message_of(moe);
  json none = wrapped("Gemma3ForConditionalGeneration", "gemma3", llama_config());
  none.erase("text_config");
  EXPECT_NE(message_of(none).find("Gemma3ForConditionalGeneration lacks an object text_config"),
            std::string::npos);
  json bad = wrapped("Qwen3_5ForConditionalGeneration", "qwen3_5", qwen35_config());
  bad["text_config"]["hidden_act"] = "gelu";
  EXPECT_NE(message_of(bad).find("config.json text_config: hidden_act 'gelu'"), std::string::npos)
      << message_of(bad);
  json type = wrapped("Qwen3_5ForConditionalGeneration", "qwen3_5_text", qwen35_config());
  EXPECT_NE(message_of(type).find("model_type 'qwen3_5_text' does not match"), std::string::npos);
}

TEST(HfNames, MultimodalWrapperLayouts) {
  auto text = [](std::string_view n) { return hf_wrapper_text_name(n).value_or("<none>"); };
  EXPECT_EQ(text("model.language_model.layers.3.mlp.up_proj.weight"),
            "model.layers.3.mlp.up_proj.weight");
  EXPECT_EQ(text("language_model.model.embed_tokens.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(text("language_model.lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(text("lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(text("mtp.fc.weight"), "mtp.fc.weight");
  EXPECT_EQ(text("model.layers.0.mlp.up_proj.weight"), "<none>");
  EXPECT_EQ(text("model.visual.blocks.0.attn.qkv.weight"), "<none>");
  auto tower = [](std::string_view arch, std::string_view n) {
    return std::string(hf_wrapper_tower(arch, n).value_or("<none>"));
  };
  EXPECT_EQ(tower("Gemma3ForConditionalGeneration", "vision_tower.vision_model.head.probe"),
            "vision tower");
  EXPECT_EQ(tower("Gemma3ForConditionalGeneration", "model.multi_modal_projector.mm_w"),
            "multimodal projector");
  EXPECT_EQ(tower("Gemma4ForConditionalGeneration", "model.audio_tower.x"), "audio tower");
  EXPECT_EQ(tower("Gemma4ForConditionalGeneration", "model.embed_vision.x"), "vision embedder");
  EXPECT_EQ(tower("Qwen3_5MoeForConditionalGeneration", "model.visual.merger.norm.weight"),
            "vision tower");
  // Only the wrapper's own towers: Qwen3.5 has no audio tower, the text classes none at all.
  EXPECT_EQ(tower("Qwen3_5ForConditionalGeneration", "model.audio_tower.x"), "<none>");
  EXPECT_EQ(tower("Gemma3ForCausalLM", "vision_tower.x"), "<none>");
}

TEST(HfNames, TablePerArchitecture) {
  auto name = [](const char* arch, const char* hf) {
    const auto g = hf_tensor_name_to_gguf(arch, hf);
    return g ? g->name : std::string("<none>");
  };
  EXPECT_EQ(name("llama", "model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(name("llama", "lm_head.weight"), "output.weight");
  EXPECT_EQ(name("llama", "model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(name("llama", "model.layers.12.self_attn.o_proj.weight"), "blk.12.attn_output.weight");
  EXPECT_EQ(name("qwen2", "model.layers.0.self_attn.q_proj.bias"), "blk.0.attn_q.bias");
  EXPECT_EQ(name("llama", "model.layers.0.post_attention_layernorm.weight"),
            "blk.0.ffn_norm.weight");
  EXPECT_EQ(name("gemma3", "model.layers.0.post_attention_layernorm.weight"),
            "blk.0.post_attention_norm.weight");
  EXPECT_EQ(name("gemma3", "model.layers.1.pre_feedforward_layernorm.weight"),
            "blk.1.ffn_norm.weight");
  EXPECT_EQ(name("gemma3", "model.layers.1.post_feedforward_layernorm.weight"),
            "blk.1.post_ffw_norm.weight");
  EXPECT_EQ(name("qwen3", "model.layers.3.self_attn.k_norm.weight"), "blk.3.attn_k_norm.weight");
  EXPECT_EQ(name("llama", "model.layers.3.self_attn.k_norm.weight"), "<none>");
  EXPECT_EQ(name("llama", "model.layers.3.pre_feedforward_layernorm.weight"), "<none>");
  EXPECT_EQ(name("llama", "model.layers.03.mlp.up_proj.weight"), "<none>");
  EXPECT_EQ(name("llama", "model.layers.-1.mlp.up_proj.weight"), "<none>");
  EXPECT_EQ(name("llama", "model.layers.99999999.mlp.up_proj.weight"), "<none>");
  EXPECT_EQ(name("llama", "model.layers.1.mlp.up_proj.bias"), "<none>");
  EXPECT_EQ(name("mistral", "model.embed_tokens.weight"), "<none>");
  EXPECT_EQ(name("qwen3moe", "model.layers.2.mlp.gate.weight"), "blk.2.ffn_gate_inp.weight");
  EXPECT_EQ(name("qwen3moe", "model.layers.2.self_attn.q_norm.weight"), "blk.2.attn_q_norm.weight");
  EXPECT_EQ(name("qwen3moe", "model.layers.2.mlp.down_proj.weight"), "blk.2.ffn_down.weight");
  const auto expert =
      hf_tensor_name_to_gguf("qwen3moe", "model.layers.2.mlp.experts.17.up_proj.weight");
  ASSERT_TRUE(expert);
  EXPECT_EQ(expert->name, "blk.2.ffn_up_exps.weight");
  EXPECT_EQ(expert->layer, 2);
  EXPECT_EQ(expert->expert, 17);
  EXPECT_EQ(name("qwen3moe", "model.layers.2.mlp.experts.07.up_proj.weight"), "<none>");
  EXPECT_EQ(name("qwen3moe", "model.layers.2.mlp.experts.gate_up_proj"), "<none>");
  EXPECT_EQ(name("qwen3", "model.layers.2.mlp.experts.1.up_proj.weight"), "<none>");
  EXPECT_EQ(name("qwen3", "model.layers.2.mlp.gate.weight"), "<none>");
  // Gemma 4's MoE block as llama.cpp names it; only under gemma4 (its wrapper's names are
  // unwrapped first: hf_wrapper_text_name).
  EXPECT_EQ(name("gemma4", "model.layers.1.router.proj.weight"), "blk.1.ffn_gate_inp.weight");
  EXPECT_EQ(name("gemma4", "model.layers.1.router.scale"), "blk.1.ffn_gate_inp.scale");
  EXPECT_EQ(name("gemma4", "model.layers.1.router.per_expert_scale"), "blk.1.ffn_down_exps.scale");
  EXPECT_EQ(name("gemma4", "model.layers.1.experts.gate_up_proj"), "blk.1.ffn_gate_up_exps.weight");
  EXPECT_EQ(name("gemma4", "model.layers.1.experts.down_proj"), "blk.1.ffn_down_exps.weight");
  EXPECT_EQ(name("gemma4", "model.layers.1.pre_feedforward_layernorm_2.weight"),
            "blk.1.pre_ffw_norm_2.weight");
  EXPECT_EQ(name("gemma4", "model.layers.1.post_feedforward_layernorm_1.weight"),
            "blk.1.post_ffw_norm_1.weight");
  EXPECT_EQ(name("gemma4", "model.layers.1.post_feedforward_layernorm_2.weight"),
            "blk.1.post_ffw_norm_2.weight");
  EXPECT_EQ(name("gemma3", "model.layers.1.router.proj.weight"), "<none>");
  EXPECT_EQ(name("gemma4", "model.layers.1.experts.0.gate_up_proj"), "<none>");
  EXPECT_EQ(hf_tensor_name_to_gguf("llama", "model.layers.7.mlp.down_proj.weight")->layer, 7);
  EXPECT_TRUE(hf_tensor_is_buffer("model.layers.0.self_attn.rotary_emb.inv_freq"));
}

}  // namespace
}  // namespace memra
