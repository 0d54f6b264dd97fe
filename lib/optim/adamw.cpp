// The fused AdamW step: PyTorch's formulas, element by element.
#include "lib/optim/adamw.h"

#include <cmath>

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace trainer::optim {
namespace {

bool fusable(const torch::Tensor& p, const torch::optim::AdamWOptions& options) {
  const torch::Tensor& g = p.grad();
  return !options.amsgrad() && p.device().is_cpu() && p.scalar_type() == torch::kFloat &&
         p.is_contiguous() && g.defined() && !g.is_sparse() && g.scalar_type() == torch::kFloat &&
         g.is_contiguous() && g.device().is_cpu();
}

struct Scalars {
  float decay, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps;
};

// The update of elements [begin, end): built for AVX2 and for the baseline, chosen at run time.
__attribute__((target_clones("avx2", "default"))) void update(float* __restrict param,
                                                              const float* __restrict grad,
                                                              float* __restrict m,
                                                              float* __restrict v, int64_t begin,
                                                              int64_t end, Scalars s) {
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

}  // namespace

torch::Tensor AdamW::step(LossClosure closure) {
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (const auto& p : group.params()) {
      if (p.grad().defined() && !fusable(p, options))
        return torch::optim::AdamW::step(std::move(closure));
    }
  }
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    const double lr = options.lr();
    const double beta1 = std::get<0>(options.betas());
    const double beta2 = std::get<1>(options.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto state = std::make_unique<torch::optim::AdamWParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(state);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      state.step(state.step() + 1);
      const double bias_correction1 = 1 - std::pow(beta1, state.step());
      const double bias_correction2 = 1 - std::pow(beta2, state.step());
      // As PyTorch: p *= 1 - lr*wd; m = lerp(m, g, 1-b1); v = b2*v + (1-b2)*g*g;
      // p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps), each in float.
      const Scalars scalars{static_cast<float>(1 - lr * options.weight_decay()),
                            static_cast<float>(1 - beta1),
                            static_cast<float>(beta2),
                            static_cast<float>(1 - beta2),
                            static_cast<float>(lr / bias_correction1),
                            static_cast<float>(std::sqrt(bias_correction2)),
                            static_cast<float>(options.eps())};
      float* param = p.data_ptr<float>();
      const float* grad = p.grad().data_ptr<float>();
      float* m = state.exp_avg().data_ptr<float>();
      float* v = state.exp_avg_sq().data_ptr<float>();
      at::parallel_for(0, p.numel(), 16384, [&](int64_t begin, int64_t end) {
        update(param, grad, m, v, begin, end, scalars);
      });
    }
  }
  return loss;
}

}  // namespace trainer::optim
