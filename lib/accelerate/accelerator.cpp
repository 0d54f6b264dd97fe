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

namespace trainer {
namespace {

// A model prepared by the Accelerator: DDP underneath with several processes, and autocast around
// the forward with mixed precision (outputs converted back to float32, as Accelerate's
// convert_outputs_to_fp32).
class AcceleratedModel : public models::Model {
 public:
  AcceleratedModel(std::shared_ptr<models::Model> original,
                   std::shared_ptr<dist::DistributedDataParallel> ddp, c10::DeviceType device_type,
                   std::optional<c10::ScalarType> autocast)
      : original_(std::move(original)),
        ddp_(std::move(ddp)),
        device_type_(device_type),
        autocast_(autocast) {
    inner_ = ddp_ ? std::static_pointer_cast<models::Model>(ddp_) : original_;
    register_module("module", inner_);
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    if (!autocast_) return inner_->forward(x);
    torch::Tensor out;
    {
      AutocastGuard guard(device_type_, *autocast_);
      out = inner_->forward(x);
    }
    return to_float32(out);
  }
  models::ModelOutput forward(const data::Batch& inputs) override {
    if (!autocast_) return inner_->forward(inputs);
    models::ModelOutput out;
    {
      AutocastGuard guard(device_type_, *autocast_);
      out = inner_->forward(inputs);
    }
    return {to_float32(out.logits), to_float32(out.loss)};
  }
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                     const torch::Tensor& num_items_in_batch) override {
    return original_->loss(outputs, labels, num_items_in_batch);
  }
  models::Task task() const override { return original_->task(); }

  const std::shared_ptr<models::Model>& original() const { return original_; }
  dist::DistributedDataParallel* ddp() const { return ddp_.get(); }

 private:
  static torch::Tensor to_float32(const torch::Tensor& out) {
    if (!out.defined()) return out;
    bool low = out.scalar_type() == torch::kBFloat16 || out.scalar_type() == torch::kHalf;
    return low ? out.to(torch::kFloat) : out;
  }

