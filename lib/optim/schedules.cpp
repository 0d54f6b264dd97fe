// Transformers' learning-rate schedules (optimization.py's get_*_schedule* functions and their
// lambdas), with the keyword arguments each function takes, read and checked once.
#include "lib/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/optim/plateau.h"

namespace trainer::optim {
namespace {

using json = nlohmann::ordered_json;

// The keyword arguments of each type's function beyond what get_scheduler passes itself
// (optimizer, num_warmup_steps, num_training_steps); last_epoch, which every LambdaLR schedule
// takes too, is refused apart. constant and constant_with_warmup get none: get_scheduler drops
// lr_scheduler_kwargs for them.
struct TypeRow {
  const char* name;
  std::vector<const char*> keys;
};

const std::vector<TypeRow>& type_rows() {
  static const std::vector<TypeRow> rows = {
      {"linear", {}},
      {"cosine", {"num_cycles"}},
      {"cosine_with_restarts", {"num_cycles"}},
      {"polynomial", {"lr_end", "power"}},
      {"constant", {}},
      {"constant_with_warmup", {}},
      {"inverse_sqrt", {"timescale"}},
      {kReduceLrOnPlateau,
       {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"}},
      {"cosine_with_min_lr", {"num_cycles", "min_lr", "min_lr_rate"}},
      {"cosine_warmup_with_min_lr", {"num_cycles", "min_lr", "min_lr_rate", "warmup_lr_rate"}},
      {"warmup_stable_decay",
       {"num_decay_steps", "num_stable_steps", "warmup_type", "decay_type", "min_lr_ratio",
        "num_cycles"}},
  };
  return rows;
}

const TypeRow& row_of(const std::string& type) {
  for (const TypeRow& row : type_rows()) {
    if (type == row.name) return row;
  }
  throw std::invalid_argument("unknown lr_scheduler_type " + type);
}

[[noreturn]] void refuse(const std::string& type, const std::string& key, const json& value,
                         const std::string& allowed) {
  throw InputError(
      fmt::format("argument lr_scheduler_kwargs: {} {} is not allowed with lr_scheduler_type {} "
                  "({})",
                  key, base::shown(value), type, allowed));
}

// The keys of `kwargs` the type's function takes, refusing any other by name (Python's
// TypeError for an unexpected keyword argument).
void check_keys(const std::string& type, const json& kwargs) {
  if (!kwargs.is_object()) {
    throw InputError(fmt::format("argument lr_scheduler_kwargs: {} is not allowed (a JSON object)",
                                 base::shown(kwargs)));
  }
  const TypeRow& row = row_of(type);
  if (type == "constant" || type == "constant_with_warmup") {
    if (!kwargs.empty()) {
      std::vector<std::string> keys;
      for (const auto& [key, value] : kwargs.items()) keys.push_back(key);
      base::warn_once(fmt::format(
          "lr_scheduler_kwargs {} have no effect: Transformers' get_scheduler passes no "
          "lr_scheduler_kwargs to lr_scheduler_type {}",
          fmt::join(keys, ", "), type));
    }
    return;
  }
  for (const auto& item : kwargs.items()) {
    // (Named, not a structured binding: C++17 lambdas cannot capture one.)
    const std::string& key = item.key();
    if (std::find_if(row.keys.begin(), row.keys.end(), [&](const char* k) { return key == k; }) !=
        row.keys.end())
      continue;
    if (key == "num_warmup_steps" || key == "num_training_steps") {
      throw InputError(fmt::format(
          "argument lr_scheduler_kwargs: {} is set by the Trainer (from warmup_steps or "
          "warmup_ratio, and the training steps), not by lr_scheduler_kwargs",
          key));
    }
    if (key == "last_epoch") {
      throw InputError(
          "argument lr_scheduler_kwargs: last_epoch is not supported (a run continues its "
          "schedule with resume_from_checkpoint)");
    }
    std::vector<std::string> names(row.keys.begin(), row.keys.end());
    throw InputError(fmt::format(
        "argument lr_scheduler_kwargs: {} is not an option of lr_scheduler_type {} ({})", key, type,
        names.empty() ? std::string("it takes none")
                      : fmt::format("its options: {}", fmt::join(names, ", "))));
  }
}

// A number (an integer or a float, as Python takes either), or nothing when absent or, where
// `nullable`, null (Python's None).
std::optional<double> number(const std::string& type, const json& kwargs, const char* key,
                             bool nullable = false) {
  if (!kwargs.contains(key)) return std::nullopt;
  const json& value = kwargs[key];
  if (nullable && value.is_null()) return std::nullopt;
  if (!value.is_number() || !std::isfinite(value.get<double>()))
    refuse(type, key, value, nullable ? "a finite number, or null" : "a finite number");
  return value.get<double>();
}

std::string phase_type(const std::string& type, const json& kwargs, const char* key,
                       const char* fallback) {
  if (!kwargs.contains(key)) return fallback;
  const json& value = kwargs[key];
  if (!value.is_string() || (value != "linear" && value != "cosine" && value != "1-sqrt"))
    refuse(type, key, value, "linear, cosine or 1-sqrt");
  return value.get<std::string>();
}

// min_lr or min_lr_rate, exactly one, as a rate of the initial learning rate.
double min_lr_rate(const std::string& type, const json& kwargs, double initial_lr) {
  const std::optional<double> min_lr = number(type, kwargs, "min_lr", true);
  const std::optional<double> rate = number(type, kwargs, "min_lr_rate", true);
  if (min_lr && rate) {
    throw InputError(fmt::format(
        "argument lr_scheduler_kwargs: min_lr {} and min_lr_rate {} are not allowed together with "
        "lr_scheduler_type {} (only one of them)",
        base::python_float(*min_lr), base::python_float(*rate), type));
  }
  if (!min_lr && !rate) {
    throw InputError(fmt::format(
        "argument lr_scheduler_kwargs: lr_scheduler_type {} needs min_lr or min_lr_rate (one "
        "of them: the rate the cosine ends at, absolute or as a rate of learning_rate)",
        type));
  }
  if (rate) return *rate;
  if (initial_lr == 0)
    refuse(type, "min_lr", *min_lr, "a rate of learning_rate 0: use min_lr_rate");
  return *min_lr / initial_lr;
}

double warmup_fraction(double step, double warmup) { return step / std::max(1.0, warmup); }

// Python's float % (the result has the divisor's sign).
double python_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

}  // namespace

const std::vector<std::string>& lr_scheduler_types() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const TypeRow& row : type_rows()) out.emplace_back(row.name);
    return out;
  }();
  return names;
}

