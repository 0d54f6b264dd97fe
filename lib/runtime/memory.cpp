// The resident set and its peak from /proc/self (statm, status, clear_refs), and the memory
// available from /proc/meminfo and the cgroup's files (see memory.h).
#include "lib/runtime/memory.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace trainer::runtime {
namespace {

// The number after `key` in a "Key:   123 kB" line of a /proc file, times `unit`; -1 if absent.
int64_t proc_field(const char* path, const std::string& key, int64_t unit) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() ||
        line[key.size()] != ':') {
      continue;
    }
    return std::strtoll(line.c_str() + key.size() + 1, nullptr, 10) * unit;
  }
  return -1;
}

// A file holding one number ("max" and anything unreadable: -1).
int64_t number_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text[0] < '0' || text[0] > '9') return -1;
  return std::strtoll(text.c_str(), nullptr, 10);
}

// The value of `key` in a memory.stat file ("key value" lines); 0 if absent.
int64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  int64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return 0;
}

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The cgroup folders from `base` + `path` up to `base` (only `base` where the path is not
// there, as inside a cgroup namespace whose root is mounted at `base`).
std::vector<std::string> folders_up(const std::string& base, std::string path) {
  std::vector<std::string> out;
  if (!is_dir(base + path)) path = "";
  while (!path.empty() && path != "/") {
    out.push_back(base + path);
    path = path.substr(0, path.find_last_of('/'));
  }
  out.push_back(base);
  return out;
}

// Values from 2^62 up are v1's "no limit" (9223372036854771712, the page-rounded maximum).
constexpr int64_t kNoLimit = int64_t{1} << 62;

}  // namespace

int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

ResidentPeak::~ResidentPeak() {
  if (running_) stop();
}

void ResidentPeak::start() {
  if (running_) stop();
  running_ = true;
  at_start_ = resident_bytes();
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  exact_ = fd >= 0 && ::write(fd, "5", 1) == 1;
  if (fd >= 0) ::close(fd);
  if (exact_) return;
  sampled_peak_ = at_start_;
  sampling_ = true;
  sampler_ = std::thread([this] {
    while (sampling_.load(std::memory_order_relaxed)) {
      const int64_t now = resident_bytes();
      if (now > sampled_peak_.load(std::memory_order_relaxed)) sampled_peak_ = now;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
}

int64_t ResidentPeak::stop() {
  if (!running_) return 0;
  running_ = false;
  const int64_t now = resident_bytes();
  int64_t peak = std::max(now, at_start_);
  if (exact_) {
    peak = std::max(peak, proc_field("/proc/self/status", "VmHWM", 1024));
  } else {
    sampling_ = false;
    sampler_.join();
    peak = std::max(peak, sampled_peak_.load());
  }
  return peak;
}

std::vector<CgroupMemoryFiles> cgroup_memory_files() {
  std::vector<CgroupMemoryFiles> out;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // "hierarchy-id:controllers:path"; v2's line is "0::path".
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) {
      // Unified at /sys/fs/cgroup, or beside v1 (the hybrid layout) at /sys/fs/cgroup/unified.
      std::string base = "/sys/fs/cgroup";
      if (!is_file(base + "/cgroup.controllers")) base += "/unified";
      for (const std::string& dir : folders_up(base, path)) {
        if (number_file(dir + "/memory.max") < 0) continue;  // "max", or no memory controller
        out.push_back({dir + "/memory.max", dir + "/memory.current", dir + "/memory.stat", true});
      }
      continue;
    }
    std::stringstream names(controllers);
    std::string name;
    bool memory = false;
    while (std::getline(names, name, ',')) memory = memory || name == "memory";
    if (!memory) continue;
    for (const std::string& dir : folders_up("/sys/fs/cgroup/memory", path)) {
      const int64_t limit = number_file(dir + "/memory.limit_in_bytes");
      if (limit < 0 || limit >= kNoLimit) continue;
      out.push_back({dir + "/memory.limit_in_bytes", dir + "/memory.usage_in_bytes",
                     dir + "/memory.stat", false});
    }
  }
  return out;
}

int64_t available_memory_bytes(const std::vector<CgroupMemoryFiles>& cgroups) {
  int64_t available = proc_field("/proc/meminfo", "MemAvailable", 1024);
  for (const CgroupMemoryFiles& files : cgroups) {
    const int64_t limit = number_file(files.limit);
    const int64_t usage = number_file(files.usage);
    if (limit < 0 || usage < 0) continue;
    // The page cache the kernel drops before it kills counts as free, as MemAvailable counts it.
    const int64_t reclaimable =
        stat_value(files.stat, files.v2 ? "inactive_file" : "total_inactive_file");
    const int64_t headroom = limit - std::max<int64_t>(0, usage - reclaimable);
    available = available < 0 ? headroom : std::min(available, headroom);
  }
  return available;
}

}  // namespace trainer::runtime
