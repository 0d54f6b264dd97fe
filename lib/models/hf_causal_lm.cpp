// GPT-2 and Llama as Transformers 5.x computes them (modeling_gpt2.py, modeling_llama.py), with
// Transformers' parameter names, and their KV cache.
#include "lib/models/hf_causal_lm.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/nn/functional.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/models/linear.h"

namespace trainer::models {
namespace hf {

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
  Tensor operator()(const Tensor& x) const {
    return add_lora(x, torch::nn::functional::linear(x, weight, bias), is_training());
  }
  Tensor host_weight() const override { return weight; }
  Tensor host_bias() const override { return bias; }
};

// GPT-2's Conv1D: weight [in, out], x @ weight + bias; room for a LoRA adapter (fan_in_fan_out).
struct Conv1D : Weights, LoraHost {
  Conv1D(int64_t in, int64_t out) : Weights({in, out}, out) {}
  Tensor operator()(const Tensor& x) const {
    auto sizes = x.sizes().vec();
    sizes.back() = weight.size(1);
    return add_lora(x, torch::addmm(bias, x.reshape({-1, x.size(-1)}), weight).view(sizes),
                    is_training());
  }
  Tensor host_weight() const override { return weight; }
  Tensor host_bias() const override { return bias; }
  bool fan_in_fan_out() const override { return true; }
};

Tensor activation(const std::string& name, const Tensor& x) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return torch::gelu(x, "tanh");
  if (name == "gelu") return torch::gelu(x);
  if (name == "relu") return torch::relu(x);
  return torch::silu(x);
}

// The boolean attention mask for queries at positions [past, past + T) over keys [0, past + T):
// causal, to real keys only (attention_mask [B, past + T] when defined), each query always seeing
// itself. Undefined when plain causal attention (is_causal) or no mask at all does the job.
Tensor attention_mask_for(const Tensor& attention_mask, int64_t past, int64_t T,
                          const torch::Device& device) {
  if (!attention_mask.defined()) return {};
  const int64_t S = past + T;
  auto opts = torch::TensorOptions(torch::kBool).device(device);
  Tensor causal = torch::ones({T, S}, opts).tril(past);
  Tensor self = torch::eye(T, S, opts).roll(past, 1);
  Tensor keys = attention_mask.to(torch::kBool).view({-1, 1, 1, S});
  return causal.logical_and(keys).logical_or(self);
}

// SDPA for queries [B, H, T, D] over keys/values [B, KV, S, D] (KV divides H): causal when no
// mask and no past, free when a single query follows a cache.
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, int64_t past,
              double dropout, double scale) {
  const int64_t T = q.size(2);
  const bool gqa = k.size(1) != q.size(1);
  Tensor keys = gqa ? k.repeat_interleave(q.size(1) / k.size(1), 1) : k;
  Tensor values = gqa ? v.repeat_interleave(q.size(1) / v.size(1), 1) : v;
  if (mask.defined()) {
    return torch::scaled_dot_product_attention(q, keys, values, mask, dropout, false, scale);
  }
  if (past == 0)
    return torch::scaled_dot_product_attention(q, keys, values, {}, dropout, true, scale);
  if (T == 1)
    return torch::scaled_dot_product_attention(q, keys, values, {}, dropout, false, scale);
  auto opts = torch::TensorOptions(torch::kBool).device(q.device());
  Tensor causal = torch::ones({T, past + T}, opts).tril(past);
  return torch::scaled_dot_product_attention(q, keys, values, causal, dropout, false, scale);
}

// Appends this step's keys and values to the cache of `layer`; returns the whole of them.
std::pair<Tensor, Tensor> cached(KVCache* cache, size_t layer, const Tensor& k, const Tensor& v) {
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

void check_ids(const Tensor& input_ids, int64_t past, int64_t max_positions, const char* model) {
  TORCH_CHECK(input_ids.dim() == 2, model, ": input_ids must be [batch, time], got ",
              input_ids.sizes());
  TORCH_CHECK(past + input_ids.size(1) <= max_positions, model, ": a sequence of ",
              past + input_ids.size(1), " tokens is longer than the model's ", max_positions,
              " positions");
}

// ---- GPT-2 ---------------------------------------------------------------------------------

struct LayerNorm : Weights {
  LayerNorm(int64_t n, double eps) : Weights({n}, n), eps(eps) {}
  Tensor operator()(const Tensor& x) const {
    return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps);
  }
  double eps;
};

