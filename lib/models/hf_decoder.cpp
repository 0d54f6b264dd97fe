// The Llama family as Transformers 5.24 computes it (modeling_llama.py, modeling_qwen2.py,
// modeling_qwen3.py, modeling_mistral.py, modeling_gemma3.py, modeling_phi3.py,
// modeling_gemma2.py, modeling_olmo2.py, modeling_smollm3.py, modeling_granite.py), one decoder
// that the config shapes: RMSNorm in float32 (Gemma's 1 + weight, Olmo2's), SwiGLU or GeGLU
// (phi3's fused projections), norms before, around or after the blocks, grouped-query
// attention with rotary embeddings (hf_rotary.cpp; one per layer type), q/k norms, sliding
// windows, Gemma's scaled embedding, extra norms and logit softcapping, sparse mixtures of experts
// (modeling_mixtral.py, modeling_qwen3_moe.py); with a KV cache.
#include <cmath>

#include <fmt/format.h>
#include <torch/nn/functional.h>
#include <torch/torch.h>

#include "lib/models/hf_layers.h"

namespace trainer::models {
namespace hf {

// RMSNorm in float32, then: LlamaRMSNorm's weight * normed in the input's type ("llama"),
// Gemma's (1 + weight) * normed in float32 ("gemma"), Olmo2's weight * normed in float32 ("olmo2"),
// each back in the input's type.
struct RmsNorm : Weights {
  RmsNorm(int64_t n, double eps, const std::string& style)
      : Weights({n}, 0), eps(eps), gemma(style == "gemma"), olmo2(style == "olmo2") {}
  Tensor operator()(const Tensor& x) const {
    Tensor h = x.to(torch::kFloat);
    h = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps);
    if (gemma) return (h * (1.0 + weight.to(torch::kFloat))).to(x.scalar_type());
    if (olmo2) return (weight * h).to(x.scalar_type());
    return weight * h.to(x.scalar_type());
  }
  double eps;
  bool gemma, olmo2;
};

// rotate_half: (-x2, x1) of the two halves of the last dimension.
Tensor rotate_half(const Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

// q or k rotated by cos and sin over its first cos.size(-1) dimensions (phi3's partial rotary
// passes the rest), in the type of cos (olmo2's float32) and then its own.
Tensor rotate(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t rotary = cos.size(-1);
  if (rotary == x.size(-1)) return (x * cos + rotate_half(x) * sin).to(x.scalar_type());
  const Tensor r = x.slice(-1, 0, rotary);
  return torch::cat({(r * cos + rotate_half(r) * sin).to(x.scalar_type()), x.slice(-1, rotary)},
                    -1);
}

bool is_gemma(const HfConfig& c) { return c.scaled_embedding; }

// The attention scale: granite's attention_multiplier, Gemma's query_pre_attn_scalar^-1/2, else
// head_dim^-1/2.
double attention_scale(const HfConfig& c) {
  if (c.model_type == "granite") return c.attention_multiplier;
  return 1.0 / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar
                                                     : static_cast<double>(c.head_dim));
}

struct DecoderAttention : torch::nn::Module {
  explicit DecoderAttention(const HfConfig& c) : c(c) {
    const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
    if (c.fused_projections) {
      qkv_proj = register_module(
          "qkv_proj", std::make_shared<Linear>(c.hidden_size, q + 2 * kv, c.attention_bias));
    } else {
      q_proj =
          register_module("q_proj", std::make_shared<Linear>(c.hidden_size, q, c.attention_bias));
      k_proj =
          register_module("k_proj", std::make_shared<Linear>(c.hidden_size, kv, c.attention_bias));
      v_proj =
          register_module("v_proj", std::make_shared<Linear>(c.hidden_size, kv, c.attention_bias));
    }
    o_proj = register_module("o_proj", std::make_shared<Linear>(q, c.hidden_size, c.o_proj_bias));
    if (c.qk_norm) {
      // Over each head (qwen3, gemma3_text), or over the whole projection (olmo2).
      const int64_t qn = c.qk_norm_whole ? q : c.head_dim, kn = c.qk_norm_whole ? kv : c.head_dim;
      q_norm = register_module("q_norm", std::make_shared<RmsNorm>(qn, c.norm_eps, c.norm_style));
      k_norm = register_module("k_norm", std::make_shared<RmsNorm>(kn, c.norm_eps, c.norm_style));
    }
    scale = attention_scale(c);
  }
  // cos and sin undefined: a layer without rotary embedding (smollm3's no_rope_layers).
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask,
                 KVCache* cache, size_t layer, int64_t past) {
    const int64_t B = x.size(0), T = x.size(1);
    const int64_t qw = c.num_attention_heads * c.head_dim, kvw = c.num_key_value_heads * c.head_dim;
    Tensor q, k, v;
    if (qkv_proj) {
      Tensor qkv = (*qkv_proj)(x);
      q = qkv.slice(-1, 0, qw);
      k = qkv.slice(-1, qw, qw + kvw);
      v = qkv.slice(-1, qw + kvw);
    } else {
      q = (*q_proj)(x);
      k = (*k_proj)(x);
      v = (*v_proj)(x);
    }
    if (q_norm && c.qk_norm_whole) {
      q = (*q_norm)(q);
      k = (*k_norm)(k);
    }
    // [B, T, n, head_dim]: the per-head q/k norms act on each head there, before the heads move
    // forward.
    auto split = [&](const Tensor& t, int64_t n) { return t.reshape({B, T, n, c.head_dim}); };
    q = split(q, c.num_attention_heads);
    k = split(k, c.num_key_value_heads);
    if (q_norm && !c.qk_norm_whole) {
      q = (*q_norm)(q);
      k = (*k_norm)(k);
    }
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
    v = split(v, c.num_key_value_heads).transpose(1, 2);
    if (cos.defined()) {
      q = rotate(q, cos, sin);
      k = rotate(k, cos, sin);
    }
    auto [keys, values] = cached(cache, layer, k, v);
    const double p = is_training() ? c.attention_dropout : 0.0;
    Tensor y = attend(q, keys, values, mask, past, p, scale,
                      c.attn_softcapping ? c.attn_logit_softcapping : 0.0);
    return (*o_proj)(y.transpose(1, 2).reshape({B, T, -1}));
  }
  const HfConfig& c;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, qkv_proj, o_proj;
  std::shared_ptr<RmsNorm> q_norm, k_norm;
  double scale;
};

