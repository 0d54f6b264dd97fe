// DistributedDataParallel on c10d's Reducer, and the cross-rank model check.
#include "lib/distributed/ddp.h"

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include "lib/base/text.h"
#include "lib/distributed/c10d.h"
#include "lib/distributed/process_group.h"
#include "lib/distributed/shm_all_reduce.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/torch_logs.h"

namespace trainer::dist {
namespace {

// "name:shape" lines, one per parameter.
std::vector<std::string> describe_parameters(const torch::nn::Module& module) {
  std::vector<std::string> lines;
  for (const auto& item : module.named_parameters()) {
    lines.push_back(fmt::format("{} {}", item.key(), base::shape_text(item.value().sizes().vec())));
  }
  return lines;
}

torch::Tensor to_bytes(const std::string& text) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

// DDP's communication hook over a shared-memory segment. The buckets wait until backward has
// made the last one, then are averaged in order, in place: all ranks meet once a step, not at
// every bucket (the averaging is the ranks' own work on their cores, which overlapping with
// backward would not hide; each meeting would cost the slower rank's lead). A float32 bucket goes
// through the segment; one of another type is scaled by 1/world and goes through the group's
// all-reduce, as without a hook.
class SharedMemoryHook : public c10d::CommHookInterface {
 public:
  SharedMemoryHook(std::unique_ptr<SharedMemoryAllReduce> all_reduce,
                   c10::intrusive_ptr<c10d::ProcessGroup> group)
      : all_reduce_(std::move(all_reduce)), group_(std::move(group)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
    pending_.emplace_back(bucket.getBufferRef(), future);
    if (!bucket.isLast()) return future;
    auto pending = std::move(pending_);
    pending_.clear();
    try {
      for (auto& [buffer, done] : pending) {
        average(buffer);
        done->markCompleted(c10::IValue(buffer));
      }
    } catch (...) {
      for (auto& [buffer, done] : pending) {
        if (!done->completed()) done->setError(std::current_exception());
      }
      throw;
    }
    return future;
  }

  torch::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  void average(torch::Tensor& buffer) {
    if (buffer.scalar_type() == torch::kFloat && buffer.is_cpu() && buffer.is_contiguous()) {
      all_reduce_->mean(buffer.data_ptr<float>(), static_cast<size_t>(buffer.numel()));
      return;
    }
    buffer.mul_(1.0 / group_->getSize());  // as the Reducer scales a bucket without a hook
    std::vector<torch::Tensor> tensors = {buffer};
    group_->allreduce(tensors)->wait();
  }

