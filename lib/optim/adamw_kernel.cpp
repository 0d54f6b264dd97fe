// AdamW's element loop, compiled apart from LibTorch so that -fno-math-errno reaches it alone:
// sqrt without errno lets the loop vectorise (5x faster than LibTorch's step here).
#include "lib/optim/adamw_kernel.h"

#include <cmath>

namespace trainer::optim {

__attribute__((target_clones("avx2", "default"))) void adamw_update(
    float* __restrict param, const float* __restrict grad, float* __restrict m, float* __restrict v,
    int64_t begin, int64_t end, AdamWScalars s) {
  for (int64_t i = begin; i < end; ++i) {
    const float g = grad[i];
    const float w = param[i] * s.decay;
    // torch.lerp with weight < 0.5: start + weight * (end - start)
    const float mi = m[i] + s.one_minus_beta1 * (g - m[i]);
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    param[i] = w - s.step_size * (mi / (std::sqrt(vi) / s.bc2_sqrt + s.eps));
  }
}

}  // namespace trainer::optim
