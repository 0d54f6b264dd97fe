// Hugging Face causal language models on LibTorch, computed as Transformers 5.x computes them and
// holding their parameters under Transformers' own names, so that a model.safetensors of
// save_pretrained loads as it is and ours loads in Transformers: GPT-2 (GPT2LMHeadModel: Conv1D
// weights stored [in, out], pre-LayerNorm, gelu_new, learned positions) and the Llama family
// (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, Gemma3ForCausalLM:
// RMSNorm in float32, SwiGLU or GeGLU, grouped-query attention, rotary embeddings with
// rotate_half, sliding windows). All with a KV cache for generation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "lib/models/hf_config.h"
#include "lib/models/model.h"

namespace trainer::models {

// Keys and values of every layer for the tokens seen so far ([B, kv_heads, T, head_dim] each).
struct KVCache {
  std::vector<torch::Tensor> keys, values;
  int64_t length = 0;  // tokens held
};

// Transformers' load_balancing_loss_func over the sparse layers' router logits (each [tokens,
// num_experts], the rows of every layer together): num_experts times the sum over experts of the
// share of the top_k picks that went to the expert times its mean routing probability, the rows
// weighted by attention_mask ([B, T], flattened as the tokens) when defined. float32.
torch::Tensor load_balancing_loss(const std::vector<torch::Tensor>& router_logits,
                                  int64_t num_experts, int64_t top_k,
                                  const torch::Tensor& attention_mask = {});

// NEFTune's noise (Transformers' neftune_post_forward_hook): embeddings x [B, T, H] plus uniform
// noise in [-m, m], m = alpha / sqrt(T * H), drawn from LibTorch's generator, when `training` and
// alpha > 0 (a constant: no gradient flows into it); x itself otherwise.
torch::Tensor neftune_noise(torch::Tensor x, double alpha, bool training);

class HfCausalLM : public Model {
 public:
  explicit HfCausalLM(HfConfig config);

  // "input_ids" (and "attention_mask", or "position_ids" as hidden_states takes them) -> logits;
  // with "labels", Transformers' ForCausalLMLoss (or DFT's with Batch::dft_loss; the statistics
  // of ModelOutput::token_stats with Batch::token_stats):
  // task_loss (shifted cross-entropy in float32, -100 ignored, summed over num_items_in_batch
  // when the Trainer set it). In training (or for a loss_only batch) with chunked_loss() on: the
  // loss alone, through causal_lm_linear_loss (no logits: they are never held whole).
  //
  // A mixture of experts (num_experts > 0) also computes its routers' load-balancing loss
  // (ModelOutput::aux_loss) when its config's output_router_logits is on, adding it times
  // router_aux_loss_coef to a loss with labels, or when Batch::router_aux_loss asks for it alone.
  ModelOutput forward(const data::Batch& inputs) override;
  torch::Tensor forward(const torch::Tensor& x) override { return logits(x); }

  // Logits [B, T, vocab_size] for input_ids int64 [B, T]: lm_logits of hidden_states.
  // attention_mask ([B, T], 1 on real tokens): queries attend to earlier real tokens and themselves
  // (a real token's logits equal Transformers'; a padding query's are not used). Positions are
  // 0..T-1 as in Transformers' forward without position_ids. A sliding layer's query sees only
  // the last sliding_window keys (itself included), in every path. With a cache: input_ids are
  // the tokens after cache->length (no attention_mask), positions continue from there, and the
  // cache grows by T. Throws c10::Error past max_position_embeddings.
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                       KVCache* cache = nullptr) {
    return lm_logits(hidden_states(input_ids, attention_mask, cache));
  }
  // The final hidden states [B, T, hidden_size] (after the last norm) that logits projects, on
  // logits' terms.
  //
  // position_ids ([B, T], no cache, no attention_mask): each token's position, as Transformers
  // takes them; a row packed with several sequences (the positions restart: any step other than
  // +1 begins a sequence, Transformers' find_packed_sequence_indices) attends only within each
  // sequence (a block-diagonal causal mask), so each sequence computes what it computes alone.
  virtual torch::Tensor hidden_states(const torch::Tensor& input_ids,
                                      const torch::Tensor& attention_mask = {},
                                      KVCache* cache = nullptr,
                                      const torch::Tensor& position_ids = {}) = 0;
  // The output layer: hidden [..., hidden_size] -> logits [..., vocab_size] (lm_head, or the
  // tied embedding), capped as tanh(x / c) * c with final_logit_softcapping c > 0 (Gemma 3).
  // A classifier has none: std::logic_error.
  torch::Tensor lm_logits(const torch::Tensor& hidden) const;
  // A classifier's (config().sequence_classification) logits [B, num_labels] of input_ids int64
  // [B, T] (attention_mask as logits takes it): `score` at each row's rightmost token that is not
  // pad_token_id (the last one without a pad id; then a batch of one row only, as Transformers:
  // InputError otherwise).
  torch::Tensor classifier_logits(const torch::Tensor& input_ids,
                                  const torch::Tensor& attention_mask = {},
                                  const torch::Tensor& position_ids = {});
  bool is_classifier() const { return config_.sequence_classification; }

