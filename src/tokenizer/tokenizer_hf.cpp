// Tokenizer from a Hugging Face folder: tokenizer.json (model, normalizer, pre-tokenizer, decoder,
// post-processor, added tokens) plus tokenizer_config.json and generation_config.json when present.
// Only the `tokenizers` components memra implements are accepted; any other is refused by name.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/unicode_normalize.h"

namespace memra {

namespace {

using nlohmann::json;
constexpr const char* kMetaspace = "\xE2\x96\x81";
constexpr uintmax_t kMaxJsonBytes = 1u << 30;

json read_json(const std::filesystem::path& path, bool required) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    if (required) fail(ErrorCode::not_found, "{} does not exist", path.string());
    return json();
  }
  if (std::filesystem::file_size(path, ec) > kMaxJsonBytes)
    fail(ErrorCode::resource_exhausted, "{} is larger than 1 GiB", path.string());
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  json j = json::parse(buffer.str(), nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::malformed_file, "{} is not valid JSON", path.string());
  return j;
}

std::string str(const json& j, const char* key, const std::string& fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}
bool flag(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A token named in tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::string token_name(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) return str(j, "content");
  return "";
}

std::string regex_of(const json& step) {
  const json& pattern = step.at("pattern");
  if (pattern.contains("Regex")) return pattern.at("Regex").get<std::string>();
  if (pattern.contains("String")) {
    // A literal: escape it for PCRE2 with \Q...\E.
    return "\\Q" + pattern.at("String").get<std::string>() + "\\E";
  }
  fail(ErrorCode::unsupported, "Split pre-tokenizer pattern is neither Regex nor String");
}

void add_pre_step(const json& step, TokenizerConfig& c, std::vector<PreStep>& steps) {
  const std::string type = str(step, "type");
  if (type == "Sequence") {
    for (const json& s : step.at("pretokenizers")) add_pre_step(s, c, steps);
  } else if (type == "ByteLevel") {
    PreStep s{PreStep::Kind::byte_level, nullptr, flag(step, "add_prefix_space", false)};
    if (flag(step, "use_regex", true)) s.regex = std::make_shared<RegexSplitter>(kGpt2Pattern);
    steps.push_back(s);
    c.kind = TokenizerConfig::Kind::byte_level;
  } else if (type == "Split") {
    const std::string behavior = str(step, "behavior");
    // Gemma's tokenizer.json splits on " " after a normalizer that turned every space into U+2581
    // (the normalizer is applied first, see from_hf_folder): no space is left, the step is a no-op.
    if (c.replace_spaces && step.at("pattern").value("String", "") == " " &&
        !flag(step, "invert", false))
      return;
    if (behavior != "Isolated" || flag(step, "invert", false))
      fail(ErrorCode::unsupported, "Split pre-tokenizer with behavior '{}'{} is not supported",
           behavior, flag(step, "invert", false) ? " (inverted)" : "");
    steps.push_back({PreStep::Kind::split, std::make_shared<RegexSplitter>(regex_of(step)), false});
  } else if (type == "Digits") {
    steps.push_back(
        {PreStep::Kind::split,
         std::make_shared<RegexSplitter>(digits_pattern(flag(step, "individual_digits", false))),
         false});
  } else if (type == "Punctuation") {
    const std::string behavior = str(step, "behavior", "Isolated");
    if (behavior != "Isolated" && behavior != "Contiguous")
      fail(ErrorCode::unsupported, "Punctuation pre-tokenizer with behavior '{}' is not supported",
           behavior);
    steps.push_back({PreStep::Kind::split,
                     std::make_shared<RegexSplitter>(punctuation_pattern(behavior == "Contiguous")),
                     false});
  } else if (type == "Metaspace") {
    if (str(step, "replacement", kMetaspace) != kMetaspace)
      fail(ErrorCode::unsupported, "Metaspace pre-tokenizer with a replacement other than U+2581");
    const std::string scheme =
        str(step, "prepend_scheme", flag(step, "add_prefix_space", true) ? "always" : "never");
    c.kind = TokenizerConfig::Kind::sentencepiece;
    c.replace_spaces = true;
    c.prepend = scheme == "always"  ? TokenizerConfig::Prepend::always
                : scheme == "first" ? TokenizerConfig::Prepend::first
                                    : TokenizerConfig::Prepend::never;
    c.split_on_metaspace = flag(step, "split", true);
  } else {
    fail(ErrorCode::unsupported, "unsupported pre-tokenizer '{}' in tokenizer.json", type);
  }
}

