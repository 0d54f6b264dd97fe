// DDP's gradient all-reduce through shared memory when every rank of the group runs on this
// machine: each rank writes its gradients into a segment all of them map, sums its share of every
// rank's, and reads the sums back; no socket, no copy through the kernel.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace trainer::dist {

class SharedMemoryAllReduce {
 public:
  // How the ranks agree on a segment: publish(key, value) on the group's store, and read(key),
  // which waits for a key another rank publishes. The keys are the same for every segment: the
  // caller keeps segments apart (a prefix of its own for each).
  struct Exchange {
    std::function<void(const std::string& key, const std::string& value)> publish;
    std::function<std::string(const std::string& key)> read;
  };

  // Collective (every rank of the group calls it at the same point): a segment when all `world`
  // ranks share this machine (host name and boot id) and it could be made (/dev/shm has room);
  // else null on every rank, and the caller keeps its process group's all-reduce. `timeout` bounds
  // every wait for another rank.
  static std::unique_ptr<SharedMemoryAllReduce> create(int rank, int world,
                                                       std::chrono::milliseconds timeout,
                                                       const Exchange& exchange);
  ~SharedMemoryAllReduce();
  SharedMemoryAllReduce(const SharedMemoryAllReduce&) = delete;
  SharedMemoryAllReduce& operator=(const SharedMemoryAllReduce&) = delete;

  // In place: data[i] becomes the sum over ranks of their data[i] * (float) (1 / world), as DDP
  // averages gradients (each scaled as the Reducer scales it, then summed in rank order). Every
  // rank calls it with the same n. Throws DistError when another rank does not arrive within the
  // timeout or has ended.
  void mean(float* data, size_t n);

 private:
  SharedMemoryAllReduce(int rank, int world, std::chrono::milliseconds timeout, void* base,
                        size_t bytes, size_t slot_floats);
  // Waits until every rank has passed barrier number `count` (this rank's own arrival included).
  void barrier(uint64_t count);
  float* slot(uint64_t parity, int rank) const;

  int rank_;
  int world_;
  std::chrono::milliseconds timeout_;
  void* base_;
  size_t bytes_;
  size_t slot_floats_;   // what a rank's slot holds: mean() goes through in pieces of this size
  uint64_t pieces_ = 0;  // pieces averaged so far (their barriers are numbered from them)
};

}  // namespace trainer::dist
