// The Accelerator: device and process-group setup, prepare(), backward and accumulation, gradient
// clipping, and the collectives a training loop needs to be correct on any number of processes.
#include "lib/accelerate/accelerator.h"

#include <algorithm>
#include <mutex>

#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "lib/accelerate/mixed_precision.h"
#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/cuda.h"
#include "lib/runtime/torch_logs.h"

namespace trainer {
namespace {

// A model prepared by the Accelerator: DDP underneath with several processes, and autocast around
// the forward with mixed precision (outputs converted back to float32, as Accelerate's
// convert_outputs_to_fp32).
class AcceleratedModel : public models::ModelWrapper {
 public:
  // `wrapper`: DDP or FSDP around `original`, or null; what it wraps is that, or `original`.
  AcceleratedModel(std::shared_ptr<models::Model> original, std::shared_ptr<models::Model> wrapper,
                   c10::DeviceType device_type, std::optional<c10::ScalarType> autocast)
      : ModelWrapper(wrapper ? wrapper : original),
        original_(std::move(original)),
        device_type_(device_type),
        autocast_(autocast) {
    register_module("module", wrapped_);
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    if (!autocast_) return wrapped_->forward(x);
    torch::Tensor out;
    {
      AutocastGuard guard(device_type_, *autocast_);
      out = wrapped_->forward(x);
    }
    return to_float32(out);
  }
  models::ModelOutput forward(const data::Batch& inputs) override {
    if (!autocast_) return wrapped_->forward(inputs);
    models::ModelOutput out;
    {
      AutocastGuard guard(device_type_, *autocast_);
      out = wrapped_->forward(inputs);
    }
    // The outputs in float32 (token_stats and token_scores are float32 already).
    out.logits = to_float32(out.logits);
    out.loss = to_float32(out.loss);
    return out;
  }
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                     const torch::Tensor& num_items_in_batch) override {
    return original_->loss(outputs, labels, num_items_in_batch);
  }
  models::Task task() const override { return original_->task(); }

  const std::shared_ptr<models::Model>& original() const { return original_; }

 private:
  static torch::Tensor to_float32(const torch::Tensor& out) {
    if (!out.defined()) return out;
    bool low = out.scalar_type() == torch::kBFloat16 || out.scalar_type() == torch::kHalf;
    return low ? out.to(torch::kFloat) : out;
  }

