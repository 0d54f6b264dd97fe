// Activation checkpointing as a custom autograd function: the forward runs the block without a
// graph and keeps its input, the random generators' states and the autocast state; the backward
// replays the block under them and back-propagates through the replay (reentrant, as
// torch.utils.checkpoint(use_reentrant=True)).
#include "lib/models/checkpoint.h"

#include <mutex>
#include <optional>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace trainer::models {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The state a replay must see as the first run saw it: the block, the random generators (CPU's,
// and the device's when the input is elsewhere) and autocast on the input's device type.
struct Replay : torch::CustomClassHolder {
  BlockFunction block;
  torch::Device device{torch::kCPU};
  Tensor cpu_rng, device_rng;
  bool autocast = false;
  at::ScalarType autocast_dtype = at::kBFloat16;
};

Tensor generator_state(const torch::Device& device) {
  const at::Generator& gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(const_cast<at::Generator&>(gen).mutex());
  return gen.get_state();
}

void set_generator_state(const torch::Device& device, const Tensor& state) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// While alive: the random generators as the first run had them, and autocast as it was then; the
// generators' and autocast's states come back when it ends.
class ReplayScope {
 public:
  explicit ReplayScope(const Replay& r) : r_(r) {
    const at::DeviceType type = r.device.type();
    autocast_ = at::autocast::is_autocast_enabled(type);
    autocast_dtype_ = at::autocast::get_autocast_dtype(type);
    cpu_rng_ = generator_state(torch::kCPU);
    set_generator_state(torch::kCPU, r.cpu_rng);
    if (r.device_rng.defined()) {
      device_rng_ = generator_state(r.device);
      set_generator_state(r.device, r.device_rng);
    }
    at::autocast::set_autocast_enabled(type, r.autocast);
    at::autocast::set_autocast_dtype(type, r.autocast_dtype);
    at::autocast::increment_nesting();
  }
  ~ReplayScope() {
    const at::DeviceType type = r_.device.type();
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type, autocast_);
    at::autocast::set_autocast_dtype(type, autocast_dtype_);
    set_generator_state(torch::kCPU, cpu_rng_);
    if (device_rng_.defined()) set_generator_state(r_.device, device_rng_);
  }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;

 private:
  const Replay& r_;
  bool autocast_;
  at::ScalarType autocast_dtype_;
  Tensor cpu_rng_, device_rng_;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // `anchor` requires grad, so that the output does whether or not x does.
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& anchor,
                        c10::intrusive_ptr<Replay> replay) {
    ctx->save_for_backward({x});
    replay->device = x.device();
    replay->cpu_rng = generator_state(torch::kCPU);
    if (!x.device().is_cpu()) replay->device_rng = generator_state(x.device());
    replay->autocast = at::autocast::is_autocast_enabled(x.device().type());
    replay->autocast_dtype = at::autocast::get_autocast_dtype(x.device().type());
    Tensor y = replay->block(x);
    ctx->saved_data["replay"] = c10::IValue::make_capsule(std::move(replay));
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const Tensor x = ctx->get_saved_variables()[0];
    auto replay = c10::static_intrusive_pointer_cast<Replay>(ctx->saved_data["replay"].toCapsule());
    ctx->saved_data.erase("replay");
    Tensor input = x.detach().requires_grad_(x.requires_grad());
    {
      torch::AutoGradMode grad_on(true);
      Tensor y;
      {
        ReplayScope scope(*replay);
        y = replay->block(input);
      }
      if (y.requires_grad()) torch::autograd::backward({y}, {grad_outputs[0]});
    }
    return {x.requires_grad() ? input.grad() : Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor checkpoint(BlockFunction block, const Tensor& x) {
  auto replay = c10::make_intrusive<Replay>();
  replay->block = std::move(block);
  static thread_local Tensor anchor = torch::empty({0}).requires_grad_(true);
  return CheckpointFunction::apply(x, anchor, std::move(replay));
}

}  // namespace trainer::models
