// Transformers' learning-rate schedules (optimization.py's get_*_schedule_with_warmup lambdas).
#include "lib/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trainer::optim {

const std::vector<std::string>& lr_scheduler_types() {
  static const std::vector<std::string> names = {"linear", "cosine", "constant",
                                                 "constant_with_warmup"};
  return names;
}

double lr_lambda(const std::string& type, int64_t step, int64_t warmup, int64_t total) {
  if (type == "constant") return 1.0;
  if (step < warmup)
    return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
  if (type == "constant_with_warmup") return 1.0;
  double progress = static_cast<double>(step - warmup) /
                    static_cast<double>(std::max<int64_t>(1, total - warmup));
  if (type == "linear") {
    return std::max(0.0, static_cast<double>(total - step) /
                             static_cast<double>(std::max<int64_t>(1, total - warmup)));
  }
  if (type == "cosine") return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
  throw std::invalid_argument("unknown lr_scheduler_type " + type);
}

}  // namespace trainer::optim
