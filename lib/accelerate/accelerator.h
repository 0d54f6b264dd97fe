// The Accelerator: Accelerate's layer between a training loop and torch.distributed. Built from
// the launcher's environment, it picks the device, joins the process group when there are several
// processes, and prepares a model (DDP, autocast), an optimizer (steps only when gradients are
// synchronised, fp16 loss scaling) and data loaders (each process its share of the batches, on
// the device). backward(), accumulate(), clip_grad_norm_() and the collectives (gather,
// gather_for_metrics, reduce, pad_across_processes) make the same loop correct on 1 or N
// processes:
//   Accelerator accelerator;
//   auto [loader, model, optimizer] = accelerator.prepare(train_loader, model, optimizer);
//   for (data::Batch batch : *loader) {
//     accelerator.backward(torch::nll_loss(model->forward(batch.at("x")), batch.at("labels")));
//     optimizer->step();
//     optimizer->zero_grad();
//   }
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/arg.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include "lib/accelerate/data_loader.h"
#include "lib/accelerate/optimizer.h"
#include "lib/accelerate/state.h"
#include "lib/data/dataloader.h"
#include "lib/distributed/ddp.h"
#include "lib/distributed/fsdp.h"
#include "lib/distributed/process_group.h"
#include "lib/models/model.h"

namespace trainer {

class GradScaler;

// Accelerate's DistributedDataParallelKwargs: how a prepared model's DDP is built; an unset field
// keeps PyTorch's default (25 MiB buckets, no unused-parameter search, buffers broadcast).
struct DistributedDataParallelKwargs {
  std::optional<double> bucket_cap_mb;
  std::optional<bool> find_unused_parameters;
  std::optional<bool> broadcast_buffers;
  std::optional<bool> static_graph;
};

// Accelerate's FullyShardedDataParallelPlugin: the sharding prepare() applies (fsdp.h), and the
// slices of the parameters each process holds.
using FullyShardedDataParallelPlugin = dist::FsdpOptions;
using ShardingStrategy = dist::ShardingStrategy;
using ShardedSlice = dist::LocalSlice;

struct AcceleratorOptions {
  // "no", "bf16" (autocast on CPU and CUDA) or "fp16" (CUDA only: autocast and a GradScaler).
  TORCH_ARG(std::string, mixed_precision) = "no";
  // backward() divides the loss by it; accumulate() synchronises every this many micro-batches.
  TORCH_ARG(int64_t, gradient_accumulation_steps) = 1;
  // Use the CPU even where CUDA is available (Transformers' use_cpu).
  TORCH_ARG(bool, cpu) = false;
  // Process-group backend: "" picks nccl on CUDA and gloo on CPU.
  TORCH_ARG(std::string, backend) = "";
  // Rendezvous and every collective (Transformers' ddp_timeout).
  TORCH_ARG(std::chrono::milliseconds, timeout) = dist::kDefaultTimeout;
  // DDP's bucket size, unused-parameter search and buffer broadcast.
  TORCH_ARG(DistributedDataParallelKwargs, ddp_kwargs) = {};
  // Sharded data parallel instead of DDP (FSDP's full_shard, shard_grad_op, or ZeRO stage 1);
  // unset: DDP with several processes.
  TORCH_ARG(std::optional<dist::FsdpOptions>, fsdp) = std::nullopt;
  // On a CUDA device, prepare() keeps a data set that fits (at most half the free device memory)
  // on the device: sampled, gathered and normalised there, no host copy per batch. false: host
  // memory, each batch copied over.
  TORCH_ARG(bool, data_on_device) = true;
};

// Turns a DDP or FSDP model's gradient synchronisation off for its lifetime (no-op without one).
class SyncGuard {
 public:
  SyncGuard() = default;
  explicit SyncGuard(dist::GradSync* ddp);
  SyncGuard(SyncGuard&& other) noexcept;
  SyncGuard& operator=(SyncGuard&&) = delete;
  SyncGuard(const SyncGuard&) = delete;
  ~SyncGuard();

