// Transformers' generate() for a batch of left-padded prompts: the KV cache, positions from the
// attention mask, the logits processors in Transformers' order (repetition penalty, no-repeat
// n-grams, bad words; then sampling's temperature, top_k, top_p, min_p), a multinomial draw per
// row from the given generator, rows stopped at an EOS and padded after it. With the same seed
// it draws the tokens model.generate(do_sample=True) draws (`trainer generate`, `trainer grpo`).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include "lib/models/hf_causal_lm.h"

namespace trainer::models {

struct SamplingSettings {
  bool do_sample = false;  // false: the argmax (greedy)
  int64_t max_new_tokens = 20;
  double temperature = 1.0;  // 1: off
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off
  std::optional<double> min_p;
  double repetition_penalty = 1.0;  // 1: off
  int64_t no_repeat_ngram_size = 0;
  std::vector<std::vector<int64_t>> bad_words_ids;
  std::vector<int64_t> eos_token_ids;  // a row ends at the first of them (kept)
  int64_t pad_token_id = 0;            // what follows a row's EOS
  bool use_cache = true;
};

// The new tokens [B, N] after `input_ids` [B, P] (int64; `attention_mask` [B, P], 0 on each
// row's left padding, or undefined: no padding), N <= max_new_tokens (fewer when every row has
// ended at an EOS, or the model's positions run out: a warning then). Each step: the last
// position's logits in float32, the processors of `settings`, then the argmax or
// torch.multinomial over the batch's probabilities with `generator` (every row draws each step,
// an ended row's token replaced by pad_token_id, as Transformers' _sample). `on_step` sees each
// step's tokens [B]. Runs without gradients, the model as it is (eval mode is the caller's).
torch::Tensor generate_tokens(HfCausalLM& model, const torch::Tensor& input_ids,
                              const torch::Tensor& attention_mask, const SamplingSettings& settings,
                              at::Generator& generator,
                              const std::function<void(const torch::Tensor&)>& on_step = {});

// The processors of `settings` on one step's scores [B, V] (float32) given the ids so far
// [B, S] whose first `prompt_padding[b]` are padding (ignored by the repetition penalty, as
// Transformers' prompt_ignore_length): what generate_tokens draws from.
torch::Tensor process_scores(torch::Tensor scores, const torch::Tensor& ids,
                             const torch::Tensor& prompt_padding, const SamplingSettings& settings);

}  // namespace trainer::models
