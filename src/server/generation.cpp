// Engine request fan-out and event hand-off; see generation.h.
#include "server/generation.h"

namespace memra::server {

void EventChannel::push(ChoiceEvent e) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

std::optional<ChoiceEvent> EventChannel::pop(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, wait, [&] { return !events_.empty(); })) return std::nullopt;
  ChoiceEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

Generation::~Generation() {
  if (n_finished_ < ids_.size()) cancel_all();
}

Request Generation::with_sink(Request request, int choice) {
  std::weak_ptr<EventChannel> channel = channel_;
  const int epoch = epochs_[choice];
  // The sink runs on the engine thread: copy the event into the channel and return at once.
  request.sink = [channel, choice, epoch](const StreamEvent& e) {
    if (auto c = channel.lock()) c->push({choice, epoch, e});
  };
  return request;
}

void Generation::submit(std::vector<Request> requests) {
  for (size_t i = 0; i < requests.size(); ++i) {
    epochs_.push_back(0);
    try {
      ids_.push_back(engine_.submit(with_sink(std::move(requests[i]), static_cast<int>(i))));
      finished_.push_back(false);
    } catch (...) {
      cancel_all();
      throw;
    }
  }
}

void Generation::restart(int choice, Request request) {
  if (finished_[choice]) return;
  ++epochs_[choice];
  try {
    const RequestId id = engine_.submit(with_sink(std::move(request), choice));
    engine_.cancel(ids_[choice]);
    ids_[choice] = id;
  } catch (...) {
    --epochs_[choice];
    throw;
  }
}

void Generation::cancel_all() {
  cancelled_ = true;
  for (size_t i = 0; i < ids_.size(); ++i)
    if (!finished_[i]) engine_.cancel(ids_[i]);
}

std::optional<ChoiceEvent> Generation::next(const std::function<bool()>& client_gone) {
  // 10 ms slices: well under one engine step on any backend, cheap to poll.
  constexpr auto kSlice = std::chrono::milliseconds(10);
  while (n_finished_ < ids_.size()) {
    if (client_gone && client_gone()) {
      cancel_all();
      n_finished_ = ids_.size();
      return std::nullopt;
    }
    std::optional<ChoiceEvent> e = channel_->pop(kSlice);
    if (!e) continue;
    if (e->choice >= 0 && e->choice < static_cast<int>(epochs_.size()) &&
        e->epoch != epochs_[e->choice])
      continue;  // from a request restart() replaced
    if (e->event.finish != FinishReason::none && e->choice >= 0 &&
        e->choice < static_cast<int>(finished_.size()) && !finished_[e->choice]) {
      finished_[e->choice] = true;
      ++n_finished_;
    }
    return e;
  }
  return std::nullopt;
}

}  // namespace memra::server
