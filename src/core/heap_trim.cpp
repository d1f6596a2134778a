#include "core/heap_trim.h"

#include <cstdlib>  // defines __GLIBC__ where it applies

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace memra {

void configure_heap_for_server() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kServerMmapThreshold));
  ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kServerTrimThreshold));
#endif
}

void trim_free_heap() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace memra
