// DistributedDataParallel: wraps a model so that every rank takes the same optimizer step.
// Parameters and buffers are broadcast from rank 0 when wrapped, every rank's model is checked to
// have the same parameter names and shapes, and gradients are averaged during backward by c10d's
// Reducer, the engine Python's DDP drives: buckets (bucket_cap_mb) whose all-reduce starts while
// backward is still running.
#pragma once

#include <memory>

#include "lib/models/model.h"

namespace c10d {
class Reducer;
}

namespace trainer::dist {

struct DdpOptions {
  // Gradient bucket size, as Transformers' ddp_bucket_cap_mb / PyTorch's bucket_cap_mb.
  double bucket_cap_mb = 25;
  // The first bucket's size: small, so the first all-reduce starts early (PyTorch: 1 MiB).
  double first_bucket_cap_mb = 1;
  // Re-broadcast buffers from rank 0 at every forward in training mode.
  bool broadcast_buffers = true;
  bool find_unused_parameters = false;
  // PyTorch's static_graph: the same parameters are used (or not) every iteration, so the Reducer
  // learns which after the first and needs no search for unused ones (Transformers'
  // ddp_static_graph).
  bool static_graph = false;
  // When every rank runs on this machine over Gloo, the gradients are averaged through a
  // shared-memory segment instead of Gloo's sockets (the same sums: each gradient times 1/world
  // as the Reducer scales it, then added in rank order). False keeps Gloo's all-reduce.
  bool shared_memory = true;
};

// A data-parallel wrapper whose backward synchronises gradients unless told not to (no_sync).
class GradSync {
 public:
  virtual ~GradSync() = default;
  virtual bool require_backward_grad_sync() const = 0;
  virtual void set_require_backward_grad_sync(bool sync) = 0;
};

class DistributedDataParallel : public models::ModelWrapper, public GradSync {
 public:
  // Wraps `module` (registered as "module", as in PyTorch) on the default process group, which
  // must be initialised. Throws DistError naming the first parameter whose name or shape differs
  // between this rank and rank 0.
  explicit DistributedDataParallel(std::shared_ptr<models::Model> module, DdpOptions options = {});
  ~DistributedDataParallel() override;

  // The wrapped module's forward; in training it prepares the Reducer, so the following backward
  // averages gradients across ranks (unless inside no_sync()).
  models::ModelOutput forward(const data::Batch& inputs) override;
  torch::Tensor forward(const torch::Tensor& x) override;

  models::Model& module() { return *wrapped_; }
  // The number of gradient elements in each bucket, in the order their all-reduces start: one
  // bucket until the first backward has shown the order gradients become ready in, then buckets
  // of first_bucket_cap_mb and bucket_cap_mb in that order.
  std::vector<int64_t> bucket_sizes() const;
  // Whether float32 gradients are averaged through shared memory (DdpOptions::shared_memory, and
  // every rank on this machine over Gloo).
  bool shares_memory() const { return shares_memory_; }
  std::shared_ptr<models::Model> module_ptr() const { return wrapped_; }

  // While a NoSync lives, backward accumulates gradients locally without communication (for
  // gradient accumulation); the first backward after it synchronises the accumulated sum.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp)
        : ddp_(ddp), previous_(ddp.require_backward_grad_sync_) {
      ddp_.require_backward_grad_sync_ = false;
    }
    ~NoSync() { ddp_.require_backward_grad_sync_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  // Whether the next backward synchronises gradients (false inside no_sync()).
  bool require_backward_grad_sync() const override { return require_backward_grad_sync_; }
  void set_require_backward_grad_sync(bool sync) override { require_backward_grad_sync_ = sync; }

 private:
  void sync_buffers();
  // Before the module's forward: the Reducer prepared, buffers broadcast. Returns whether the
  // following backward synchronises.
  bool before_forward();
  // After it: the Reducer told which outputs the backward starts from.
  void after_forward(bool sync, std::vector<torch::Tensor> outputs);

  DdpOptions options_;
  std::shared_ptr<c10d::Reducer> reducer_;
  bool shares_memory_ = false;
  int64_t iterations_ = 0;  // forwards with gradients synchronised (PyTorch's num_iterations)
  bool require_backward_grad_sync_ = true;
};

// Checks that every rank has the same parameter names and shapes as rank 0. Throws DistError on
// every rank, naming the first rank and parameter that differ.
void verify_same_parameters(const torch::nn::Module& module);

}  // namespace trainer::dist