struct DecoderMlp : torch::nn::Module {
  explicit DecoderMlp(const HfConfig& c) : c(c) {
    const int64_t E = c.hidden_size, I = c.intermediate_size;
    if (c.fused_projections) {
      gate_up_proj =
          register_module("gate_up_proj", std::make_shared<Linear>(E, 2 * I, c.mlp_bias));
    } else {
      gate_proj = register_module("gate_proj", std::make_shared<Linear>(E, I, c.mlp_bias));
      up_proj = register_module("up_proj", std::make_shared<Linear>(E, I, c.mlp_bias));
    }
    down_proj = register_module("down_proj", std::make_shared<Linear>(I, E, c.mlp_bias));
  }
  Tensor forward(const Tensor& x) {
    if (gate_up_proj) {  // Phi3MLP: the gate's half first
      auto halves = (*gate_up_proj)(x).chunk(2, -1);
      return (*down_proj)(halves[1] * activation(c.activation, halves[0]));
    }
    return (*down_proj)(activation(c.activation, (*gate_proj)(x)) * (*up_proj)(x));
  }
  const HfConfig& c;
  std::shared_ptr<Linear> gate_proj, up_proj, gate_up_proj, down_proj;
};

// One expert of a sparse layer: a SwiGLU MLP under the Hub's names (mixtral's w1, w2, w3;
// qwen3_moe's gate_proj, up_proj, down_proj), each a linear layer LoRA can adapt.
struct Expert : torch::nn::Module {
  explicit Expert(const HfConfig& c) {
    const bool mixtral = c.model_type == "mixtral";
    const int64_t E = c.hidden_size, X = c.moe_intermediate_size;
    gate = register_module(mixtral ? "w1" : "gate_proj", std::make_shared<Linear>(E, X, false));
    if (mixtral) down = register_module("w2", std::make_shared<Linear>(X, E, false));
    up = register_module(mixtral ? "w3" : "up_proj", std::make_shared<Linear>(E, X, false));
    if (!mixtral) down = register_module("down_proj", std::make_shared<Linear>(X, E, false));
  }
  Tensor forward(const Tensor& x, const std::string& act) {
    return (*down)(activation(act, (*gate)(x)) * (*up)(x));
  }
  std::shared_ptr<Linear> gate, up, down;
};

