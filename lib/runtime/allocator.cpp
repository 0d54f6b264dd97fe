// glibc malloc tuning for tensor-sized blocks. LibTorch's CPU tensors come from glibc's malloc,
// which hands blocks over 128 KiB straight back to the kernel when freed (and stops raising that
// threshold once other threads, like a process group's, exist): every training step then
// page-faults its activations in again. Keeping blocks up to 32 MiB in the heap makes a BasicNet
// step on one core about 15-20% faster (scripts/bench/ddp_scaling).
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