 private:
  dist::GradSync* ddp_ = nullptr;
  bool previous_ = true;
};

// How reduce() combines the processes' tensors.
enum class Reduction { kSum, kMean, kMax };

class Accelerator {
 public:
  // Reads the launcher's environment (torchrun's, SLURM's, Open MPI's; InputError for bad
  // values), picks the device (cuda:<LOCAL_RANK> when CUDA is available and not options.cpu,
  // else CPU) and, with more than one process, joins the default process group (reused when
  // already initialised; left when the last Accelerator that joined it goes). Throws InputError
  // for a bad mixed_precision, fp16 without CUDA, or a LOCAL_RANK without a CUDA device;
  // DistError when the rendezvous fails.
  explicit Accelerator(AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  const torch::Device& device() const { return device_; }
  int num_processes() const { return num_processes_; }
  int process_index() const { return process_index_; }
  int local_process_index() const { return local_process_index_; }
  bool is_main_process() const { return process_index_ == 0; }
  bool is_local_main_process() const { return local_process_index_ == 0; }
  const std::string& mixed_precision() const { return options_.mixed_precision(); }
  int64_t gradient_accumulation_steps() const { return options_.gradient_accumulation_steps(); }
  const AcceleratorOptions& options() const { return options_; }
  const GradientState& gradient_state() const { return *state_; }
  // How many times the launcher has restarted this run's processes (torchrun's
  // TORCHELASTIC_RESTART_COUNT; 0 on the first attempt and without a launcher).
  int restart_count() const { return restart_count_; }
  // An elastic run's gradient accumulation for this world size: `accumulation` (meant for the
  // world size of the most nodes) times that world size over this one, so the total batch stays
  // (4 ranks x 1 become 2 x 2). `accumulation` itself outside an elastic run. Throws InputError
  // when the ratio is not a whole number. Read before an Accelerator exists (it takes the
  // result).
  static int64_t elastic_accumulation(int64_t accumulation);

  // The model on the device, wrapped in DistributedDataParallel with more than one process, or in
  // FullyShardedDataParallel with the fsdp option (on any number), except with evaluation_mode;
  // run under autocast with mixed precision (outputs come back
  // as float32). Returns the model itself when nothing needs wrapping.
  std::shared_ptr<models::Model> prepare_model(std::shared_ptr<models::Model> model,
                                               bool evaluation_mode = false);
  std::shared_ptr<models::Model> prepare(std::shared_ptr<models::Model> model) {
    return prepare_model(std::move(model));
  }
  // With a sharded model prepared, the optimizer's parameters become this process's slices of
  // them (FSDP's use_orig_params), and each step is followed by the gather stages 1-2 need.
  std::shared_ptr<AcceleratedOptimizer> prepare(std::shared_ptr<torch::optim::Optimizer> optimizer);
  // Each process its share of the loader's batches, on the device; with data_on_device on a CUDA
  // device and no collator, over a copy of the data set held there (made once per data set and
  // reused) when it takes at most half the free device memory.
  std::shared_ptr<DataLoaderShard> prepare(const data::DataLoader& loader);
  // Several at once, as accelerator.prepare(a, b, ...) in Python: a tuple of the prepared objects
  // in the same order, for structured bindings.
  template <typename A, typename B, typename... Rest>
  auto prepare(A&& a, B&& b, Rest&&... rest) {
    // Braces: prepared left to right (DDP wraps models in the same order on every process).
    return std::tuple{prepare(std::forward<A>(a)), prepare(std::forward<B>(b)),
                      prepare(std::forward<Rest>(rest))...};
  }
  // The sharded model prepare_model() made last (null without fsdp, or once it is gone).
  std::shared_ptr<dist::FullyShardedDataParallel> sharded_model() const { return sharded_.lock(); }
  // Runs f with the full parameters of a sharded model in place (FSDP's summon_full_params; on
  // rank 0 only with rank0_only); every process calls it. Just f without sharding.
  void with_full_params(const std::function<void()>& f, bool rank0_only = false);
  // The model prepare_model() was given.
  std::shared_ptr<models::Model> unwrap_model(const std::shared_ptr<models::Model>& model) const;

  // loss / gradient_accumulation_steps, backpropagated (through the GradScaler with fp16).
  void backward(const torch::Tensor& loss);
  // Call once per micro-batch, around its forward and backward: counts micro-batches and decides
  // whether this one synchronises gradients (every gradient_accumulation_steps-th, and a prepared
  // loader's last batch); on the others DDP accumulates locally (no_sync) and the prepared
  // optimizer's step and zero_grad do nothing.
  [[nodiscard]] SyncGuard accumulate(models::Model& model);
  // DDP's no_sync for a prepared model: backward inside it does not synchronise.
  [[nodiscard]] SyncGuard no_sync(models::Model& model);
  bool sync_gradients() const { return state_->sync_gradients; }
  // For loops that count micro-batches themselves (the Trainer): whether the prepared
  // optimizers act on this micro-batch.
  void set_sync_gradients(bool sync) { state_->sync_gradients = sync; }
  // Divides the prepared optimizers' gradients by the fp16 loss scale (no-op otherwise).
  void unscale_gradients();
  // torch.nn.utils.clip_grad_norm_ of the (unscaled, synchronised) gradients: scales them so that
  // their global 2-norm is at most max_norm. Returns the norm before clipping as a tensor on the
  // device, without waiting for it.
  torch::Tensor clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm);

