// DDP's gradient all-reduce through a shared-memory segment of the ranks of one machine.
//
// The segment: a header with one cache line per rank (how many barriers it has passed, its
// process id), then two sets (a piece's parity) of one slot per rank. A piece of the gradients
// goes: each rank writes its values times 1/world into its slot; barrier; each rank sums its share
// of the piece over every rank's slot (in rank order) into its own slot; barrier; each rank reads
// every share back. The next piece uses the other set, so a rank writing piece k + 2 cannot meet a
// rank still reading piece k (it passed piece k + 1's barriers after reading).
#include "lib/distributed/shm_all_reduce.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/distributed/process_group.h"

namespace trainer::dist {
// A named namespace: this file shares a unity translation unit with others.
namespace shm {
namespace {

constexpr size_t kLine = 64;
constexpr uint64_t kMagic = 0x7472616e53484d31ULL;  // "tranSHM1"

struct alignas(kLine) RankState {
  std::atomic<uint64_t> arrived;
  std::atomic<int32_t> pid;
};
static_assert(sizeof(RankState) == kLine);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

struct Header {
  uint64_t magic;
  uint64_t world;
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t header_bytes(int world) {
  return round_up(kLine + kLine * static_cast<size_t>(world), static_cast<size_t>(4096));
}

RankState* rank_states(void* base) {
  return reinterpret_cast<RankState*>(static_cast<char*>(base) + kLine);
}

// This machine: its host name and this boot's id (two containers may share a host name).
std::string machine_key() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return fmt::format("{}/{}", host, boot);
}

}  // namespace
}  // namespace shm

std::unique_ptr<SharedMemoryAllReduce> SharedMemoryAllReduce::create(
    int rank, int world, std::chrono::milliseconds timeout, const Exchange& exchange) {
  if (world < 2) return nullptr;
  const std::string machine = shm::machine_key();
  exchange.publish("machine/" + std::to_string(rank), machine);
  for (int r = 0; r < world; ++r) {
    if (exchange.read("machine/" + std::to_string(r)) != machine) return nullptr;
  }
  // 32 MiB in all at most (Docker's /dev/shm is 64 MiB), between 256 KiB and 4 MiB a slot.
  const size_t slot_bytes = std::clamp<size_t>(
      (32u << 20) / (2 * static_cast<size_t>(world)) / 4096 * 4096, 256u << 10, 4u << 20);
  const size_t slot_floats = slot_bytes / sizeof(float);
  const size_t bytes = shm::header_bytes(world) + 2 * static_cast<size_t>(world) * slot_bytes;
  std::string name;
  int fd = -1;
  if (rank == 0) {
    std::random_device random;
    name = fmt::format("/trainer-ddp-{}-{:08x}", ::getpid(), random());
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    // posix_fallocate, not only ftruncate: a full /dev/shm is a refusal now, not a SIGBUS later.
    if (fd >= 0 && ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0) {
      ::close(fd);
      fd = -1;
      ::shm_unlink(name.c_str());
    }
    exchange.publish("name", fd >= 0 ? name : "");
  } else {
    name = exchange.read("name");
    if (!name.empty()) fd = ::shm_open(name.c_str(), O_RDWR, 0600);
    struct stat info {};
    if (fd >= 0 && (::fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) != bytes)) {
      ::close(fd);
      fd = -1;
    }
  }
  void* base = MAP_FAILED;
  if (fd >= 0) {
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
  }
  if (base != MAP_FAILED) {
    auto* header = static_cast<shm::Header*>(base);
    if (rank == 0) *header = shm::Header{shm::kMagic, static_cast<uint64_t>(world)};
    shm::rank_states(base)[rank].pid.store(static_cast<int32_t>(::getpid()));
  }
  // Every rank says whether it joined; all use the segment or none does.
  exchange.publish("joined/" + std::to_string(rank), base != MAP_FAILED ? "1" : "0");
  bool all = true;
  for (int r = 0; r < world; ++r) all = exchange.read("joined/" + std::to_string(r)) == "1" && all;
  // Every rank has mapped it (or given up): the name goes, the memory stays while mapped, and
  // nothing is left in /dev/shm whatever happens to the ranks.
  if (rank == 0 && !name.empty()) ::shm_unlink(name.c_str());
  if (!all) {
    if (base != MAP_FAILED) ::munmap(base, bytes);
    return nullptr;
  }
  const auto* header = static_cast<const shm::Header*>(base);
  if (header->magic != shm::kMagic || header->world != static_cast<uint64_t>(world)) {
    ::munmap(base, bytes);
    throw DistError(
        fmt::format("the shared-memory segment of rank 0 is not this run's (rank {})", rank));
  }
  return std::unique_ptr<SharedMemoryAllReduce>(
      new SharedMemoryAllReduce(rank, world, timeout, base, bytes, slot_floats));
}

