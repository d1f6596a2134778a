// Persistent worker threads for the CPU ops. Workers spin briefly on the job generation counter
// before sleeping on a condition variable: decode runs hundreds of small ops per token, and a
// futex wake per op would cost more than the op itself.
#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace memra {

namespace {
constexpr int kSpinIterations = 20000;  // ~tens of microseconds before a worker sleeps
}

ThreadPool::ThreadPool(int n_threads) {
  const int n = std::max(1, n_threads);
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_tasks(int thread) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1);
    if (task >= n_tasks_) break;
    try {
      (*job_)(task, thread);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_task_.store(n_tasks_);  // abandon the remaining tasks
    }
  }
}

void ThreadPool::worker_main(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load();
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) gen = generation_.load();
    if (gen == seen) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      gen = generation_.load();
    }
    seen = gen;
    if (stop_) return;
    run_tasks(thread);
    if (active_.fetch_sub(1) == 1) {
      std::lock_guard lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    n_tasks_ = n_tasks;
    next_task_.store(0);
    error_ = nullptr;
    active_.store(static_cast<int>(workers_.size()));
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  run_tasks(0);
  for (int spin = 0; active_.load() != 0 && spin < kSpinIterations; ++spin) {
  }
  if (active_.load() != 0) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return active_.load() == 0; });
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace memra