// A sparse layer's MLP (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock): the router's softmax in
// float32, each token's num_experts_per_tok likeliest experts (their weights renormalised with
// norm_topk_prob, then in the hidden type for qwen3_moe), the tokens grouped per expert and each
// expert run once on its group, each token's outputs weighted and summed in its picks' order (as
// Transformers' grouped_mm path). Every expert runs, on an empty group too, so that each has a
// gradient (DDP's reducer waits for every parameter's).
struct SparseMoe : torch::nn::Module {
  explicit SparseMoe(const HfConfig& c) : c(c) {
    gate = register_module("gate", std::make_shared<Linear>(c.hidden_size, c.num_experts, false));
    experts_list = register_module("experts", torch::nn::ModuleList());
    for (int64_t e = 0; e < c.num_experts; ++e) {
      auto expert = std::make_shared<Expert>(c);
      experts_list->push_back(expert);
      experts.push_back(expert);
    }
  }
  // The output [B, T, H] and the router's logits [B * T, num_experts].
  std::pair<Tensor, Tensor> forward(Tensor x) {
    const auto sizes = x.sizes().vec();
    const int64_t H = c.hidden_size, k = c.num_experts_per_tok;
    if (is_training() && c.router_jitter_noise > 0) {
      x = x *
          torch::empty_like(x).uniform_(1.0 - c.router_jitter_noise, 1.0 + c.router_jitter_noise);
    }
    const Tensor h = x.reshape({-1, H});
    const Tensor logits = (*gate)(h);
    auto [weights, chosen] = torch::topk(torch::softmax(logits.to(torch::kFloat), -1), k, -1);
    if (c.norm_topk_prob) weights = weights / weights.sum(-1, true);
    if (!c.router_weights_in_float) weights = weights.to(logits.scalar_type());
    // Slot t * k + j is token t's j-th pick; sorted by expert, each expert's slots are a run.
    const Tensor picks = chosen.reshape(-1);
    const Tensor order = std::get<1>(picks.sort(std::optional<bool>(true), 0, false));
    const Tensor counts = torch::bincount(picks, {}, c.num_experts).cpu();
    const Tensor tokens = order.div(k, "floor");
    const Tensor slot_weights = weights.reshape(-1).index_select(0, order).unsqueeze(-1);
    std::vector<Tensor> grouped;
    grouped.reserve(experts.size());
    int64_t start = 0;
    for (size_t e = 0; e < experts.size(); ++e) {
      const int64_t n = counts[static_cast<int64_t>(e)].item<int64_t>();
      const Tensor rows = tokens.slice(0, start, start + n);
      grouped.push_back(experts[e]->forward(h.index_select(0, rows), c.activation) *
                        slot_weights.slice(0, start, start + n));
      start += n;
    }
    // Back in slot order, then each token's picks summed.
    const Tensor inverse =
        torch::empty_like(order).index_put_({order}, torch::arange(order.size(0), order.options()));
    const Tensor y = torch::cat(grouped).index_select(0, inverse).view({-1, k, H}).sum(1);
    return {y.to(x.scalar_type()).view(sizes), logits};
  }
  const HfConfig& c;
  std::shared_ptr<Linear> gate;
  torch::nn::ModuleList experts_list{nullptr};
  std::vector<std::shared_ptr<Expert>> experts;
};

