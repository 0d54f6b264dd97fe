// FullyShardedDataParallel: units laid out in flat buffers, the forward and backward hooks that
// gather and free them, gradients reduced per unit as its backward ends, and the sharded
// clipping.
#include "lib/distributed/fsdp.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/distributed/c10d.h"
#include "lib/distributed/ddp.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/torch_logs.h"

namespace trainer::dist {
namespace {

// A unit's full parameters are one storage that every parameter (and every tensor autograd saved
// from them) shares: freeing it and allocating it again keeps them all, only the memory goes.
bool allocated(const torch::Tensor& t) { return t.storage().nbytes() > 0; }

void free_storage(const torch::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

void allocate_storage(const torch::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<models::Model> module,
                                                   FsdpOptions options)
    : ModelWrapper(std::move(module)), options_(options) {
  runtime::configure_allocator();
  runtime::route_torch_logs();
  register_module("module", wrapped_);
  world_ = get_world_size();
  rank_ = get_rank();
  torch::NoGradGuard no_grad;
  if (is_initialized()) sync_with_ranks();
  for (const auto& p : wrapped_->parameters()) {
    if (options_.offload && !p.device().is_cpu()) {
      throw InputError(
          "fsdp offload: CPU offload of parameters on a CUDA device is not built (on CPU the "
          "state is there already); leave offload out");
    }
  }
  assign_parameters(choose_units());
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u].params.empty()) continue;
    flatten(units_[u]);
    add_slices(u);
    hook_gradients(u);
  }
  wrapped_->set_block_hooks(this);
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  wrapped_->set_block_hooks(nullptr);
  for (Unit& unit : units_) {
    try {
      unit.gathering.wait();
    } catch (const std::exception&) {  // a failed prefetch: its error was not asked for
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Wrapping: units, flat buffers, slices, hooks

void FullyShardedDataParallel::sync_with_ranks() {
  verify_same_parameters(*wrapped_);
  if (options_.sync_module_states) {
    std::vector<torch::Tensor> states;
    for (const auto& p : wrapped_->parameters()) states.push_back(p);
    for (const auto& b : wrapped_->buffers()) states.push_back(b);
    if (!states.empty()) c10d::broadcast_coalesced(default_group(), states, 250u << 20, 0);
  }
}

std::map<const void*, size_t> FullyShardedDataParallel::choose_units() {
  // The units: the wrapped blocks, and the root holding every other parameter.
  std::vector<models::Block> blocks = wrapped_->blocks();
  const std::string unknown = models::unknown_block_class(blocks, options_.wrap_classes);
  if (!unknown.empty()) throw InputError("fsdp_config transformer_layer_cls_to_wrap " + unknown);
  std::map<const void*, size_t> owner;
  units_.emplace_back();
  block_unit_.assign(blocks.size(), -1);
  for (size_t i = 0; i < blocks.size(); ++i) {
    int64_t count = 0;
    for (const auto& p : blocks[i].module->parameters()) count += p.numel();
    const bool wrap = options_.wrap_blocks ||
                      std::find(options_.wrap_classes.begin(), options_.wrap_classes.end(),
                                blocks[i].class_name) != options_.wrap_classes.end() ||
                      (options_.min_num_params > 0 && count >= options_.min_num_params);
    if (!wrap) continue;
    block_unit_[i] = static_cast<int>(units_.size());
    Unit unit;
    unit.name = blocks[i].name;
    unit.block = static_cast<int>(i);
    units_.push_back(std::move(unit));
    for (const auto& p : blocks[i].module->parameters()) {
      owner.emplace(p.unsafeGetTensorImpl(), units_.size() - 1);
    }
  }
  return owner;
}

void FullyShardedDataParallel::assign_parameters(const std::map<const void*, size_t>& owner) {
  std::set<const void*> seen;
  for (const auto& item : wrapped_->named_parameters()) {
    const torch::Tensor& p = item.value();
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;  // tied: one place
    auto it = owner.find(p.unsafeGetTensorImpl());
    Unit& unit = units_[it == owner.end() ? 0 : it->second];
    if (!unit.params.empty()) {
      const torch::Tensor& first = unit.params.front().tensor;
      if (first.scalar_type() != p.scalar_type() || first.device() != p.device()) {
        throw InputError(fmt::format(
            "fsdp: unit {} mixes {} on {} ({}) and {} on {} ({}); a unit's parameters must "
            "share one dtype and device",
            unit.name.empty() ? "(root)" : unit.name, c10::toString(first.scalar_type()),
            first.device().str(), unit.params.front().name, c10::toString(p.scalar_type()),
            p.device().str(), item.key()));
      }
    }
    Param param;
    param.name = item.key();
    param.tensor = p;
    param.offset = unit.numel;
    param.numel = p.numel();
    param.trainable = p.requires_grad();
    unit.numel += p.numel();
    unit.has_frozen = unit.has_frozen || !param.trainable;
    unit.trainable += param.trainable ? 1 : 0;
    unit.params.push_back(std::move(param));
  }
}

void FullyShardedDataParallel::flatten(Unit& unit) {
  // Each parameter becomes a view of its unit's flat buffer; this rank's chunk is the master.
  const bool full_shard = options_.strategy == ShardingStrategy::kFullShard;
  unit.chunk = std::max<int64_t>(1, (unit.numel + world_ - 1) / world_);
  const torch::Tensor& first = unit.params.front().tensor;
  unit.full = torch::zeros({unit.chunk * world_}, first.options().requires_grad(false));
  for (Param& param : unit.params) {
    torch::Tensor place = unit.full.narrow(0, param.offset, param.numel);
    place.copy_(param.tensor.reshape({-1}));
    param.tensor.set_data(place.view(param.tensor.sizes()));
  }
  torch::Tensor mine = unit.full.narrow(0, rank_ * unit.chunk, unit.chunk);
  unit.shard = full_shard ? mine.clone() : mine;
  unit.gathered = true;
  if (full_shard) reshard(unit);
}

void FullyShardedDataParallel::add_slices(size_t u) {
  // The slices this rank's optimizer updates.
  const Unit& unit = units_[u];
  const int64_t begin = rank_ * unit.chunk, end = begin + unit.chunk;
  for (const Param& param : unit.params) {
    const int64_t lo = std::max(begin, param.offset);
    const int64_t hi = std::min(end, param.offset + param.numel);
    if (lo >= hi) continue;
    LocalSlice slice;
    slice.name = param.name;
    slice.shape = param.tensor.sizes().vec();
    slice.begin = lo - param.offset;
    slice.view = unit.shard.narrow(0, lo - begin, hi - lo).detach();
    slice.view.requires_grad_(param.trainable);
    slice.trainable = param.trainable;
    slice_of_.emplace(param.tensor.unsafeGetTensorImpl(), slices_.size());
    slices_.push_back(std::move(slice));
    slice_unit_.push_back(u);
    slice_offset_.push_back(lo - begin);
  }
}

void FullyShardedDataParallel::hook_gradients(size_t u) {
  // Each trainable parameter's gradient is taken into the unit's buffer once accumulated.
  const Unit& unit = units_[u];
  for (size_t i = 0; i < unit.params.size(); ++i) {
    if (!unit.params[i].trainable) continue;
    auto accumulator = torch::autograd::impl::grad_accumulator(unit.params[i].tensor);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, u, i](const torch::autograd::variable_list& outputs,
                     const torch::autograd::variable_list&) {
          on_grad_ready(u, i);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));
  }
}

// ---------------------------------------------------------------------------------------------
// Gathering and freeing

void FullyShardedDataParallel::unshard(Unit& unit) {
  if (unit.params.empty()) return;
  if (unit.gathering.active()) {
    unit.gathering.wait();
    unit.gathered = true;
  }
  if (unit.gathered) return;
  allocate_storage(unit.full);
  all_gather_into_tensor(unit.full, unit.shard);
  unit.gathered = true;
}

void FullyShardedDataParallel::prefetch(Unit& unit) {
  if (unit.params.empty() || unit.gathered || unit.gathering.active()) return;
  allocate_storage(unit.full);
  unit.gathering = all_gather_into_tensor_async(unit.full, unit.shard);
}

void FullyShardedDataParallel::reshard(Unit& unit) {
  if (options_.strategy != ShardingStrategy::kFullShard || unit.params.empty()) return;
  unit.gathering.wait();
  if (allocated(unit.full)) free_storage(unit.full);
  unit.gathered = false;
}

FullyShardedDataParallel::Unit* FullyShardedDataParallel::neighbour(int index, int step) {
  for (int i = index + step; i >= 0 && i < static_cast<int>(block_unit_.size()); i += step) {
    if (block_unit_[static_cast<size_t>(i)] >= 0) return &units_[block_unit_[i]];
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Forward

void FullyShardedDataParallel::begin_forward() {
  sync_ = torch::GradMode::is_enabled() && require_sync_;
  callback_queued_ = false;
  for (Unit& unit : units_) {
    unit.grads_seen = 0;
    unit.reduced = false;
  }
  unshard(units_[0]);
  if (options_.forward_prefetch) {
    if (Unit* next = neighbour(-1, 1)) prefetch(*next);
  }
}

void FullyShardedDataParallel::end_forward(const std::vector<torch::Tensor>& outputs) {
  if (!torch::GradMode::is_enabled()) {
    for (Unit& unit : units_) reshard(unit);
    return;
  }
  // The root stays gathered through backward; the first gradient that reaches an output queues
  // what runs once backward is over.
  for (const torch::Tensor& out : outputs) {
    if (out.defined() && out.requires_grad()) {
      out.register_hook([this](const torch::Tensor&) { queue_final_callback(); });
    }
  }
}

models::ModelOutput FullyShardedDataParallel::forward(const data::Batch& inputs) {
  begin_forward();
  models::ModelOutput out = wrapped_->forward(inputs);
  end_forward({out.logits, out.loss, out.token_scores.log_probs});
  return out;
}

torch::Tensor FullyShardedDataParallel::forward(const torch::Tensor& x) {
  begin_forward();
  torch::Tensor out = wrapped_->forward(x);
  end_forward({out});
  return out;
}

void FullyShardedDataParallel::before_block(size_t index) {
  const int u = block_unit_[index];
  if (u < 0) return;
  unshard(units_[static_cast<size_t>(u)]);
  if (options_.forward_prefetch) {
    if (Unit* next = neighbour(static_cast<int>(index), 1)) prefetch(*next);
  }
}

torch::Tensor FullyShardedDataParallel::after_block(size_t index, torch::Tensor output) {
  const int u = block_unit_[index];
  if (u < 0) return output;
  if (torch::GradMode::is_enabled() && output.requires_grad()) {
    output.register_hook([this, u](const torch::Tensor&) { pre_backward(static_cast<size_t>(u)); });
  }
  reshard(units_[static_cast<size_t>(u)]);
  return output;
}

// ---------------------------------------------------------------------------------------------
// Backward

void FullyShardedDataParallel::queue_final_callback() {
  if (callback_queued_) return;
  callback_queued_ = true;
  torch::autograd::Engine::get_default_engine().queue_callback([this] { final_callback(); });
}

void FullyShardedDataParallel::pre_backward(size_t u) {
  queue_final_callback();
  Unit& unit = units_[u];
  unshard(unit);
  if (options_.backward_prefetch) {
    if (Unit* previous = neighbour(unit.block, -1)) prefetch(*previous);
  }
}

void FullyShardedDataParallel::on_grad_ready(size_t u, size_t i) {
  if (!sync_) return;  // no_sync: the gradient stays in the parameter, accumulating
  Unit& unit = units_[u];
  Param& param = unit.params[i];
  torch::NoGradGuard no_grad;
  if (!unit.grad_full.defined()) unit.grad_full = torch::zeros_like(unit.shard).repeat({world_});
  take_grad(unit, param);
  if (++unit.grads_seen == unit.trainable) reduce(unit);
}

void FullyShardedDataParallel::take_grad(Unit& unit, Param& param) {
  torch::Tensor& grad = param.tensor.mutable_grad();
  if (!grad.defined()) return;
  unit.grad_full.narrow(0, param.offset, param.numel).copy_(grad.reshape({-1}));
  grad.reset();
}

void FullyShardedDataParallel::reduce(Unit& unit) {
  torch::NoGradGuard no_grad;
  if (!unit.grad_full.defined()) unit.grad_full = torch::zeros_like(unit.shard).repeat({world_});
  // Gradients of parameters whose hook did not run (unused in this forward) count as zero; one
  // left in a parameter by no_sync backwards is taken now.
  for (Param& param : unit.params) {
    if (param.trainable) take_grad(unit, param);
  }
  torch::Tensor mine;
  if (options_.strategy == ShardingStrategy::kShardOptimizer) {
    all_reduce(unit.grad_full);
    mine = unit.grad_full.narrow(0, rank_ * unit.chunk, unit.chunk).clone();
  } else {
    mine = torch::empty_like(unit.shard);
    reduce_scatter_tensor(mine, unit.grad_full);
  }
  mine.div_(world_);
  unit.grad_full = torch::Tensor();
  unit.reduced = true;
  const size_t u = static_cast<size_t>(&unit - units_.data());
  for (size_t s = 0; s < slices_.size(); ++s) {
    LocalSlice& slice = slices_[s];
    if (slice_unit_[s] != u || !slice.trainable) continue;
    // Not a view (zero_grad detaches gradients in place): an alias of the reduced chunk.
    torch::Tensor part = mine.narrow(0, slice_offset_[s], slice.view.numel()).detach();
    torch::Tensor& grad = slice.view.mutable_grad();
    if (grad.defined()) {
      grad.add_(part);
    } else {
      grad = part;
    }
  }
  // A block's parameters go as soon as its gradients are reduced, unless a frozen parameter may
  // still be read by a gradient of the block's input (then the final callback frees them).
  if (unit.block >= 0 && !unit.has_frozen) reshard(unit);
}

void FullyShardedDataParallel::final_callback() {
  callback_queued_ = false;
  if (sync_) {
    for (Unit& unit : units_) {
      if (!unit.reduced && unit.trainable > 0) reduce(unit);
    }
  }
  for (Unit& unit : units_) reshard(unit);
}

// ---------------------------------------------------------------------------------------------
// Optimizer, clipping, full parameters

torch::Tensor FullyShardedDataParallel::local_view(const torch::Tensor& param) const {
  auto it = slice_of_.find(param.unsafeGetTensorImpl());
  return it == slice_of_.end() ? torch::Tensor() : slices_[it->second].view;
}

void FullyShardedDataParallel::after_optimizer_step() {
  if (options_.strategy == ShardingStrategy::kFullShard) return;
  torch::NoGradGuard no_grad;
  std::vector<Pending> pending;
  for (Unit& unit : units_) {
    if (!unit.params.empty())
      pending.push_back(all_gather_into_tensor_async(unit.full, unit.shard));
  }
  for (Pending& p : pending) p.wait();
}

torch::Tensor FullyShardedDataParallel::clip_grad_norm_(double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const LocalSlice& slice : slices_) {
    if (slice.view.grad().defined()) grads.push_back(slice.view.grad());
  }
  // The squares' sum in float64: the slices split the parameters differently on each world
  // size, and a float32 sum of a million squares would differ between splits in the fifth digit.
  const torch::TensorOptions options =
      torch::TensorOptions(torch::kDouble)
          .device(units_[0].shard.defined() ? units_[0].shard.device()
                                            : torch::Device(torch::kCPU));
  torch::Tensor squares = torch::zeros({1}, options);
  for (const torch::Tensor& g : grads) squares += g.to(torch::kDouble).pow(2).sum();
  all_reduce(squares);
  torch::Tensor total = squares.sqrt().reshape({}).to(torch::kFloat);
  if (std::isinf(max_norm) || grads.empty()) return total;
  torch::Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coefficient);
  return total;
}

void FullyShardedDataParallel::with_full_params(const std::function<void()>& f, bool rank0_only) {
  if (options_.strategy != ShardingStrategy::kFullShard) {
    f();
    return;
  }
  torch::NoGradGuard no_grad;
  for (Unit& unit : units_) {
    if (unit.params.empty()) continue;
    if (!rank0_only) {
      unshard(unit);
      continue;
    }
    std::vector<torch::Tensor> chunks = gather(unit.shard, 0);
    if (rank_ == 0 && !unit.gathered) {
      allocate_storage(unit.full);
      torch::cat_out(unit.full, chunks);
      unit.gathered = true;
    }
  }
  // The module runs on its own meanwhile (generation): no hook frees a block behind it.
  wrapped_->set_block_hooks(nullptr);
  struct Free {
    FullyShardedDataParallel* self;
    ~Free() {
      self->wrapped_->set_block_hooks(self);
      for (Unit& unit : self->units_) self->reshard(unit);
    }
  } free{this};
  f();
}

FullyShardedDataParallel::StateBytes FullyShardedDataParallel::state_bytes() const {
  StateBytes bytes;
  std::set<const void*> counted;
  auto add = [&](const torch::Tensor& t, int64_t& total) {
    if (!t.defined()) return;
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    if (!counted.insert(storage).second) return;
    total += static_cast<int64_t>(storage->nbytes());
  };
  for (const Unit& unit : units_) {
    if (unit.params.empty()) continue;
    add(unit.full, bytes.parameters);
    add(unit.shard, bytes.parameters);
    add(unit.grad_full, bytes.gradients);
    for (const Param& p : unit.params) add(p.tensor.grad(), bytes.gradients);
  }
  for (const LocalSlice& slice : slices_) add(slice.view.grad(), bytes.gradients);
  return bytes;
}

std::vector<std::pair<std::string, int64_t>> FullyShardedDataParallel::units() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const Unit& unit : units_) out.emplace_back(unit.name, unit.numel);
  return out;
}

}  // namespace trainer::dist
