// Transformers' Adafactor step, operation for operation (optimization.py, Adafactor.step with
// the Trainer's settings), so that the same float32 arithmetic gives the same parameters; and its
// state in LibTorch's optimizer archive.
#include "lib/optim/adafactor.h"

#include <cmath>

#include <torch/torch.h>

namespace trainer::optim {
namespace {

// Transformers' _rms: the 2-norm over the square root of the element count.
torch::Tensor rms(const torch::Tensor& t) {
  return t.norm(2) / std::sqrt(static_cast<double>(t.numel()));
}

// Transformers' _approx_sq_grad: the factored estimate of 1 / sqrt(E[g^2]).
torch::Tensor approx_sq_grad(const torch::Tensor& row, const torch::Tensor& col) {
  torch::Tensor r_factor = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
  torch::Tensor c_factor = col.unsqueeze(-2).rsqrt();
  return torch::mul(r_factor, c_factor);
}

bool half_precision(torch::ScalarType type) {
  return type == torch::kHalf || type == torch::kBFloat16;
}

void check_options(const AdafactorOptions& o) {
  TORCH_CHECK(o.lr() >= 0, "Adafactor: invalid learning rate: ", o.lr());
  TORCH_CHECK(o.eps() >= 0, "Adafactor: invalid eps: ", o.eps());
  TORCH_CHECK(o.clip_threshold() > 0, "Adafactor: invalid clip_threshold: ", o.clip_threshold());
  TORCH_CHECK(o.weight_decay() >= 0, "Adafactor: invalid weight_decay: ", o.weight_decay());
  TORCH_CHECK(!o.beta1() || (*o.beta1() >= 0 && *o.beta1() < 1),
              "Adafactor: invalid beta1: ", o.beta1().value_or(0));
}

}  // namespace

AdafactorOptions::AdafactorOptions(double lr) : lr_(lr) {}

void AdafactorOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(clip_threshold);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(decay_rate);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta1);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
}

void AdafactorOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, clip_threshold);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, decay_rate);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG_OPTIONAL(double, beta1);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
}

void AdafactorParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq_row);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq_col);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
}

void AdafactorParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq_row);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq_col);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
}

Adafactor::Adafactor(const std::vector<torch::optim::OptimizerParamGroup>& param_groups,
                     AdafactorOptions defaults)
    : Optimizer(param_groups, std::make_unique<AdafactorOptions>(defaults)) {
  check_options(defaults);
  for (const auto& group : this->param_groups())
    check_options(static_cast<const AdafactorOptions&>(group.options()));
}

torch::Tensor Adafactor::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const AdafactorOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      torch::Tensor grad = p.grad();
      if (half_precision(grad.scalar_type())) grad = grad.to(torch::kFloat);
      TORCH_CHECK(!grad.is_sparse(), "Adafactor does not support sparse gradients.");
      const auto shape = grad.sizes().vec();
      const bool factored = shape.size() >= 2;
      const bool first_moment = options.beta1().has_value();

      auto& slot = state_[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto state = std::make_unique<AdafactorParamState>();
        state->step(0);
        if (first_moment) state->exp_avg(torch::zeros_like(grad));
        if (factored) {
          std::vector<int64_t> row(shape.begin(), shape.end() - 1);
          std::vector<int64_t> col(shape.begin(), shape.end() - 2);
          col.push_back(shape.back());
          state->exp_avg_sq_row(torch::zeros(row).to(grad));
          state->exp_avg_sq_col(torch::zeros(col).to(grad));
        } else {
          state->exp_avg_sq(torch::zeros_like(grad));
        }
        slot = std::move(state);
      }
      auto& state = static_cast<AdafactorParamState&>(*slot);
      // A loaded state comes to the gradient's device and dtype.
      if (first_moment) state.exp_avg(state.exp_avg().to(grad));
      if (factored) {
        state.exp_avg_sq_row(state.exp_avg_sq_row().to(grad));
        state.exp_avg_sq_col(state.exp_avg_sq_col().to(grad));
      } else {
        state.exp_avg_sq(state.exp_avg_sq().to(grad));
      }

      torch::Tensor p_fp32 = p;
      if (half_precision(p.scalar_type())) p_fp32 = p_fp32.to(torch::kFloat);

      state.step(state.step() + 1);
      const double lr = options.lr();  // relative_step and scale_parameter off
      const double beta2t = 1.0 - std::pow(static_cast<double>(state.step()), options.decay_rate());
      torch::Tensor update = grad.pow(2) + options.eps();
      if (factored) {
        torch::Tensor& row = state.exp_avg_sq_row();
        torch::Tensor& col = state.exp_avg_sq_col();
        row.mul_(beta2t).add_(update.mean(-1), 1.0 - beta2t);
        col.mul_(beta2t).add_(update.mean(-2), 1.0 - beta2t);
        update = approx_sq_grad(row, col);
        update.mul_(grad);
      } else {
        torch::Tensor& exp_avg_sq = state.exp_avg_sq();
        exp_avg_sq.mul_(beta2t).add_(update, 1.0 - beta2t);
        update = exp_avg_sq.rsqrt().mul_(grad);
      }
      update.div_((rms(update) / options.clip_threshold()).clamp_(1.0));
      update.mul_(lr);
      if (first_moment) {
        torch::Tensor& exp_avg = state.exp_avg();
        exp_avg.mul_(*options.beta1()).add_(update, 1.0 - *options.beta1());
        update = exp_avg;
      }
      if (options.weight_decay() != 0) p_fp32.add_(p_fp32, -options.weight_decay() * lr);
      p_fp32.add_(-update);
      if (half_precision(p.scalar_type())) p.copy_(p_fp32);
    }
  }
  return loss;
}

void Adafactor::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<AdafactorParamState, AdafactorOptions>(archive, *this);
}

void Adafactor::load(torch::serialize::InputArchive& archive) {
  torch::optim::serialize<AdafactorParamState, AdafactorOptions>(archive, *this);
}

}  // namespace trainer::optim
