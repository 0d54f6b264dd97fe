// Mixed precision as torch.autocast and torch.amp.GradScaler do it: AutocastGuard runs the code in
// its scope with matrix products and convolutions in bf16 or fp16 (the rest stays float32), and
// GradScaler scales an fp16 loss so small gradients do not underflow, skipping steps whose
// gradients overflowed.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

namespace trainer {

// "no", "bf16" or "fp16" -> the autocast dtype (std::nullopt for "no"). Throws InputError for
// anything else, naming the allowed values.
std::optional<c10::ScalarType> autocast_dtype(const std::string& mixed_precision);

// While alive, autocast is on for `device_type` with `dtype` (as `with torch.autocast(...)`);
// the previous state comes back when it ends, and the cast cache is cleared when the outermost
// guard ends.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
};

// torch.amp.GradScaler: multiplies the loss by a scale (65536 at first), divides the gradients by
// it before the optimizer step, skips the step when any gradient is inf or NaN and then halves
// the scale; doubles it after growth_interval steps without overflow.
class GradScaler {
 public:
  explicit GradScaler(torch::Device device, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int64_t growth_interval = 2000);

  // loss * scale.
  torch::Tensor scale(const torch::Tensor& loss);
  // Divides the optimizer's gradients by the scale, once per step and optimizer, and records
  // whether any is inf or NaN.
  void unscale_(torch::optim::Optimizer& optimizer);
  // Unscales if unscale_ was not called for this optimizer, then steps unless one of its
  // gradients overflowed. Returns whether it stepped (this reads one value from the device).
  bool step(torch::optim::Optimizer& optimizer);
  // Adjusts the scale from the overflows of every optimizer unscaled since the last update (as
  // PyTorch's update()), and starts the next step.
  void update();
  // Asks for update() before the next scale() or get_scale(), so that every optimizer of a step
  // is unscaled with the same scale however many there are (prepared optimizers do this).
  void request_update() { update_requested_ = true; }
  // The scale the next loss is multiplied by.
  double get_scale();

 private:
  torch::Tensor scale_;           // float32 [1]
  torch::Tensor growth_tracker_;  // int32 [1]
  double growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  // Per optimizer unscaled this step: float32 [1], 1 when its gradients held inf or NaN.
  std::map<const torch::optim::Optimizer*, torch::Tensor> found_inf_;
  bool update_requested_ = false;
};

}  // namespace trainer
