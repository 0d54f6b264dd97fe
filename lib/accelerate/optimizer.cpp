// AcceleratedOptimizer: steps only on micro-batches that synchronise gradients.
#include "lib/accelerate/optimizer.h"

#include "lib/accelerate/mixed_precision.h"

namespace trainer {

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
  if (after_step_) after_step_();
}

void AcceleratedOptimizer::zero_grad() {
  if (state_->sync_gradients) optimizer_->zero_grad();
}

}  // namespace trainer
