// Accelerate's AcceleratedOptimizer: an optimizer that steps once per accumulation window, through
// the GradScaler under fp16.
#pragma once

#include <functional>
#include <memory>

#include <torch/optim/optimizer.h>

#include "lib/accelerate/state.h"

namespace trainer {

class GradScaler;

// A prepared optimizer (Accelerate's AcceleratedOptimizer): step() and zero_grad() act only when
// gradients are synchronised, so inside accumulate() they run once per accumulation window; with
// fp16 the step goes through the GradScaler and is skipped when a gradient overflowed.
class AcceleratedOptimizer {
 public:
  AcceleratedOptimizer(std::shared_ptr<torch::optim::Optimizer> optimizer,
                       std::shared_ptr<GradientState> state, std::shared_ptr<GradScaler> scaler);
  void step();
  void zero_grad();
  // Whether the last step() that ran left the parameters as they were because a gradient
  // overflowed (fp16); steps skipped for accumulation do not change it.
  bool step_was_skipped() const { return step_was_skipped_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // Runs after each step that ran (sharded data parallel gathers the updated chunks).
  void set_after_step(std::function<void()> after_step) { after_step_ = std::move(after_step); }
  std::shared_ptr<torch::optim::Optimizer> optimizer_ptr() const { return optimizer_; }

 private:
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  std::shared_ptr<GradientState> state_;
  std::shared_ptr<GradScaler> scaler_;
  bool step_was_skipped_ = false;
  std::function<void()> after_step_;
};

}  // namespace trainer
