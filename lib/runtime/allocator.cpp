// glibc malloc tuning for tensor-sized blocks.
#include "lib/runtime/allocator.h"

#include <mutex>

#include <malloc.h>

namespace trainer::runtime {

void configure_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  });
}

}  // namespace trainer::runtime