struct Gpt2Attention : torch::nn::Module {
  Gpt2Attention(const HfConfig& c, int64_t layer) : c(c) {
    c_attn = register_module("c_attn", std::make_shared<Conv1D>(c.hidden_size, 3 * c.hidden_size));
    c_proj = register_module("c_proj", std::make_shared<Conv1D>(c.hidden_size, c.hidden_size));
    scale = c.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(c.head_dim)) : 1.0;
    if (c.scale_attn_by_inverse_layer_idx) scale /= static_cast<double>(layer + 1);
  }
  Tensor forward(const Tensor& x, const Tensor& mask, KVCache* cache, size_t layer, int64_t past) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto qkv = (*c_attn)(x).split(C, 2);
    auto heads = [&](const Tensor& t) {
      return t.view({B, T, c.num_attention_heads, c.head_dim}).transpose(1, 2);
    };
    auto [k, v] = cached(cache, layer, heads(qkv[1]), heads(qkv[2]));
    const double p = is_training() ? c.attn_pdrop : 0.0;
    Tensor y = attend(heads(qkv[0]), k, v, mask, past, p, scale);
    y = y.transpose(1, 2).reshape({B, T, C});
    y = (*c_proj)(y);
    return is_training() && c.resid_pdrop > 0 ? torch::dropout(y, c.resid_pdrop, true) : y;
  }
  const HfConfig& c;
  std::shared_ptr<Conv1D> c_attn, c_proj;
  double scale;
};

struct Gpt2Mlp : torch::nn::Module {
  explicit Gpt2Mlp(const HfConfig& c) : c(c) {
    c_fc = register_module("c_fc", std::make_shared<Conv1D>(c.hidden_size, c.intermediate_size));
    c_proj =
        register_module("c_proj", std::make_shared<Conv1D>(c.intermediate_size, c.hidden_size));
  }
  Tensor forward(const Tensor& x) {
    Tensor y = (*c_proj)(activation(c.activation, (*c_fc)(x)));
    return is_training() && c.resid_pdrop > 0 ? torch::dropout(y, c.resid_pdrop, true) : y;
  }
  const HfConfig& c;
  std::shared_ptr<Conv1D> c_fc, c_proj;
};

struct Gpt2Block : torch::nn::Module {
  Gpt2Block(const HfConfig& c, int64_t layer) {
    ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps));
    attn = register_module("attn", std::make_shared<Gpt2Attention>(c, layer));
    ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps));
    mlp = register_module("mlp", std::make_shared<Gpt2Mlp>(c));
  }
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<Gpt2Attention> attn;
  std::shared_ptr<Gpt2Mlp> mlp;
};

struct Gpt2Body : torch::nn::Module {
  explicit Gpt2Body(const HfConfig& c) {
    wte = register_module(
        "wte", std::make_shared<Weights>(std::vector<int64_t>{c.vocab_size, c.hidden_size}, 0));
    wpe = register_module("wpe",
                          std::make_shared<Weights>(
                              std::vector<int64_t>{c.max_position_embeddings, c.hidden_size}, 0));
    h = register_module("h", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      auto block = std::make_shared<Gpt2Block>(c, i);
      h->push_back(block);
      blocks.push_back(block);
    }
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.hidden_size, c.norm_eps));
  }
  std::shared_ptr<Weights> wte, wpe;
  torch::nn::ModuleList h{nullptr};
  std::vector<std::shared_ptr<Gpt2Block>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
};

class Gpt2 : public HfCausalLM {
 public:
  explicit Gpt2(const HfConfig& config) : HfCausalLM(config) {
    transformer = register_module("transformer", std::make_shared<Gpt2Body>(config_));
    register_lm_head();
    init_weights();
  }

  Tensor logits(const Tensor& input_ids, const Tensor& attention_mask, KVCache* cache) override {
    const int64_t past = cache ? cache->length : 0;
    check_ids(input_ids, past, config_.max_position_embeddings, "GPT-2");
    const int64_t T = input_ids.size(1);
    Tensor positions = torch::arange(past, past + T, input_ids.options().dtype(torch::kLong));
    Tensor x = torch::embedding(transformer->wte->weight, input_ids) +
               torch::embedding(transformer->wpe->weight, positions);
    if (is_training() && config_.embd_pdrop > 0) x = torch::dropout(x, config_.embd_pdrop, true);
    Tensor mask = attention_mask_for(attention_mask, past, T, input_ids.device());
    for (size_t i = 0; i < transformer->blocks.size(); ++i) {
      auto& b = *transformer->blocks[i];
      x = run_block(i, x, [&](Tensor h) {
        h = h + b.attn->forward((*b.ln_1)(h), mask, cache, i, past);
        return h + b.mlp->forward((*b.ln_2)(h));
      });
    }
    if (cache) cache->length = past + T;
    x = (*transformer->ln_f)(x);
    return torch::nn::functional::linear(x, output_weight(transformer->wte->weight));
  }

