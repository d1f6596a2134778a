// `memra tokenize`: text -> token ids (and back) with a model's tokenizer. A batch mode reads a
// JSON request and writes one JSON answer, so oracle tests can check thousands of strings in one
// process. Texts may be given as hex bytes to test invalid UTF-8.
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "core/error.h"
#include "formats/model_source.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_text.h"

namespace memra::cli {

namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: memra tokenize -m SOURCE [--text TEXT | --batch FILE|-] [--no-add-special]\n"
    "                      [--parse-special] [--decode]\n"
    "  -m SOURCE         GGUF file, Hugging Face folder (tokenizer.json) or hf:org/name\n"
    "  --text TEXT       print the ids of TEXT (and its decoded text with --decode)\n"
    "  --batch FILE      JSON {\"texts\": [string | {\"hex\": \"..\"}], \"add_special\": bool,\n"
    "                    \"parse_special\": bool, \"skip_special\": bool}; prints JSON\n"
    "                    {\"results\": [{\"ids\", \"decoded\", \"streamed\"}]}\n"
    "  --no-add-special  do not add BOS/EOS\n"
    "  --parse-special   let special tokens written in the text match\n";

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2) fail(ErrorCode::invalid_argument, "hex text has an odd number of digits");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int b = 0;
    const auto r = std::from_chars(hex.data() + i, hex.data() + i + 2, b, 16);
    if (r.ec != std::errc() || r.ptr != hex.data() + i + 2)
      fail(ErrorCode::invalid_argument, "hex text has a non-hex digit near offset {}", i);
    out.push_back(static_cast<char>(b));
  }
  return out;
}

json run_batch(const Tokenizer& tok, const json& request) {
  EncodeOptions options;
  options.add_special = request.value("add_special", false);
  options.parse_special = request.value("parse_special", false);
  const bool skip_special = request.value("skip_special", false);
  json results = json::array();
  for (const json& item : request.at("texts")) {
    const std::string text =
        item.is_string() ? item.get<std::string>() : from_hex(item.at("hex").get<std::string>());
    const std::vector<int32_t> ids = tok.encode(text, options);
    StreamDecoder stream(tok, skip_special);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    results.push_back({{"ids", ids},
                       {"decoded", text::utf8_sanitize(tok.decode(ids, skip_special))},
                       {"streamed", streamed}});
  }
  return {{"results", results}};
}

int run_tokenize(const Args& args) {
  std::string source, text, batch;
  bool have_text = false, decode = false;
  EncodeOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& { return flag_value(args, i); };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      source = value();
    } else if (a == "--text") {
      text = value();
      have_text = true;
    } else if (a == "--batch") {
      batch = value();
    } else if (a == "--no-add-special") {
      options.add_special = false;
    } else if (a == "--parse-special") {
      options.parse_special = true;
    } else if (a == "--decode") {
      decode = true;
    } else {
      fail(ErrorCode::invalid_argument, "unknown option '{}' (see memra tokenize --help)", a);
    }
  }
  if (source.empty()) source = model_source_default_path();
  if (!have_text && batch.empty()) fail(ErrorCode::invalid_argument, "give --text or --batch");
  const auto tok = Tokenizer::from_source(source);
  if (!batch.empty()) {
    std::stringstream buffer;
    if (batch == "-") {
      buffer << std::cin.rdbuf();
    } else {
      std::ifstream in(batch, std::ios::binary);
      if (!in) fail(ErrorCode::not_found, "cannot read {}", batch);
      buffer << in.rdbuf();
    }
    const json request = json::parse(buffer.str(), nullptr, false);
    if (request.is_discarded() || !request.contains("texts"))
      fail(ErrorCode::invalid_argument, "--batch input is not a JSON object with \"texts\"");
    try {
      std::printf("%s\n", run_batch(*tok, request).dump().c_str());
    } catch (const json::exception& e) {
      fail(ErrorCode::invalid_argument, "--batch input: {}", e.what());
    }
    return 0;
  }
  const std::vector<int32_t> ids = tok->encode(text, options);
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
  if (decode) std::printf("%s\n", text::utf8_sanitize(tok->decode(ids, false)).c_str());
  return 0;
}

const Registration kReg{{"tokenize", "text -> token ids with a model's tokenizer", &run_tokenize}};

}  // namespace

}  // namespace memra::cli
