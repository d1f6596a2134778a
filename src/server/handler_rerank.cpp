// POST /v1/rerank (Cohere / Jina shape): each document is scored by a causal LM's answer to a
// per-model yes/no prompt (the Qwen3-Reranker method): relevance = p(yes) over {yes, no} at the
// prompt's last position, from the engine's score requests. Each document's score depends on its
// own prompt only, so it is the same alone and batched.
#include <algorithm>
#include <cmath>
#include <fstream>

#include "server/generate.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

namespace {

constexpr size_t kWave = 64;  // engine requests in flight per HTTP request
constexpr size_t kMaxPromptFile = 1 << 16;

// Qwen3-Reranker's prompt, as its model card gives it (the thinking span is closed up front).
constexpr const char* kQwen3Prompt =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    "and the Instruct provided. Note that the answer can only be \"yes\" or \"no\"."
    "<|im_end|>\n<|im_start|>user\n<Instruct>: {instruction}\n<Query>: {query}\n<Document>: "
    "{document}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
constexpr const char* kQwen3Instruction =
    "Given a web search query, retrieve relevant passages that answer the query";

int32_t token_with_text(const Tokenizer& tok, const std::string& text) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.token_text(id) == text) return id;
  fail(ErrorCode::unsupported, "rerank answer token '{}' is not one token of this vocabulary",
       text);
}

struct RerankRequest {
  std::string model;
  std::string query;
  std::string instruction;
  std::vector<std::string> documents;
  size_t top_n = 0;
  bool return_documents = false;
};

RerankRequest parse_rerank_request(App& app, const ojson& body, ServedModel*& model) {
  RerankRequest r;
  r.model = string_field(body, "model");
  model = &app.model_for(r.model, ModelTask::rerank);
  r.query = string_field(body, "query");
  if (r.query.empty()) bad_request("query", "'query' must be a non-empty string");
  const ojson* docs = field(body, "documents");
  if (!docs || !docs->is_array() || docs->empty())
    bad_request("documents", "'documents' must be a non-empty list of strings or {{\"text\"}}");
  const size_t limit = static_cast<size_t>(app.config().request_limits.max_rerank_documents);
  if (docs->size() > limit)
    bad_request("documents", "'documents' has {} entries, at most {} allowed", docs->size(), limit);
  for (const ojson& d : *docs) {
    const ojson* text = d.is_object() ? field(d, "text") : &d;
    if (!text || !text->is_string())
      bad_request("documents",
                  "each document must be a string or an object with a \"text\" string");
    r.documents.push_back(text->get<std::string>());
  }
  r.top_n = static_cast<size_t>(integer_in(body, "top_n", 1, static_cast<int64_t>(limit),
                                           static_cast<int64_t>(docs->size())));
  r.return_documents = boolean(body, "return_documents", false);
  r.instruction = string_field(body, "instruction");
  if (r.instruction.empty()) r.instruction = model->rerank.default_instruction;
  if (field(body, "max_chunks_per_doc") || field(body, "rank_fields"))
    unsupported_field(field(body, "rank_fields") ? "rank_fields" : "max_chunks_per_doc",
                      "document chunking and rank_fields are not supported");
  return r;
}

// The prompt's literal parts may name special tokens (parsed); the client's text never does.
std::vector<int32_t> render(const RerankFormat& f, const Tokenizer& tok, const RerankRequest& r,
                            const std::string& document) {
  std::vector<int32_t> ids;
  const auto append = [&](const std::string& text, bool literal) {
    if (text.empty()) return;
    const std::vector<int32_t> part =
        tok.encode(text, {.add_special = ids.empty() && literal, .parse_special = literal});
    ids.insert(ids.end(), part.begin(), part.end());
  };
  const std::string& p = f.prompt;
  size_t at = 0;
  while (at < p.size()) {
    const size_t open = p.find('{', at);
    if (open == std::string::npos) break;
    const size_t close = p.find('}', open);
    const std::string slot = close == std::string::npos ? "" : p.substr(open + 1, close - open - 1);
    const std::string* value = slot == "query"         ? &r.query
                               : slot == "document"    ? &document
                               : slot == "instruction" ? &r.instruction
                                                       : nullptr;
    if (!value) {  // not a slot: literal text
      append(p.substr(at, open + 1 - at), true);
      at = open + 1;
      continue;
    }
    append(p.substr(at, open - at), true);
    append(*value, false);
    at = close + 1;
  }
  append(p.substr(at), true);
  return ids;
}