void apply_normalizer(const json& n, TokenizerConfig& c) {
  if (n.is_null()) return;
  const std::string type = str(n, "type");
  if (type == "Sequence") {
    for (const json& s : n.at("normalizers")) apply_normalizer(s, c);
  } else if (type == "Prepend" && str(n, "prepend") == kMetaspace) {
    c.kind = TokenizerConfig::Kind::sentencepiece;
    c.prepend = TokenizerConfig::Prepend::always;
  } else if (type == "Replace" && n.at("pattern").value("String", "") == " " &&
             str(n, "content") == kMetaspace) {
    c.kind = TokenizerConfig::Kind::sentencepiece;
    c.replace_spaces = true;
  } else if (type == "NFC") {
    if (!text::nfc_available())
      fail(ErrorCode::unsupported,
           "tokenizer.json normalizer NFC needs memra built with ICU (libicu-dev)");
    c.nfc = true;
  } else {
    fail(ErrorCode::unsupported, "unsupported normalizer '{}' in tokenizer.json", type);
  }
}

void apply_decoder(const json& d, TokenizerConfig& c) {
  if (d.is_null()) return;
  const std::string type = str(d, "type");
  if (type == "Sequence") {
    for (const json& s : d.at("decoders")) apply_decoder(s, c);
  } else if (type == "Strip") {
    if (str(d, "content") != " " || d.value("start", 0) != 1 || d.value("stop", 0) != 0)
      fail(ErrorCode::unsupported, "Strip decoder other than one leading space");
    c.strip_leading_space = true;
  } else if (type == "Metaspace") {
    c.strip_leading_space =
        str(d, "prepend_scheme", "always") != "never" && flag(d, "add_prefix_space", true);
  } else if (type != "ByteLevel" && type != "ByteFallback" && type != "Fuse" && type != "Replace") {
    fail(ErrorCode::unsupported, "unsupported decoder '{}' in tokenizer.json", type);
  }
}

void apply_post_processor(const json& p, TokenizerConfig& c, const TokenIdMap& ids) {
  if (p.is_null()) return;
  const std::string type = str(p, "type");
  if (type == "Sequence") {
    for (const json& s : p.at("processors")) apply_post_processor(s, c, ids);
  } else if (type == "TemplateProcessing") {
    bool seen_sequence = false;
    for (const json& piece : p.at("single")) {
      if (piece.contains("Sequence")) {
        seen_sequence = true;
      } else if (piece.contains("SpecialToken")) {
        auto it = ids.find(piece.at("SpecialToken").value("id", ""));
        if (it == ids.end())
          fail(ErrorCode::malformed_file, "TemplateProcessing names an unknown token");
        if (seen_sequence) {
          c.add_eos = true;
          c.eos_id = it->second;
        } else {
          c.add_bos = true;
          c.bos_id = it->second;
        }
      }
    }
  } else if (type != "ByteLevel") {
    fail(ErrorCode::unsupported, "unsupported post-processor '{}' in tokenizer.json", type);
  }
}

void load_model(const json& m, TokenizerConfig& c, size_t n_added_max) {
  if (str(m, "type", "BPE") != "BPE")
    fail(ErrorCode::unsupported,
         "unsupported tokenizer model '{}' in tokenizer.json (memra supports BPE)", str(m, "type"));
  if (!str(m, "continuing_subword_prefix").empty() || !str(m, "end_of_word_suffix").empty())
    fail(ErrorCode::unsupported,
         "BPE with a subword prefix or end-of-word suffix is not supported");
  if (m.contains("dropout") && !m.at("dropout").is_null() && m.at("dropout").get<double>() > 0)
    fail(ErrorCode::unsupported, "BPE dropout is not supported");
  const json& vocab = m.at("vocab");
  size_t n = n_added_max;
  for (const auto& [token, id] : vocab.items()) n = std::max(n, id.get<size_t>() + 1);
  if (n > (1u << 24)) fail(ErrorCode::malformed_file, "tokenizer.json vocabulary ids exceed 2^24");
  c.tokens.assign(n, "");
  for (const auto& [token, id] : vocab.items()) c.tokens[id.get<size_t>()] = token;
  for (const json& merge : m.at("merges")) {
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) fail(ErrorCode::malformed_file, "merge '{}' has no space", s);
      c.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      c.merges.emplace_back(merge.at(0).get<std::string>(), merge.at(1).get<std::string>());
    }
  }
  c.model.byte_fallback = flag(m, "byte_fallback", false);
  c.model.fuse_unk = flag(m, "fuse_unk", false);
  c.model.ignore_merges = flag(m, "ignore_merges", false);
  const std::string unk = str(m, "unk_token");
  if (!unk.empty() && vocab.contains(unk)) c.model.unk_id = vocab.at(unk).get<int32_t>();
}