  const HfConfig& config() const { return config_; }
  // The longest sequence the model reads (generation stops there): max_position_embeddings, or
  // no limit where a dynamic rotary embedding scales past it.
  virtual int64_t max_positions() const { return config_.max_position_embeddings; }
  // Whether a generation whose cache holds `past` tokens must instead compute the whole sequence
  // of `length` tokens again: Phi3's prepare_inputs_for_generation drops the cache the first time
  // the sequence passes original_max_position_embeddings (where its longrope switches to the
  // long factors, which the cached keys were not rotated with).
  bool cache_goes_stale(int64_t past, int64_t length) const {
    const int64_t original = config_.original_max_position_embeddings;
    return config_.model_type == "phi3" && past > 0 && length >= original + 1 && past <= original;
  }
  // Every dropout probability 0 (TRL's disable_dropout_in_model); config.json as it was.
  void disable_dropout();
  // The floating-point type of the parameters.
  torch::Dtype dtype() const;
  // NEFTune (Transformers' neftune_noise_alpha): while training, uniform noise in [-m, m], m =
  // alpha / sqrt(tokens x hidden size), added to the input embeddings (0: none).
  void set_neftune_noise_alpha(double alpha) { neftune_noise_alpha_ = alpha; }
  // config.json's use_cache as the model is saved (Transformers' Trainer sets it from its
  // use_cache argument); generation here keeps its cache either way.
  void set_use_cache(bool on) { config_.json["use_cache"] = on; }

  // Transformers' output_router_logits and router_aux_loss_coef as the model is saved (TRL's
  // SFTTrainer sets them: the load-balancing loss on, with its weight).
  void set_router_aux_loss(bool on, double coef) {
    config_.output_router_logits = on;
    config_.router_aux_loss_coef = coef;
    config_.json["output_router_logits"] = on;
    config_.json["router_aux_loss_coef"] = coef;
  }

 protected:
  // A sparse layer's router logits [tokens, num_experts] in layer order, kept by hidden_states
  // while keep_router_logits_ is on (forward sets it for their load-balancing loss).
  bool keep_router_logits_ = false;
  std::vector<torch::Tensor> router_logits_;
  // The input embeddings `x` [B, T, H] with NEFTune's noise while training.
  torch::Tensor neftune(torch::Tensor x) const {
    return neftune_noise(std::move(x), neftune_noise_alpha_, is_training());
  }
  double neftune_noise_alpha_ = 0.0;
  // Transformers' _init_weights: Linear, Conv1D and Embedding weights normal(0,
  // initializer_range), biases 0, norms 1 (and 0); GPT-2's c_proj weights normal(0,
  // initializer_range / sqrt(2 n_layer)).
  void init_weights();
  // lm_head.weight [vocab_size, hidden_size] unless tie_word_embeddings (then the file has none);
  // a classifier's score.weight [num_labels, hidden_size] instead.
  void register_lm_head();
  // The input embedding's weight [vocab_size, hidden_size].
  virtual const torch::Tensor& embedding_weight() const = 0;
  // The output projection: lm_head.weight, or the embedding's weight when tied.
  const torch::Tensor& output_weight() const {
    return lm_head_weight_.defined() ? lm_head_weight_ : embedding_weight();
  }

  HfConfig config_;
  torch::Tensor lm_head_weight_;
  torch::Tensor score_weight_;  // a classifier's

 private:
  // forward's outputs before the load-balancing loss.
  ModelOutput outputs(const data::Batch& inputs);
  // A classifier's: its logits and, with "labels", Transformers' ForSequenceClassificationLoss.
  ModelOutput classifier_outputs(const data::Batch& inputs);
};

// A freshly initialised model of the config (random weights as Transformers draws them in
// distribution, from LibTorch's default generator), in float32.
std::shared_ptr<HfCausalLM> make_hf_causal_lm(const HfConfig& config);

// Transformers' no_init_weights: while one lives (on this thread), the models made skip
// init_weights, their parameters left as allocated (uninitialised, untouched memory) for a
// checkpoint's weights to fill; the random draws are not spent either.
class NoInitWeights {
 public:
  NoInitWeights() : previous_(active_) { active_ = true; }
  ~NoInitWeights() { active_ = previous_; }
  NoInitWeights(const NoInitWeights&) = delete;
  NoInitWeights& operator=(const NoInitWeights&) = delete;
  static bool active() { return active_; }

 private:
  bool previous_;
  static thread_local bool active_;
};

}  // namespace trainer::models