  std::vector<Block> blocks() override {
    std::vector<Block> out;
    for (size_t i = 0; i < transformer->blocks.size(); ++i) {
      out.push_back({fmt::format("transformer.h.{}", i), "GPT2Block", transformer->blocks[i]});
    }
    return out;
  }

  std::shared_ptr<Gpt2Body> transformer;
};

// ---- Llama ---------------------------------------------------------------------------------

struct RmsNorm : Weights {
  RmsNorm(int64_t n, double eps) : Weights({n}, 0), eps(eps) {}
  Tensor operator()(const Tensor& x) const {
    Tensor h = x.to(torch::kFloat);
    h = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps);
    return weight * h.to(x.scalar_type());
  }
  double eps;
};

// rotate_half: (-x2, x1) of the two halves of the last dimension.
Tensor rotate_half(const Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

struct LlamaAttention : torch::nn::Module {
  explicit LlamaAttention(const HfConfig& c) : c(c) {
    const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
    q_proj =
        register_module("q_proj", std::make_shared<Linear>(c.hidden_size, q, c.attention_bias));
    k_proj =
        register_module("k_proj", std::make_shared<Linear>(c.hidden_size, kv, c.attention_bias));
    v_proj =
        register_module("v_proj", std::make_shared<Linear>(c.hidden_size, kv, c.attention_bias));
    o_proj =
        register_module("o_proj", std::make_shared<Linear>(q, c.hidden_size, c.attention_bias));
  }
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& mask,
                 KVCache* cache, size_t layer, int64_t past) {
    const int64_t B = x.size(0), T = x.size(1);
    auto heads = [&](const Tensor& t, int64_t n) {
      return t.view({B, T, n, c.head_dim}).transpose(1, 2);
    };
    Tensor q = heads((*q_proj)(x), c.num_attention_heads);
    Tensor k = heads((*k_proj)(x), c.num_key_value_heads);
    Tensor v = heads((*v_proj)(x), c.num_key_value_heads);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    auto [keys, values] = cached(cache, layer, k, v);
    const double p = is_training() ? c.attention_dropout : 0.0;
    Tensor y =
        attend(q, keys, values, mask, past, p, 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
    return (*o_proj)(y.transpose(1, 2).reshape({B, T, -1}));
  }
  const HfConfig& c;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;
};

struct LlamaMlp : torch::nn::Module {
  explicit LlamaMlp(const HfConfig& c) : c(c) {
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

struct LlamaLayer : torch::nn::Module {
  explicit LlamaLayer(const HfConfig& c) {
    self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c));
    mlp = register_module("mlp", std::make_shared<LlamaMlp>(c));
    input_layernorm =
        register_module("input_layernorm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps));
    post_attention_layernorm = register_module(
        "post_attention_layernorm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps));
  }
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMlp> mlp;
  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
};

struct LlamaBody : torch::nn::Module {
  explicit LlamaBody(const HfConfig& c) {
    embed_tokens = register_module(
        "embed_tokens",
        std::make_shared<Weights>(std::vector<int64_t>{c.vocab_size, c.hidden_size}, 0));
    layers_list = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      auto layer = std::make_shared<LlamaLayer>(c);
      layers_list->push_back(layer);
      layers.push_back(layer);
    }
    norm = register_module("norm", std::make_shared<RmsNorm>(c.hidden_size, c.norm_eps));
  }
  std::shared_ptr<Weights> embed_tokens;
  torch::nn::ModuleList layers_list{nullptr};
  std::vector<std::shared_ptr<LlamaLayer>> layers;
  std::shared_ptr<RmsNorm> norm;
};

class Llama : public HfCausalLM {
 public:
  explicit Llama(const HfConfig& config) : HfCausalLM(config) {
    model = register_module("model", std::make_shared<LlamaBody>(config_));
    register_lm_head();
    // inv_freq as LlamaRotaryEmbedding computes it (float32), not a parameter or buffer of the
    // state dict (Transformers does not save it).
    inv_freq_ =
        1.0 / torch::pow(config_.rope_theta,
                         torch::arange(0, config_.head_dim, 2, torch::kLong).to(torch::kFloat) /
                             static_cast<double>(config_.head_dim));
    init_weights();
  }

  Tensor logits(const Tensor& input_ids, const Tensor& attention_mask, KVCache* cache) override {
    const int64_t past = cache ? cache->length : 0;
    check_ids(input_ids, past, config_.max_position_embeddings, "Llama");
    const int64_t T = input_ids.size(1);
    Tensor x = torch::embedding(model->embed_tokens->weight, input_ids);
    // cos and sin in float32, then in the activations' type: [1, 1, T, head_dim].
    Tensor positions =
        torch::arange(past, past + T, torch::TensorOptions(torch::kFloat).device(x.device()));
    Tensor freqs = positions.unsqueeze(1) * inv_freq_.to(x.device()).unsqueeze(0);
    Tensor emb = torch::cat({freqs, freqs}, -1);
    Tensor cos = emb.cos().to(x.scalar_type()).view({1, 1, T, -1});
    Tensor sin = emb.sin().to(x.scalar_type()).view({1, 1, T, -1});
    Tensor mask = attention_mask_for(attention_mask, past, T, input_ids.device());
    for (size_t i = 0; i < model->layers.size(); ++i) {
      auto& l = *model->layers[i];
      x = run_block(i, x, [&](Tensor h) {
        h = h + l.self_attn->forward((*l.input_layernorm)(h), cos, sin, mask, cache, i, past);
        return h + l.mlp->forward((*l.post_attention_layernorm)(h));
      });
    }
    if (cache) cache->length = past + T;
    x = (*model->norm)(x);
    return torch::nn::functional::linear(x, output_weight(model->embed_tokens->weight));
  }

  std::vector<Block> blocks() override {
    std::vector<Block> out;
    for (size_t i = 0; i < model->layers.size(); ++i) {
      out.push_back({fmt::format("model.layers.{}", i), "LlamaDecoderLayer", model->layers[i]});
    }
    return out;
  }

  std::shared_ptr<LlamaBody> model;

 private:
  Tensor inv_freq_;
};

}  // namespace hf

HfCausalLM::HfCausalLM(HfConfig config) : config_(std::move(config)) {
  task_.kind = data::TaskKind::kCausalLM;
}

ModelOutput HfCausalLM::forward(const data::Batch& inputs) {
  ModelOutput out;
  out.logits =
      logits(inputs.at("input_ids"),
             inputs.contains("attention_mask") ? inputs.at("attention_mask") : torch::Tensor());
  if (inputs.contains("labels")) {
    out.loss = task_loss(task(), out.logits.to(torch::kFloat), inputs.at("labels"),
                         inputs.num_items_in_batch);
  }
  return out;
}

void HfCausalLM::register_lm_head() {
  if (config_.tie_word_embeddings) return;
  auto head = register_module("lm_head", std::make_shared<torch::nn::Module>());
  lm_head_weight_ =
      head->register_parameter("weight", torch::empty({config_.vocab_size, config_.hidden_size}));
}

torch::Dtype HfCausalLM::dtype() const {
  for (const auto& p : parameters()) return p.scalar_type();
  return torch::kFloat;
}

void HfCausalLM::init_weights() {
  torch::NoGradGuard no_grad;
  const double std = config_.initializer_range;
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config_.num_hidden_layers));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    const bool is_norm =
        name.find("ln_") != std::string::npos || name.find("norm") != std::string::npos;
    if (is_norm) {
      base::ends_with(name, ".bias") ? p.zero_() : p.fill_(1.0);
    } else if (base::ends_with(name, ".bias")) {
      p.zero_();
    } else if (config_.model_type == "gpt2" && base::ends_with(name, "c_proj.weight")) {
      p.normal_(0.0, residual_std);
    } else {
      p.normal_(0.0, std);
    }
  }
}

std::shared_ptr<HfCausalLM> make_hf_causal_lm(const HfConfig& config) {
  if (config.model_type == "gpt2") return std::make_shared<hf::Gpt2>(config);
  if (config.model_type == "llama") return std::make_shared<hf::Llama>(config);
  throw InputError(
      fmt::format("model_type \"{}\" is not supported (gpt2, llama)", config.model_type));
}

}  // namespace trainer::models
