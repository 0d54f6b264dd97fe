// Autocast scopes and the fp16 gradient scaler, on LibTorch's own autocast state and AMP kernels
// (the ones torch.autocast and torch.amp.GradScaler call).
#include "lib/accelerate/mixed_precision.h"

#include <map>

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"

namespace trainer {

std::optional<c10::ScalarType> autocast_dtype(const std::string& mixed_precision) {
  if (mixed_precision == "no") return std::nullopt;
  if (mixed_precision == "bf16") return torch::kBFloat16;
  if (mixed_precision == "fp16") return torch::kHalf;
  throw InputError(fmt::format("mixed_precision \"{}\" is not allowed (allowed: no, bf16, fp16)",
                               mixed_precision));
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype)
    : device_type_(device_type),
      previous_enabled_(at::autocast::is_autocast_enabled(device_type)),
      previous_dtype_(at::autocast::get_autocast_dtype(device_type)) {
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

GradScaler::GradScaler(torch::Device device, double init_scale, double growth_factor,
                       double backoff_factor, int64_t growth_interval)
    : scale_(
          torch::full({1}, init_scale, torch::TensorOptions().dtype(torch::kFloat).device(device))),
      growth_tracker_(torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt).device(device))),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) {
  if (update_requested_) update();
  return loss * scale_.to(loss.device(), /*non_blocking=*/true).reshape({});
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (found_inf_.count(&optimizer)) return;
  torch::NoGradGuard no_grad;
  torch::Tensor inv_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  torch::Tensor found_inf = torch::zeros_like(scale_);
  // The kernel takes gradients of one dtype at a time, as PyTorch groups them.
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      if (p.grad().defined()) by_dtype[p.grad().scalar_type()].push_back(p.grad());
    }
  }
  for (auto& [dtype, grads] : by_dtype) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  }
  found_inf_[&optimizer] = found_inf;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  unscale_(optimizer);
  bool overflow = found_inf_.at(&optimizer).item<float>() != 0.0f;
  if (!overflow) optimizer.step();
  return !overflow;
}

void GradScaler::update() {
  update_requested_ = false;
  if (found_inf_.empty()) return;  // nothing was unscaled since the last update
  torch::Tensor combined = torch::zeros_like(scale_);
  for (auto& [optimizer, found_inf] : found_inf_) combined += found_inf;
  at::_amp_update_scale_(scale_, growth_tracker_, combined, growth_factor_, backoff_factor_,
                         growth_interval_);
  found_inf_.clear();
}

double GradScaler::get_scale() {
  if (update_requested_) update();
  return scale_.item<double>();
}

}  // namespace trainer