  // Every process's tensor concatenated along dim 0 in process order (0-dim tensors become one
  // row each). The first dimension may differ between processes; the others and the dtype must
  // not (std::invalid_argument naming both otherwise, on every process).
  torch::Tensor gather(const torch::Tensor& tensor);
  // gather() of per-example rows of the batch in flight from a prepared loader, without the rows
  // that only even out the processes: over a whole evaluation, the rows of every example exactly
  // once, in the single-process order. A tensor whose first dimension is not its process's batch
  // size, or one gathered after the iteration ended (see DataLoaderShard::end_iteration), is
  // gathered whole.
  torch::Tensor gather_for_metrics(const torch::Tensor& tensor);
  // Sum, mean or maximum over processes of a tensor of the same shape on each.
  torch::Tensor reduce(const torch::Tensor& tensor, Reduction reduction = Reduction::kSum);
  // The tensor padded with pad_index along `dim` to the largest size any process has there
  // (at the start with pad_first), so that tensors of different lengths can be gathered.
  torch::Tensor pad_across_processes(const torch::Tensor& tensor, int64_t dim = 0,
                                     int64_t pad_index = 0, bool pad_first = false);

  // Waits until every process reaches this point (a barrier; nothing with one process).
  void wait_for_everyone();
  // Runs `f` on the main process first, then on the others (for work whose result the others
  // reuse, like writing a cache). Returns f's result. If f throws on the main process, the
  // others still run f, and the exception is rethrown.
  template <typename F>
  auto main_process_first(F&& f) {
    return run_first(is_main_process(), std::forward<F>(f));
  }
  // The same per machine: the local main process first.
  template <typename F>
  auto local_main_process_first(F&& f) {
    return run_first(is_local_main_process(), std::forward<F>(f));
  }
  // Prints a line on the main process only.
  void print(const std::string& line) const;
  template <typename... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) const {
    if (is_main_process()) print(fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  template <typename F>
  auto run_first(bool first, F&& f) {
    if (!first) {
      wait_for_everyone();
      return f();
    }
    std::exception_ptr error;
    if constexpr (std::is_void_v<decltype(f())>) {
      try {
        f();
      } catch (...) {
        error = std::current_exception();
      }
      wait_for_everyone();
      if (error) std::rethrow_exception(error);
    } else {
      decltype(f()) result{};
      try {
        result = f();
      } catch (...) {
        error = std::current_exception();
      }
      wait_for_everyone();
      if (error) std::rethrow_exception(error);
      return result;
    }
  }
  // Each process's dims of `tensor` (at most 8), checked to agree but for `dim` (normalised
  // from a negative value). Every process takes part before anything is checked, and all of
  // them throw the same std::invalid_argument when something does not agree or `dim` is out of
  // range.
  std::vector<std::vector<int64_t>> gather_shapes(const torch::Tensor& tensor, int64_t& dim,
                                                  const char* what);
  torch::Tensor gather_rows(const torch::Tensor& tensor, bool for_metrics);

  AcceleratorOptions options_;
  torch::Device device_{torch::kCPU};
  int num_processes_ = 1;
  int process_index_ = 0;
  int local_process_index_ = 0;
  int restart_count_ = 0;
  std::optional<c10::ScalarType> autocast_dtype_;
  std::shared_ptr<void> group_owner_;  // keeps the process group this Accelerator joined
  std::shared_ptr<GradientState> state_ = std::make_shared<GradientState>();
  std::shared_ptr<GradScaler> scaler_;
  std::vector<std::weak_ptr<torch::optim::Optimizer>> optimizers_;
  std::weak_ptr<dist::FullyShardedDataParallel> sharded_;
  // Data sets prepare() copied to the device, beside the host data set each copies.
  std::vector<std::pair<std::weak_ptr<const data::Dataset>, std::shared_ptr<const data::Dataset>>>
      device_datasets_;
  std::shared_ptr<const data::Dataset> device_dataset(
      const std::shared_ptr<const data::Dataset>& dataset);
  int64_t step_ = 0;  // micro-batches counted by accumulate()
};

}  // namespace trainer
