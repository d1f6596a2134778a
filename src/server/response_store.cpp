// The Responses store; see response_store.h.
#include "server/response_store.h"

namespace memra::server {

namespace {

size_t size_of(const StoredResponse& r) {
  auto text = [](const auto& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  };
  return r.id.size() + text(r.response) + text(r.input_items) + text(r.conversation);
}

}  // namespace

void ResponseStore::drop_locked(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->value->id);
  entries_.erase(it);
}

void ResponseStore::evict_locked() {
  const Clock::time_point oldest_allowed = now_() - std::chrono::seconds(limits_.max_age_s);
  while (!entries_.empty() &&
         (entries_.size() > limits_.max_responses || bytes_ > limits_.max_bytes ||
          entries_.front().stored_at < oldest_allowed))
    drop_locked(entries_.begin());
}

void ResponseStore::put(std::shared_ptr<const StoredResponse> r) {
  const size_t bytes = size_of(*r);
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(r->id); it != index_.end()) drop_locked(it->second);
  if (limits_.max_responses == 0 || bytes > limits_.max_bytes) return;
  const std::string id = r->id;
  entries_.push_back({std::move(r), now_(), bytes});
  index_[id] = std::prev(entries_.end());
  bytes_ += bytes;
  evict_locked();
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mutex_);
  evict_locked();  // expiry is checked on read too: an idle store still forgets
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : it->second->value;
}

bool ResponseStore::remove(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  drop_locked(it->second);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace memra::server
