// The bounded in-memory store behind the Responses API's `store`, previous_response_id, and
// GET/DELETE /v1/responses/{id}: at most `max_responses` entries and `max_bytes` of JSON, each
// kept for at most `max_age_s`; the oldest are evicted first. An evicted id reads as unknown.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace memra::server {

struct ResponseStoreLimits {
  size_t max_responses = 1000;   // 0: nothing is stored
  size_t max_bytes = 64u << 20;  // JSON text of responses, inputs and conversations
  int64_t max_age_s = 24 * 3600;
};

struct StoredResponse {
  std::string id;
  nlohmann::json response;              // the Response object, as GET returns it
  nlohmann::ordered_json input_items;   // this request's input, as items with ids
  nlohmann::ordered_json conversation;  // template-ready messages up to and including the output
};

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ResponseStore(ResponseStoreLimits limits,
                         std::function<Clock::time_point()> now = Clock::now)
      : limits_(limits), now_(std::move(now)) {}

  // Keeps `r` (replacing an entry with its id), then evicts down to the limits. An entry larger
  // than max_bytes alone is not kept.
  void put(std::shared_ptr<const StoredResponse> r);
  // Null when unknown, deleted, evicted or expired.
  std::shared_ptr<const StoredResponse> get(const std::string& id);
  bool remove(const std::string& id);  // false when not there
  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> value;
    Clock::time_point stored_at;
    size_t bytes;
  };
  void drop_locked(std::list<Entry>::iterator it);
  void evict_locked();

  ResponseStoreLimits limits_;
  std::function<Clock::time_point()> now_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // oldest first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace memra::server
