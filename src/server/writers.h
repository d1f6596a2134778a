// The ResponseWriter of each protocol (see generate.h): OpenAI chat.completion[.chunk],
// text_completion, Anthropic Messages, OpenAI Responses. Each is built per request.
#pragma once

#include <memory>

#include "server/generate.h"

namespace memra::server {

std::unique_ptr<ResponseWriter> make_chat_writer(const App& app, const ServedModel& model,
                                                 const GenerationJob& job, HttpExchange& ex);
std::unique_ptr<ResponseWriter> make_completion_writer(const App& app, const ServedModel& model,
                                                       const GenerationJob& job, HttpExchange& ex);
std::unique_ptr<ResponseWriter> make_messages_writer(const ServedModel& model,
                                                     const GenerationJob& job, HttpExchange& ex);

}  // namespace memra::server