// One decoder layer, registered in Transformers' order. Norms before attention and MLP (Llama),
// also after each (Gemma's sandwich), or after each only (Olmo2); granite scales each block's
// output, phi3 drops it out (resid_pdrop) before the residual add.
struct DecoderLayer : torch::nn::Module {
  DecoderLayer(const HfConfig& c, int64_t index)
      : sliding(c.is_sliding_layer(index)),
        rope(c.has_rope(index)),
        places(c.norm_places),
        residual_multiplier(c.residual_multiplier),
        resid_pdrop(c.model_type == "phi3" ? c.resid_pdrop : 0.0) {
    auto norm = [&](const char* name) {
      return register_module(name,
                             std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, c.norm_style));
    };
    self_attn = register_module("self_attn", std::make_shared<DecoderAttention>(c));
    if (c.is_sparse_layer(index)) {
      moe = register_module(c.model_type == "mixtral" ? "block_sparse_moe" : "mlp",
                            std::make_shared<SparseMoe>(c));
    } else {
      mlp = register_module("mlp", std::make_shared<DecoderMlp>(c));
    }
    if (places != "post") input_layernorm = norm("input_layernorm");
    post_attention_layernorm = norm("post_attention_layernorm");
    if (places == "sandwich") pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
    if (places != "pre") post_feedforward_layernorm = norm("post_feedforward_layernorm");
  }
  // A block's output as it joins the residual stream.
  Tensor branch(Tensor y) {
    if (resid_pdrop > 0) y = torch::dropout(y, resid_pdrop, is_training());
    if (residual_multiplier != 1.0) y = y * residual_multiplier;
    return y;
  }
  // The MLP, dense or sparse (then its router's logits go to `router_logits` when given).
  Tensor feed_forward(const Tensor& x, Tensor* router_logits) {
    if (!moe) return mlp->forward(x);
    auto [y, logits] = moe->forward(x);
    if (router_logits) *router_logits = logits;
    return y;
  }
  Tensor forward(Tensor h, const Tensor& cos, const Tensor& sin, const Tensor& mask, KVCache* cache,
                 size_t layer, int64_t past, Tensor* router_logits = nullptr) {
    if (places == "post") {
      h = h +
          (*post_attention_layernorm)(self_attn->forward(h, cos, sin, mask, cache, layer, past));
      return h + (*post_feedforward_layernorm)(feed_forward(h, router_logits));
    }
    Tensor a = self_attn->forward((*input_layernorm)(h), cos, sin, mask, cache, layer, past);
    if (places == "pre") {
      h = h + branch(a);
      return h + branch(feed_forward((*post_attention_layernorm)(h), router_logits));
    }
    h = h + (*post_attention_layernorm)(a);
    return h + (*post_feedforward_layernorm)(
                   feed_forward((*pre_feedforward_layernorm)(h), router_logits));
  }
  bool sliding, rope;
  std::string places;
  double residual_multiplier, resid_pdrop;
  std::shared_ptr<DecoderAttention> self_attn;
  std::shared_ptr<DecoderMlp> mlp;
  std::shared_ptr<SparseMoe> moe;
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
        register_module("norm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps, c.norm_style));
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
    rotary_ = std::make_shared<RotaryEmbedding>(config_.rope, config_.rotary_dim,
                                                config_.max_position_embeddings);
    if (config_.model_type == "gemma3_text") {
      local_rotary_ = std::make_shared<RotaryEmbedding>(config_.local_rope, config_.rotary_dim,
                                                        config_.max_position_embeddings);
    }
    init_weights();
  }

  Tensor hidden_states(const Tensor& input_ids, const Tensor& attention_mask, KVCache* cache,
                       const Tensor& position_ids) override {
    const int64_t past = cache ? cache->length : 0;
    // Dynamic scaling is what makes positions past max_position_embeddings work.
    check_ids(input_ids, past, max_positions(), prefix_.c_str(), position_ids);
    const int64_t T = input_ids.size(1);
    const Tensor& embedding = model->embed_tokens->weight;
    // nn.Embedding(padding_idx=pad_token_id): that row gets no gradient.
    Tensor x = torch::embedding(embedding, input_ids, padding_idx_);
    if (is_gemma(config_)) {
      // Gemma's ScaledWordEmbedding: times sqrt(hidden_size), a float32 scalar in the
      // embedding's type.
      x = x * torch::scalar_tensor(std::sqrt(static_cast<double>(config_.hidden_size)),
                                   torch::TensorOptions(torch::kFloat).device(x.device()))
                  .to(embedding.scalar_type());
    } else if (config_.embedding_multiplier != 0 && config_.embedding_multiplier != 1.0) {
      x = x * config_.embedding_multiplier;  // granite
    }
    x = neftune(std::move(x));
    // cos and sin in float32, then in the activations' type: [1 or B, 1, T, head_dim].
    Tensor positions =
        position_ids.defined()
            ? position_ids.to(torch::TensorOptions(torch::kFloat).device(x.device()))
            : torch::arange(past, past + T, torch::TensorOptions(torch::kFloat).device(x.device()))
                  .unsqueeze(0);
    // olmo2 rotates in float32; the others in the activations' type.
    const torch::Dtype rotary_type = config_.rotary_in_float ? torch::kFloat : x.scalar_type();
    const auto full = (*rotary_)(positions, rotary_type);
    const auto local = local_rotary_ ? (*local_rotary_)(positions, rotary_type) : full;
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
      const std::pair<Tensor, Tensor> none;
      const auto& rotation = !l->rope ? none : l->sliding ? local : full;
      // By value: with activation checkpointing the block runs again in backward. A sparse layer
      // whose router logits are kept returns them beside its output, [B, T, H + experts]: one
      // tensor through the checkpoint and the sharding hooks, their gradient with it.
      const bool keep = keep_router_logits_ && l->moe;
      x = run_block(i, x,
                    [l, cos = rotation.first, sin = rotation.second,
                     mask = l->sliding ? sliding_mask : full_mask, cache, i, past, keep](Tensor h) {
                      if (!keep) return l->forward(h, cos, sin, mask, cache, i, past);
                      Tensor logits;
                      Tensor out = l->forward(h, cos, sin, mask, cache, i, past, &logits);
                      return torch::cat(
                          {out, logits.view({out.size(0), out.size(1), -1}).to(out.scalar_type())},
                          -1);
                    });
      if (keep) {
        const int64_t H = config_.hidden_size;
        router_logits_.push_back(x.slice(-1, H).reshape({-1, config_.num_experts}));
        x = x.slice(-1, 0, H);
      }
    }
    if (cache) cache->length = past + T;
    // granite's logits are the lm_head's over logits_scaling: the same as the lm_head's of the
    // final hidden state over it.
    if (config_.logits_scaling != 1.0) return (*model->norm)(x) / config_.logits_scaling;
    return (*model->norm)(x);
  }

  const Tensor& embedding_weight() const override { return model->embed_tokens->weight; }

  int64_t max_positions() const override {
    return rotary_->extends_positions() ? INT64_MAX : config_.max_position_embeddings;
  }

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
