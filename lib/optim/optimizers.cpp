// Transformers' optimizer handlers (trainer_optimizer.py: _get_adamw_torch, _get_adafactor,
// _get_sgd, _get_adagrad, _get_rmsprop) in C++: a class per name and its options, the defaults
// from the keyword arguments and each group's from them with its own weight_decay.
#include "lib/optim/optimizers.h"

#include <functional>
#include <optional>
#include <set>
#include <stdexcept>

#include <torch/optim/adagrad.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "lib/optim/adafactor.h"
#include "lib/optim/adamw.h"

namespace trainer::optim {
namespace {

// optim_args as the handler reads it: the keys it knows, each read once.
class OptionReader {
 public:
  OptionReader(const OptimizerChoice& choice, std::set<std::string> known)
      : choice_(choice), known_(std::move(known)) {
    for (const auto& [key, value] : choice.options) {
      if (!known_.count(key)) {
        throw std::invalid_argument("make_optimizer: optim " + choice.name +
                                    " reads no optim_args key " + key);
      }
    }
  }
  std::optional<double> get(const std::string& key) const {
    auto it = choice_.options.find(key);
    if (it == choice_.options.end()) return std::nullopt;
    return it->second;
  }

 private:
  const OptimizerChoice& choice_;
  std::set<std::string> known_;
};

// Builds the groups with options(weight_decay) each, and the optimizer over them with
// options(optim_args' weight_decay) as its defaults.
template <typename Optimizer, typename Options>
std::shared_ptr<torch::optim::Optimizer> build(
    const std::vector<ParamGroup>& groups, std::optional<double> default_weight_decay,
    const std::function<Options(std::optional<double>)>& options) {
  std::vector<torch::optim::OptimizerParamGroup> built;
  for (const ParamGroup& group : groups) {
    built.emplace_back(group.params, std::make_unique<Options>(options(group.weight_decay)));
  }
  return std::make_shared<Optimizer>(built, options(default_weight_decay));
}

}  // namespace

std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerChoice& choice,
                                                        const std::vector<ParamGroup>& groups) {
  const std::string& name = choice.name;
  const double lr = choice.lr;
  if (name == "adamw_torch_fused" || name == "adamw_torch") {
    OptionReader read(choice, {});
    return build<AdamW, torch::optim::AdamWOptions>(
        groups, std::nullopt, [&](std::optional<double> weight_decay) {
          auto o = torch::optim::AdamWOptions(lr)
                       .betas({choice.adam_beta1, choice.adam_beta2})
                       .eps(choice.adam_epsilon);
          if (weight_decay) o.weight_decay(*weight_decay);
          return o;
        });
  }
  if (name == "adafactor") {
    OptionReader read(choice, {});
    return build<Adafactor, AdafactorOptions>(groups, std::nullopt,
                                              [&](std::optional<double> weight_decay) {
                                                auto o = AdafactorOptions(lr);
                                                if (weight_decay) o.weight_decay(*weight_decay);
                                                return o;
                                              });
  }
  if (name == "sgd") {
    OptionReader read(choice, {"momentum", "dampening", "weight_decay", "nesterov"});
    return build<torch::optim::SGD, torch::optim::SGDOptions>(
        groups, read.get("weight_decay"), [&](std::optional<double> weight_decay) {
          auto o = torch::optim::SGDOptions(lr)
                       .momentum(read.get("momentum").value_or(0.0))
                       .dampening(read.get("dampening").value_or(0.0))
                       .nesterov(read.get("nesterov").value_or(0.0) != 0);
          if (weight_decay) o.weight_decay(*weight_decay);
          return o;
        });
  }
  if (name == "adagrad") {
    OptionReader read(choice, {"lr_decay", "weight_decay", "eps"});
    return build<torch::optim::Adagrad, torch::optim::AdagradOptions>(
        groups, read.get("weight_decay"), [&](std::optional<double> weight_decay) {
          auto o = torch::optim::AdagradOptions(lr)
                       .lr_decay(read.get("lr_decay").value_or(0.0))
                       .eps(read.get("eps").value_or(1e-10));
          if (weight_decay) o.weight_decay(*weight_decay);
          return o;
        });
  }
  if (name == "rmsprop") {
    OptionReader read(choice, {"momentum", "alpha", "eps", "weight_decay", "centered"});
    return build<torch::optim::RMSprop, torch::optim::RMSpropOptions>(
        groups, read.get("weight_decay"), [&](std::optional<double> weight_decay) {
          auto o = torch::optim::RMSpropOptions(lr)
                       .momentum(read.get("momentum").value_or(0.0))
                       .alpha(read.get("alpha").value_or(0.99))
                       .eps(read.get("eps").value_or(1e-8))
                       .centered(read.get("centered").value_or(0.0) != 0);
          if (weight_decay) o.weight_decay(*weight_decay);
          return o;
        });
  }
  throw std::invalid_argument("make_optimizer: no optimizer named " + name);
}

}  // namespace trainer::optim
