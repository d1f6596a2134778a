#pragma once

namespace memra {

// Hands the allocator's free memory back to the operating system (glibc: every arena's free
// pages, not only the top of the main heap). A server calls it once load has stopped: a burst of
// connection threads leaves each glibc arena holding its peak working set, which would otherwise
// stay resident for the life of the process and hide real leaks in RSS. A no-op elsewhere.
void trim_free_heap();

}  // namespace memra
