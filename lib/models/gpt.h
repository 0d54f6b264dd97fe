// A decoder-only transformer (GPT-2's layout, as nanoGPT writes it in PyTorch): pre-norm blocks
// of causal self-attention (LibTorch's scaled_dot_product_attention) and a 4x GELU MLP, tied
// input and output embeddings; and seeded sampling from it (`trainer generate`).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>

#include "lib/models/linear.h"
#include "lib/models/model.h"

namespace trainer::base {
class JsonFields;
}

namespace trainer::models {

struct GptConfig {
  int64_t vocab_size = 256;  // bytes
  int64_t block_size = 128;  // the longest context (positions of wpe)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;  // a multiple of n_head
  double dropout = 0.0;  // on embeddings, attention weights and residual branches, in training
  bool bias = true;      // biases in the Linear layers and LayerNorms (GPT-2 has them)
};

// Throws InputError naming the first value out of range ("model_config: n_embd 100 is not
// allowed (a multiple of n_head = 3)").
void check_gpt_config(const GptConfig& config);

// LayerNorm with an optional bias (PyTorch's, eps 1e-5): weight, and bias when `bias`.
class GptLayerNormImpl : public torch::nn::Module {
 public:
  GptLayerNormImpl(int64_t size, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
};
TORCH_MODULE(GptLayerNorm);

// Multi-head causal self-attention: c_attn (n_embd -> 3 n_embd: q, k, v), c_proj.
class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config);
  // x: [B, T, C]. attn_mask: undefined (plain causal attention) or bool [B, 1, T, T], true where
  // a query may attend to a key.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& attn_mask = {});
  Linear c_attn{nullptr}, c_proj{nullptr};
  torch::nn::Dropout resid_dropout{nullptr};
  int64_t n_head;
  double dropout;
};
TORCH_MODULE(CausalSelfAttention);

// c_fc (n_embd -> 4 n_embd), GELU (exact erf form, PyTorch's default), c_proj, dropout.
class GptMlpImpl : public torch::nn::Module {
 public:
  explicit GptMlpImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  Linear c_fc{nullptr}, c_proj{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(GptMlp);

// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GptBlockImpl : public torch::nn::Module {
 public:
  explicit GptBlockImpl(const GptConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& attn_mask = {});
  GptLayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  GptMlp mlp{nullptr};
};
TORCH_MODULE(GptBlock);

// wte, wpe, drop, h.0 ... h.{n_layer-1}, ln_f: nanoGPT's `transformer` ModuleDict.
class GptTransformerImpl : public torch::nn::Module {
 public:
  explicit GptTransformerImpl(const GptConfig& config);
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::nn::ModuleList h{nullptr};
  GptLayerNorm ln_f{nullptr};
};
TORCH_MODULE(GptTransformer);

// The model. Parameters as nanoGPT / GPT-2 name them: transformer.wte.weight,
// transformer.wpe.weight, transformer.h.0.ln_1.weight, transformer.h.0.attn.c_attn.weight, ...,
// transformer.ln_f.weight; lm_head.weight is transformer.wte.weight itself. Tying: the tensor is
// a parameter once (of wte: the optimizer, gradient synchronisation and parameter counts see it
// once) and a buffer of lm_head, so that the state dict, model.safetensors and its loading carry
// lm_head.weight as PyTorch's state_dict() does (two names, one tensor). Initialised as GPT-2:
// weights normal(0, 0.02), biases 0, LayerNorms 1 and 0, and the residual projections
// (attn.c_proj, mlp.c_proj) normal(0, 0.02 / sqrt(2 n_layer)), from LibTorch's default generator.
// Its task is causal_lm.
class Gpt : public Model {
 public:
  // Throws InputError as check_gpt_config does.
  explicit Gpt(const GptConfig& config);

  // The batch's "input_ids" (and "attention_mask" when present) -> logits; with "labels", also
  // the loss, as Transformers' GPT2LMHeadModel returns it: task_loss(task(), logits, labels,
  // inputs.num_items_in_batch) (shifted cross-entropy, -100 ignored; a sum over the window's
  // token count when the Trainer set it, else the mean). In training (or for a loss_only batch)
  // with chunked_loss() on: the loss alone, through causal_lm_linear_loss.
  ModelOutput forward(const data::Batch& inputs) override;

  // Logits float [B, T, vocab_size] for input_ids int64 [B, T] (T <= block_size). With an
  // attention_mask ([B, T], 1 on real tokens, 0 on padding), a query attends only to earlier real
  // tokens and itself (so padding anywhere, left or right, never changes a real token's logits;
  // with right padding they equal those of plain causal attention); without one, plain causal
  // attention (is_causal, the fused kernels). Throws c10::Error for T > block_size.
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {});
  // The final hidden states [B, T, n_embd] (after ln_f) that logits projects, on its terms.
  torch::Tensor hidden_states(const torch::Tensor& input_ids,
                              const torch::Tensor& attention_mask = {});
  // logits(x).
  torch::Tensor forward(const torch::Tensor& x) override;
  // The transformer blocks transformer.h.<i> (nanoGPT's class Block).
  std::vector<Block> blocks() override;

  const GptConfig& config() const { return config_; }
  // The tied output embedding: transformer->wte->weight.
  const torch::Tensor& lm_head_weight() const { return transformer->wte->weight; }

  GptTransformer transformer{nullptr};
  std::shared_ptr<torch::nn::Module> lm_head;

 private:
  GptConfig config_;
};

// The registry's gpt (make_model("gpt", ...)): options n_layer (4), n_head (4), n_embd (128),
// block_size (the data's context length, info.input_shape's last; at least that), dropout (0),
// bias (true) read from `options`; the vocabulary is info.num_labels. Throws InputError for an
// unknown option, a bad value, or a block_size shorter than the data's context.
std::shared_ptr<Gpt> make_gpt(base::JsonFields& options, const data::DataInfo& info);

struct SamplingOptions {
  int64_t max_new_tokens = 256;
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0: every token; else only the k most likely, 1..vocab_size
  // Tokens of context each step sees, the latest; 0: block_size - 1. A model trained on blocks of
  // L tokens whose labels are the inputs shifted inside the loss (Transformers' way, not
  // nanoGPT's) never learned to predict from position L - 1: no label follows it. So the longest
  // context it was trained to use is L - 1 (L: the data's context length).
  int64_t context = 0;
};

// `prompt` (int64 [T], T >= 1) followed by max_new_tokens tokens sampled one at a time from the
// model's next-token distribution (logits / temperature, the top_k largest kept), each step
// seeing the last options.context tokens: nanoGPT's generate(). Draws only from `generator` (a CPU
// generator), in eval mode and without gradients, so the same seed gives the same tokens.
// Throws std::invalid_argument for an empty prompt, temperature <= 0, or top_k out of range.
torch::Tensor generate(Gpt& model, const torch::Tensor& prompt, const SamplingOptions& options,
                       at::Generator generator);

}  // namespace trainer::models