  std::shared_ptr<models::Model> original_;
  c10::DeviceType device_type_;
  std::optional<c10::ScalarType> autocast_;
};

dist::GradSync* find_grad_sync(models::Model& model) {
  return models::find_wrapped<dist::GradSync>(model);
}

// The default process group while some Accelerator that joined it lives (Accelerate's shared
// state: every Accelerator of a process uses the same group).
struct GroupOwner {
  ~GroupOwner() { dist::destroy_process_group(); }
};
std::mutex g_group_mutex;
std::weak_ptr<GroupOwner> g_group;

std::shared_ptr<GroupOwner> join_group(const std::string& backend,
                                       std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(g_group_mutex);
  if (auto owner = g_group.lock()) return owner;
  if (dist::is_initialized()) return nullptr;  // the program's own group: it leaves it itself
  dist::InitOptions init;
  init.backend = backend;
  init.timeout = timeout;
  dist::init_process_group(init);
  auto owner = std::make_shared<GroupOwner>();
  g_group = owner;
  return owner;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// SyncGuard

SyncGuard::SyncGuard(dist::GradSync* ddp) : ddp_(ddp) {
  if (ddp_) {
    previous_ = ddp_->require_backward_grad_sync();
    ddp_->set_require_backward_grad_sync(false);
  }
}

SyncGuard::SyncGuard(SyncGuard&& other) noexcept : ddp_(other.ddp_), previous_(other.previous_) {
  other.ddp_ = nullptr;
}

SyncGuard::~SyncGuard() {
  if (ddp_) ddp_->set_require_backward_grad_sync(previous_);
}

// ---------------------------------------------------------------------------------------------
// Accelerator

int64_t Accelerator::elastic_accumulation(int64_t accumulation) {
  const dist::DistEnv env = dist::is_initialized() ? dist::environment() : dist::read_dist_env();
  const int64_t full = env.elastic_world_size;
  const int64_t here = env.world_size;
  if (full <= 0 || full == here) return accumulation;
  if ((accumulation * full) % here != 0) {
    throw InputError(fmt::format(
        "elastic run on {} of {} processes: gradient_accumulation_steps {} cannot grow to keep the "
        "total batch size ({} x {} / {} is not a whole number; choose node counts that divide "
        "the largest, or a larger gradient_accumulation_steps)",
        here, full, accumulation, accumulation, full, here));
  }
  return accumulation * full / here;
}

Accelerator::Accelerator(AcceleratorOptions options) : options_(std::move(options)) {
  runtime::configure_allocator();
  runtime::route_torch_logs();
  autocast_dtype_ = autocast_dtype(options_.mixed_precision());
  if (options_.gradient_accumulation_steps() < 1) {
    throw InputError(fmt::format("gradient_accumulation_steps {} is not allowed (must be >= 1)",
                                 options_.gradient_accumulation_steps()));
  }
  dist::DistEnv env = dist::is_initialized() ? dist::environment() : dist::read_dist_env();
  restart_count_ = env.restart_count;
  const bool cuda = !options_.cpu() && torch::cuda::is_available();
  if (cuda) {
    int count = static_cast<int>(torch::cuda::device_count());
    if (env.local_rank >= count) {
      throw InputError(fmt::format(
          "LOCAL_RANK {} has no CUDA device (this machine has {}): start at most {} processes "
          "per machine, or set use_cpu",
          env.local_rank, count, count));
    }
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
    c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).setDevice(device_);
  }
  if (options_.mixed_precision() == "fp16") {
    if (!cuda) {
      throw InputError(
          "mixed precision fp16 is not supported on CPU (it needs a CUDA device; bf16 works on "
          "CPU)");
    }
    scaler_ = std::make_shared<GradScaler>(device_);
  }
  std::string backend = options_.backend().empty() ? (cuda ? "nccl" : "gloo") : options_.backend();
  if (backend == "nccl" && !cuda) {
    throw InputError("backend nccl needs CUDA devices (on CPU, use gloo)");
  }
  if (env.world_size > 1 || dist::is_initialized()) {
    group_owner_ = join_group(backend, options_.timeout());
    num_processes_ = dist::get_world_size();
    process_index_ = dist::get_rank();
    local_process_index_ = dist::get_local_rank();
  }
}

Accelerator::~Accelerator() = default;

std::shared_ptr<models::Model> Accelerator::prepare_model(std::shared_ptr<models::Model> model,
                                                          bool evaluation_mode) {
  if (!model) throw std::invalid_argument("Accelerator::prepare_model: model is null");
  model->to(device_);
  std::shared_ptr<models::Model> wrapper;
  if (options_.fsdp() && !evaluation_mode) {
    auto sharded = std::make_shared<dist::FullyShardedDataParallel>(model, *options_.fsdp());
    sharded_ = sharded;
    wrapper = sharded;
  } else if (num_processes_ > 1 && !evaluation_mode) {
    const DistributedDataParallelKwargs& kwargs = options_.ddp_kwargs();
    dist::DdpOptions ddp_options;
    if (kwargs.bucket_cap_mb) ddp_options.bucket_cap_mb = *kwargs.bucket_cap_mb;
    if (kwargs.find_unused_parameters)
      ddp_options.find_unused_parameters = *kwargs.find_unused_parameters;
    if (kwargs.broadcast_buffers) ddp_options.broadcast_buffers = *kwargs.broadcast_buffers;
    if (kwargs.static_graph) ddp_options.static_graph = *kwargs.static_graph;
    wrapper = std::make_shared<dist::DistributedDataParallel>(model, ddp_options);
  }
  if (!wrapper && !autocast_dtype_) return model;
  return std::make_shared<AcceleratedModel>(model, wrapper, device_.type(), autocast_dtype_);
}

void Accelerator::with_full_params(const std::function<void()>& f, bool rank0_only) {
  if (auto sharded = sharded_.lock()) {
    sharded->with_full_params(f, rank0_only);
  } else {
    f();
  }
}

std::shared_ptr<AcceleratedOptimizer> Accelerator::prepare(
    std::shared_ptr<torch::optim::Optimizer> optimizer) {
  if (!optimizer) throw std::invalid_argument("Accelerator::prepare: optimizer is null");
  optimizers_.erase(std::remove_if(optimizers_.begin(), optimizers_.end(),
                                   [](const auto& weak) { return weak.expired(); }),
                    optimizers_.end());
  optimizers_.push_back(optimizer);
  auto sharded = sharded_.lock();
  if (sharded) {
    // Each group keeps its options (weight decay) over this process's slices of its parameters.
    for (auto& group : optimizer->param_groups()) {
      std::vector<torch::Tensor> slices;
      for (const auto& p : group.params()) {
        torch::Tensor slice = sharded->local_view(p);
        if (slice.defined()) slices.push_back(slice);
      }
      group.params() = std::move(slices);
    }
  }
  auto prepared = std::make_shared<AcceleratedOptimizer>(std::move(optimizer), state_, scaler_);
  if (sharded) {
    std::weak_ptr<dist::FullyShardedDataParallel> weak = sharded;
    prepared->set_after_step([weak] {
      if (auto model = weak.lock()) model->after_optimizer_step();
    });
  }
  return prepared;
}

std::shared_ptr<const data::Dataset> Accelerator::device_dataset(
    const std::shared_ptr<const data::Dataset>& dataset) {
  if (!device_.is_cuda() || !options_.data_on_device() || !dataset->device().is_cpu())
    return nullptr;
  device_datasets_.erase(std::remove_if(device_datasets_.begin(), device_datasets_.end(),
                                        [](const auto& entry) { return entry.first.expired(); }),
                         device_datasets_.end());
  for (const auto& [source, copy] : device_datasets_) {
    if (source.lock() == dataset) return copy;
  }
  auto copy = dataset->to_device(device_, cuda::free_memory(device_) / 2);
  if (copy) device_datasets_.emplace_back(dataset, copy);
  return copy;
}

std::shared_ptr<DataLoaderShard> Accelerator::prepare(const data::DataLoader& loader) {
  // A collator expects host examples, as in PyTorch: only the dataset's own batches move.
  auto on_device = loader.collator() ? nullptr : device_dataset(loader.dataset_ptr());
  return std::make_shared<DataLoaderShard>(on_device ? loader.with_dataset(on_device) : loader,
                                           num_processes_, process_index_, device_, state_);
}

std::shared_ptr<models::Model> Accelerator::unwrap_model(
    const std::shared_ptr<models::Model>& model) const {
  if (auto prepared = std::dynamic_pointer_cast<AcceleratedModel>(model))
    return prepared->original();
  // DDP and FSDP (the wrappers that synchronise gradients) come off; PEFT's stays, as in
  // Accelerate's unwrap_model.
  auto* wrapper = dynamic_cast<models::ModelWrapper*>(model.get());
  if (wrapper && dynamic_cast<dist::GradSync*>(model.get())) return wrapper->unwrap_ptr();
  return model;
}

void Accelerator::backward(const torch::Tensor& loss) {
  torch::Tensor scaled = gradient_accumulation_steps() > 1
                             ? loss / static_cast<double>(gradient_accumulation_steps())
                             : loss;
  if (scaler_) scaled = scaler_->scale(scaled);
  scaled.backward();
}

SyncGuard Accelerator::accumulate(models::Model& model) {
  if (state_->end_of_dataloader) {
    step_ = 0;
    state_->sync_gradients = true;
  } else {
    ++step_;
    state_->sync_gradients = step_ % gradient_accumulation_steps() == 0;
  }
  if (state_->sync_gradients) return SyncGuard();
  return SyncGuard(find_grad_sync(model));
}

SyncGuard Accelerator::no_sync(models::Model& model) { return SyncGuard(find_grad_sync(model)); }

void Accelerator::unscale_gradients() {
  if (!scaler_) return;
  for (auto& weak : optimizers_) {
    if (auto optimizer = weak.lock()) scaler_->unscale_(*optimizer);
  }
}

torch::Tensor Accelerator::clip_grad_norm_(const std::vector<torch::Tensor>& parameters,
                                           double max_norm) {
  unscale_gradients();
  // Sharded: the norm of every process's slices together (Accelerate asks FSDP the same way).
  if (auto sharded = sharded_.lock()) return sharded->clip_grad_norm_(max_norm);
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({}, torch::TensorOptions().device(device_));
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
  torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  if (std::isinf(max_norm)) return total;  // only the norm was asked for
  torch::Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coefficient);
  return total;
}

void Accelerator::print(const std::string& line) const {
  if (!is_main_process()) return;
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace trainer
