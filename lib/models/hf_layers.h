// The pieces GPT-2 (hf_causal_lm.cpp) and the Llama family (hf_decoder.cpp) share: weights under
// Transformers' names, nn.Linear with room for LoRA, the activations, the attention masks (causal,
// padded, sliding), SDPA over grouped heads, the KV cache's growth. Internal to lib/models.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/functional.h>
#include <torch/torch.h>

#include "lib/models/hf_causal_lm.h"
#include "lib/models/linear.h"

namespace trainer::models::hf {

using torch::Tensor;

// A module holding `weight` (and `bias`) under those names; the layout is the caller's.
struct Weights : torch::nn::Module {
  Weights(std::vector<int64_t> weight_shape, int64_t bias_size) {
    weight = register_parameter("weight", torch::empty(weight_shape));
    if (bias_size > 0) bias = register_parameter("bias", torch::empty({bias_size}));
  }
  Tensor weight, bias;
};

// Linear as nn.Linear stores it: weight [out, in]; room for a LoRA adapter.
struct Linear : Weights, LoraHost {
  Linear(int64_t in, int64_t out, bool with_bias) : Weights({out, in}, with_bias ? out : 0) {}
  // aten::linear (as Transformers' nn.Linear): autocast caches its cast of the weight for the
  // region, where F::linear's weight.t() is a view it casts again at every call (linear.h).
  Tensor operator()(const Tensor& x) const {
    return add_lora(x, torch::linear(x, weight, bias), is_training());
  }
  Tensor host_weight() const override { return weight; }
  Tensor host_bias() const override { return bias; }
};

inline Tensor activation(const std::string& name, const Tensor& x) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return torch::gelu(x, "tanh");
  if (name == "gelu") return torch::gelu(x);
  if (name == "relu") return torch::relu(x);
  return torch::silu(x);
}

// The boolean attention mask for queries at positions [past, past + T) over keys [0, past + T):
// causal, within the last `window` keys when window > 0 (key j is seen by query i when
// i - window < j <= i, as Transformers' sliding_window_overlay), to real keys only
// (attention_mask [B, past + T] when defined), each query always seeing itself. Undefined when
// plain causal attention (is_causal) or no mask at all does the job.
inline Tensor attention_mask_for(const Tensor& attention_mask, int64_t past, int64_t T,
                                 const torch::Device& device, int64_t window = 0) {
  const int64_t S = past + T;
  const bool windowed = window > 0 && S > window;
  if (!attention_mask.defined() && !windowed) return {};
  auto opts = torch::TensorOptions(torch::kBool).device(device);
  Tensor causal = torch::ones({T, S}, opts).tril(past);
  if (windowed) causal = causal.triu(past - window + 1);
  if (!attention_mask.defined()) return causal;
  Tensor self = torch::eye(T, S, opts).roll(past, 1);
  Tensor keys = attention_mask.to(torch::kBool).view({-1, 1, 1, S});
  return causal.logical_and(keys).logical_or(self);
}

// Transformers' find_packed_sequence_indices: for position_ids [B, T], each token's sequence
// index within its row (a step other than +1 starts a new one), or undefined when every row
// holds one sequence.
inline Tensor packed_sequence_indices(const Tensor& position_ids) {
  Tensor step = torch::diff(position_ids, 1, -1, position_ids.slice(1, 0, 1) - 1);
  Tensor index = step.ne(1).cumsum(-1);
  if (index.select(1, -1).eq(0).all().item<bool>()) return {};
  return index;
}

// attention_mask_for's mask for a packed row (no cache, no attention_mask): causal (within the
// window) and only within each token's sequence; [B, 1, T, T]. Undefined when no row is packed
// (then attention_mask_for's own mask holds).
inline Tensor packed_attention_mask(const Tensor& position_ids, const torch::Device& device,
                                    int64_t window = 0) {
  if (!position_ids.defined()) return {};
  Tensor index = packed_sequence_indices(position_ids);
  if (!index.defined()) return {};
  const int64_t T = position_ids.size(1);
  auto opts = torch::TensorOptions(torch::kBool).device(device);
  Tensor causal = torch::ones({T, T}, opts).tril();
  if (window > 0 && T > window) causal = causal.triu(-window + 1);
  Tensor same = index.unsqueeze(2).eq(index.unsqueeze(1)).unsqueeze(1).to(device);
  return causal.logical_and(same);
}

