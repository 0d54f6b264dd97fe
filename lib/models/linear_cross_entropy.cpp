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
                               bool with_grads, bool dft, bool with_stats, double smoothing) {
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
      Tensor z = torch::linear(h, weight);
      if (softcap > 0) z = torch::tanh(z / softcap) * softcap;
      const Tensor zf = z.to(torch::kFloat);
      Tensor logp = torch::log_softmax(zf, 1);
      const Tensor valid = valid_all.slice(0, start, end);
      const Tensor target = t.masked_fill(valid.logical_not(), 0).unsqueeze(1);
      Tensor logp_t = logp.gather(1, target).squeeze(1).masked_fill(valid.logical_not(), 0);
      // DFT: each token's -log p weighted by p, the weight a constant.
      const Tensor weight_t = dft ? logp_t.exp().mul_(valid) : Tensor();
      if (smoothing > 0) {
        // LabelSmoother: (1 - epsilon) of the label's -log p, epsilon of the mean over the
        // vocabulary of -log p.
        loss.sub_(logp_t.sum() * (1.0 - smoothing) +
                  (logp.sum(1) * valid.to(torch::kFloat)).sum() * (smoothing / V));
      } else {
        loss.sub_(dft ? (logp_t * weight_t).sum() : logp_t.sum());
      }
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
      // With smoothing the target is (1 - epsilon) onehot(t) + epsilon / V.
      g.scatter_add_(1, target, validf.neg() * (1.0 - smoothing));
      if (smoothing > 0) g.sub_(smoothing / V);
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
    return {grad_h, grad_w, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

// The label tokens' log-probabilities and statistics, a chunk of rows at a time; backward computes
// each chunk's logits again (d log p_t / dz = onehot(t) - softmax(z)), so no chunk's logits are
// kept between the passes.
struct TokenLogProbs : torch::autograd::Function<TokenLogProbs> {
  static variable_list forward(AutogradContext* ctx, const Tensor& hidden, const Tensor& weight,
                               const Tensor& labels, double softcap, int64_t rows, bool log_sum_sq,
                               double temperature) {
    const int64_t N = hidden.size(0), V = weight.size(0);
    if (N > 0) {
      const Tensor bad = labels.lt(0).logical_or(labels.ge(V));
      if (bad.any().item<bool>()) {
        TORCH_CHECK(false, "Target ", labels.masked_select(bad)[0].item<int64_t>(),
                    " is out of bounds.");
      }
    }
    const auto f32 = hidden.options().dtype(torch::kFloat);
    Tensor log_p = torch::zeros({N}, f32);
    Tensor stats = torch::zeros({4, N}, f32);  // entropy, mean logit, top-1, log sum p^2
    torch::Dtype z_type = hidden.scalar_type();
    for (int64_t start = 0; start < N; start += rows) {
      const int64_t end = std::min(N, start + rows);
      const Tensor t = labels.slice(0, start, end);
      Tensor z = torch::linear(hidden.slice(0, start, end), weight);
      z_type = z.scalar_type();
      if (softcap > 0) z = torch::tanh(z / softcap) * softcap;
      Tensor zf = z.to(torch::kFloat);
      if (temperature != 1.0) zf = zf / temperature;
      const Tensor logp = torch::log_softmax(zf, 1);
      log_p.slice(0, start, end).copy_(logp.gather(1, t.unsqueeze(1)).squeeze(1));
      stats[0].slice(0, start, end).copy_(-(logp.exp() * logp).sum(1));
      stats[1].slice(0, start, end).copy_(zf.mean(1));
      stats[2].slice(0, start, end).copy_(zf.argmax(1).eq(t));
      if (log_sum_sq) stats[3].slice(0, start, end).copy_(torch::logsumexp(logp * 2, 1));
    }
    ctx->save_for_backward({hidden, weight, labels});
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["rows"] = rows;
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["z_type"] = static_cast<int64_t>(z_type);
    ctx->mark_non_differentiable({stats});
    return {log_p, stats};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &hidden = saved[0], &weight = saved[1], &labels = saved[2];
    const double softcap = ctx->saved_data.at("softcap").toDouble();
    const int64_t rows = ctx->saved_data.at("rows").toInt();
    const double temperature = ctx->saved_data.at("temperature").toDouble();
    const auto z_type = static_cast<torch::Dtype>(ctx->saved_data.at("z_type").toInt());
    const Tensor grad = grad_outputs[0];
    const bool need_h = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
    const int64_t N = hidden.size(0);
    NoAutocast no_autocast(hidden.device().type());
    Tensor grad_h = need_h ? torch::empty_like(hidden) : Tensor();
    Tensor grad_w =
        need_w ? torch::zeros(weight.sizes(), hidden.options().dtype(torch::kFloat)) : Tensor();
    const Tensor w = weight.to(z_type);
    for (int64_t start = 0; start < N && (need_h || need_w) && grad.defined(); start += rows) {
      const int64_t end = std::min(N, start + rows);
      const Tensor h = hidden.slice(0, start, end);
      const Tensor t = labels.slice(0, start, end);
      Tensor z = torch::linear(h.to(z_type), w);
      if (softcap > 0) z = torch::tanh(z / softcap) * softcap;
      const Tensor zf = z.to(torch::kFloat);
      // g (onehot - softmax(z / temperature)) / temperature, through the cap's
      // 1 - (capped / softcap)^2.
      const Tensor g_row = grad.slice(0, start, end).to(torch::kFloat).unsqueeze(1);
      Tensor g = torch::softmax(temperature != 1.0 ? zf / temperature : zf, 1).neg_();
      g.scatter_add_(1, t.unsqueeze(1), torch::ones_like(g_row));
      g.mul_(temperature != 1.0 ? g_row / temperature : g_row);
      if (softcap > 0) g.mul_(1.0 - (zf / softcap).square());
      if (need_h) grad_h.slice(0, start, end).copy_(torch::mm(g.to(z_type), w));
      if (need_w) grad_w.addmm_(g.t(), h.to(torch::kFloat));
    }
    if (grad_w.defined() && grad_w.scalar_type() != weight.scalar_type())
      grad_w = grad_w.to(weight.scalar_type());
    return {grad_h, grad_w, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

TokenScores causal_lm_token_scores(const Tensor& hidden, const Tensor& weight, const Tensor& labels,
                                   double softcap, bool log_sum_sq, int64_t chunk_rows,
                                   double temperature) {
  TORCH_CHECK(hidden.dim() == 3 && labels.dim() == 2 && hidden.size(0) == labels.size(0) &&
                  hidden.size(1) == labels.size(1) && hidden.size(2) == weight.size(1),
              "token scores: hidden states [batch, length, hidden] and labels [batch, length], "
              "not ",
              hidden.sizes(), " and ", labels.sizes());
  const int64_t B = hidden.size(0), T = hidden.size(1), H = hidden.size(2);
  const int64_t L = std::max<int64_t>(T - 1, 0);
  const Tensor shifted = labels.slice(1, 1).reshape({-1});
  const Tensor mask = shifted.ne(kIgnoreIndex);
  const Tensor rows = mask.nonzero().squeeze(1);
  const Tensor h = hidden.slice(1, 0, L).reshape({-1, H}).index_select(0, rows);
  const int64_t chunk =
      chunk_rows > 0 ? chunk_rows : std::max<int64_t>(1, kLogitsPerChunk / weight.size(0));
  variable_list out = TokenLogProbs::apply(h, weight, shifted.index_select(0, rows), softcap, chunk,
                                           log_sum_sq, temperature);
  // Back to [B, T-1], zeros where there is no label (index_put keeps log p differentiable).
  auto place = [&](const Tensor& values) {
    return torch::zeros({B * L}, values.options()).index_put({rows}, values).view({B, L});
  };
  TokenScores scores;
  scores.log_probs = place(out[0]);
  scores.entropy = place(out[1][0]);
  scores.mean_logits = place(out[1][1]);
  scores.is_top1 = place(out[1][2]);
  if (log_sum_sq) scores.log_sum_sq_probs = place(out[1][3]);
  return scores;
}

Tensor shift_labels(const Tensor& labels) {
  return torch::cat(
      {labels.slice(1, 1), torch::full({labels.size(0), 1}, kIgnoreIndex, labels.options())}, 1);
}

Tensor causal_lm_logits_loss(const Tensor& logits, const Tensor& labels,
                             const Tensor& num_items_in_batch, bool dft, Tensor* stats,
                             double smoothing) {
  const Tensor shifted = shift_labels(labels).reshape({-1});
  const Tensor valid = shifted.ne(kIgnoreIndex);
  const Tensor z = logits.to(torch::kFloat).reshape({shifted.size(0), -1});
  const Tensor logp = torch::log_softmax(z, 1);
  const Tensor target = shifted.masked_fill(valid.logical_not(), 0).unsqueeze(1);
  const Tensor logp_t = logp.gather(1, target).squeeze(1).masked_fill(valid.logical_not(), 0);
  Tensor sum = dft ? -(logp_t * logp_t.detach().exp().mul(valid)).sum() : -logp_t.sum();
  if (smoothing > 0) {
    sum = sum * (1.0 - smoothing) - (logp.sum(1) * valid.to(torch::kFloat)).sum() *
                                        (smoothing / static_cast<double>(z.size(1)));
  }
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
                            double softcap, int64_t chunk_rows, bool dft, Tensor* stats,
                            double smoothing) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && labels.dim() == 1 &&
                  hidden.size(0) == labels.size(0) && hidden.size(1) == weight.size(1),
              "linear_cross_entropy: hidden [N, H], weight [V, H] and labels [N], not ",
              hidden.sizes(), ", ", weight.sizes(), " and ", labels.sizes());
  variable_list out =
      LinearCrossEntropy::apply(hidden, weight, labels, softcap, chunk_rows,
                                c10::GradMode::is_enabled(), dft, stats != nullptr, smoothing);
  if (stats) *stats = out[1];
  return out[0];
}

Tensor causal_lm_linear_loss(const Tensor& hidden, const Tensor& weight, const Tensor& labels,
                             const Tensor& num_items_in_batch, double softcap, bool dft,
                             Tensor* stats, double smoothing) {
  TORCH_CHECK(hidden.dim() == 3 && labels.dim() == 2 && hidden.size(0) == labels.size(0) &&
                  hidden.size(1) == labels.size(1),
              "causal_lm loss: hidden states [batch, length, hidden] and labels [batch, length], "
              "not ",
              hidden.sizes(), " and ", labels.sizes());
  const int64_t H = hidden.size(2);
  // Transformers' shift: labels padded with -100 at the end, then moved left by one.
  const Tensor shifted = shift_labels(labels).reshape({-1});
  const Tensor rows = shifted.ne(kIgnoreIndex).nonzero().squeeze(1);
  const Tensor sum =
      linear_cross_entropy(hidden.reshape({-1, H}).index_select(0, rows), weight,
                           shifted.index_select(0, rows), softcap, 0, dft, stats, smoothing);
  if (num_items_in_batch.defined()) return sum / num_items_in_batch.to(sum.scalar_type());
  return sum / static_cast<double>(rows.size(0));
}

}  // namespace trainer::models
