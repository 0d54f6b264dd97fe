// The checked CPU allocator behind AllocationCheck (allocation_check.h): a c10::Allocator that
// forwards to the one LibTorch had (its DataPtrs, deleter and copies are that one's), refusing
// what does not fit while a check is on.
#include "lib/runtime/allocation_check.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/warn.h"
#include "lib/runtime/memory.h"

namespace trainer::runtime {
namespace {

std::string mib(int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

// What the checks share: how many are alive, the test's limit, and the cgroup's files (found
// when the first check of a stretch starts).
struct CheckState {
  std::atomic<int> alive{0};
  std::atomic<int64_t> max_bytes{0};  // 0: no test limit
  std::mutex mutex;                   // guards cgroups
  std::vector<CgroupMemoryFiles> cgroups;
};

CheckState& check_state() {
  static CheckState* state = new CheckState();  // never destroyed: allocations outlive main
  return *state;
}

[[noreturn]] void refuse(size_t n, const std::string& why) {
  throw c10::OutOfMemoryError(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      fmt::format("DefaultCPUAllocator: can't allocate memory: you tried to allocate {} bytes. "
                  "Error code 12 (Cannot allocate memory); {}",
                  n, why));
}

class CheckedCpuAllocator final : public c10::Allocator {
 public:
  explicit CheckedCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    CheckState& state = check_state();
    if (state.alive.load(std::memory_order_relaxed) > 0) check(state, n);
    return inner_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  bool is_simple_data_ptr(const c10::DataPtr& data_ptr) const override {
    return inner_->is_simple_data_ptr(data_ptr);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    inner_->copy_data(dest, src, count);
  }

 private:
  static void check(CheckState& state, size_t n) {
    const int64_t bytes = static_cast<int64_t>(n);
    const int64_t max_bytes = state.max_bytes.load(std::memory_order_relaxed);
    if (max_bytes > 0 && bytes > max_bytes) {
      refuse(n, fmt::format("refused: above {} {} (a test's limit)", kMaxAllocationBytesEnv,
                            max_bytes));
    }
    if (bytes < kCheckedAllocationBytes) return;
    int64_t available;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      available = available_memory_bytes(state.cgroups);
    }
    if (available >= 0 && bytes > available - kAllocationMargin) {
      refuse(n, fmt::format("refused before the kernel's OOM killer: {} available, and {} kept "
                            "free (auto_find_batch_size)",
                            mib(available), mib(kAllocationMargin)));
    }
  }

  c10::Allocator* inner_;
};

// Wraps LibTorch's CPU allocator, once per process. False when another allocator of a higher
// priority keeps its place (the check then cannot see LibTorch's allocations).
bool install_checked_allocator() {
  static const bool installed = [] {
    c10::Allocator* inner = c10::GetCPUAllocator();
    static CheckedCpuAllocator* wrapper = new CheckedCpuAllocator(inner);  // lives for good
    c10::SetCPUAllocator(wrapper, /*priority=*/0);
    return c10::GetCPUAllocator() == wrapper;
  }();
  return installed;
}

}  // namespace

int64_t max_allocation_bytes_from_env() {
  const char* text = std::getenv(kMaxAllocationBytesEnv);
  if (!text) return 0;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || errno == ERANGE || value <= 0) {
    throw InputError(fmt::format(
        "environment variable {}: '{}' is not a byte count (a whole number above 0; for tests)",
        kMaxAllocationBytesEnv, text));
  }
  return value;
}

AllocationCheck::AllocationCheck() {
  CheckState& state = check_state();
  const int64_t max_bytes = max_allocation_bytes_from_env();
  if (!install_checked_allocator()) {
    base::warn_once(
        "auto_find_batch_size: another CPU allocator has LibTorch's place; running out of memory "
        "on the CPU is not checked (the kernel's OOM killer may end the run instead)");
  }
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.alive.load() == 0) state.cgroups = cgroup_memory_files();
  }
  state.max_bytes = max_bytes;
  ++state.alive;
}

AllocationCheck::~AllocationCheck() { --check_state().alive; }

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error)) return true;
  if (dynamic_cast<const std::bad_alloc*>(&error)) return true;
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  if (!c10_error) return false;
  const std::string& text = c10_error->what_without_backtrace();
  for (const char* words : {" out of memory.", "DefaultCPUAllocator: can't allocate memory",
                            "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED."}) {
    if (text.find(words) != std::string::npos) return true;
  }
  return false;
}

}  // namespace trainer::runtime
