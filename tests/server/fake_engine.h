// A test double for memra::Engine: a byte-level tokenizer and a scripted "model" that writes a
// reply chosen from the prompt (a tool call when the user says TOOL:, the tool result after a
// tool message, a <think> span then an answer when the user says THINK:, otherwise a greeting that
// depends on the seed). It honours the engine contract the
// server relies on: one token per request per step, max_tokens, stop strings held back, EOS,
// logprobs, cancel within one step, a bounded queue, stats. Used by the C++ server tests and the
// memra-fake-server binary that the protocol tests in tests/python drive.
#pragma once

#include <memory>
#include <string>

#include "memra/engine.h"
#include "server/app.h"

namespace memra::server::testing {

struct FakeEngineOptions {
  int step_ms = 2;  // engine step period
  int32_t context_length = 256;
  int32_t max_sequences = 64;
  int32_t max_queued = 256;
  bool thinking = false;  // the model's template marks <think> spans (replies to THINK: use one)
};

std::unique_ptr<Engine> make_fake_engine(const FakeEngineOptions& options);
// A ServedModel with the fake engine and a simple chat renderer
// ("<bos><start_of_turn>role\ncontent<end_of_turn>\n..." + "<start_of_turn>model\n").
ServedModel make_fake_model(const FakeEngineOptions& options, const std::string& id = "fake-model");

}  // namespace memra::server::testing
