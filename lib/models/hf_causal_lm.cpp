// GPT-2 as Transformers 5.x computes it (modeling_gpt2.py), with Transformers' parameter names
// and its KV cache; what every HfCausalLM shares (the loss, the tied head, the initialisation).
// The Llama family is hf_decoder.cpp's.
#include "lib/models/hf_causal_lm.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/nn/functional.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/models/hf_layers.h"
#include "lib/models/linear_cross_entropy.h"

namespace trainer::models {
namespace hf {

using torch::Tensor;

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

  Tensor hidden_states(const Tensor& input_ids, const Tensor& attention_mask, KVCache* cache,
                       const Tensor& position_ids) override {
    const int64_t past = cache ? cache->length : 0;
    check_ids(input_ids, past, config_.max_position_embeddings, "GPT-2", position_ids);
    const int64_t T = input_ids.size(1);
    Tensor positions = position_ids.defined()
                           ? position_ids.to(input_ids.options().dtype(torch::kLong))
                           : torch::arange(past, past + T, input_ids.options().dtype(torch::kLong));
    Tensor x = neftune(torch::embedding(transformer->wte->weight, input_ids)) +
               torch::embedding(transformer->wpe->weight, positions);
    if (is_training() && config_.embd_pdrop > 0) x = torch::dropout(x, config_.embd_pdrop, true);
    Tensor mask = position_ids.defined() && !attention_mask.defined() && !cache
                      ? packed_attention_mask(position_ids, input_ids.device())
                      : Tensor();
    if (!mask.defined()) mask = attention_mask_for(attention_mask, past, T, input_ids.device());
    for (size_t i = 0; i < transformer->blocks.size(); ++i) {
      // By value: with activation checkpointing the block runs again in backward.
      x = run_block(i, x, [b = transformer->blocks[i].get(), mask, cache, i, past](Tensor h) {
        h = h + b->attn->forward((*b->ln_1)(h), mask, cache, i, past);
        return h + b->mlp->forward((*b->ln_2)(h));
      });
    }
    if (cache) cache->length = past + T;
    return (*transformer->ln_f)(x);
  }

  const Tensor& embedding_weight() const override { return transformer->wte->weight; }

  std::vector<Block> blocks() override {
    std::vector<Block> out;
    for (size_t i = 0; i < transformer->blocks.size(); ++i) {
      out.push_back({fmt::format("transformer.h.{}", i), "GPT2Block", transformer->blocks[i]});
    }
    return out;
  }

  std::shared_ptr<Gpt2Body> transformer;
};

}  // namespace hf

HfCausalLM::HfCausalLM(HfConfig config) : config_(std::move(config)) {
  task_.kind = data::TaskKind::kCausalLM;
  if (config_.sequence_classification) {
    task_.kind = config_.num_labels == 1 || config_.problem_type == "regression"
                     ? data::TaskKind::kRegression
                     : data::TaskKind::kClassification;
    // Transformers' classifiers take **kwargs: the Trainer counts the window's labels and does
    // not divide their (mean) loss by the accumulation steps.
    task_.loss_kwargs = true;
  }
}

torch::Tensor load_balancing_loss(const std::vector<torch::Tensor>& router_logits,
                                  int64_t num_experts, int64_t top_k,
                                  const torch::Tensor& attention_mask) {
  const auto options = torch::TensorOptions(torch::kFloat).device(router_logits.at(0).device());
  torch::Tensor tokens = torch::zeros({num_experts}, options);
  torch::Tensor probs = torch::zeros({num_experts}, options);
  torch::Tensor rows = torch::zeros({}, options);
  torch::Tensor mask;
  if (attention_mask.defined()) mask = attention_mask.reshape(-1).to(options);
  for (const torch::Tensor& logits : router_logits) {
    // The softmax in the logits' type, and the top-k of those probabilities, as there.
    const torch::Tensor weights = torch::softmax(logits, -1);
    const torch::Tensor chosen = std::get<1>(torch::topk(weights, top_k, -1)).reshape(-1);
    if (!mask.defined()) {
      tokens = tokens + torch::bincount(chosen, {}, num_experts).to(options);
      probs = probs + weights.to(torch::kFloat).sum(0);
      rows = rows + static_cast<double>(weights.size(0));
    } else {
      tokens = tokens + torch::zeros({num_experts}, options)
                            .scatter_add(0, chosen, mask.repeat_interleave(top_k));
      probs = probs + (weights.to(torch::kFloat) * mask.unsqueeze(-1)).sum(0);
      rows = rows + mask.sum();
    }
  }
  return (tokens / rows * (probs / rows)).sum() * static_cast<double>(num_experts);
}

