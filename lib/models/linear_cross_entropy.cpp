// The chunked output layer and cross-entropy: a custom autograd function whose forward walks the
// tokens a chunk at a time, computing each chunk's logits, its share of the loss, and (when
// training) its share of the gradients, then drops the chunk; backward scales the gradients kept.
#include "lib/models/linear_cross_entropy.h"

#include <algorithm>

#include <ATen/autocast_mode.h>
#include <torch/nn/functional.h>
#include <torch/torch.h>

namespace trainer::models {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kIgnoreIndex = -100;
constexpr int64_t kLogitsPerChunk = int64_t{1} << 24;

// While alive, autocast is off on `type` (the gradients' products are computed in the types
// chosen here); its state comes back when it ends.
class NoAutocast {
 public:
  explicit NoAutocast(at::DeviceType type)
      : type_(type), enabled_(at::autocast::is_autocast_enabled(type)) {
    at::autocast::set_autocast_enabled(type_, false);
  }
  ~NoAutocast() { at::autocast::set_autocast_enabled(type_, enabled_); }
  NoAutocast(const NoAutocast&) = delete;
  NoAutocast& operator=(const NoAutocast&) = delete;

 private:
  at::DeviceType type_;
  bool enabled_;
};

struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static variable_list forward(AutogradContext* ctx, const Tensor& hidden, const Tensor& weight,
                               const Tensor& labels, double softcap, int64_t chunk_rows,
                               bool with_grads, bool dft, bool with_stats) {
    const int64_t N = hidden.size(0), V = weight.size(0);
    const Tensor valid_all = labels.ne(kIgnoreIndex);
    if (N > 0) {
      const Tensor bad = valid_all.logical_and(labels.lt(0).logical_or(labels.ge(V)));
      if (bad.any().item<bool>()) {
        TORCH_CHECK(false, "Target ", labels.masked_select(bad)[0].item<int64_t>(),
                    " is out of bounds.");
      }
    }
    const bool need_h = with_grads && hidden.requires_grad();
    const bool need_w = with_grads && weight.requires_grad();
    const auto f32 = hidden.options().dtype(torch::kFloat);
    Tensor loss = torch::zeros({}, f32);
    // entropy sum, argmax hits, count (TRL's per-token statistics), never differentiated.
    Tensor stats = torch::zeros({3}, f32);
    Tensor grad_h = need_h ? torch::empty_like(hidden) : Tensor();
    // The output weight's gradient is summed over chunks in float32 whatever the weight's type.
    Tensor grad_w = need_w ? torch::zeros(weight.sizes(), f32) : Tensor();
    Tensor weight_as_z;
    const int64_t rows = chunk_rows > 0 ? chunk_rows : std::max<int64_t>(1, kLogitsPerChunk / V);
    for (int64_t start = 0; start < N; start += rows) {
      const int64_t end = std::min(N, start + rows);
      const Tensor h = hidden.slice(0, start, end);
      const Tensor t = labels.slice(0, start, end);
      // As the plain path: linear (in autocast's type where it is on), the cap, then float32.
      Tensor z = torch::nn::functional::linear(h, weight);
      if (softcap > 0) z = torch::tanh(z / softcap) * softcap;
      const Tensor zf = z.to(torch::kFloat);
      Tensor logp = torch::log_softmax(zf, 1);
      const Tensor valid = valid_all.slice(0, start, end);
      const Tensor target = t.masked_fill(valid.logical_not(), 0).unsqueeze(1);
      Tensor logp_t = logp.gather(1, target).squeeze(1).masked_fill(valid.logical_not(), 0);
      // DFT: each token's -log p weighted by p, the weight a constant.
      const Tensor weight_t = dft ? logp_t.exp().mul_(valid) : Tensor();
      loss.sub_(dft ? (logp_t * weight_t).sum() : logp_t.sum());
      if (with_stats) {
        const Tensor validf = valid.to(torch::kFloat);
        stats[0].add_((-(logp.exp() * logp).sum(1) * validf).sum());
        stats[1].add_((zf.argmax(1).eq(t) * valid).sum().to(torch::kFloat));
        stats[2].add_(validf.sum());
      }
      if (!need_h && !need_w) continue;
      // d(-log p_t)/dz = softmax(z) - onehot(t), zero on ignored rows; through the cap, times
      // 1 - tanh^2 = 1 - (capped / softcap)^2.
      Tensor g = logp.exp_();
      const Tensor validf = valid.to(torch::kFloat).unsqueeze(1);
      g.scatter_add_(1, target, validf.neg());
      g.mul_(dft ? weight_t.unsqueeze(1) : validf);
      if (softcap > 0) g.mul_(1.0 - (zf / softcap).square());
      NoAutocast no_autocast(hidden.device().type());
      if (need_h) {
        // The weight in the logits' type (autocast's), converted once for every chunk.
        if (!weight_as_z.defined()) weight_as_z = weight.to(z.scalar_type());
        grad_h.slice(0, start, end).copy_(torch::mm(g.to(z.scalar_type()), weight_as_z));
      }
      if (need_w) grad_w.addmm_(g.t(), h.to(torch::kFloat));
    }
    if (need_h) ctx->saved_data["grad_hidden"] = grad_h;
    if (need_w) ctx->saved_data["grad_weight"] = grad_w;
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->mark_non_differentiable({stats});
    return {loss, stats};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const Tensor& scale = grad_outputs[0];
    // Taken out of the context, so that autograd may keep them as the .grad they become.
    auto take = [&](const char* key) -> Tensor {
      auto it = ctx->saved_data.find(key);
      if (it == ctx->saved_data.end()) return Tensor();
      Tensor grad = it->second.toTensor();
      ctx->saved_data.erase(it);
      return grad.mul_(scale);
    };
    const auto weight_dtype = static_cast<torch::Dtype>(ctx->saved_data.at("weight_dtype").toInt());
    Tensor grad_h = take("grad_hidden");
    // The weight's gradient was summed in float32.
    Tensor grad_w = take("grad_weight");
    if (grad_w.defined() && grad_w.scalar_type() != weight_dtype) grad_w = grad_w.to(weight_dtype);
    return {grad_h, grad_w, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

Tensor shift_labels(const Tensor& labels) {
  return torch::cat(
      {labels.slice(1, 1), torch::full({labels.size(0), 1}, kIgnoreIndex, labels.options())}, 1);
}

Tensor causal_lm_logits_loss(const Tensor& logits, const Tensor& labels,
                             const Tensor& num_items_in_batch, bool dft, Tensor* stats) {
  const Tensor shifted = shift_labels(labels).reshape({-1});
  const Tensor valid = shifted.ne(kIgnoreIndex);
  const Tensor z = logits.to(torch::kFloat).reshape({shifted.size(0), -1});
  const Tensor logp = torch::log_softmax(z, 1);
  const Tensor target = shifted.masked_fill(valid.logical_not(), 0).unsqueeze(1);
  const Tensor logp_t = logp.gather(1, target).squeeze(1).masked_fill(valid.logical_not(), 0);
  const Tensor sum = dft ? -(logp_t * logp_t.detach().exp().mul(valid)).sum() : -logp_t.sum();
  if (stats) {
    torch::NoGradGuard no_grad;
    const Tensor validf = valid.to(torch::kFloat);
    *stats =
        torch::stack({(-(logp.exp() * logp).sum(1) * validf).sum(),
                      (z.argmax(1).eq(shifted) * valid).sum().to(torch::kFloat), validf.sum()});
  }
  if (num_items_in_batch.defined()) return sum / num_items_in_batch.to(sum.scalar_type());
  return sum / valid.sum().to(torch::kFloat);
}

Tensor linear_cross_entropy(const Tensor& hidden, const Tensor& weight, const Tensor& labels,
                            double softcap, int64_t chunk_rows, bool dft, Tensor* stats) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && labels.dim() == 1 &&
                  hidden.size(0) == labels.size(0) && hidden.size(1) == weight.size(1),
              "linear_cross_entropy: hidden [N, H], weight [V, H] and labels [N], not ",
              hidden.sizes(), ", ", weight.sizes(), " and ", labels.sizes());
  variable_list out = LinearCrossEntropy::apply(hidden, weight, labels, softcap, chunk_rows,
                                                c10::GradMode::is_enabled(), dft, stats != nullptr);
  if (stats) *stats = out[1];
  return out[0];
}

Tensor causal_lm_linear_loss(const Tensor& hidden, const Tensor& weight, const Tensor& labels,
                             const Tensor& num_items_in_batch, double softcap, bool dft,
                             Tensor* stats) {
  TORCH_CHECK(hidden.dim() == 3 && labels.dim() == 2 && hidden.size(0) == labels.size(0) &&
                  hidden.size(1) == labels.size(1),
              "causal_lm loss: hidden states [batch, length, hidden] and labels [batch, length], "
              "not ",
              hidden.sizes(), " and ", labels.sizes());
  const int64_t H = hidden.size(2);
  // Transformers' shift: labels padded with -100 at the end, then moved left by one.
  const Tensor shifted = shift_labels(labels).reshape({-1});
  const Tensor rows = shifted.ne(kIgnoreIndex).nonzero().squeeze(1);
  const Tensor sum = linear_cross_entropy(hidden.reshape({-1, H}).index_select(0, rows), weight,
                                          shifted.index_select(0, rows), softcap, 0, dft, stats);
  if (num_items_in_batch.defined()) return sum / num_items_in_batch.to(sum.scalar_type());
  return sum / static_cast<double>(rows.size(0));
}

}  // namespace trainer::models
