#pragma once

#include <cstddef>

namespace memra {

// glibc's mmap and trim thresholds for a long-running server (a no-op elsewhere), set once before
// the threads start. By default glibc raises its mmap threshold to the size of each mapped block
// freed (up to 32 MiB) and its trim threshold to twice that: once the engine has freed one big
// buffer, every later block under that size (a sampler's 1-2 MiB of scratch per request) comes
// from an arena, and an arena other than the main one keeps up to twice that size of free top,
// which malloc_trim does not hand back. Fixed thresholds keep every block of kServerMmapThreshold
// or more in a mapping of its own, unmapped when freed, and hand an arena's free top above
// kServerTrimThreshold back as it is freed.
inline constexpr size_t kServerMmapThreshold = size_t{1} << 20;
inline constexpr size_t kServerTrimThreshold = size_t{1} << 20;
void configure_heap_for_server();

// Hands the allocator's free memory back to the operating system (glibc: the free pages inside
// every arena and the main heap's top; other arenas' tops go back as they are freed, see
// configure_heap_for_server). A server calls it once load has stopped: a burst of connection
// threads leaves each glibc arena holding free pages of its peak working set, which would
// otherwise stay resident for the life of the process and hide real leaks in RSS. A no-op
// elsewhere.
void trim_free_heap();

}  // namespace memra