ModelOutput HfCausalLM::forward(const data::Batch& inputs) {
  // A mixture of experts' routers' logits are kept while it runs, for their load-balancing loss.
  // (Transformers' classifiers never add it, whatever output_router_logits says.)
  const bool aux = config_.num_experts > 0 && !config_.sequence_classification &&
                   (config_.output_router_logits || inputs.router_aux_loss);
  router_logits_.clear();
  keep_router_logits_ = aux;
  ModelOutput out;
  try {
    out = outputs(inputs);
  } catch (...) {
    keep_router_logits_ = false;
    router_logits_.clear();
    throw;
  }
  keep_router_logits_ = false;
  if (!aux || router_logits_.empty()) return out;
  out.aux_loss = load_balancing_loss(
      router_logits_, config_.num_experts, config_.num_experts_per_tok,
      inputs.contains("attention_mask") ? inputs.at("attention_mask") : torch::Tensor());
  router_logits_.clear();
  // Transformers' MoE ForCausalLM: the loss with labels plus router_aux_loss_coef times it.
  if (!inputs.router_aux_loss && out.loss.defined() && inputs.contains("labels")) {
    out.loss = out.loss + config_.router_aux_loss_coef * out.aux_loss;
  }
  return out;
}

torch::Tensor HfCausalLM::classifier_logits(const torch::Tensor& input_ids,
                                            const torch::Tensor& attention_mask,
                                            const torch::Tensor& position_ids) {
  if (!config_.sequence_classification) {
    throw std::logic_error("classifier_logits of a model that is not a classifier");
  }
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  torch::Tensor last;
  if (config_.pad_token_id < 0 && B != 1) {
    throw InputError(fmt::format(
        "{}: a batch of {} rows needs config.json's pad_token_id to find each row's last token "
        "(Transformers: cannot handle batch sizes > 1 if no padding token is defined); set it",
        hf_architecture(config_), B));
  }
  if (config_.pad_token_id < 0) {
    last = torch::full({B}, T - 1, input_ids.options().dtype(torch::kLong));
  } else {
    // The rightmost token that is not the pad id, whichever side the padding is on (a row of
    // pads only: the first).
    const torch::Tensor indices = torch::arange(T, input_ids.options().dtype(torch::kInt));
    last = (indices * input_ids.ne(config_.pad_token_id).to(torch::kInt)).argmax(-1);
  }
  const torch::Tensor hidden = hidden_states(input_ids, attention_mask, nullptr, position_ids);
  const torch::Tensor rows = torch::arange(B, last.options().dtype(torch::kLong));
  return torch::linear(hidden.index({rows, last}), score_weight_);
}

