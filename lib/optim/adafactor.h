// Adafactor as Transformers' Trainer builds it for optim adafactor (transformers.optimization
// .Adafactor with scale_parameter=False, relative_step=False, warmup_init=False): the step size is
// lr, second moments are factored into a row and a column average for parameters of two or more
// dimensions (full for one), and each update is clipped to an RMS of clip_threshold. Half and bf16
// parameters are updated in float32 and copied back, with float32 state, as Transformers does.
#pragma once

#include <optional>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/optim/serialize.h>

namespace trainer::optim {

struct AdafactorOptions : public torch::optim::OptimizerCloneableOptions<AdafactorOptions> {
  AdafactorOptions(double lr = 1e-3);  // NOLINT: converts as LibTorch's options do
  TORCH_ARG(double, lr) = 1e-3;
  // Added to the squared gradient (Transformers' eps[0]; its eps[1] only bounds the parameter
  // scale that scale_parameter=False turns off).
  TORCH_ARG(double, eps) = 1e-30;
  TORCH_ARG(double, clip_threshold) = 1.0;  // the update's RMS is at most this
  TORCH_ARG(double, decay_rate) = -0.8;     // beta2 at step t: 1 - t^decay_rate
  TORCH_ARG(std::optional<double>, beta1);  // a first moment of the updates with this decay
  TORCH_ARG(double, weight_decay) = 0.0;    // p -= weight_decay * lr * p before the update

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

// One parameter's state: its step count and second moments (exp_avg_sq_row and exp_avg_sq_col, of
// the parameter's shape without its last and without its second-to-last dimension, when factored;
// exp_avg_sq otherwise), exp_avg with beta1. Undefined tensors are the ones it does not use.
struct AdafactorParamState
    : public torch::optim::OptimizerCloneableParamState<AdafactorParamState> {
  TORCH_ARG(int64_t, step) = 0;
  TORCH_ARG(torch::Tensor, exp_avg);
  TORCH_ARG(torch::Tensor, exp_avg_sq_row);
  TORCH_ARG(torch::Tensor, exp_avg_sq_col);
  TORCH_ARG(torch::Tensor, exp_avg_sq);

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
};

class Adafactor : public torch::optim::Optimizer {
 public:
  // Groups without options of their own take `defaults`. Throws c10::Error (as LibTorch's
  // optimizers do) for an lr, eps or weight_decay < 0, a clip_threshold <= 0 or a beta1 outside
  // [0, 1), in the defaults or any group.
  explicit Adafactor(const std::vector<torch::optim::OptimizerParamGroup>& param_groups,
                     AdafactorOptions defaults = {});
  explicit Adafactor(std::vector<torch::Tensor> params, AdafactorOptions defaults = {})
      : Adafactor({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  // One update of every parameter with a gradient (Transformers' Adafactor.step). Throws
  // c10::Error for a sparse gradient.
  torch::Tensor step(LossClosure closure = nullptr) override;
  // LibTorch's archive of the state and each group's options (checkpoints' optimizer.pt).
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
};

}  // namespace trainer::optim
