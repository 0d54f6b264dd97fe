// A language model's output layer and cross-entropy in one, a chunk of tokens at a time (Liger's
// fused linear cross-entropy): the [tokens, vocabulary] logits are never held whole, and the
// gradients of the hidden states and of the output weight are computed chunk by chunk in the
// forward, so that backward only scales them.
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace trainer::models {

// sum over rows i with labels[i] != -100 of cross_entropy(logits_i, labels[i]), where logits =
// linear(hidden, weight) in the type linear gives under the current autocast, capped as
// tanh(logits / softcap) * softcap when softcap > 0 (Gemma's final_logit_softcapping), then
// float32 (Transformers' logits.float()). hidden [N, H], weight [V, H], labels int64 [N]. Returns
// a float32 scalar; differentiable in hidden and weight (whichever requires grad) with the
// gradients of that sum. `chunk_rows` rows at a time (0: about 2^24 logits a chunk). The same
// value and gradients as the plain linear and cross_entropy_loss(reduction sum, ignore_index
// -100), to float32 rounding. Throws c10::Error for a label outside [0, V) other than -100.
//
// `dft`: each row's -log p weighted by its p, taken as a constant (TRL's loss_type "dft"), with
// those gradients. `stats`, when given, receives ModelOutput::token_stats of the rows with a
// label: float32 [3], the entropies' sum, the argmax hits, the count. `smoothing` epsilon > 0:
// each row's loss is Transformers' LabelSmoother's, -(1 - epsilon) log p(label) - epsilon/V sum_v
// log p_v (not with dft).
torch::Tensor linear_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& labels, double softcap = 0.0,
                                   int64_t chunk_rows = 0, bool dft = false,
                                   torch::Tensor* stats = nullptr, double smoothing = 0.0);

// Transformers' ForCausalLMLoss over the final hidden states: hidden [B, T, H], labels [B, T]
// shifted left by one (the last position predicts nothing), -100 ignored, through
// linear_cross_entropy on the rows that have a label; divided by num_items_in_batch when defined
// (a scalar: the window's token count), else by the count of those rows (their mean; NaN when
// there are none, as cross_entropy's mean).
// `dft`, `stats` and `smoothing` as linear_cross_entropy's.
torch::Tensor causal_lm_linear_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& labels,
                                    const torch::Tensor& num_items_in_batch, double softcap = 0.0,
                                    bool dft = false, torch::Tensor* stats = nullptr,
                                    double smoothing = 0.0);

// The same loss from whole logits [B, T, V] (the plain path, use_liger_kernel false): the
// cross-entropy (or DFT's) of the shifted labels, summed and divided as causal_lm_linear_loss
// divides; `stats` and `smoothing` as there.
torch::Tensor causal_lm_logits_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                    const torch::Tensor& num_items_in_batch, bool dft = false,
                                    torch::Tensor* stats = nullptr, double smoothing = 0.0);

// A causal language model's score of each of its label tokens (TRL's fused LM head outputs):
// float32 [B, T-1] each, position t scoring labels[:, t+1] from hidden[:, t], 0 where that label
// is -100. log_probs is differentiable in hidden and weight; the others carry no gradient.
struct TokenScores {
  torch::Tensor log_probs;         // log p(label)
  torch::Tensor entropy;           // of the predicted distribution
  torch::Tensor mean_logits;       // the logits' mean over the vocabulary
  torch::Tensor is_top1;           // 1 where the label is the argmax
  torch::Tensor log_sum_sq_probs;  // log sum_v p_v^2 (only when asked for; undefined otherwise)
};

// TokenScores of hidden [B, T, H] through weight [V, H] (the logits capped as
// linear_cross_entropy caps them, then float32) for labels [B, T], a chunk of rows at a time, only
// the rows that have a label: the [rows, V] logits are never held whole, in the forward or in the
// backward (which computes each chunk's logits again). `chunk_rows` 0: about 2^24 logits a chunk.
// `temperature` divides the (capped) logits before the softmax, as TRL's GRPO scores its
// samples (the entropy is then the tempered distribution's).
TokenScores causal_lm_token_scores(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& labels, double softcap = 0.0,
                                   bool log_sum_sq = false, int64_t chunk_rows = 0,
                                   double temperature = 1.0);

// Transformers' shift of causal-LM labels [B, T]: moved left by one, -100 at the end.
torch::Tensor shift_labels(const torch::Tensor& labels);

}  // namespace trainer::models
