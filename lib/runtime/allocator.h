// Process-wide allocator settings for tensor work on CPU. LibTorch's CPU tensors come from glibc's
// malloc, which hands blocks over 128 KiB straight back to the kernel when freed (and stops
// raising that threshold once other threads, like a process group's, exist): every training step
// then page-faults its activations in again. Keeping blocks up to 32 MiB in the heap makes a
// BasicNet step on one core about 15-20% faster (scripts/bench/ddp_scaling).
#pragma once

namespace trainer::runtime {

// Sets glibc's M_MMAP_THRESHOLD to 32 MiB (its maximum) and M_TRIM_THRESHOLD to 1 GiB, once per
// process; later calls do nothing. Freed memory is kept for reuse instead of returned, as
// PyTorch's caching allocators do on GPUs. Called by Trainer, DistributedDataParallel and the
// trainer program; a C++ program of its own can call it first thing.
void configure_allocator();

}  // namespace trainer::runtime