// SDPA for queries [B, H, T, D] over keys/values [B, KV, S, D] (KV divides H): causal when no
// mask and no past, free when a single query follows a cache. With `softcap` (gemma2's
// attn_logit_softcapping), Transformers' eager attention: scores capped (c tanh(s / c)) before the
// mask, softmax in float32.
inline Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     int64_t past, double dropout, double scale, double softcap = 0.0) {
  const int64_t T = q.size(2);
  const bool gqa = k.size(1) != q.size(1);
  Tensor keys = gqa ? k.repeat_interleave(q.size(1) / k.size(1), 1) : k;
  Tensor values = gqa ? v.repeat_interleave(q.size(1) / v.size(1), 1) : v;
  auto opts = torch::TensorOptions(torch::kBool).device(q.device());
  if (softcap > 0) {
    Tensor scores = torch::matmul(q, keys.transpose(-2, -1)) * scale;
    scores = torch::tanh(scores / softcap) * softcap;
    Tensor allowed = mask.defined() ? mask : torch::ones({T, past + T}, opts).tril(past);
    // -inf where Transformers adds the type's lowest: the same softmax (a query always sees
    // itself), and no bf16 overflow.
    scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
    Tensor p = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
    if (dropout > 0) p = torch::dropout(p, dropout, true);
    return torch::matmul(p, values);
  }
  if (mask.defined()) {
    return torch::scaled_dot_product_attention(q, keys, values, mask, dropout, false, scale);
  }
  if (past == 0)
    return torch::scaled_dot_product_attention(q, keys, values, {}, dropout, true, scale);
  if (T == 1)
    return torch::scaled_dot_product_attention(q, keys, values, {}, dropout, false, scale);
  Tensor causal = torch::ones({T, past + T}, opts).tril(past);
  return torch::scaled_dot_product_attention(q, keys, values, causal, dropout, false, scale);
}

// Appends this step's keys and values to the cache of `layer`; returns the whole of them.
inline std::pair<Tensor, Tensor> cached(KVCache* cache, size_t layer, const Tensor& k,
                                        const Tensor& v) {
  if (!cache) return {k, v};
  if (cache->keys.size() <= layer) {
    cache->keys.resize(layer + 1);
    cache->values.resize(layer + 1);
  }
  Tensor& ck = cache->keys[layer];
  Tensor& cv = cache->values[layer];
  ck = ck.defined() ? torch::cat({ck, k}, 2) : k;
  cv = cv.defined() ? torch::cat({cv, v}, 2) : v;
  return {ck, cv};
}

// With position_ids (a packed row), its sequences' positions are what must fit.
inline void check_ids(const Tensor& input_ids, int64_t past, int64_t max_positions,
                      const char* model, const Tensor& position_ids = {}) {
  TORCH_CHECK(input_ids.dim() == 2, model, ": input_ids must be [batch, time], got ",
              input_ids.sizes());
  if (position_ids.defined() && position_ids.numel() > 0) {
    TORCH_CHECK(position_ids.sizes() == input_ids.sizes(), model,
                ": position_ids must have input_ids' shape ", input_ids.sizes(), ", got ",
                position_ids.sizes());
    const int64_t longest = position_ids.max().item<int64_t>() + 1;
    TORCH_CHECK(longest <= max_positions, model, ": a sequence of ", longest,
                " tokens is longer than the model's ", max_positions, " positions");
    return;
  }
  TORCH_CHECK(past + input_ids.size(1) <= max_positions, model, ": a sequence of ",
              past + input_ids.size(1), " tokens is longer than the model's ", max_positions,
              " positions");
}

// The Llama family's rotary embedding, as Transformers 5.24's <Model>RotaryEmbedding computes it:
// inv_freq by rope type (ROPE_INIT_FUNCTIONS, float32 as there) and cos and sin times its
// attention scaling; `dynamic` recomputes inv_freq when the positions grow past what it last saw
// (and goes back to the original below max_position_embeddings), `longrope` switches from the
// short factors to the long ones past original_max_position_embeddings, both as Transformers'
// dynamic_rope_update does on each forward.
class RotaryEmbedding {
 public:
  // `rotary_dim`: the dimensions of a head that rotate (HfConfig::rotary_dim).
  RotaryEmbedding(const RopeParameters& rope, int64_t rotary_dim, int64_t max_position_embeddings);
  // cos and sin for `positions` ([rows, T], float32 on the activations' device), in `dtype`:
  // [rows, 1, T, rotary_dim].
  std::pair<Tensor, Tensor> operator()(const Tensor& positions, torch::Dtype dtype);
  // Whether positions past max_position_embeddings are this embedding's to scale (dynamic).
  bool extends_positions() const { return rope_.type == "dynamic"; }

 private:
  // inv_freq and the attention scaling of the rope type for `seq_len` (0: the config's own
  // length, as Transformers' init without seq_len).
  std::pair<Tensor, double> compute(int64_t seq_len) const;

  RopeParameters rope_;
  int64_t dim_, max_positions_;
  Tensor inv_freq_, original_inv_freq_, long_inv_freq_;
  double attention_scaling_ = 1.0;
  int64_t max_seq_len_cached_;
};

// The Llama family's model of the config (llama, qwen2, qwen3, mistral, gemma3_text), freshly
// initialised (hf_decoder.cpp).
std::shared_ptr<HfCausalLM> make_hf_decoder(const HfConfig& config);

}  // namespace trainer::models::hf
