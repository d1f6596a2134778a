// POST /v1/chat/completions: validate, render the model's chat template, tokenize, generate.
#include "server/generate.h"
#include "server/structured_output.h"
#include "server/writers.h"

namespace memra::server {

void handle_chat_completions(App& app, const HttpRequest& req, HttpExchange& ex) {
  ojson body = parse_json_body(req.body, app.config().request_limits);
  ChatRequest chat = parse_chat_request(body, app.config().request_limits);
  ServedModel& model = app.model_for(chat.gen.model, ModelTask::generate);
  GenerationJob job;
  job.chat = true;
  job.id = make_completion_id("chatcmpl-");
  job.created = unix_time_now();
  job.gen = chat.gen;
  job.tools_active = chat.tools_active();
  job.grammar = chat.tool_call_forced()
                    ? forced_tool_call_grammar(chat, model.tool_format, model.id)
                    : response_format_grammar(chat.gen);
  render_chat_job(model, chat, job);
  fit_to_context(model, job);
  run_generation(app, model, job, ex, *make_chat_writer(app, model, job, ex));
}

}  // namespace memra::server
