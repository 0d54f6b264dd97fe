// torch.distributed's process-group API in C++: init_process_group from the launcher's
// environment (or the tutorial's explicit rank and world size), rendezvous through c10d's
// TCPStore, Gloo or NCCL underneath, and the collectives with a timeout each.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>
#include <torch/types.h>

#include "lib/distributed/env.h"

namespace c10d {
class ProcessGroup;
}

namespace trainer::dist {

// A collective or rendezvous that failed at run time (a peer died, a timeout passed).
class DistError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Transformers' ddp_timeout default.
inline constexpr std::chrono::seconds kDefaultTimeout{1800};

struct InitOptions {
  std::string backend = "gloo";                         // "gloo" or "nccl"
  int rank = -1;                                        // -1: from the environment
  int world_size = -1;                                  // -1: from the environment
  std::chrono::milliseconds timeout = kDefaultTimeout;  // every collective and the rendezvous
};

// Joins the default process group. Rank 0 hosts the TCPStore at MASTER_ADDR:MASTER_PORT and the
// others connect, except under torchrun's agent store, where all connect and keys are prefixed
// with /worker/attempt_<TORCHELASTIC_RESTART_COUNT>. Throws InputError for a bad backend name,
// a busy port or bad environment; DistError when the rendezvous fails or times out.
void init_process_group(const InitOptions& options = {});
// The tutorial's setup(rank, world_size): dist.init_process_group(backend, rank=, world_size=).
void init_process_group(const std::string& backend, int rank, int world_size);
// Leaves the default group (the tutorial's cleanup()). A no-op when not initialised.
void destroy_process_group();
bool is_initialized();

// This process's place: 0 and 1 when not initialised, as a single process.
int get_rank();
int get_world_size();
int get_local_rank();
const DistEnv& environment();

enum class ReduceOp { kSum, kAvg, kMax, kMin };

// The collectives of the default group; each waits for completion (or the timeout) and throws
// DistError naming the collective, this rank and the cause. Without a group they are the
// identity, as for one process.
void barrier();
void all_reduce(torch::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
void broadcast(torch::Tensor& tensor, int src = 0);
std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor);

// A collective started without waiting for it (a prefetch): wait() blocks until it is done and
// throws DistError as the collectives above; a second wait() does nothing.
class Pending {
 public:
  Pending() = default;
  explicit Pending(std::function<void()> wait) : wait_(std::move(wait)) {}
  void wait() {
    auto wait = std::move(wait_);
    wait_ = nullptr;
    if (wait) wait();
  }
  bool active() const { return static_cast<bool>(wait_); }

 private:
  std::function<void()> wait_;
};

// all_gather_into_tensor: `output` ([world * n], contiguous) gets every rank's `input` ([n]) in
// rank order. `input` may be this rank's chunk of `output`.
Pending all_gather_into_tensor_async(torch::Tensor output, torch::Tensor input);
void all_gather_into_tensor(torch::Tensor output, torch::Tensor input);
// reduce_scatter_tensor with a sum: `output` ([n]) gets this rank's chunk of the sum over ranks of
// `input` ([world * n]). Gloo composes it (an all-reduce of a copy of the input, then this rank's
// chunk); NCCL has its own.
void reduce_scatter_tensor(torch::Tensor output, torch::Tensor input);
// gather: on `dst`, the returned tensors are every rank's `input` (same shape everywhere) in rank
// order; elsewhere, nothing.
std::vector<torch::Tensor> gather(const torch::Tensor& input, int dst = 0);

// The default group, for DistributedDataParallel. Throws std::logic_error when not initialised.
c10::intrusive_ptr<c10d::ProcessGroup> default_group();

class SharedMemoryAllReduce;
// Collective: a shared-memory all-reduce of the default group's ranks (shm_all_reduce.h) when the
// group is Gloo's and every rank shares this machine; else null on every rank.
std::unique_ptr<SharedMemoryAllReduce> shared_memory_all_reduce();

}  // namespace trainer::dist