  std::unique_ptr<SharedMemoryAllReduce> all_reduce_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::vector<std::pair<torch::Tensor, c10::intrusive_ptr<c10::ivalue::Future>>> pending_;
};

}  // namespace

void verify_same_parameters(const torch::nn::Module& module) {
  std::vector<std::string> mine = describe_parameters(module);
  std::string text = fmt::format("{}", fmt::join(mine, "\n"));
  // Gather every rank's description: lengths first, then the padded bytes.
  torch::Tensor length = torch::tensor({static_cast<int64_t>(text.size())}, torch::kLong);
  auto lengths = all_gather(length);
  int64_t longest = 0;
  for (const auto& l : lengths) longest = std::max(longest, l.item<int64_t>());
  torch::Tensor padded = torch::zeros({longest}, torch::kUInt8);
  padded.narrow(0, 0, static_cast<int64_t>(text.size())).copy_(to_bytes(text));
  auto all = all_gather(padded);
  auto lines_of = [&](size_t rank) {
    std::string s(static_cast<const char*>(all[rank].data_ptr()),
                  static_cast<size_t>(lengths[rank].item<int64_t>()));
    std::vector<std::string> lines;
    for (size_t start = 0; start <= s.size();) {
      size_t end = s.find('\n', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) lines.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    return lines;
  };
  std::vector<std::string> reference = lines_of(0);
  for (size_t rank = 1; rank < all.size(); ++rank) {
    std::vector<std::string> other = lines_of(rank);
    for (size_t i = 0; i < std::max(reference.size(), other.size()); ++i) {
      std::string a = i < reference.size() ? reference[i] : "(none)";
      std::string b = i < other.size() ? other[i] : "(none)";
      if (a != b) {
        throw DistError(
            fmt::format("DistributedDataParallel: the models differ across ranks: parameter {} is "
                        "{} on rank 0 but {} on rank {}",
                        i, a, b, rank));
      }
    }
  }
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<models::Model> module,
                                                 DdpOptions options)
    : ModelWrapper(std::move(module)), options_(options) {
  runtime::configure_allocator();
  runtime::route_torch_logs();
  register_module("module", wrapped_);
  auto group = default_group();
  verify_same_parameters(*wrapped_);
  std::vector<torch::Tensor> states;
  for (const auto& p : wrapped_->parameters()) states.push_back(p);
  for (const auto& b : wrapped_->buffers()) states.push_back(b);
  {
    torch::NoGradGuard no_grad;
    if (!states.empty()) c10d::broadcast_coalesced(group, states, 250u << 20, 0);
  }
  std::vector<torch::Tensor> params;
  for (const auto& p : wrapped_->parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  auto cap = static_cast<int64_t>(options_.bucket_cap_mb * 1024 * 1024);
  auto first_cap = static_cast<int64_t>(options_.first_bucket_cap_mb * 1024 * 1024);
  // As PyTorch's DDP: the first iteration all-reduces every gradient in one bucket once backward
  // has finished (the registration order may not be the order gradients become ready in), unless
  // unused parameters are expected; then buckets guess the reverse of the registration order.
  // After the first iteration buckets follow the real order (see forward()).
  std::vector<size_t> limits = {std::numeric_limits<size_t>::max()};
  if (options_.find_unused_parameters) {
    limits = {static_cast<size_t>(first_cap), static_cast<size_t>(cap)};
  }
  auto buckets = std::get<0>(c10d::compute_bucket_assignment_by_size(
      params, limits, std::vector<bool>(params.size(), false)));
  std::reverse(buckets.begin(), buckets.end());
  reducer_ =
      compat::make_reducer(params, buckets, group, cap, first_cap, options_.find_unused_parameters);
  if (options_.static_graph) reducer_->set_static_graph();
  if (options_.shared_memory) {
    if (auto all_reduce = shared_memory_all_reduce()) {
      reducer_->register_comm_hook(
          std::make_unique<SharedMemoryHook>(std::move(all_reduce), group));
      shares_memory_ = true;
    }
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::sync_buffers() {
  auto buffers = wrapped_->buffers();
  if (buffers.empty() || !options_.broadcast_buffers) return;
  torch::NoGradGuard no_grad;
  c10d::broadcast_coalesced(default_group(), buffers, 250u << 20, 0);
}

bool DistributedDataParallel::before_forward() {
  bool sync = torch::GradMode::is_enabled() && require_backward_grad_sync_;
  if (sync) reducer_->prepare_for_forward();
  // After the first backward the Reducer knows the order gradients became ready in, and once
  // (every rank in the same iteration) regroups the buckets in that order, so the large ones
  // start all-reducing while the rest of backward still runs; PyTorch's DDP does the same here.
  if (torch::GradMode::is_enabled()) reducer_->rebuild_buckets();
  if (is_training()) sync_buffers();
  return sync;
}

void DistributedDataParallel::after_forward(bool sync, std::vector<torch::Tensor> outputs) {
  // A forward without gradients (DPO's reference pass) has no backward to prepare, as in
  // PyTorch's DDP.
  if (!sync || !torch::GradMode::is_enabled()) return;
  ++iterations_;
  std::vector<torch::Tensor> roots;
  if (options_.static_graph) {
    // As PyTorch's _DDPSink: in the first iteration of a static graph the Reducer only records
    // which gradients arrive, and all-reduces them all once backward has finished.
    reducer_->prepare_for_backward({});
    if (iterations_ != 1) return;
    for (auto& out : outputs) {
      if (!out.defined() || !out.requires_grad()) continue;
      std::weak_ptr<c10d::Reducer> reducer = reducer_;
      out.register_hook([reducer](const torch::Tensor& grad) {
        torch::autograd::Engine::get_default_engine().queue_callback([reducer] {
          if (auto r = reducer.lock()) r->delay_all_reduce();
        });
        return grad;
      });
      break;
    }
    return;
  }
  if (options_.find_unused_parameters) {
    for (auto& out : outputs) {
      if (out.defined()) roots.push_back(std::move(out));
    }
  }
  reducer_->prepare_for_backward(roots);
}

torch::Tensor DistributedDataParallel::forward(const torch::Tensor& x) {
  bool sync = before_forward();
  torch::Tensor out = wrapped_->forward(x);
  after_forward(sync, {out});
  return out;
}

models::ModelOutput DistributedDataParallel::forward(const data::Batch& inputs) {
  bool sync = before_forward();
  models::ModelOutput out = wrapped_->forward(inputs);
  after_forward(sync, {out.logits, out.loss, out.token_scores.log_probs});
  return out;
}

std::vector<int64_t> DistributedDataParallel::bucket_sizes() const {
  std::vector<int64_t> sizes;
  for (auto& bucket : reducer_->get_grad_buckets(/*return_zero_tensors=*/true)) {
    sizes.push_back(bucket.getBufferRef().numel());
  }
  return sizes;
}

}  // namespace trainer::dist
