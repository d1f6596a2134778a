// POST /v1/completions: raw text or token-id prompts (one or many), generate.
#include "server/generate.h"
#include "server/structured_output.h"
#include "server/writers.h"
#include "tokenizer/tokenizer.h"

namespace memra::server {

void handle_completions(App& app, const HttpRequest& req, HttpExchange& ex) {
  ojson body = parse_json_body(req.body, app.config().request_limits);
  CompletionRequest completion = parse_completion_request(body, app.config().request_limits);
  ServedModel& model = app.model_for(completion.gen.model, ModelTask::generate);
  const Tokenizer& tok = model.engine->tokenizer();
  GenerationJob job;
  job.id = make_completion_id("cmpl-");
  job.created = unix_time_now();
  for (const PromptInput& p : completion.prompts) {
    // The whole prompt is the client's (users hand-render chat formats for completions), so
    // special tokens written in it become their ids, as in HF tokenizers, vLLM and llama.cpp.
    // Chat message content keeps its protection: the template text is parsed, not the messages.
    job.prompts.push_back(
        p.is_tokens ? p.ids : tok.encode(p.text, {.add_special = true, .parse_special = true}));
    if (job.prompts.back().empty()) bad_request("prompt", "'prompt' encodes to no tokens");
  }
  job.gen = completion.gen;
  job.grammar = response_format_grammar(job.gen);
  fit_to_context(model, job);
  run_generation(app, model, job, ex, *make_completion_writer(app, model, job, ex));
}

}  // namespace memra::server
