// This process's memory as Linux reports it: the resident set now and its peak over a stretch of
// time (the Trainer's memory metrics), and the memory still available to it before the kernel's
// OOM killer would act (the allocation check of auto_find_batch_size). Torch-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace trainer::runtime {

// Bytes of this process's resident set now (VmRSS of /proc/self/status: what psutil's
// memory_info().rss reads). 0 where /proc cannot be read.
int64_t resident_bytes();

// The peak of the resident set between start() and stop(). Exact where Linux lets the process
// reset its high-water mark (writing "5" to /proc/self/clear_refs resets VmHWM, which the kernel
// raises to VmRSS before any memory is unmapped): VmHWM at stop() is then the peak. Where that
// write fails, a thread samples resident_bytes() every 100 microseconds until stop() (a peak
// shorter than that may be missed, as Transformers' sampling thread may miss one). One stretch
// at a time per process: start() resets the process-wide mark.
class ResidentPeak {
 public:
  ResidentPeak() = default;
  ~ResidentPeak();
  ResidentPeak(const ResidentPeak&) = delete;
  ResidentPeak& operator=(const ResidentPeak&) = delete;

  // Begins a stretch (ends an unfinished one first).
  void start();
  // Ends the stretch and returns its peak in bytes: at least resident_bytes() now and at
  // start(). 0 without a start().
  int64_t stop();
  // Whether the last start() reset the kernel's mark (false: the sampling thread measures).
  bool exact() const { return exact_; }

 private:
  bool running_ = false;
  bool exact_ = false;
  int64_t at_start_ = 0;
  std::atomic<bool> sampling_{false};
  std::atomic<int64_t> sampled_peak_{0};
  std::thread sampler_;
};

// Where this process's cgroup keeps its memory limit and usage (v2: memory.max and
// memory.current; v1: memory.limit_in_bytes and memory.usage_in_bytes), for its own cgroup and
// each one above it that sets a limit. Empty outside a cgroup with a limit.
struct CgroupMemoryFiles {
  std::string limit;
  std::string usage;
  std::string stat;  // memory.stat: the reclaimable page cache counted in usage
  bool v2 = true;
};
std::vector<CgroupMemoryFiles> cgroup_memory_files();

// The bytes this process may still take: MemAvailable of /proc/meminfo, or less where a cgroup's
// limit is nearer (its limit minus its usage, less the inactive page cache the kernel reclaims
// before it kills). -1 where neither can be read. `cgroups` as cgroup_memory_files() found them.
int64_t available_memory_bytes(const std::vector<CgroupMemoryFiles>& cgroups);

}  // namespace trainer::runtime