TokenizerConfig config_from_json(const json& tj, const json& cfg, const json& gen) {
  TokenizerConfig c;
  size_t n_added_max = 0;
  for (const json& a : tj.value("added_tokens", json::array()))
    n_added_max = std::max(n_added_max, a.at("id").get<size_t>() + 1);
  load_model(tj.at("model"), c, n_added_max);
  c.token_types.assign(c.tokens.size(), TokenType::normal);
  for (const json& a : tj.value("added_tokens", json::array())) {
    if (flag(a, "single_word", false))
      fail(ErrorCode::unsupported, "added token '{}' is single_word, which memra does not support",
           str(a, "content"));
    AddedToken t{str(a, "content"), a.at("id").get<int32_t>(), flag(a, "special", false),
                 flag(a, "lstrip", false), flag(a, "rstrip", false)};
    c.tokens[t.id] = t.content;
    c.token_types[t.id] = t.special ? TokenType::control : TokenType::user_defined;
    c.added.push_back(t);
  }
  for (size_t i = 0; i < c.tokens.size(); ++i)
    if (c.tokens[i].empty())
      fail(ErrorCode::malformed_file, "tokenizer.json has no token for id {}", i);

  c.kind = TokenizerConfig::Kind::sentencepiece;  // until a ByteLevel step says otherwise
  apply_normalizer(tj.value("normalizer", json()), c);
  std::vector<PreStep> steps;
  if (!tj.value("pre_tokenizer", json()).is_null()) add_pre_step(tj.at("pre_tokenizer"), c, steps);
  const json decoder = tj.value("decoder", json());
  if (!decoder.is_null() && str(decoder, "type") == "ByteLevel")
    c.kind = TokenizerConfig::Kind::byte_level;
  if (c.kind == TokenizerConfig::Kind::sentencepiece && !steps.empty())
    fail(ErrorCode::unsupported,
         "tokenizer.json mixes SentencePiece normalization with regex pre-tokenizers");
  if (c.kind == TokenizerConfig::Kind::sentencepiece && !c.replace_spaces)
    fail(ErrorCode::unsupported,
         "tokenizer.json is neither byte-level nor SentencePiece-style BPE");
  c.pre = PreTokenizer(std::move(steps));
  c.pre.gguf_name = c.pre.match_gguf_name();  // what to_gguf writes as tokenizer.ggml.pre
  apply_decoder(decoder, c);

  TokenIdMap ids;
  for (size_t i = 0; i < c.tokens.size(); ++i) ids.emplace(c.tokens[i], static_cast<int32_t>(i));
  apply_post_processor(tj.value("post_processor", json()), c, ids);
  auto id_of = [&](const json& name) {
    auto it = ids.find(token_name(name));
    return it == ids.end() ? -1 : it->second;
  };
  if (cfg.is_object()) {
    if (cfg.contains("bos_token")) c.bos_id = id_of(cfg.at("bos_token"));
    if (cfg.contains("eos_token")) c.eos_id = id_of(cfg.at("eos_token"));
    if (cfg.contains("pad_token")) c.pad_id = id_of(cfg.at("pad_token"));
    c.add_bos = flag(cfg, "add_bos_token", c.add_bos);
    c.add_eos = flag(cfg, "add_eos_token", c.add_eos);
    const json tmpl = cfg.value("chat_template", json());
    if (tmpl.is_string()) c.chat_template = tmpl.get<std::string>();
    if (tmpl.is_array())
      for (const json& t : tmpl)
        if (str(t, "name") == "default") c.chat_template = str(t, "template");
  }
  if (gen.is_object() && gen.contains("eos_token_id")) {
    const json& e = gen.at("eos_token_id");
    for (const json& id : e.is_array() ? e : json::array({e}))
      if (id.is_number_integer()) c.eog_ids.push_back(id.get<int32_t>());
  }
  return c;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_folder(const std::string& folder) {
  const std::filesystem::path dir(folder);
  const json tj = read_json(dir / "tokenizer.json", true);
  const json cfg = read_json(dir / "tokenizer_config.json", false);
  const json gen = read_json(dir / "generation_config.json", false);
  try {
    TokenizerConfig c = config_from_json(tj, cfg, gen);
    std::ifstream jinja(dir / "chat_template.jinja", std::ios::binary);
    if (jinja) {
      std::stringstream buffer;
      buffer << jinja.rdbuf();
      c.chat_template = buffer.str();
    }
    return std::make_unique<BpeTokenizer>(std::move(c));
  } catch (const json::exception& e) {
    fail(ErrorCode::malformed_file, "{}: unexpected structure: {}",
         (dir / "tokenizer.json").string(), e.what());
  }
}

}  // namespace memra