SharedMemoryAllReduce::SharedMemoryAllReduce(int rank, int world, std::chrono::milliseconds timeout,
                                             void* base, size_t bytes, size_t slot_floats)
    : rank_(rank),
      world_(world),
      timeout_(timeout),
      base_(base),
      bytes_(bytes),
      slot_floats_(slot_floats) {}

SharedMemoryAllReduce::~SharedMemoryAllReduce() { ::munmap(base_, bytes_); }

float* SharedMemoryAllReduce::slot(uint64_t parity, int rank) const {
  char* slots = static_cast<char*>(base_) + shm::header_bytes(world_);
  const size_t index = parity * static_cast<size_t>(world_) + static_cast<size_t>(rank);
  return reinterpret_cast<float*>(slots + index * slot_floats_ * sizeof(float));
}

void SharedMemoryAllReduce::barrier(uint64_t count) {
  shm::RankState* ranks = shm::rank_states(base_);
  ranks[rank_].arrived.store(count, std::memory_order_release);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < world_; ++r) {
    // Yield the core a while (the other rank is usually close), then sleep: ranks may outnumber
    // the cores, and a waiting rank must not take one from a working rank.
    for (uint64_t tries = 0; ranks[r].arrived.load(std::memory_order_acquire) < count; ++tries) {
      if (tries < 2000) {
        ::sched_yield();
        continue;
      }
      struct timespec pause {
        0, 50'000
      };
      ::nanosleep(&pause, nullptr);
      if (tries % 256 != 0) continue;
      const int32_t pid = ranks[r].pid.load();
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
        throw DistError(fmt::format(
            "all_reduce (shared memory) failed on rank {} of {}: rank {} (process {}) has ended",
            rank_, world_, r, pid));
      }
      if (std::chrono::steady_clock::now() - start > timeout_) {
        throw DistError(fmt::format(
            "all_reduce (shared memory) failed on rank {} of {} (timeout {} s): rank {} did not "
            "arrive",
            rank_, world_, static_cast<double>(timeout_.count()) / 1000.0, r));
      }
    }
  }
}

void SharedMemoryAllReduce::mean(float* data, size_t n) {
  // As the Reducer scales a gradient into its bucket without a hook: times (float) 1/world.
  const auto scale = static_cast<float>(1.0 / world_);
  for (size_t offset = 0; offset < n; offset += slot_floats_) {
    const size_t m = std::min(slot_floats_, n - offset);
    // Two barriers a piece: piece k's are numbers 2k + 1 and 2k + 2.
    const uint64_t piece = pieces_++;
    const uint64_t parity = piece & 1u;
    float* mine = slot(parity, rank_);
    const float* in = data + offset;
    for (size_t i = 0; i < m; ++i) mine[i] = in[i] * scale;
    barrier(2 * piece + 1);
    // Shares of whole cache lines, so that no two ranks write one line.
    const size_t share =
        shm::round_up((m + static_cast<size_t>(world_) - 1) / world_, shm::kLine / 4);
    auto bounds = [&](int r) {
      const size_t lo = std::min(m, static_cast<size_t>(r) * share);
      return std::pair<size_t, size_t>(lo, std::min(m, lo + share));
    };
    const auto [lo, hi] = bounds(rank_);
    // In blocks, so that the sums (in rank order) vectorise and this rank's own slot is read
    // before its block is written.
    constexpr size_t kBlock = 1024;
    float sum[kBlock];
    for (size_t begin = lo; begin < hi; begin += kBlock) {
      const size_t count = std::min(kBlock, hi - begin);
      std::memcpy(sum, slot(parity, 0) + begin, count * sizeof(float));
      for (int r = 1; r < world_; ++r) {
        const float* other = slot(parity, r) + begin;
        for (size_t i = 0; i < count; ++i) sum[i] += other[i];
      }
      std::memcpy(mine + begin, sum, count * sizeof(float));
    }
    barrier(2 * piece + 2);
    for (int r = 0; r < world_; ++r) {
      const auto [from, to] = bounds(r);
      if (to > from) {
        std::memcpy(data + offset + from, slot(parity, r) + from, (to - from) * sizeof(float));
      }
    }
  }
}

}  // namespace trainer::dist
