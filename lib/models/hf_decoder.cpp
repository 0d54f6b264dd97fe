// The Llama family as Transformers 5.x computes it (modeling_llama.py, modeling_qwen2.py,
// modeling_qwen3.py, modeling_mistral.py, modeling_gemma3.py), one decoder that the config
// shapes: RMSNorm in float32 (Gemma's scaling by 1 + weight), SwiGLU or GeGLU, grouped-query
// attention with rotary embeddings (hf_rotary.cpp; one per layer type), q/k norms, sliding
// windows, Gemma's scaled embedding, extra norms and logit softcapping; with a KV cache.
#include <cmath>

#include <fmt/format.h>
#include <torch/nn/functional.h>
#include <torch/torch.h>

#include "lib/models/hf_layers.h"

namespace trainer::models {
namespace hf {

// LlamaRMSNorm (weight * normed, in the input's type) or Gemma3RMSNorm ((1 + weight) * normed in
// float32, then the input's type).
struct RmsNorm : Weights {
  RmsNorm(int64_t n, double eps, bool gemma) : Weights({n}, 0), eps(eps), gemma(gemma) {}
  Tensor operator()(const Tensor& x) const {
    Tensor h = x.to(torch::kFloat);
    h = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps);
    if (gemma) return (h * (1.0 + weight.to(torch::kFloat))).to(x.scalar_type());
    return weight * h.to(x.scalar_type());
  }
  double eps;
  bool gemma;
};

// rotate_half: (-x2, x1) of the two halves of the last dimension.
Tensor rotate_half(const Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

bool is_gemma(const HfConfig& c) { return c.model_type == "gemma3_text"; }

struct DecoderAttention : torch::nn::Module {
  explicit DecoderAttention(const HfConfig& c) : c(c) {
    const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
    q_proj =
        register_module("q_proj", std::make_shared<Linear>(c.hidden_size, q, c.attention_bias));
    k_proj =
        register_module("k_proj", std::make_shared<Linear>(c.hidden_size, kv, c.attention_bias));
    v_proj =
        register_module("v_proj", std::make_shared<Linear>(c.hidden_size, kv, c.attention_bias));
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, c.hidden_size, c.o_proj_bias));
    if (c.qk_norm) {
      q_norm =
          register_module("q_norm", std::make_shared<RmsNorm>(c.head_dim, c.norm_eps, is_gemma(c)));
      k_norm =
          register_module("k_norm", std::make_shared<RmsNorm>(c.head_dim, c.norm_eps, is_gemma(c)));
    }
    scale = 1.0 / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar
                                                        : static_cast<double>(c.head_dim));
  }
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask,
                 KVCache* cache, size_t layer, int64_t past) {
    const int64_t B = x.size(0), T = x.size(1);
    // [B, T, n, head_dim]: the q/k norms act on each head there, before the heads move forward.
    auto split = [&](const Tensor& t, int64_t n) { return t.view({B, T, n, c.head_dim}); };
    Tensor q = split((*q_proj)(x), c.num_attention_heads);
    Tensor k = split((*k_proj)(x), c.num_key_value_heads);
    if (q_norm) {
      q = (*q_norm)(q);
      k = (*k_norm)(k);
    }
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
    Tensor v = split((*v_proj)(x), c.num_key_value_heads).transpose(1, 2);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    auto [keys, values] = cached(cache, layer, k, v);
    const double p = is_training() ? c.attention_dropout : 0.0;
    Tensor y = attend(q, keys, values, mask, past, p, scale);
    return (*o_proj)(y.transpose(1, 2).reshape({B, T, -1}));
  }
  const HfConfig& c;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RmsNorm> q_norm, k_norm;
  double scale;
};

struct DecoderMlp : torch::nn::Module {
  explicit DecoderMlp(const HfConfig& c) : c(c) {
    gate_proj = register_module(
        "gate_proj", std::make_shared<Linear>(c.hidden_size, c.intermediate_size, c.mlp_bias));
    up_proj = register_module(
        "up_proj", std::make_shared<Linear>(c.hidden_size, c.intermediate_size, c.mlp_bias));
    down_proj = register_module(
        "down_proj", std::make_shared<Linear>(c.intermediate_size, c.hidden_size, c.mlp_bias));
  }
  Tensor forward(const Tensor& x) {
    return (*down_proj)(activation(c.activation, (*gate_proj)(x)) * (*up_proj)(x));
  }
  const HfConfig& c;
  std::shared_ptr<Linear> gate_proj, up_proj, down_proj;
};

// One decoder layer, registered in Transformers' order; Gemma 3 adds a norm after attention and
// two around the MLP.
struct DecoderLayer : torch::nn::Module {
  DecoderLayer(const HfConfig& c, int64_t index) : sliding(c.is_sliding_layer(index)) {
    const bool gemma = is_gemma(c);
    auto norm = [&](const char* name) {
      return register_module(name, std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, gemma));
    };
    self_attn = register_module("self_attn", std::make_shared<DecoderAttention>(c));
    mlp = register_module("mlp", std::make_shared<DecoderMlp>(c));
    input_layernorm = norm("input_layernorm");
    post_attention_layernorm = norm("post_attention_layernorm");
    if (gemma) {
      pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
      post_feedforward_layernorm = norm("post_feedforward_layernorm");
    }
  }
  Tensor forward(Tensor h, const Tensor& cos, const Tensor& sin, const Tensor& mask, KVCache* cache,
                 size_t layer, int64_t past) {
    Tensor a = self_attn->forward((*input_layernorm)(h), cos, sin, mask, cache, layer, past);
    if (!pre_feedforward_layernorm) {
      h = h + a;
      return h + mlp->forward((*post_attention_layernorm)(h));
    }
    h = h + (*post_attention_layernorm)(a);
    return h + (*post_feedforward_layernorm)(mlp->forward((*pre_feedforward_layernorm)(h)));
  }
  bool sliding;
  std::shared_ptr<DecoderAttention> self_attn;
  std::shared_ptr<DecoderMlp> mlp;
  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;
};