LrSchedule::LrSchedule(std::string type, const json& kwargs, int64_t warmup, int64_t total,
                       double initial_lr)
    : type_(std::move(type)),
      warmup_(static_cast<double>(warmup)),
      total_(static_cast<double>(total)),
      initial_lr_(initial_lr) {
  if (type_ == kReduceLrOnPlateau)
    throw std::invalid_argument("reduce_lr_on_plateau is not a LambdaLR schedule");
  check_keys(type_, kwargs);
  if (type_ == "constant" || type_ == "constant_with_warmup") return;
  const json& kw = kwargs;
  if (type_ == "cosine" || type_ == "cosine_with_min_lr" || type_ == "cosine_warmup_with_min_lr" ||
      type_ == "warmup_stable_decay") {
    num_cycles_ = number(type_, kw, "num_cycles").value_or(0.5);
  } else if (type_ == "cosine_with_restarts") {
    num_cycles_ = number(type_, kw, "num_cycles").value_or(1.0);
  }
  if (type_ == "polynomial") {
    lr_end_ = number(type_, kw, "lr_end").value_or(1e-7);
    power_ = number(type_, kw, "power").value_or(1.0);
    if (!(initial_lr > lr_end_)) {
      refuse(type_, "lr_end", lr_end_,
             fmt::format("must be smaller than the initial learning rate {}",
                         base::python_float(initial_lr)));
    }
    // Where Python would fail at the last step: 0.0 ** power, and a decay over 0 steps.
    if (power_ < 0) refuse(type_, "power", power_, "must be >= 0: the decay ends at 0.0 ** power");
    if (total == warmup) {
      throw InputError(fmt::format(
          "argument warmup_steps: {} warmup steps of {} training steps are not allowed with "
          "lr_scheduler_type polynomial (its decay needs at least one step past the warmup)",
          warmup, total));
    }
  } else if (type_ == "inverse_sqrt") {
    const std::optional<double> timescale = number(type_, kw, "timescale", true);
    timescale_ = timescale ? *timescale : (warmup != 0 ? warmup_ : 10000.0);
    if (timescale && *timescale <= 0)
      refuse(type_, "timescale", *timescale, "must be > 0, or null");
  } else if (type_ == "cosine_with_min_lr" || type_ == "cosine_warmup_with_min_lr") {
    min_lr_rate_ = min_lr_rate(type_, kw, initial_lr);
    if (type_ == "cosine_warmup_with_min_lr")
      warmup_lr_rate_ = number(type_, kw, "warmup_lr_rate", true);
  } else if (type_ == "warmup_stable_decay") {
    if (!kw.contains("num_decay_steps")) {
      throw InputError(
          "argument lr_scheduler_kwargs: lr_scheduler_type warmup_stable_decay needs "
          "num_decay_steps (the steps of its decay phase)");
    }
    num_decay_steps_ = *number(type_, kw, "num_decay_steps");
    // A phase of negative length: Transformers' lambda then runs its phases out of order (and
    // 1-sqrt takes the root of a negative number).
    if (num_decay_steps_ < 0) {
      refuse(type_, "num_decay_steps", num_decay_steps_, "a number of steps >= 0");
    }
    const std::optional<double> stable = number(type_, kw, "num_stable_steps", true);
    if (stable && *stable < 0) {
      refuse(type_, "num_stable_steps", *stable, "a number of steps >= 0, or null");
    }
    if (stable) {
      base::warn_once(
          "lr_scheduler_kwargs num_stable_steps is set: warmup_stable_decay uses it, not the "
          "training steps, as Transformers does");
    }
    num_stable_steps_ = stable ? *stable : total_ - warmup_ - num_decay_steps_;
    warmup_type_ = phase_type(type_, kw, "warmup_type", "linear");
    decay_type_ = phase_type(type_, kw, "decay_type", "cosine");
    min_lr_ratio_ = number(type_, kw, "min_lr_ratio").value_or(0.0);
  }
}

