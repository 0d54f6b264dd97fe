// torch's ReduceLROnPlateau without the optimizer: its options (lr_scheduler_kwargs of
// reduce_lr_on_plateau, checked as torch checks them) and the decision it takes on each metric,
// over the rates handed in. Torch-free; LibTorch's side is ReduceLROnPlateau in lr_scheduler.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::optim {

// ReduceLROnPlateau's keyword arguments, with torch's defaults.
struct PlateauOptions {
  std::string mode = "min";
  double factor = 0.1;
  double patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";
  double cooldown = 0;
  std::vector<double> min_lrs = {0.0};  // one for every group, or one per group
  bool min_lr_per_group = false;
  double eps = 1e-8;
};

// Reads lr_scheduler_kwargs of reduce_lr_on_plateau. Throws InputError naming the key for a value
// torch refuses (factor >= 1, an unknown mode or threshold_mode) or a value of the wrong kind.
PlateauOptions parse_plateau_options(const nlohmann::ordered_json& kwargs);

// What ReduceLROnPlateau keeps between steps (its state_dict but the options).
struct PlateauState {
  double best = 0;  // mode_worse (+-inf) until a first metric
  int64_t num_bad_epochs = 0;
  double cooldown_counter = 0;
  int64_t last_epoch = 0;
};

class Plateau {
 public:
  // For `groups` parameter groups. Throws InputError when min_lr lists another count.
  Plateau(PlateauOptions options, size_t groups);

  // One ReduceLROnPlateau.step(metric): updates the state and, after more than `patience` bad
  // metrics, the rates `lrs` (one per group) in place.
  void step(double metric, std::vector<double>& lrs);

  double mode_worse() const;
  const PlateauState& state() const { return state_; }
  void set_state(const PlateauState& state) { state_ = state; }
  const PlateauOptions& options() const { return options_; }

 private:
  bool is_better(double a, double best) const;

  PlateauOptions options_;
  PlateauState state_;
};

}  // namespace trainer::optim
