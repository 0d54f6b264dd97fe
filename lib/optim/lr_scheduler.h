// PyTorch's LambdaLR: each parameter group's learning rate is its initial rate times
// lr_lambda(step), set when the scheduler is made (step 0) and after each step(). The Trainer's
// schedules (linear, cosine, constant, with warmup) are lambdas over it, as in Transformers.
#pragma once

#include <functional>
#include <stdexcept>
#include <vector>

#include <torch/optim/optimizer.h>

namespace trainer::optim {

class LambdaLR {
 public:
  // Keeps a reference to `optimizer`, which must outlive the scheduler.
  LambdaLR(torch::optim::Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
      : optimizer_(optimizer), lr_lambda_(std::move(lr_lambda)) {
    for (auto& group : optimizer_.param_groups()) base_lrs_.push_back(group.options().get_lr());
    apply();
  }
  virtual ~LambdaLR() = default;

  // Moves to the next step's learning rate (call after each optimizer step).
  void step() {
    ++last_step_;
    apply();
  }
  // The learning rates set last, one per parameter group.
  const std::vector<double>& get_last_lr() const { return last_lrs_; }
  int64_t last_step() const { return last_step_; }
  // The initial rates the multipliers apply to, one per parameter group.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // Replaces them (a resumed run keeps its saved schedule); the next set_last_step() or step()
  // applies them. Throws std::invalid_argument for a count other than the groups'.
  void set_base_lrs(std::vector<double> base_lrs) {
    if (base_lrs.size() != base_lrs_.size())
      throw std::invalid_argument("LambdaLR: one base learning rate per parameter group");
    base_lrs_ = std::move(base_lrs);
  }
  // Continues from a saved last_step() (a resumed run): the rates of that step.
  void set_last_step(int64_t step) {
    last_step_ = step;
    apply();
  }

 private:
  void apply() {
    double factor = lr_lambda_(last_step_);
    last_lrs_.clear();
    auto& groups = optimizer_.param_groups();
    for (size_t i = 0; i < groups.size(); ++i) {
      last_lrs_.push_back(base_lrs_[i] * factor);
      groups[i].options().set_lr(last_lrs_.back());
    }
  }

  torch::optim::Optimizer& optimizer_;
  std::function<double(int64_t)> lr_lambda_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
  int64_t last_step_ = 0;
};

}  // namespace trainer::optim
