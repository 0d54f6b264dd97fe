// torch.optim.lr_scheduler.ReduceLROnPlateau's options and step, over plain rates.
#include "lib/optim/plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"

namespace trainer::optim {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& key, const json& value, const std::string& allowed) {
  throw InputError(
      fmt::format("argument lr_scheduler_kwargs: {} {} is not allowed with lr_scheduler_type "
                  "reduce_lr_on_plateau ({})",
                  key, base::shown(value), allowed));
}

double number(const json& kwargs, const char* key, double fallback) {
  if (!kwargs.contains(key)) return fallback;
  const json& value = kwargs[key];
  if (!value.is_number() || !std::isfinite(value.get<double>()))
    refuse(key, value, "a finite number");
  return value.get<double>();
}

std::string choice(const json& kwargs, const char* key, const char* fallback, const char* a,
                   const char* b) {
  if (!kwargs.contains(key)) return fallback;
  const json& value = kwargs[key];
  if (!value.is_string() || (value != a && value != b))
    refuse(key, value, fmt::format("{} or {}", a, b));
  return value.get<std::string>();
}

}  // namespace

PlateauOptions parse_plateau_options(const json& kwargs) {
  PlateauOptions options;
  options.mode = choice(kwargs, "mode", "min", "min", "max");
  options.factor = number(kwargs, "factor", 0.1);
  if (options.factor >= 1.0) refuse("factor", kwargs["factor"], "must be < 1.0");
  options.patience = number(kwargs, "patience", 10);
  options.threshold = number(kwargs, "threshold", 1e-4);
  options.threshold_mode = choice(kwargs, "threshold_mode", "rel", "rel", "abs");
  options.cooldown = number(kwargs, "cooldown", 0);
  options.eps = number(kwargs, "eps", 1e-8);
  if (kwargs.contains("min_lr")) {
    const json& value = kwargs["min_lr"];
    if (value.is_array()) {
      options.min_lrs.clear();
      options.min_lr_per_group = true;
      for (const json& v : value) {
        if (!v.is_number() || !std::isfinite(v.get<double>()))
          refuse("min_lr", value, "a finite number, or a list of one per parameter group");
        options.min_lrs.push_back(v.get<double>());
      }
    } else {
      options.min_lrs = {number(kwargs, "min_lr", 0)};
    }
  }
  return options;
}

Plateau::Plateau(PlateauOptions options, size_t groups) : options_(std::move(options)) {
  if (options_.min_lr_per_group && options_.min_lrs.size() != groups) {
    throw InputError(fmt::format(
        "argument lr_scheduler_kwargs: min_lr lists {} rates; the optimizer has {} parameter "
        "groups (one rate per group, or a single number)",
        options_.min_lrs.size(), groups));
  }
  if (!options_.min_lr_per_group) options_.min_lrs.assign(groups, options_.min_lrs.at(0));
  state_.best = mode_worse();
}

double Plateau::mode_worse() const {
  const double inf = std::numeric_limits<double>::infinity();
  return options_.mode == "min" ? inf : -inf;
}

bool Plateau::is_better(double a, double best) const {
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min") {
    return rel ? a < best * (1.0 - options_.threshold) : a < best - options_.threshold;
  }
  return rel ? a > best * (options_.threshold + 1.0) : a > best + options_.threshold;
}

void Plateau::step(double metric, std::vector<double>& lrs) {
  state_.last_epoch += 1;
  if (is_better(metric, state_.best)) {
    state_.best = metric;
    state_.num_bad_epochs = 0;
  } else {
    state_.num_bad_epochs += 1;
  }
  if (state_.cooldown_counter > 0) {
    state_.cooldown_counter -= 1;
    state_.num_bad_epochs = 0;  // bad metrics in the cooldown do not count
  }
  if (static_cast<double>(state_.num_bad_epochs) > options_.patience) {
    for (size_t i = 0; i < lrs.size(); ++i) {
      const double old_lr = lrs[i];
      const double new_lr = std::max(old_lr * options_.factor, options_.min_lrs.at(i));
      if (old_lr - new_lr > options_.eps) lrs[i] = new_lr;
    }
    state_.cooldown_counter = options_.cooldown;
    state_.num_bad_epochs = 0;
  }
}

}  // namespace trainer::optim
