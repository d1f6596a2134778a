// row_workers_run: plain threads per call (tensors are large; a pool would buy nothing here).
#include "formats/row_workers.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include "core/error.h"

namespace memra {

void row_workers_run(uint64_t rows, int threads,
                     const std::function<void(uint64_t, uint64_t)>& fill, const std::string& what) {
  const uint64_t n_workers =
      std::clamp<uint64_t>(rows / 16, 1, static_cast<uint64_t>(std::max(threads, 1)));
  std::vector<std::exception_ptr> errors(n_workers);
  auto work = [&](uint64_t w) {
    try {
      fill(rows * w / n_workers, rows * (w + 1) / n_workers);
    } catch (...) {
      errors[w] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (uint64_t w = 1; w < n_workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      throw Error(err.code(), what + ": " + err.what());
    }
  }
}

}  // namespace memra
