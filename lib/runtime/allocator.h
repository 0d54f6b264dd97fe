// Process-wide allocator settings for tensor work on CPU: freed tensor-sized blocks stay in the
// heap for the next step instead of going back to the kernel (why: allocator.cpp).
#pragma once

namespace trainer::runtime {

// Sets glibc's M_MMAP_THRESHOLD to 32 MiB (its maximum) and M_TRIM_THRESHOLD to 1 GiB, once per
// process; later calls do nothing. Freed memory is kept for reuse instead of returned, as
// PyTorch's caching allocators do on GPUs. Called by Trainer, DistributedDataParallel and the
// trainer program; a C++ program of its own can call it first thing.
void configure_allocator();

}  // namespace trainer::runtime
