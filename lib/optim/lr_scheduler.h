// PyTorch's learning-rate schedulers the Trainer uses: LambdaLR (each parameter group's rate is
// its initial rate times lr_lambda(step), set when the scheduler is made (step 0) and after each
// step(); Transformers' schedules are lambdas over it) and ReduceLROnPlateau (the rates cut when
// an evaluation's metric stops improving, stepped with that metric instead), both behind
// LRScheduler.
#pragma once

#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include <torch/optim/optimizer.h>

#include "lib/optim/plateau.h"

namespace trainer::optim {

class LRScheduler {
 public:
  // Keeps a reference to `optimizer`, which must outlive the scheduler.
  explicit LRScheduler(torch::optim::Optimizer& optimizer) : optimizer_(optimizer) {
    for (auto& group : optimizer_.param_groups()) base_lrs_.push_back(group.options().get_lr());
    last_lrs_ = base_lrs_;
  }
  virtual ~LRScheduler() = default;

  // Whether the scheduler steps with an evaluation's metric (step_with_metric) rather than after
  // each optimizer step (step).
  virtual bool steps_with_metric() const { return false; }
  // Moves to the next step's learning rate (call after each optimizer step).
  virtual void step() = 0;
  // One step with an evaluation's metric; std::logic_error for a scheduler that has none.
  virtual void step_with_metric(double) {
    throw std::logic_error("LRScheduler: this scheduler does not step with a metric");
  }
  // The learning rates set last, one per parameter group.
  const std::vector<double>& get_last_lr() const { return last_lrs_; }
  int64_t last_step() const { return last_step_; }
  // The initial rates, one per parameter group.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // Replaces them (a resumed run keeps its saved schedule); the next set_last_step() or step()
  // applies them. Throws std::invalid_argument for a count other than the groups'.
  void set_base_lrs(std::vector<double> base_lrs) {
    if (base_lrs.size() != base_lrs_.size())
      throw std::invalid_argument("LRScheduler: one base learning rate per parameter group");
    base_lrs_ = std::move(base_lrs);
  }
  // Continues from a saved last_step() (a resumed run): the rates of that step.
  virtual void set_last_step(int64_t step) = 0;

 protected:
  void set_rates(std::vector<double> lrs) {
    last_lrs_ = std::move(lrs);
    auto& groups = optimizer_.param_groups();
    for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(last_lrs_.at(i));
  }

  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
  int64_t last_step_ = 0;
};

class LambdaLR : public LRScheduler {
 public:
  LambdaLR(torch::optim::Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
      : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {
    apply();
  }

  void step() override {
    ++last_step_;
    apply();
  }
  void set_last_step(int64_t step) override {
    last_step_ = step;
    apply();
  }

 private:
  void apply() {
    const double factor = lr_lambda_(last_step_);
    std::vector<double> lrs;
    for (double base : base_lrs_) lrs.push_back(base * factor);
    set_rates(std::move(lrs));
  }

  std::function<double(int64_t)> lr_lambda_;
};

// torch's ReduceLROnPlateau: the rates start at the optimizer's and only step_with_metric changes
// them (the Trainer calls it after each evaluation during training, with metric_for_best_model).
// Throws InputError when the options' min_lr lists another count of rates than the groups.
class ReduceLROnPlateau : public LRScheduler {
 public:
  ReduceLROnPlateau(torch::optim::Optimizer& optimizer, PlateauOptions options)
      : LRScheduler(optimizer), plateau_(std::move(options), base_lrs_.size()) {}

  bool steps_with_metric() const override { return true; }
  void step() override {}
  void step_with_metric(double metric) override {
    std::vector<double> lrs = last_lrs_;
    plateau_.step(metric, lrs);
    set_rates(std::move(lrs));
  }
  // A new schedule (step 0): the base rates and a fresh state. A resumed one restores its state
  // and rates with restore() instead.
  void set_last_step(int64_t step) override {
    last_step_ = step;
    plateau_.set_state(PlateauState{plateau_.mode_worse(), 0, 0, 0});
    set_rates(base_lrs_);
  }
  const Plateau& plateau() const { return plateau_; }
  // Continues a saved run: its state (a NaN best: still mode_worse, which a metric never makes
  // it) and the rates it had set, one per parameter group (std::invalid_argument otherwise).
  void restore(PlateauState state, std::vector<double> lrs) {
    if (lrs.size() != base_lrs_.size())
      throw std::invalid_argument("ReduceLROnPlateau: one learning rate per parameter group");
    if (std::isnan(state.best)) state.best = plateau_.mode_worse();
    plateau_.set_state(state);
    set_rates(std::move(lrs));
  }

 private:
  Plateau plateau_;
};

}  // namespace trainer::optim
