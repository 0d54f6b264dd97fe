// Transformers' learning-rate schedules (optimization.py's get_*_schedule_with_warmup lambdas),
// one row of a table each: the names that lr_scheduler_type allows come from the same table.
#include "lib/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trainer::optim {
namespace {

double warmup_fraction(int64_t step, int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
}

double constant(int64_t, int64_t, int64_t) { return 1.0; }

double constant_with_warmup(int64_t step, int64_t warmup, int64_t) {
  return step < warmup ? warmup_fraction(step, warmup) : 1.0;
}

double linear(int64_t step, int64_t warmup, int64_t total) {
  if (step < warmup) return warmup_fraction(step, warmup);
  return std::max(0.0, static_cast<double>(total - step) /
                           static_cast<double>(std::max<int64_t>(1, total - warmup)));
}

double cosine(int64_t step, int64_t warmup, int64_t total) {
  if (step < warmup) return warmup_fraction(step, warmup);
  const double progress = static_cast<double>(step - warmup) /
                          static_cast<double>(std::max<int64_t>(1, total - warmup));
  return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
}

struct Schedule {
  const char* name;
  double (*multiplier)(int64_t step, int64_t warmup, int64_t total);
};

constexpr Schedule kSchedules[] = {{"linear", linear},
                                   {"cosine", cosine},
                                   {"constant", constant},
                                   {"constant_with_warmup", constant_with_warmup}};

}  // namespace

const std::vector<std::string>& lr_scheduler_types() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Schedule& s : kSchedules) out.emplace_back(s.name);
    return out;
  }();
  return names;
}

double lr_lambda(const std::string& type, int64_t step, int64_t warmup, int64_t total) {
  for (const Schedule& s : kSchedules) {
    if (type == s.name) return s.multiplier(step, warmup, total);
  }
  throw std::invalid_argument("unknown lr_scheduler_type " + type);
}

}  // namespace trainer::optim
