// configure_heap_for_server (src/core/heap_trim.h): a thread's big blocks go back to the system
// when freed, even after a bigger block has been freed (which, by glibc's default, raises its
// mmap and trim thresholds to that block's size and twice it for the rest of the process). Its own
// binary: the thresholds are process-wide.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/heap_trim.h"

namespace memra {
namespace {

// Bytes glibc's arenas hold from the system (mapped blocks not included); nullopt where glibc's
// figures do not describe the allocator (elsewhere, or under ASan).
std::optional<size_t> arena_bytes() {
#if defined(__SANITIZE_ADDRESS__)
  return std::nullopt;
#elif defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
  return ::mallinfo2().arena;
#else
  return std::nullopt;
#endif
}

void touch_and_free(size_t bytes) {
  void* p = std::malloc(bytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, bytes);
  std::free(p);
}

TEST(HeapForServer, ThreadArenasHandBigFreedBlocksBack) {
  configure_heap_for_server();
  touch_and_free(size_t{16} << 20);  // glibc's default would raise its thresholds here
  std::optional<size_t> grew_big, grew_many;
  std::thread([&] {
    touch_and_free(64);         // the thread's first allocation: it gets an arena of its own here
    std::vector<void*> blocks;  // many under the mmap threshold, freed together
    blocks.reserve(32);         // before them: nothing in use above the blocks
    const auto before = arena_bytes();
    touch_and_free(size_t{8} << 20);
    const auto after_big = arena_bytes();
    for (int i = 0; i < 32; ++i) {
      blocks.push_back(std::malloc(size_t{512} << 10));
      std::memset(blocks.back(), 1, size_t{512} << 10);
    }
    for (void* p : blocks) std::free(p);
    const auto after_many = arena_bytes();
    if (!before || !after_big || !after_many) return;
    grew_big = *after_big > *before ? *after_big - *before : 0;
    grew_many = *after_many > *before ? *after_many - *before : 0;
  }).join();
  if (!grew_big) GTEST_SKIP() << "no glibc heap figures";
  EXPECT_LT(*grew_big, size_t{1} << 20);  // glibc's default: the whole 8 MiB stays in the arena
  EXPECT_LE(*grew_many, kServerTrimThreshold + (size_t{1} << 20));  // default: all 16 MiB stay
}

}  // namespace
}  // namespace memra
