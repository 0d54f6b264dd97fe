// The arguments that trade memory for time, read into what the Trainer acts on: the optimizer
// (optim, optim_args, as Transformers' trainer_optimizer.py reads them), activation checkpointing
// (with Transformers' older gradient_checkpointing names) and the chunked loss (use_liger_kernel).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "trainer/training_args.h"

namespace trainer {
namespace {

using json = nlohmann::ordered_json;

// The optim_args keys each optimizer reads, as Transformers' _get_sgd, _get_adagrad and
// _get_rmsprop read them: numbers, and the flags that are words.
struct OptimArgKeys {
  std::vector<std::string> numbers;
  std::vector<std::string> flags;
};

const std::map<std::string, OptimArgKeys>& optim_arg_keys() {
  static const std::map<std::string, OptimArgKeys> keys = {
      {"adamw_torch_fused", {}},
      {"adamw_torch", {}},
      {"adafactor", {}},
      {"sgd", {{"momentum", "dampening", "weight_decay"}, {"nesterov"}}},
      {"adagrad", {{"lr_decay", "weight_decay", "eps"}, {}}},
      {"rmsprop", {{"momentum", "alpha", "eps", "weight_decay"}, {"centered"}}},
  };
  return keys;
}

bool contains(const std::vector<std::string>& list, const std::string& word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

[[noreturn]] void bad_optim_args(const std::string& text, const std::string& why) {
  throw InputError(
      fmt::format("argument optim_args: {} is not allowed ({})", base::shown(json(text)), why));
}

}  // namespace

const std::vector<std::string>& TrainingArguments::optimizers() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out = {"adamw_torch_fused", "adamw_torch", "adafactor", "sgd",
                                    "adagrad",           "rmsprop"};
    return out;
  }();
  return names;
}

OptimizerPlan TrainingArguments::optimizer_plan() const {
  if (!contains(optimizers(), optim_)) {
    throw InputError(fmt::format("argument optim: {} is not allowed (allowed: {})",
                                 base::shown(json(optim_)), fmt::join(optimizers(), ", ")));
  }
  OptimizerPlan plan;
  plan.name = optim_;
  if (!optim_args_ || optim_args_->empty()) return plan;
  const OptimArgKeys& keys = optim_arg_keys().at(optim_);
  if (keys.numbers.empty() && keys.flags.empty()) {
    bad_optim_args(*optim_args_, fmt::format("optim {} reads no optim_args; sgd, adagrad and "
                                             "rmsprop do",
                                             optim_));
  }
  // Transformers drops the spaces, splits at commas, and each piece must be key=value.
  std::string text = *optim_args_;
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  std::vector<std::string> allowed = keys.numbers;
  allowed.insert(allowed.end(), keys.flags.begin(), keys.flags.end());
  const std::string allowed_text =
      fmt::format("optim {} reads {} as key=value,key=value", optim_, fmt::join(allowed, ", "));
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string piece = text.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = piece.find('=');
    if (eq == std::string::npos || piece.find('=', eq + 1) != std::string::npos) {
      bad_optim_args(*optim_args_, allowed_text);
    }
    const std::string key = piece.substr(0, eq), value = piece.substr(eq + 1);
    if (!contains(allowed, key)) {
      bad_optim_args(*optim_args_, fmt::format("{} is not a key it reads; {}",
                                               base::shown(json(key)), allowed_text));
    }
    if (plan.options.count(key)) {
      bad_optim_args(*optim_args_, fmt::format("{} is given twice", key));
    }
    if (contains(keys.flags, key)) {
      std::string word = value;
      std::transform(word.begin(), word.end(), word.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (word == "true" || word == "1" || word == "yes") {
        plan.options[key] = 1;
      } else if (word == "false" || word == "0" || word == "no") {
        plan.options[key] = 0;
      } else {
        bad_optim_args(*optim_args_,
                       fmt::format("{} is true or false, not {}", key, base::shown(json(value))));
      }
      continue;
    }
    char* end = nullptr;
    errno = 0;
    const double number = std::strtod(value.c_str(), &end);
    // Every number these optimizers read is >= 0 (PyTorch refuses a negative one).
    if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(number) || number < 0) {
      bad_optim_args(*optim_args_, fmt::format("{} must be a number >= 0, not {}", key,
                                               base::shown(json(value))));
    }
    plan.options[key] = number;
  }
  if (optim_ == "sgd" && plan.options.count("nesterov") && plan.options.at("nesterov") > 0) {
    const double momentum = plan.options.count("momentum") ? plan.options.at("momentum") : 0.0;
    const double dampening = plan.options.count("dampening") ? plan.options.at("dampening") : 0.0;
    if (momentum <= 0 || dampening != 0) {
      bad_optim_args(*optim_args_,
                     "nesterov needs a momentum > 0 and dampening 0, as PyTorch's SGD");
    }
  }
  return plan;
}

CheckpointingPlan TrainingArguments::checkpointing_plan() const {
  // Transformers: the new name wins; the old one is read only where the new one is unset.
  CheckpointingPlan plan;
  plan.enabled = activation_checkpointing_.value_or(gradient_checkpointing_.value_or(false));
  const bool old_kwargs = activation_checkpointing_kwargs_.empty();
  const json& kwargs =
      old_kwargs ? gradient_checkpointing_kwargs_ : activation_checkpointing_kwargs_;
  const std::string name =
      old_kwargs ? "gradient_checkpointing_kwargs" : "activation_checkpointing_kwargs";
  for (const auto& [key, value] : kwargs.items()) {
    auto bad = [&, key = key, value = value](const std::string& allowed) {
      throw InputError(fmt::format("argument {}: {} {} is not allowed ({})", name, key,
                                   base::json_text(value), allowed));
    };
    if (key == "every_n_layers") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1) bad("an integer >= 1");
      plan.every_n_layers = value.get<int64_t>();
    } else if (key == "use_reentrant" || key == "preserve_rng_state") {
      if (!value.is_boolean()) bad("true or false");
      // Either way of recomputing gives the same gradients here; the random state (dropout) is
      // always replayed, so that they stay the same.
      if (key == "preserve_rng_state" && !value.get<bool>()) {
        bad("true: the recomputation always replays the forward's dropout masks");
      }
    } else if (key == "offload") {
      if (!value.is_boolean()) bad("true or false");
      plan.offload = value.get<bool>();
    } else {
      throw InputError(fmt::format(
          "argument {}: {} is not an option of activation checkpointing (allowed: every_n_layers, "
          "use_reentrant, preserve_rng_state, offload)",
          name, base::shown_text(key)));
    }
  }
  // DDP's search for unused parameters walks the forward's graph, which a recomputed block is not
  // in: its parameters would be marked unused, then ready when the replay's backward reaches them
  // (PyTorch refuses reentrant checkpointing with it too).
  if (plan.enabled && ddp_find_unused_parameters_.value_or(false)) {
    throw InputError(
        "argument ddp_find_unused_parameters: true is not allowed with activation checkpointing "
        "(a recomputed block's parameters are not in the forward's graph; leave it false or "
        "null)");
  }
  return plan;
}

}  // namespace trainer
