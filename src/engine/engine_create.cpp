// Engine::create: resolves the model source, opens the archive, loads the model and the
// tokenizer (GGUF metadata or the HF folder's tokenizer.json), the chat template when the model
// has one, and the EOS ids (tokenizer + HF generation_config.json), then starts the engine.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "engine/backend_select.h"
#include "engine/engine_impl.h"
#include "formats/model_archive.h"
#include "formats/model_source.h"
#include "models/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace memra {

namespace {

constexpr uintmax_t kMaxGenerationConfigBytes = 1u << 20;

// A small JSON file of an HF folder; null when the folder has none.
nlohmann::json read_folder_json(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return nullptr;
  if (std::filesystem::file_size(path, ec) > kMaxGenerationConfigBytes)
    fail(ErrorCode::malformed_file, "{} is larger than {} bytes", path.string(),
         kMaxGenerationConfigBytes);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(ErrorCode::malformed_file, "{} is not valid JSON", path.string());
  return j;
}

// eos_token_id from an HF folder's generation_config.json (an int or a list of ints).
std::vector<int32_t> generation_config_eos(const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder) / "generation_config.json";
  const nlohmann::json j = read_folder_json(path);
  std::vector<int32_t> out;
  if (!j.is_object() || !j.contains("eos_token_id")) return out;
  const nlohmann::json& eos = j["eos_token_id"];
  auto take = [&](const nlohmann::json& v) {
    if (!v.is_number_integer())
      fail(ErrorCode::malformed_file, "{}: eos_token_id holds a non-integer", path.string());
    out.push_back(v.get<int32_t>());
  };
  if (eos.is_array()) {
    for (const auto& v : eos) take(v);
  } else if (!eos.is_null()) {
    take(eos);
  }
  return out;
}

std::unique_ptr<ChatTemplate> load_chat_template(const Tokenizer& tokenizer) {
  const std::string source = tokenizer.chat_template();
  if (source.empty()) return nullptr;
  try {
    return std::make_unique<ChatTemplate>(source);
  } catch (const Error& e) {
    // The model stays usable for completions; chat requests are refused as "no chat template".
    MEMRA_LOG_WARN("the model's chat template does not parse, chat is disabled: {}", e.what());
    return nullptr;
  }
}

// GGUF <arch>.pooling_type (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank), named;
// empty when absent or out of range.
std::string pooling_type_name(const gguf::Metadata& metadata, const std::string& arch) {
  static const char* const kNames[] = {"none", "mean", "cls", "last", "rank"};
  const std::optional<int64_t> v = metadata.get_int(arch + ".pooling_type");
  if (!v || *v < 0 || *v > 4) return {};
  return kNames[*v];
}

// A sentence-transformers folder's pooling (1_Pooling/config.json): "last", "mean", "cls", or
// empty when it has none or another mode.
std::string sentence_transformers_pooling(const std::string& folder) {
  const nlohmann::json j =
      read_folder_json(std::filesystem::path(folder) / "1_Pooling" / "config.json");
  if (!j.is_object()) return {};
  const auto on = [&](const char* key) {
    return j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
  };
  const int modes = on("pooling_mode_lasttoken") + on("pooling_mode_mean_tokens") +
                    on("pooling_mode_cls_token") + on("pooling_mode_max_tokens") +
                    on("pooling_mode_mean_sqrt_len_tokens") +
                    on("pooling_mode_weightedmean_tokens");
  if (modes != 1) return {};
  return on("pooling_mode_lasttoken")     ? "last"
         : on("pooling_mode_mean_tokens") ? "mean"
         : on("pooling_mode_cls_token")   ? "cls"
                                          : "";
}

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineOptions& options) {
  const std::string source = options.model.empty() ? model_source_default_path() : options.model;
  const ResolvedModel resolved = model_source_resolve(source);
  auto archive = std::make_shared<const ModelArchive>(archive_open(resolved.path));
  EngineParts parts;
  parts.tokenizer = archive->kind == ArchiveKind::gguf ? Tokenizer::from_gguf(archive->metadata)
                                                       : Tokenizer::from_hf_folder(resolved.path);
  parts.chat_template = load_chat_template(*parts.tokenizer);
  parts.eos_ids = parts.tokenizer->eos_ids();
  if (archive->kind == ArchiveKind::hf_folder)
    for (int32_t id : generation_config_eos(resolved.path))
      if (std::find(parts.eos_ids.begin(), parts.eos_ids.end(), id) == parts.eos_ids.end())
        parts.eos_ids.push_back(id);
  ModelLoadOptions load;
  load.ops = backend_select({options.device, options.n_threads, false, options.deterministic});
  if (!options.deterministic) {
    constexpr const char* kGpu =
        "steps over 1,024 tokens (or MEMRA_FAST_MIN_TOKENS) multiply by cuBLASLt on f16 copies of "
        "the quantized weights; a sequence's tokens may depend on what else runs in its steps";
    MEMRA_LOG_WARN("engine: deterministic off: {}",
                   load.ops->host_memory()
                       ? "no effect on the CPU (it has only the batch-invariant path)"
                       : kGpu);
  }
  if (!options.kv_dtype.empty()) {
    const std::optional<DType> kv = kv_dtype_from_name(options.kv_dtype);
    if (!kv)
      fail(ErrorCode::invalid_argument,
           "kv_dtype '{}' is not a dtype name (F16, BF16, F32, F8_E4M3 or fp8)", options.kv_dtype);
    load.kv_dtype = *kv;
    // Its accuracy cost is large on the models measured (PERFORMANCE.md, "FP8 KV cache"): said
    // at every start, since it trades answers for capacity.
    if (*kv == DType::f8_e4m3)
      MEMRA_LOG_WARN(
          "engine: KV cache F8_E4M3 holds twice F16's tokens but rounds K and V to 3 mantissa "
          "bits: against an F32 cache, Gemma 3 270M's next-token top-1 agreed on 75% of "
          "teacher-forced positions (KL 0.11), where F16 agreed on all of them");
  }
  parts.ops = load.ops;
  parts.model = model_load(archive, load);
  const ModelInfo& mi = parts.model->info();
  if (mi.n_vocab < parts.tokenizer->n_vocab())
    fail(ErrorCode::malformed_file, "tokenizer has {} tokens but the model only {} logits",
         parts.tokenizer->n_vocab(), mi.n_vocab);
  parts.info.id = resolved.display;
  parts.info.architecture = mi.architecture;
  parts.info.n_vocab = mi.n_vocab;
  parts.info.weight_bytes = mi.weight_bytes;
  parts.info.device = mi.device;
  parts.info.kv_dtype = std::string(dtype_name(mi.kv_dtype));
  parts.info.deterministic = options.deterministic || load.ops->host_memory();
  parts.info.n_embd = mi.n_embd;
  parts.info.pooling = archive->kind == ArchiveKind::hf_folder
                           ? sentence_transformers_pooling(resolved.path)
                           : pooling_type_name(archive->metadata, mi.architecture);
  return engine_start(std::move(parts), options);
}

}  // namespace memra