// Scores documents [first, first + n); false when the client went away, 500 on an engine error.
bool run_wave(App& app, ServedModel& model, const std::vector<std::vector<int32_t>>& prompts,
              size_t first, size_t n, HttpExchange& ex, std::vector<double>& scores) {
  std::vector<Request> requests;
  for (size_t i = first; i < first + n; ++i) {
    Request q;
    q.kind = RequestKind::score;
    q.prompt = prompts[i];
    q.score_token_ids = {model.rerank.yes_id, model.rerank.no_id};
    requests.push_back(std::move(q));
  }
  return run_to_results(app, model, std::move(requests), ex, "rerank_failed", "rerank",
                        [&](int choice, StreamEvent& event) {
                          if (event.scores.size() != 2) return false;
                          const double yes = event.scores[0], no = event.scores[1];
                          scores[first + static_cast<size_t>(choice)] =
                              1.0 / (1.0 + std::exp(no - yes));
                          return true;
                        });
}

}  // namespace

RerankFormat rerank_format_load(const Engine& engine, const std::string& prompt,
                                const std::string& tokens) {
  RerankFormat f;
  const std::string& arch = engine.model_info().architecture;
  if (prompt == "qwen3" || (prompt.empty() && arch == "qwen3")) {
    f.prompt = kQwen3Prompt;
    f.default_instruction = kQwen3Instruction;
  } else if (prompt.empty()) {
    fail(ErrorCode::unsupported,
         "no rerank prompt for a {} model (classification heads are not supported): give "
         "rerank_prompt=FILE (text with {{query}} and {{document}}) in its MEMRA_MODELS entry",
         arch);
  } else {
    std::ifstream in(prompt, std::ios::binary);
    if (!in) fail(ErrorCode::not_found, "rerank_prompt: cannot open '{}'", prompt);
    f.prompt.assign(kMaxPromptFile + 1, '\0');
    in.read(f.prompt.data(), static_cast<std::streamsize>(f.prompt.size()));
    f.prompt.resize(static_cast<size_t>(in.gcount()));
    if (f.prompt.size() > kMaxPromptFile)
      fail(ErrorCode::invalid_argument, "rerank_prompt: '{}' is larger than {} bytes", prompt,
           kMaxPromptFile);
    if (f.prompt.find("{query}") == std::string::npos ||
        f.prompt.find("{document}") == std::string::npos)
      fail(ErrorCode::invalid_argument, "rerank_prompt '{}' has no {{query}} or no {{document}}",
           prompt);
  }
  const std::string pair = tokens.empty() ? "yes/no" : tokens;
  const size_t slash = pair.find('/');
  f.yes_id = token_with_text(engine.tokenizer(), pair.substr(0, slash));
  f.no_id = token_with_text(engine.tokenizer(), pair.substr(slash + 1));
  return f;
}

void handle_rerank(App& app, const HttpRequest& req, HttpExchange& ex) {
  const ojson body = parse_json_body(req.body, app.config().request_limits);
  ServedModel* model = nullptr;
  const RerankRequest r = parse_rerank_request(app, body, model);
  const Tokenizer& tok = model->engine->tokenizer();
  const int32_t ctx = model->engine->model_info().context_length;
  std::vector<std::vector<int32_t>> prompts;
  int64_t tokens = 0;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    prompts.push_back(render(model->rerank, tok, r, r.documents[i]));
    tokens += static_cast<int64_t>(prompts.back().size());
    if (static_cast<int64_t>(prompts.back().size()) > ctx)
      bad_request("documents",
                  "document {} makes a prompt of {} tokens; this model's maximum context length "
                  "is {} tokens",
                  i, prompts.back().size(), ctx);
  }
  std::vector<double> scores(prompts.size(), 0.0);
  for (size_t first = 0; first < prompts.size(); first += kWave) {
    if (!run_wave(app, *model, prompts, first, std::min(kWave, prompts.size() - first), ex,
                  scores)) {
      ex.send(499, "application/json", "{}");  // the client left: nobody reads this
      return;
    }
  }
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  nlohmann::json results = nlohmann::json::array();
  for (size_t k = 0; k < std::min(r.top_n, order.size()); ++k) {
    nlohmann::json item = {{"index", order[k]}, {"relevance_score", scores[order[k]]}};
    if (r.return_documents) item["document"] = {{"text", r.documents[order[k]]}};
    results.push_back(std::move(item));
  }
  send_json(ex, 200,
            {{"id", make_completion_id("rerank-")},
             {"model", model->id},
             {"results", results},
             {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace memra::server