ModelOutput HfCausalLM::classifier_outputs(const data::Batch& inputs) {
  ModelOutput out;
  out.logits = classifier_logits(
      inputs.at("input_ids"),
      inputs.contains("attention_mask") ? inputs.at("attention_mask") : torch::Tensor(),
      inputs.contains("position_ids") ? inputs.at("position_ids") : torch::Tensor());
  if (!inputs.contains("labels")) return out;
  const torch::Tensor& labels = inputs.at("labels");
  if (config_.problem_type.empty()) {
    // ForSequenceClassificationLoss decides it once and keeps it in the config (and so in the
    // saved config.json).
    config_.problem_type =
        config_.num_labels == 1 ? "regression"
        : labels.scalar_type() == torch::kLong || labels.scalar_type() == torch::kInt
            ? "single_label_classification"
            : "multi_label_classification";
    config_.json["problem_type"] = config_.problem_type;
  }
  const torch::Tensor logits = out.logits;
  if (config_.problem_type == "regression") {
    const torch::Tensor target = labels.to(logits.scalar_type());
    out.loss = config_.num_labels == 1 ? torch::mse_loss(logits.squeeze(), target.squeeze())
                                       : torch::mse_loss(logits, target);
  } else if (config_.problem_type == "single_label_classification") {
    out.loss = torch::nn::functional::cross_entropy(
        logits.view({-1, config_.num_labels}).to(torch::kFloat), labels.view({-1}).to(torch::kLong),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  } else {
    out.loss = torch::binary_cross_entropy_with_logits(logits, labels.to(logits.scalar_type()));
  }
  return out;
}

ModelOutput HfCausalLM::outputs(const data::Batch& inputs) {
  if (config_.sequence_classification) return classifier_outputs(inputs);
  ModelOutput out;
  const torch::Tensor mask =
      inputs.contains("attention_mask") ? inputs.at("attention_mask") : torch::Tensor();
  const torch::Tensor positions =
      inputs.contains("position_ids") ? inputs.at("position_ids") : torch::Tensor();
  torch::Tensor* stats = inputs.token_stats ? &out.token_stats : nullptr;
  if (inputs.token_scores) {
    out.token_scores = causal_lm_token_scores(
        hidden_states(inputs.at("input_ids"), mask, nullptr, positions), output_weight(),
        inputs.at("labels"), config_.final_logit_softcapping, inputs.token_sum_sq, 0,
        inputs.score_temperature);
    return out;
  }
  if (chunked_loss() && (is_training() || inputs.loss_only) && inputs.contains("labels")) {
    out.loss = causal_lm_linear_loss(
        hidden_states(inputs.at("input_ids"), mask, nullptr, positions), output_weight(),
        inputs.at("labels"), inputs.num_items_in_batch, config_.final_logit_softcapping,
        inputs.dft_loss, stats, inputs.label_smoothing);
    return out;
  }
  out.logits = lm_logits(hidden_states(inputs.at("input_ids"), mask, nullptr, positions));
  if (inputs.contains("labels") && (inputs.dft_loss || stats)) {
    out.loss = causal_lm_logits_loss(out.logits, inputs.at("labels"), inputs.num_items_in_batch,
                                     inputs.dft_loss, stats, inputs.label_smoothing);
  } else if (inputs.contains("labels")) {
    out.loss = task_loss(task(), out.logits.to(torch::kFloat), inputs.at("labels"),
                         inputs.num_items_in_batch, inputs.label_smoothing);
  }
  return out;
}

torch::Tensor neftune_noise(torch::Tensor x, double alpha, bool training) {
  if (alpha <= 0 || !training) return x;
  // Transformers' neftune_post_forward_hook: mag = alpha / sqrt(seq_len * hidden_size).
  const double magnitude = alpha / std::sqrt(static_cast<double>(x.size(1) * x.size(2)));
  torch::Tensor noise;
  {
    torch::NoGradGuard no_grad;
    noise = torch::zeros_like(x).uniform_(-magnitude, magnitude);
  }
  return x + noise;
}

void HfCausalLM::disable_dropout() {
  config_.resid_pdrop = config_.embd_pdrop = config_.attn_pdrop = config_.attention_dropout = 0.0;
}

torch::Tensor HfCausalLM::lm_logits(const torch::Tensor& hidden) const {
  if (config_.sequence_classification) {
    throw std::logic_error("lm_logits of a sequence classifier (it has no language model head)");
  }
  torch::Tensor out = torch::linear(hidden, output_weight());
  if (config_.final_logit_softcapping > 0) {
    const double cap = config_.final_logit_softcapping;
    out = torch::tanh(out / cap) * cap;
  }
  return out;
}

void HfCausalLM::register_lm_head() {
  if (config_.sequence_classification) {
    auto score = register_module("score", std::make_shared<torch::nn::Module>());
    score_weight_ = score->register_parameter(
        "weight", torch::empty({config_.num_labels, config_.hidden_size}));
    return;
  }
  if (config_.tie_word_embeddings) return;
  auto head = register_module("lm_head", std::make_shared<torch::nn::Module>());
  lm_head_weight_ =
      head->register_parameter("weight", torch::empty({config_.vocab_size, config_.hidden_size}));
}

torch::Dtype HfCausalLM::dtype() const {
  for (const auto& p : parameters()) return p.scalar_type();
  return torch::kFloat;
}

thread_local bool NoInitWeights::active_ = false;

void HfCausalLM::init_weights() {
  if (NoInitWeights::active()) return;
  torch::NoGradGuard no_grad;
  const double std = config_.initializer_range;
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config_.num_hidden_layers));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    const bool is_norm =
        name.find("ln_") != std::string::npos || name.find("norm") != std::string::npos;
    if (is_norm) {
      // Gemma's RMSNorm scales by 1 + weight: its weights start at 0.
      base::ends_with(name, ".bias") || config_.norm_style == "gemma" ? p.zero_() : p.fill_(1.0);
    } else if (base::ends_with(name, ".bias")) {
      p.zero_();
    } else if (config_.model_type == "gpt2" && base::ends_with(name, "c_proj.weight")) {
      p.normal_(0.0, residual_std);
    } else {
      p.normal_(0.0, std);
    }
  }
  // nn.Embedding(padding_idx=pad_token_id), as the Llama family builds its embedding: that row
  // starts at 0.
  if (const int64_t pad = hf_padding_idx(config_); pad >= 0) {
    named_parameters()["model.embed_tokens.weight"][pad].zero_();
  }
}

std::shared_ptr<HfCausalLM> make_hf_causal_lm(const HfConfig& config) {
  if (config.model_type == "gpt2") return std::make_shared<hf::Gpt2>(config);
  return hf::make_hf_decoder(config);
}

}  // namespace trainer::models