struct DecoderBody : torch::nn::Module {
  explicit DecoderBody(const HfConfig& c) {
    embed_tokens = register_module(
        "embed_tokens",
        std::make_shared<Weights>(std::vector<int64_t>{c.vocab_size, c.hidden_size}, 0));
    layers_list = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      auto layer = std::make_shared<DecoderLayer>(c, i);
      layers_list->push_back(layer);
      layers.push_back(layer);
    }
    norm =
        register_module("norm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, is_gemma(c)));
  }
  std::shared_ptr<Weights> embed_tokens;
  torch::nn::ModuleList layers_list{nullptr};
  std::vector<std::shared_ptr<DecoderLayer>> layers;
  std::shared_ptr<RmsNorm> norm;
};

class Decoder : public HfCausalLM {
 public:
  explicit Decoder(const HfConfig& config) : HfCausalLM(config) {
    model = register_module("model", std::make_shared<DecoderBody>(config_));
    register_lm_head();
    // Not a parameter or buffer of the state dict (Transformers does not save inv_freq); Gemma 3's
    // sliding layers have their own.
    rotary_ = std::make_shared<RotaryEmbedding>(config_.rope, config_.head_dim,
                                                config_.max_position_embeddings);
    if (is_gemma(config_)) {
      local_rotary_ = std::make_shared<RotaryEmbedding>(config_.local_rope, config_.head_dim,
                                                        config_.max_position_embeddings);
    }
    init_weights();
  }

  Tensor hidden_states(const Tensor& input_ids, const Tensor& attention_mask, KVCache* cache,
                       const Tensor& position_ids) override {
    const int64_t past = cache ? cache->length : 0;
    // Dynamic scaling is what makes positions past max_position_embeddings work.
    check_ids(input_ids, past,
              rotary_->extends_positions() ? INT64_MAX : config_.max_position_embeddings,
              prefix_.c_str(), position_ids);
    const int64_t T = input_ids.size(1);
    const Tensor& embedding = model->embed_tokens->weight;
    // nn.Embedding(padding_idx=pad_token_id): that row gets no gradient.
    Tensor x = torch::embedding(embedding, input_ids, padding_idx_);
    if (is_gemma(config_)) {
      // Gemma3TextScaledWordEmbedding: times sqrt(hidden_size), a float32 scalar in the
      // embedding's type.
      x = x * torch::scalar_tensor(std::sqrt(static_cast<double>(config_.hidden_size)),
                                   torch::TensorOptions(torch::kFloat).device(x.device()))
                  .to(embedding.scalar_type());
    }
    x = neftune(std::move(x));
    // cos and sin in float32, then in the activations' type: [1 or B, 1, T, head_dim].
    Tensor positions =
        position_ids.defined()
            ? position_ids.to(torch::TensorOptions(torch::kFloat).device(x.device()))
            : torch::arange(past, past + T, torch::TensorOptions(torch::kFloat).device(x.device()))
                  .unsqueeze(0);
    const auto full = (*rotary_)(positions, x.scalar_type());
    const auto local = local_rotary_ ? (*local_rotary_)(positions, x.scalar_type()) : full;
    const bool packed = position_ids.defined() && !attention_mask.defined() && !cache;
    auto mask_for = [&](int64_t window) {
      Tensor mask =
          packed ? packed_attention_mask(position_ids, input_ids.device(), window) : Tensor();
      return mask.defined()
                 ? mask
                 : attention_mask_for(attention_mask, past, T, input_ids.device(), window);
    };
    Tensor full_mask = mask_for(0);
    Tensor sliding_mask = config_.sliding_window > 0 ? mask_for(config_.sliding_window) : full_mask;
    for (size_t i = 0; i < model->layers.size(); ++i) {
      DecoderLayer* l = model->layers[i].get();
      const auto& rotation = l->sliding ? local : full;
      // By value: with activation checkpointing the block runs again in backward.
      x = run_block(i, x,
                    [l, cos = rotation.first, sin = rotation.second,
                     mask = l->sliding ? sliding_mask : full_mask, cache, i,
                     past](Tensor h) { return l->forward(h, cos, sin, mask, cache, i, past); });
    }
    if (cache) cache->length = past + T;
    return (*model->norm)(x);
  }

  const Tensor& embedding_weight() const override { return model->embed_tokens->weight; }

  std::vector<Block> blocks() override {
    std::vector<Block> out;
    const std::string layer_class = prefix_ + "DecoderLayer";
    for (size_t i = 0; i < model->layers.size(); ++i) {
      out.push_back({fmt::format("model.layers.{}", i), layer_class, model->layers[i]});
    }
    return out;
  }

  std::shared_ptr<DecoderBody> model;

 private:
  std::shared_ptr<RotaryEmbedding> rotary_, local_rotary_;
  std::string prefix_ = hf_class_prefix(config_.model_type);
  int64_t padding_idx_ = hf_padding_idx(config_);
};

std::shared_ptr<HfCausalLM> make_hf_decoder(const HfConfig& config) {
  return std::make_shared<Decoder>(config);
}

}  // namespace hf
}  // namespace trainer::models
