// The bridge from an HTTP request to the engine queue: submits one engine request per choice,
// receives their StreamEvents (on the engine thread) through a channel, and hands them to the
// HTTP thread. The HTTP thread polls for a vanished client between events, so a disconnect
// cancels every choice within one engine step (the engine then frees the KV blocks).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "memra/engine.h"

namespace memra::server {

struct ChoiceEvent {
  int choice = 0;
  int epoch = 0;  // which engine request of the choice (restart() starts the next)
  StreamEvent event;
};

class EventChannel {
 public:
  void push(ChoiceEvent e);
  // Waits up to `wait` for an event.
  std::optional<ChoiceEvent> pop(std::chrono::milliseconds wait);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<ChoiceEvent> events_;
};

class Generation {
 public:
  explicit Generation(Engine& engine)
      : engine_(engine), channel_(std::make_shared<EventChannel>()) {}
  ~Generation();  // cancels whatever has not finished
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits every request (their sinks are replaced). If one is refused, the ones already queued
  // are cancelled and the engine's Error propagates.
  void submit(std::vector<Request> requests);
  // The next event of any choice; nullopt once every choice has finished, or when `client_gone`
  // says the client left (then everything is cancelled).
  std::optional<ChoiceEvent> next(const std::function<bool()>& client_gone);
  // Replaces a running choice's engine request with `request` (a continuation: the thinking
  // budget forces the close tag); events of the old one are dropped from now on. When the engine
  // refuses the new one, the old one keeps running and the Error propagates.
  void restart(int choice, Request request);
  void cancel_all();
  bool cancelled() const { return cancelled_; }

 private:
  Engine& engine_;
  std::shared_ptr<EventChannel> channel_;  // shared with the sinks, which may outlive us
  Request with_sink(Request request, int choice);

  std::vector<RequestId> ids_;
  std::vector<int> epochs_;
  std::vector<bool> finished_;
  size_t n_finished_ = 0;
  bool cancelled_ = false;
};

}  // namespace memra::server
