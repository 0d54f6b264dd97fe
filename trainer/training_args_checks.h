// What TrainingArguments::validate's files share (internal to trainer/training_args_validate*.cpp):
// the one-line refusal of a value, a choice among allowed ones, a float as Python prints it, and
// the bounds of counts.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::validate {

using json = nlohmann::ordered_json;
using base::shown;

inline void check(bool ok, const std::string& key, const std::string& value,
                  const std::string& allowed) {
  if (!ok)
    throw InputError(fmt::format("argument {}: {} is not allowed ({})", key, value, allowed));
}

inline void check_choice(const std::string& key, const std::string& value,
                         const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  throw InputError(fmt::format("argument {}: \"{}\" is not allowed (allowed: {})", key, value,
                               fmt::format("{}", fmt::join(allowed, ", "))));
}

inline std::string num(double v) { return base::python_float(v); }

// Step counts are int64 on the way and doubles in the logs: 2^53 keeps both exact.
constexpr int64_t kMaxSteps = int64_t{1} << 53;
// Batch sizes and accumulation multiply into the total batch size: int32 keeps that in int64.
constexpr int64_t kMaxCount = 2147483647;
constexpr double kMaxFloat = 3.4028234663852886e38;  // FLT_MAX

}  // namespace trainer::validate
