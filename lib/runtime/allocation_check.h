// Running out of memory on the CPU as an exception, for auto_find_batch_size: while an
// AllocationCheck lives, LibTorch's CPU allocator refuses a request that does not fit in the
// memory available, with the error its own DefaultCPUAllocator gives, before the kernel's OOM
// killer would end the process (glibc's malloc hands out address space that the kernel only
// backs when it is touched, so LibTorch's own error rarely comes on Linux). Also what counts as
// out of memory, on the CPU and on CUDA, for the Trainer's retry.
#pragma once

#include <cstdint>
#include <exception>

namespace trainer::runtime {

// For tests: while an AllocationCheck lives, any one CPU allocation of LibTorch above this many
// bytes is refused as out of memory (a forced failure without filling the machine's memory).
inline constexpr const char* kMaxAllocationBytesEnv = "TRAINER_MAX_ALLOCATION_BYTES";
// Requests of at least this many bytes are checked against the memory available (smaller ones
// cost more to check than they risk).
inline constexpr int64_t kCheckedAllocationBytes = int64_t{16} << 20;
// What a checked request must leave available: the rest of the step's smaller allocations, and
// the memory of everything else on the machine that grows meanwhile.
inline constexpr int64_t kAllocationMargin = int64_t{128} << 20;

// TRAINER_MAX_ALLOCATION_BYTES as a byte count (0 when unset). Throws InputError when it is set
// but not a whole number above 0.
int64_t max_allocation_bytes_from_env();

// While one lives (they nest, and may live on several threads), LibTorch's CPU allocations of at
// least kCheckedAllocationBytes are refused when, with kAllocationMargin, they do not fit in
// available_memory_bytes() (memory.h: MemAvailable, and the cgroup's limit less its usage), and
// any allocation above TRAINER_MAX_ALLOCATION_BYTES when that is set. A refusal throws
// c10::OutOfMemoryError "DefaultCPUAllocator: can't allocate memory: you tried to allocate N
// bytes. Error code 12 (Cannot allocate memory) ..." (LibTorch's own words, then why). The
// first one installs a wrapper around c10::GetCPUAllocator() that stays for the process; with
// none alive it passes every request through unchecked.
class AllocationCheck {
 public:
  // Throws InputError when TRAINER_MAX_ALLOCATION_BYTES is set but not a positive whole number.
  AllocationCheck();
  ~AllocationCheck();
  AllocationCheck(const AllocationCheck&) = delete;
  AllocationCheck& operator=(const AllocationCheck&) = delete;
};

// Whether `error` is running out of memory, as Accelerate's should_reduce_batch_size decides:
// c10::OutOfMemoryError (CUDA's caching allocator, an AllocationCheck), std::bad_alloc, or a
// c10::Error in LibTorch's words for it ("DefaultCPUAllocator: can't allocate memory", "CUDA
// out of memory.", cuDNN's CUDNN_STATUS_NOT_SUPPORTED that a large batch provokes).
bool is_out_of_memory(const std::exception& error);

}  // namespace trainer::runtime
