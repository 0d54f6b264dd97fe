// AdamW's update of a range of float32 elements in one pass over memory (the CPU path of
// optim::AdamW), torch-free.
#pragma once

#include <cstdint>

namespace trainer::optim {

// The scalars of one parameter's step: weight decay factor (1 - lr * wd), 1 - beta1, beta2,
// 1 - beta2, lr / bias_correction1, sqrt(bias_correction2), eps.
struct AdamWScalars {
  float decay, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps;
};

// PyTorch's AdamW formulas for elements [begin, end), each in float: p *= decay;
// m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g;
// p -= step_size * m / (sqrt(v) / bc2_sqrt + eps). Built for AVX2 and for the baseline, chosen at
// run time.
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t begin, int64_t end,
                  AdamWScalars s);

}  // namespace trainer::optim