  std::shared_ptr<models::Model> original_;
  std::shared_ptr<dist::DistributedDataParallel> ddp_;
  std::shared_ptr<models::Model> inner_;
  c10::DeviceType device_type_;
  std::optional<c10::ScalarType> autocast_;
};

dist::DistributedDataParallel* find_ddp(models::Model& model) {
  if (auto* prepared = dynamic_cast<AcceleratedModel*>(&model)) return prepared->ddp();
  return dynamic_cast<dist::DistributedDataParallel*>(&model);
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

// `tensor` with `dim` grown to `length` by rows of `value`, after it (before with `first`).
torch::Tensor pad_to(const torch::Tensor& tensor, int64_t dim, int64_t length, int64_t value,
                     bool first) {
  const int64_t mine = tensor.size(dim);
  if (mine == length) return tensor;
  auto sizes = tensor.sizes().vec();
  sizes[dim] = length;
  torch::Tensor padded = torch::full(sizes, value, tensor.options());
  padded.narrow(dim, first ? length - mine : 0, mine).copy_(tensor);
  return padded;
}

// The largest size any process's tensor has along `dim`.
int64_t longest_along(const std::vector<std::vector<int64_t>>& shapes, int64_t dim) {
  int64_t longest = 0;
  for (const auto& s : shapes) longest = std::max(longest, s[dim]);
  return longest;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DataLoaderShard

DataLoaderShard::DataLoaderShard(data::DataLoader loader, int num_processes, int process_index,
                                 torch::Device device, std::shared_ptr<GradientState> state)
    : loader_(std::move(loader)),
      num_processes_(num_processes),
      process_index_(process_index),
      device_(device),
      state_(std::move(state)) {}

void DataLoaderShard::set_epoch(int64_t epoch) { loader_.set_epoch(epoch); }

int64_t DataLoaderShard::size() const {
  int64_t batches = loader_.size();
  return loader_.options().drop_last ? batches / num_processes_
                                     : (batches + num_processes_ - 1) / num_processes_;
}

DataLoaderShard::Slot DataLoaderShard::slot(int64_t i, int rank) const {
  int64_t batches = loader_.size();
  int64_t j = i * num_processes_ + rank;
  if (j < batches) return {j, false};
  return {batches == 0 ? 0 : (j - batches) % batches, true};
}

void DataLoaderShard::end_iteration() {
  state_->batch_rows.clear();
  state_->real_rows.clear();
}

data::Batch DataLoaderShard::batch(int64_t i) {
  if (i < 0 || i >= size()) {
    throw std::out_of_range(fmt::format("batch {} out of range [0, {})", i, size()));
  }
  data::Batch batch = loader_.batch(slot(i, process_index_).batch).to(device_);
  const int64_t examples = loader_.num_examples();
  state_->batch_rows.assign(num_processes_, 0);
  state_->real_rows.assign(num_processes_, 0);
  for (int q = 0; q < num_processes_; ++q) {
    Slot s = slot(i, q);
    int64_t rows = std::min(batch_size(), examples - s.batch * batch_size());
    state_->batch_rows[q] = rows;
    state_->real_rows[q] = s.repeat ? 0 : rows;
  }
  state_->end_of_dataloader = i + 1 == size();
  return batch;
}

// ---------------------------------------------------------------------------------------------
// AcceleratedOptimizer and SyncGuard

AcceleratedOptimizer::AcceleratedOptimizer(std::shared_ptr<torch::optim::Optimizer> optimizer,
                                           std::shared_ptr<GradientState> state,
                                           std::shared_ptr<GradScaler> scaler)
    : optimizer_(std::move(optimizer)), state_(std::move(state)), scaler_(std::move(scaler)) {}

void AcceleratedOptimizer::step() {
  if (!state_->sync_gradients) return;
  if (scaler_) {
    // The scale moves once all optimizers of this step have stepped (at the next scale()).
    step_was_skipped_ = !scaler_->step(*optimizer_);
    scaler_->request_update();
  } else {
    optimizer_->step();
    step_was_skipped_ = false;
  }
}

void AcceleratedOptimizer::zero_grad() {
  if (state_->sync_gradients) optimizer_->zero_grad();
}

SyncGuard::SyncGuard(dist::DistributedDataParallel* ddp) : ddp_(ddp) {
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

Accelerator::Accelerator(AcceleratorOptions options) : options_(std::move(options)) {
  runtime::configure_allocator();
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
  std::shared_ptr<dist::DistributedDataParallel> ddp;
  if (num_processes_ > 1 && !evaluation_mode) {
    const DistributedDataParallelKwargs& kwargs = options_.ddp_kwargs();
    dist::DdpOptions ddp_options;
    if (kwargs.bucket_cap_mb) ddp_options.bucket_cap_mb = *kwargs.bucket_cap_mb;
    if (kwargs.find_unused_parameters)
      ddp_options.find_unused_parameters = *kwargs.find_unused_parameters;
    if (kwargs.broadcast_buffers) ddp_options.broadcast_buffers = *kwargs.broadcast_buffers;
    ddp = std::make_shared<dist::DistributedDataParallel>(model, ddp_options);
  }
  if (!ddp && !autocast_dtype_) return model;
  return std::make_shared<AcceleratedModel>(model, ddp, device_.type(), autocast_dtype_);
}

std::shared_ptr<AcceleratedOptimizer> Accelerator::prepare(
    std::shared_ptr<torch::optim::Optimizer> optimizer) {
  if (!optimizer) throw std::invalid_argument("Accelerator::prepare: optimizer is null");
  optimizers_.erase(std::remove_if(optimizers_.begin(), optimizers_.end(),
                                   [](const auto& weak) { return weak.expired(); }),
                    optimizers_.end());
  optimizers_.push_back(optimizer);
  return std::make_shared<AcceleratedOptimizer>(std::move(optimizer), state_, scaler_);
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
  if (auto ddp = std::dynamic_pointer_cast<dist::DistributedDataParallel>(model))
    return ddp->module_ptr();
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
  return SyncGuard(find_ddp(model));
}

SyncGuard Accelerator::no_sync(models::Model& model) { return SyncGuard(find_ddp(model)); }

void Accelerator::unscale_gradients() {
  if (!scaler_) return;
  for (auto& weak : optimizers_) {
    if (auto optimizer = weak.lock()) scaler_->unscale_(*optimizer);
  }
}

torch::Tensor Accelerator::clip_grad_norm_(const std::vector<torch::Tensor>& parameters,
                                           double max_norm) {
  unscale_gradients();
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

std::vector<std::vector<int64_t>> Accelerator::gather_shapes(const torch::Tensor& tensor,
                                                             int64_t& dim, const char* what) {
  constexpr int64_t kMaxDims = 8;
  // [dims, dtype, dim, sizes...]; dims -1 marks a tensor of more dimensions than fit.
  std::vector<int64_t> header(3 + kMaxDims, -1);
  header[0] = tensor.dim() <= kMaxDims ? tensor.dim() : -1;
  header[1] = static_cast<int64_t>(tensor.scalar_type());
  header[2] = dim;
  for (int64_t d = 0; d < std::min(tensor.dim(), kMaxDims); ++d) header[3 + d] = tensor.size(d);
  auto all = dist::all_gather(torch::tensor(header, torch::kLong).to(device_));
  // Every process checks every process's header, so all of them throw the same error.
  std::vector<std::vector<int64_t>> shapes;
  std::vector<torch::ScalarType> types;
  std::vector<int64_t> dims;
  for (const auto& h : all) {
    torch::Tensor cpu = h.to(torch::kCPU);
    const int64_t* v = cpu.data_ptr<int64_t>();
    if (v[0] < 0) {
      throw std::invalid_argument(fmt::format(
          "{}: process {} has a tensor of more than {} dimensions", what, shapes.size(), kMaxDims));
    }
    shapes.emplace_back(v + 3, v + 3 + v[0]);
    types.push_back(static_cast<torch::ScalarType>(v[1]));
    dims.push_back(v[2]);
  }
  for (size_t q = 1; q < dims.size(); ++q) {
    if (dims[q] != dims[0]) {
      throw std::invalid_argument(fmt::format("{}: process {} passed dim {} but process 0 dim {}",
                                              what, q, dims[q], dims[0]));
    }
  }
  const auto ndim = static_cast<int64_t>(shapes[0].size());
  if (dim < 0) dim += ndim;
  if (ndim > 0 && (dim < 0 || dim >= ndim)) {
    throw std::invalid_argument(
        fmt::format("{}: dim {} is not allowed for tensors of {} dimensions", what, dims[0], ndim));
  }
  for (size_t q = 1; q < shapes.size(); ++q) {
    bool same = shapes[q].size() == shapes[0].size() && types[q] == types[0];
    for (size_t d = 0; same && d < shapes[q].size(); ++d) {
      same = static_cast<int64_t>(d) == dim || shapes[q][d] == shapes[0][d];
    }
    if (!same) {
      throw std::invalid_argument(fmt::format(
          "{}: process {} has a {} tensor of shape {} but process 0 has a {} tensor of shape {} "
          "(only dimension {} may differ)",
          what, q, c10::toString(types[q]), base::shape_text(shapes[q]), c10::toString(types[0]),
          base::shape_text(shapes[0]), dim));
    }
  }
  return shapes;
}

torch::Tensor Accelerator::pad_across_processes(const torch::Tensor& tensor, int64_t dim,
                                                int64_t pad_index, bool pad_first) {
  if (num_processes_ == 1) return tensor;
  auto shapes = gather_shapes(tensor, dim, "pad_across_processes");
  if (tensor.dim() == 0) return tensor;  // every process has a 0-dim tensor: nothing to pad
  return pad_to(tensor, dim, longest_along(shapes, dim), pad_index, pad_first);
}

torch::Tensor Accelerator::gather_rows(const torch::Tensor& tensor, bool for_metrics) {
  torch::Tensor t = tensor.dim() == 0 ? tensor.reshape({1}) : tensor;
  if (num_processes_ == 1) return t;
  int64_t dim = 0;
  auto shapes = gather_shapes(t, dim, for_metrics ? "gather_for_metrics" : "gather");
  std::vector<int64_t> keep;
  for (const auto& s : shapes) keep.push_back(s[0]);
  const GradientState& state = *state_;
  if (for_metrics && state.batch_rows.size() == shapes.size()) {
    bool per_example = true;
    for (size_t q = 0; q < shapes.size(); ++q) per_example &= shapes[q][0] == state.batch_rows[q];
    if (per_example) keep = state.real_rows;
  }
  torch::Tensor padded = pad_to(t.to(device_), 0, longest_along(shapes, 0), 0, false);
  auto parts = dist::all_gather(padded.contiguous());
  std::vector<torch::Tensor> rows;
  for (size_t q = 0; q < parts.size(); ++q) rows.push_back(parts[q].narrow(0, 0, keep[q]));
  return torch::cat(rows).to(t.device());
}

torch::Tensor Accelerator::gather(const torch::Tensor& tensor) {
  return gather_rows(tensor, false);
}

torch::Tensor Accelerator::gather_for_metrics(const torch::Tensor& tensor) {
  return gather_rows(tensor, true);
}

torch::Tensor Accelerator::reduce(const torch::Tensor& tensor, Reduction reduction) {
  torch::Tensor out = tensor.to(device_).clone();
  if (num_processes_ > 1) {
    dist::all_reduce(out,
                     reduction == Reduction::kMax ? dist::ReduceOp::kMax : dist::ReduceOp::kSum);
  }
  if (reduction == Reduction::kMean) out = out / static_cast<double>(num_processes_);
  return out.to(tensor.device());
}

void Accelerator::wait_for_everyone() {
  if (num_processes_ > 1) dist::barrier();
}

void Accelerator::print(const std::string& line) const {
  if (!is_main_process()) return;
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace trainer
