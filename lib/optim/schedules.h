// Transformers' learning-rate schedules as multipliers of the initial rate (the lr_lambda that
// LambdaLR applies): linear, cosine, constant and constant_with_warmup. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer::optim {

// The schedule names lr_lambda knows, for argument validation: linear, cosine, constant,
// constant_with_warmup.
const std::vector<std::string>& lr_scheduler_types();

// The multiplier at optimizer step `step` (0-based) of `total`, after linear warmup over `warmup`
// steps, as Transformers' get_scheduler computes it. Throws std::invalid_argument for a `type`
// not in lr_scheduler_types().
double lr_lambda(const std::string& type, int64_t step, int64_t warmup, int64_t total);

}  // namespace trainer::optim
