// POST /v1/embeddings (OpenAI): inputs as text or token ids, one or many, each prefilled once by
// the engine's embedding path and pooled as the model is configured (ServedModel::pooling);
// vectors come back L2-normalized, as float lists or base64 of little-endian float32.
#include <bit>
#include <cstring>

#include "server/generate.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

namespace {

// Engine requests in flight per HTTP request: larger inputs lists go in waves, so one request
// cannot fill the engine queue (each wave still batches into the same steps).
constexpr size_t kWave = 64;

struct EmbeddingRequest {
  std::string model;
  std::vector<std::vector<int32_t>> inputs;  // token ids (text already encoded)
  bool base64 = false;
};

bool is_token_list(const ojson& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const ojson& t : v)
    if (!t.is_number_integer()) return false;
  return true;
}

std::vector<int32_t> token_ids(const ojson& v, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (const ojson& t : v) {
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      bad_request("input", "'input' token id {} is outside the vocabulary [0, {})", id, n_vocab);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// `input`: a string, a list of strings, a list of token ids, or a list of token-id lists.
std::vector<std::vector<int32_t>> parse_inputs(const ojson& body, const Tokenizer& tok,
                                               const RequestLimits& limits) {
  const ojson* input = field(body, "input");
  if (!input) bad_request("input", "'input' is required");
  const auto encode = [&](const ojson& text) {
    std::vector<int32_t> ids =
        tok.encode(text.get<std::string>(), {.add_special = true, .parse_special = true});
    if (ids.empty()) bad_request("input", "'input' has an empty string (no tokens to embed)");
    return ids;
  };
  std::vector<std::vector<int32_t>> out;
  if (input->is_string()) {
    out.push_back(encode(*input));
    return out;
  }
  const char* shape =
      "'input' must be a string, a list of strings, a list of token ids or a list of token-id "
      "lists";
  if (!input->is_array() || input->empty()) bad_request("input", "{} (non-empty)", shape);
  if (is_token_list(*input)) {
    out.push_back(token_ids(*input, tok.n_vocab()));
    return out;
  }
  if (input->size() > static_cast<size_t>(limits.max_embedding_inputs))
    bad_request("input", "'input' has {} entries, at most {} allowed", input->size(),
                limits.max_embedding_inputs);
  for (const ojson& item : *input) {
    if (item.is_string())
      out.push_back(encode(item));
    else if (is_token_list(item))
      out.push_back(token_ids(item, tok.n_vocab()));
    else
      bad_request("input", "{}; an entry is {}", shape,
                  item.is_array() && item.empty() ? "an empty list" : type_name(item));
  }
  return out;
}

EmbeddingRequest parse_embedding_request(App& app, const ojson& body, ServedModel*& model) {
  EmbeddingRequest r;
  r.model = string_field(body, "model");
  model = &app.model_for(r.model, ModelTask::embed);
  const EngineModelInfo& info = model->engine->model_info();
  const std::string format = string_field(body, "encoding_format");
  if (!format.empty() && format != "float" && format != "base64")
    bad_request("encoding_format", "'encoding_format' must be 'float' or 'base64', got '{}'",
                format);
  r.base64 = format == "base64";
  // Only the model's full width: truncated (Matryoshka) embeddings are not supported.
  if (field(body, "dimensions")) {
    const int64_t dims = integer_in(body, "dimensions", 1, 1 << 20, 0);
    if (dims != info.n_embd)
      unsupported_field("dimensions",
                        "'dimensions' {}: the model '{}' does not support truncated embeddings; "
                        "it gives {} dimensions (omit 'dimensions' or send {})",
                        dims, model->id, info.n_embd, info.n_embd);
  }
  (void)string_field(body, "user");  // accepted, unused (type-checked)
  r.inputs = parse_inputs(body, model->engine->tokenizer(), app.config().request_limits);
  for (size_t i = 0; i < r.inputs.size(); ++i)
    if (static_cast<int64_t>(r.inputs[i].size()) > info.context_length)
      bad_request("input",
                  "input {} has {} tokens; this model's maximum context length is {} tokens", i,
                  r.inputs[i].size(), info.context_length);
  return r;
}

std::string base64_of(const std::vector<float>& v) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k)
      chunk = (chunk << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 0x3f] : '=';
  }
  return out;
}

// Runs inputs [first, first + n) and stores their vectors; false when the client went away, 500
// on an engine error.
bool run_wave(App& app, ServedModel& model, const std::vector<std::vector<int32_t>>& inputs,
              size_t first, size_t n, HttpExchange& ex, std::vector<std::vector<float>>& out) {
  std::vector<Request> requests;
  for (size_t i = first; i < first + n; ++i) {
    Request q;
    q.kind = RequestKind::embed;
    q.prompt = inputs[i];
    q.pooling = model.pooling;
    q.normalize = true;
    requests.push_back(std::move(q));
  }
  return run_to_results(app, model, std::move(requests), ex, "embedding_failed", "embedding",
                        [&](int choice, StreamEvent& event) {
                          out[first + static_cast<size_t>(choice)] = std::move(event.embedding);
                          return true;
                        });
}

}  // namespace

void handle_embeddings(App& app, const HttpRequest& req, HttpExchange& ex) {
  const ojson body = parse_json_body(req.body, app.config().request_limits);
  ServedModel* model = nullptr;
  const EmbeddingRequest r = parse_embedding_request(app, body, model);
  std::vector<std::vector<float>> vectors(r.inputs.size());
  for (size_t first = 0; first < r.inputs.size(); first += kWave) {
    if (!run_wave(app, *model, r.inputs, first, std::min(kWave, r.inputs.size() - first), ex,
                  vectors)) {
      // The client left (or a forced shutdown): nobody reads this, it only marks the request.
      ex.send(499, "application/json", "{}");
      return;
    }
  }
  nlohmann::json data = nlohmann::json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    tokens += static_cast<int64_t>(r.inputs[i].size());
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", r.base64 ? nlohmann::json(base64_of(vectors[i]))
                                           : nlohmann::json(vectors[i])}});
  }
  send_json(ex, 200,
            {{"object", "list"},
             {"data", data},
             {"model", model->id},
             {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace memra::server
