// The process's memory readings: the resident set grows by what is touched, ResidentPeak sees a
// peak that was unmapped before stop(), and the memory available is MemAvailable or a cgroup's
// headroom (limit less usage, the inactive page cache counted as free), whichever is less.
#include "lib/runtime/memory.h"

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <sys/mman.h>

#include "tests/test_util.h"

namespace trainer {
namespace memory_test {

constexpr int64_t kMiB = int64_t{1} << 20;

using Touched = testing::TouchedMemory;

int64_t meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  int64_t kb = 0;
  std::string unit;
  while (in >> name >> kb) {
    std::getline(in, unit);
    if (name == key + ":") return kb * 1024;
  }
  return -1;
}

TEST(ResidentMemory, GrowsByWhatIsTouched) {
  const int64_t before = runtime::resident_bytes();
  ASSERT_GT(before, 0);
  Touched block(64 * kMiB);
  const int64_t with = runtime::resident_bytes();
  EXPECT_GE(with - before, 63 * kMiB);
  EXPECT_LE(with - before, 72 * kMiB);
  block.unmap();
  EXPECT_LE(runtime::resident_bytes() - before, 8 * kMiB);
}

TEST(ResidentMemory, ThePeakOfAStretchCountsMemoryGoneBeforeItsEnd) {
  runtime::ResidentPeak peak;
  EXPECT_EQ(peak.stop(), 0);  // never started
  peak.start();
  const int64_t start = runtime::resident_bytes();
  {
    Touched block(96 * kMiB);
    // Long enough for the sampling thread, where the kernel's mark cannot be reset.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int64_t after = runtime::resident_bytes();
  const int64_t highest = peak.stop();
  EXPECT_GE(highest - start, 95 * kMiB) << (peak.exact() ? "VmHWM" : "sampled");
  EXPECT_LE(highest - start, 110 * kMiB);
  EXPECT_GE(highest, after);
  // A second stretch starts from what is resident now, not from the first one's peak.
  peak.start();
  EXPECT_LE(peak.stop() - runtime::resident_bytes(), 8 * kMiB);
}

TEST(AvailableMemory, IsMemAvailableOrTheCgroupsHeadroomWhicheverIsLess) {
  // This machine's own cgroups (whatever they are) never raise it above MemTotal.
  const int64_t here = runtime::available_memory_bytes(runtime::cgroup_memory_files());
  EXPECT_GT(here, 0);
  EXPECT_LE(here, meminfo("MemTotal"));
  // The cgroups below are nearer their limits than the machine (MemAvailable moves meanwhile).
  ASSERT_GT(meminfo("MemAvailable"), 1024 * kMiB) << "the machine is too full for this test";

  testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  // v2: a 1000 MiB limit, 700 MiB used of which 200 MiB inactive page cache: 500 MiB left.
  runtime::CgroupMemoryFiles v2{write("max", "1048576000\n"), write("current", "734003200\n"),
                                write("stat", "anon 1\nactive_file 5\ninactive_file 209715200\n"),
                                true};
  EXPECT_EQ(runtime::available_memory_bytes({v2}), 500 * kMiB);
  // v1 reads total_inactive_file (the hierarchy's); a parent nearer its limit decides: 2000 MiB
  // used of 2048, 100 of them inactive page cache.
  runtime::CgroupMemoryFiles v1{write("limit1", "2147483648\n"), write("usage1", "2097152000\n"),
                                write("stat1", "inactive_file 1\ntotal_inactive_file 104857600\n"),
                                false};
  EXPECT_EQ(runtime::available_memory_bytes({v2, v1}), 148 * kMiB);
  // Unreadable files are passed over: MemAvailable alone.
  runtime::CgroupMemoryFiles gone{dir.file("none"), dir.file("none"), dir.file("none"), true};
  EXPECT_GT(runtime::available_memory_bytes({gone}), 1000 * kMiB);
}

}  // namespace memory_test
}  // namespace trainer
