// The CPU allocation check of auto_find_batch_size: while one lives, LibTorch's allocations above
// TRAINER_MAX_ALLOCATION_BYTES, or larger than the memory available, throw LibTorch's own
// out-of-memory error (never the kernel's OOM killer); with none alive nothing is refused. And
// which errors count as out of memory: LibTorch's real DefaultCPUAllocator failure among them.
#include "lib/runtime/allocation_check.h"

#include <cstdlib>
#include <new>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/runtime/memory.h"

namespace trainer {
namespace allocation_check_test {

// TRAINER_MAX_ALLOCATION_BYTES set to `value` (unset with nullopt) for the scope.
class ScopedLimit {
 public:
  explicit ScopedLimit(std::optional<std::string> value) {
    if (value) {
      ::setenv(runtime::kMaxAllocationBytesEnv, value->c_str(), 1);
    } else {
      ::unsetenv(runtime::kMaxAllocationBytesEnv);
    }
  }
  ~ScopedLimit() { ::unsetenv(runtime::kMaxAllocationBytesEnv); }
};

// The what() of the c10::OutOfMemoryError that allocating `bytes` throws ("" when none does).
std::string refusal(int64_t bytes) {
  try {
    torch::Tensor t = torch::empty({bytes}, torch::kUInt8);
  } catch (const c10::OutOfMemoryError& e) {
    return e.what_without_backtrace();
  }
  return "";
}

TEST(AllocationCheck, RefusesAboveTheTestsLimitOnlyWhileOneLives) {
  const ScopedLimit limit("100000");
  EXPECT_EQ(refusal(1 << 20), "");  // no check alive
  {
    const runtime::AllocationCheck check;
    EXPECT_EQ(refusal(1 << 20),
              "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1048576 bytes. "
              "Error code 12 (Cannot allocate memory); refused: above "
              "TRAINER_MAX_ALLOCATION_BYTES 100000 (a test's limit)");
    EXPECT_EQ(refusal(100000), "");  // at the limit: allowed
    {
      const runtime::AllocationCheck nested;
      EXPECT_NE(refusal(100001), "");
    }
    EXPECT_NE(refusal(100001), "") << "the outer check is still alive";
    // What LibTorch allocates through its allocator is refused wherever it is asked for.
    const torch::Tensor small = torch::ones({1000});
    EXPECT_THROW(torch::cat({small, small.repeat({100})}), c10::OutOfMemoryError);
  }
  EXPECT_EQ(refusal(1 << 20), "");
}

TEST(AllocationCheck, RefusesWhatDoesNotFitInTheMemoryAvailable) {
  const ScopedLimit no_limit(std::nullopt);
  const int64_t available = runtime::available_memory_bytes(runtime::cgroup_memory_files());
  ASSERT_GT(available, runtime::kAllocationMargin + (int64_t{256} << 20));
  const runtime::AllocationCheck check;
  // More than there is: refused at once, before a page is touched (unchecked, Linux would hand
  // out the address space and the kernel's OOM killer end the process as it filled).
  const std::string too_much = refusal(available + (int64_t{1} << 30));
  EXPECT_EQ(too_much.rfind("DefaultCPUAllocator: can't allocate memory: you tried to allocate ", 0),
            0u)
      << too_much;
  EXPECT_NE(too_much.find("refused before the kernel's OOM killer"), std::string::npos);
  // Within the margin of what is available: refused too.
  EXPECT_NE(refusal(available - runtime::kAllocationMargin / 2), "");
  // 64 MiB fits.
  EXPECT_EQ(refusal(int64_t{64} << 20), "");
}

TEST(AllocationCheck, ABadTestLimitIsAnInputError) {
  for (const char* bad : {"", "0", "-5", "1MB", "12 ", "99999999999999999999"}) {
    const ScopedLimit limit{std::string(bad)};
    try {
      const runtime::AllocationCheck check;
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("environment variable TRAINER_MAX_ALLOCATION_BYTES: '") + bad +
                    "' is not a byte count (a whole number above 0; for tests)");
    }
  }
  EXPECT_EQ(refusal(int64_t{1} << 30), "") << "a check that failed to start checks nothing";
}

TEST(AllocationCheck, OutOfMemoryIsWhatAccelerateRetries) {
  // LibTorch's own DefaultCPUAllocator when posix_memalign fails (a c10::Error, not its
  // OutOfMemoryError): asked for 2^50 bytes with no check alive. Under AddressSanitizer such a
  // request aborts in its allocator first (scripts/sanitize sets ASAN_OPTIONS).
  if (!std::getenv("ASAN_OPTIONS")) {
    try {
      torch::Tensor t = torch::empty({int64_t{1} << 50}, torch::kUInt8);
      ADD_FAILURE() << "2^50 bytes were allocated";
    } catch (const c10::Error& e) {
      EXPECT_TRUE(runtime::is_out_of_memory(e)) << e.what_without_backtrace();
    }
  }
  const c10::SourceLocation here{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  EXPECT_TRUE(runtime::is_out_of_memory(c10::OutOfMemoryError(here, "anything")));
  EXPECT_TRUE(runtime::is_out_of_memory(std::bad_alloc()));
  EXPECT_TRUE(runtime::is_out_of_memory(
      c10::Error(here, "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; ...)")));
  EXPECT_FALSE(runtime::is_out_of_memory(c10::Error(here, "mat1 and mat2 shapes cannot be")));
  EXPECT_FALSE(runtime::is_out_of_memory(std::runtime_error("CUDA out of memory.")));
  EXPECT_FALSE(runtime::is_out_of_memory(InputError("argument x: out of memory.")));
}

}  // namespace allocation_check_test
}  // namespace trainer