double LrSchedule::operator()(int64_t step_index) const {
  const double step = static_cast<double>(step_index);
  const double pi = M_PI;
  if (type_ == "constant") return 1.0;
  if (type_ == "cosine_warmup_with_min_lr") {
    if (step < warmup_) {
      if (!warmup_lr_rate_) return (step + 1.0) / std::max(1.0, warmup_);
      const double rate = *warmup_lr_rate_;
      return rate + (1.0 - rate) * step / std::max(1.0, warmup_ - 1);
    }
    const double progress = (step - warmup_ + 1.0) / std::max(1.0, total_ - warmup_);
    double factor = 0.5 * (1.0 + std::cos(pi * num_cycles_ * 2.0 * progress));
    factor = factor * (1 - min_lr_rate_) + min_lr_rate_;
    return std::max(0.0, factor);
  }
  if (type_ == "warmup_stable_decay") {
    if (step < warmup_) {
      const double progress = step / std::max(1.0, warmup_);
      double factor = progress;
      if (warmup_type_ == "cosine") factor = 0.5 * (1.0 - std::cos(pi * progress));
      if (warmup_type_ == "1-sqrt") factor = 1.0 - std::sqrt(1.0 - progress);
      factor = factor * (1.0 - min_lr_ratio_) + min_lr_ratio_;
      return std::max(0.0, factor);
    }
    if (step < warmup_ + num_stable_steps_) return 1.0;
    if (step < warmup_ + num_stable_steps_ + num_decay_steps_) {
      const double progress =
          (step - warmup_ - num_stable_steps_) / std::max(1.0, num_decay_steps_);
      double factor = 1.0 - progress;
      if (decay_type_ == "cosine")
        factor = 0.5 * (1.0 + std::cos(pi * num_cycles_ * 2.0 * progress));
      if (decay_type_ == "1-sqrt") factor = 1.0 - std::sqrt(progress);
      factor = factor * (1.0 - min_lr_ratio_) + min_lr_ratio_;
      return std::max(0.0, factor);
    }
    return min_lr_ratio_;
  }
  // The others share Transformers' linear warmup from 0.
  if (step < warmup_) return warmup_fraction(step, warmup_);
  if (type_ == "constant_with_warmup") return 1.0;
  if (type_ == "linear") return std::max(0.0, (total_ - step) / std::max(1.0, total_ - warmup_));
  if (type_ == "polynomial") {
    if (step > total_) return lr_end_ / initial_lr_;
    const double lr_range = initial_lr_ - lr_end_;
    const double pct_remaining = 1 - (step - warmup_) / (total_ - warmup_);
    const double decay = lr_range * std::pow(pct_remaining, power_) + lr_end_;
    return decay / initial_lr_;
  }
  if (type_ == "inverse_sqrt") {
    const double shift = timescale_ - warmup_;
    return 1.0 / std::sqrt((step + shift) / timescale_);
  }
  const double progress = (step - warmup_) / std::max(1.0, total_ - warmup_);
  if (type_ == "cosine_with_restarts") {
    if (progress >= 1.0) return 0.0;
    return std::max(0.0, 0.5 * (1.0 + std::cos(pi * python_mod(num_cycles_ * progress, 1.0))));
  }
  double factor = 0.5 * (1.0 + std::cos(pi * num_cycles_ * 2.0 * progress));
  if (type_ == "cosine_with_min_lr") factor = factor * (1 - min_lr_rate_) + min_lr_rate_;
  return std::max(0.0, factor);  // cosine, cosine_with_min_lr
}

void check_lr_scheduler_kwargs(const std::string& type, const json& kwargs, double initial_lr) {
  if (type == kReduceLrOnPlateau) {
    check_keys(type, kwargs);
    parse_plateau_options(kwargs);
    return;
  }
  // Steps do not matter to the checks, but polynomial's decay needs one past the warmup.
  LrSchedule(type, kwargs, 0, 1, initial_lr);
}

}  // namespace trainer::optim
