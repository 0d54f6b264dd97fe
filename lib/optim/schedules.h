// Transformers' learning-rate schedules (every lr_scheduler_type of Transformers 5.24 but greedy)
// with their lr_scheduler_kwargs: the LambdaLR multipliers, and the checks that turn Transformers'
// errors for bad keyword arguments into one-line InputErrors. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::optim {

// The names lr_scheduler_type allows, Transformers' SchedulerType values but greedy.
const std::vector<std::string>& lr_scheduler_types();

// The type that is not a multiplier of the step but torch's ReduceLROnPlateau (plateau.h).
inline constexpr const char* kReduceLrOnPlateau = "reduce_lr_on_plateau";

// One schedule: the type and its keyword arguments read as Transformers' get_scheduler passes
// them to the type's function, over `warmup` warmup steps of `total` (num_warmup_steps,
// num_training_steps), with the optimizer's initial learning rate `initial_lr` (polynomial's
// lr_end and min_lr are absolute rates).
class LrSchedule {
 public:
  // Throws InputError (one line naming the key, its value and what is allowed) for a key the
  // type's function does not take, a value it refuses or one it would fail on. Keys that
  // Transformers ignores (any, with constant and constant_with_warmup) are warned about.
  // reduce_lr_on_plateau is not a LambdaLR schedule: std::invalid_argument.
  LrSchedule(std::string type, const nlohmann::ordered_json& kwargs, int64_t warmup, int64_t total,
             double initial_lr);

  // The multiplier of the initial rate at `step` (LambdaLR's last_epoch, 0-based).
  double operator()(int64_t step) const;

  const std::string& type() const { return type_; }

 private:
  std::string type_;
  double warmup_;
  double total_;
  double initial_lr_;
  double num_cycles_ = 0.5;
  double power_ = 1.0;
  double lr_end_ = 1e-7;
  double timescale_ = 0;
  double min_lr_rate_ = 0;
  std::optional<double> warmup_lr_rate_;
  double num_stable_steps_ = 0;
  double num_decay_steps_ = 0;
  std::string warmup_type_ = "linear";
  std::string decay_type_ = "cosine";
  double min_lr_ratio_ = 0;
};

// Checks lr_scheduler_kwargs for `type` before a run (the rate the optimizer starts from is
// `initial_lr`): InputError as LrSchedule's constructor, or ReduceLROnPlateau's options.
void check_lr_scheduler_kwargs(const std::string& type, const nlohmann::ordered_json& kwargs,
                               double initial_lr);

}  // namespace trainer::optim
