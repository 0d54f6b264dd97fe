// The optimizers TrainingArguments' optim names, built as Transformers' Trainer builds them
// (trainer_optimizer.py's handlers over create_optimizer's parameter groups): which class, and
// which keyword arguments from the learning rate, the Adam arguments and optim_args.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

namespace trainer::optim {

// A parameter group and its weight decay (Transformers' "weight_decay" key of a group).
struct ParamGroup {
  std::vector<torch::Tensor> params;
  double weight_decay = 0.0;
};

// What the arguments choose (TrainingArguments::optimizer_plan and the Adam arguments).
struct OptimizerChoice {
  std::string name = "adamw_torch_fused";  // one of those make_optimizer lists
  double lr = 1e-3;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;  // the AdamWs only
  std::map<std::string, double> options;  // optim_args: numbers, and flags as 1 or 0
};

// The optimizer `choice` names over `groups`, as Transformers builds it:
//   adamw_torch_fused, adamw_torch  optim::AdamW (lr, betas, eps; the same update either way)
//   adafactor  optim::Adafactor (lr, and Transformers' scale_parameter=False, relative_step=False)
//   sgd        torch::optim::SGD (lr; momentum, dampening, nesterov)
//   adagrad    torch::optim::Adagrad (lr; lr_decay, eps)
//   rmsprop    torch::optim::RMSprop (lr; momentum, alpha, eps, centered)
// with each group's weight_decay. optim_args' weight_decay is read and left without effect, as in
// Transformers, where every group's own weight_decay overrides the optimizer's (it stays in the
// defaults, which only a group added later without options would take). Throws
// std::invalid_argument for a name or an options key it does not know (TrainingArguments refuses
// those first), c10::Error for a value the optimizer refuses.
std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerChoice& choice,
                                                        const std::vector<ParamGroup>& groups);

}  // namespace trainer::optim
