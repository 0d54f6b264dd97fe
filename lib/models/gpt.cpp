// The GPT model (nanoGPT's modules and parameter names on LibTorch) and nanoGPT's sampling loop.
#include "lib/models/gpt.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/nn/functional.h>
#include <torch/nn/init.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/json_fields.h"
#include "lib/base/text.h"
#include "lib/models/linear_cross_entropy.h"

namespace trainer::models {

namespace F = torch::nn::functional;

void check_gpt_config(const GptConfig& c) {
  auto bad = [](const std::string& name, auto value, const std::string& allowed) {
    return InputError(fmt::format("model_config: {} {} is not allowed ({})", name, value, allowed));
  };
  if (c.vocab_size < 1) throw bad("vocab_size", c.vocab_size, "an integer >= 1");
  if (c.block_size < 1) throw bad("block_size", c.block_size, "an integer >= 1");
  if (c.n_layer < 1) throw bad("n_layer", c.n_layer, "an integer >= 1");
  if (c.n_head < 1) throw bad("n_head", c.n_head, "an integer >= 1");
  if (c.n_embd < 1 || c.n_embd % c.n_head != 0) {
    throw bad("n_embd", c.n_embd, fmt::format("a positive multiple of n_head = {}", c.n_head));
  }
  if (!(c.dropout >= 0 && c.dropout < 1)) throw bad("dropout", c.dropout, "a number in [0, 1)");
}

GptLayerNormImpl::GptLayerNormImpl(int64_t size, bool with_bias) {
  weight = register_parameter("weight", torch::ones({size}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({size}));
}

torch::Tensor GptLayerNormImpl::forward(const torch::Tensor& x) {
  return torch::layer_norm(x, {weight.size(0)}, weight, bias, 1e-5);
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& c)
    : n_head(c.n_head), dropout(c.dropout) {
  c_attn = register_module("c_attn",
                           Linear(torch::nn::LinearOptions(c.n_embd, 3 * c.n_embd).bias(c.bias)));
  c_proj =
      register_module("c_proj", Linear(torch::nn::LinearOptions(c.n_embd, c.n_embd).bias(c.bias)));
  resid_dropout = register_module("resid_dropout", torch::nn::Dropout(c.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x,
                                               const torch::Tensor& attn_mask) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto qkv = c_attn->forward(x).split(C, 2);
  // [B, T, C] -> [B, n_head, T, head_size]
  auto heads = [&](const torch::Tensor& t) {
    return t.view({B, T, n_head, C / n_head}).transpose(1, 2);
  };
  const double p = is_training() ? dropout : 0.0;
  torch::Tensor y =
      attn_mask.defined()
          ? torch::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                                                attn_mask, p, /*is_causal=*/false)
          : torch::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), {}, p,
                                                /*is_causal=*/true);
  y = y.transpose(1, 2).contiguous().view({B, T, C});
  return resid_dropout->forward(c_proj->forward(y));
}

GptMlpImpl::GptMlpImpl(const GptConfig& c) {
  c_fc = register_module("c_fc",
                         Linear(torch::nn::LinearOptions(c.n_embd, 4 * c.n_embd).bias(c.bias)));
  c_proj = register_module("c_proj",
                           Linear(torch::nn::LinearOptions(4 * c.n_embd, c.n_embd).bias(c.bias)));
  dropout = register_module("dropout", torch::nn::Dropout(c.dropout));
}

torch::Tensor GptMlpImpl::forward(const torch::Tensor& x) {
  return dropout->forward(c_proj->forward(torch::gelu(c_fc->forward(x))));
}

GptBlockImpl::GptBlockImpl(const GptConfig& c) {
  ln_1 = register_module("ln_1", GptLayerNorm(c.n_embd, c.bias));
  attn = register_module("attn", CausalSelfAttention(c));
  ln_2 = register_module("ln_2", GptLayerNorm(c.n_embd, c.bias));
  mlp = register_module("mlp", GptMlp(c));
}

torch::Tensor GptBlockImpl::forward(const torch::Tensor& input, const torch::Tensor& attn_mask) {
  torch::Tensor x = input + attn->forward(ln_1->forward(input), attn_mask);
  return x + mlp->forward(ln_2->forward(x));
}

GptTransformerImpl::GptTransformerImpl(const GptConfig& c) {
  wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", torch::nn::Embedding(c.block_size, c.n_embd));
  drop = register_module("drop", torch::nn::Dropout(c.dropout));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(GptBlock(c));
  ln_f = register_module("ln_f", GptLayerNorm(c.n_embd, c.bias));
}

Gpt::Gpt(const GptConfig& config) : config_(config) {
  check_gpt_config(config);
  task_.kind = data::TaskKind::kCausalLM;
  transformer = register_module("transformer", GptTransformer(config));
  lm_head = register_module("lm_head", std::make_shared<torch::nn::Module>());
  lm_head->register_buffer("weight", transformer->wte->weight);
  // GPT-2's initialisation (nanoGPT's _init_weights and its c_proj scaling).
  torch::NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    const bool is_bias = base::ends_with(name, ".bias");
    if (name.find(".ln_") != std::string::npos) {
      is_bias ? p.zero_() : p.fill_(1.0);
    } else if (is_bias) {
      p.zero_();
    } else {
      p.normal_(0.0, base::ends_with(name, ".c_proj.weight") ? residual_std : 0.02);
    }
  }
}

torch::Tensor Gpt::logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
  return torch::linear(hidden_states(input_ids, attention_mask), transformer->wte->weight);
}

torch::Tensor Gpt::hidden_states(const torch::Tensor& input_ids,
                                 const torch::Tensor& attention_mask) {
  TORCH_CHECK(input_ids.dim() == 2, "Gpt: input_ids must be [batch, time], got ",
              input_ids.sizes());
  const int64_t T = input_ids.size(1);
  TORCH_CHECK(T <= config_.block_size, "Gpt: a sequence of ", T,
              " tokens is longer than block_size ", config_.block_size);
  torch::Tensor positions = torch::arange(T, input_ids.options().dtype(torch::kLong));
  torch::Tensor x = transformer->wte->forward(input_ids) + transformer->wpe->forward(positions);
  x = transformer->drop->forward(x);
  torch::Tensor attn_mask;
  if (attention_mask.defined()) {
    TORCH_CHECK(attention_mask.sizes() == input_ids.sizes(),
                "Gpt: attention_mask must have input_ids' shape ", input_ids.sizes(), ", got ",
                attention_mask.sizes());
    // Causal, to real keys only; each query may always see itself, so that a padding query (left
    // padding) has a key and no row of the softmax is empty.
    auto opts = torch::TensorOptions(torch::kBool).device(input_ids.device());
    torch::Tensor causal = torch::ones({T, T}, opts).tril();
    torch::Tensor self = torch::eye(T, opts);
    torch::Tensor keys = attention_mask.to(torch::kBool).view({-1, 1, 1, T});
    attn_mask = causal.logical_and(keys).logical_or(self);
  }
  for (size_t i = 0; i < transformer->h->size(); ++i) {
    auto* block = transformer->h[i]->as<GptBlock>();
    // By value: with activation checkpointing the block runs again in backward.
    x = run_block(
        i, x, [block, attn_mask](const torch::Tensor& h) { return block->forward(h, attn_mask); });
  }
  return transformer->ln_f->forward(x);
}

torch::Tensor Gpt::forward(const torch::Tensor& x) { return logits(x); }

std::vector<Block> Gpt::blocks() {
  std::vector<Block> out;
  for (size_t i = 0; i < transformer->h->size(); ++i) {
    out.push_back({fmt::format("transformer.h.{}", i), "Block", transformer->h->ptr(i)});
  }
  return out;
}

ModelOutput Gpt::forward(const data::Batch& inputs) {
  ModelOutput out;
  const torch::Tensor mask =
      inputs.contains("attention_mask") ? inputs.at("attention_mask") : torch::Tensor();
  if (chunked_loss() && (is_training() || inputs.loss_only) && inputs.contains("labels")) {
    out.loss = causal_lm_linear_loss(
        hidden_states(inputs.at("input_ids"), mask), transformer->wte->weight, inputs.at("labels"),
        inputs.num_items_in_batch, 0.0, false, nullptr, inputs.label_smoothing);
    return out;
  }
  out.logits = logits(inputs.at("input_ids"), mask);
  if (inputs.contains("labels")) {
    out.loss = task_loss(task(), out.logits, inputs.at("labels"), inputs.num_items_in_batch,
                         inputs.label_smoothing);
  }
  return out;
}

std::shared_ptr<Gpt> make_gpt(base::JsonFields& options, const data::DataInfo& info) {
  GptConfig c;
  c.vocab_size = info.num_labels;
  const int64_t context = info.input_shape.empty() ? c.block_size : info.input_shape.back();
  c.n_layer = options.integer("n_layer", c.n_layer, 1, 1024);
  c.n_head = options.integer("n_head", c.n_head, 1, 1024);
  c.n_embd = options.integer("n_embd", c.n_embd, 1, 1 << 16);
  c.block_size = options.integer("block_size", context, 1, 1 << 20);
  c.dropout = options.number("dropout", c.dropout, 0.0, 1.0, /*max_open=*/true);
  c.bias = options.boolean("bias", c.bias);
  options.finish();
  if (c.block_size < context) {
    options.fail_object(
        fmt::format("block_size {} is shorter than the data's context of {} tokens (give "
                    "block_size >= {}, or leave it out to take the data's)",
                    c.block_size, context, context));
  }
  return std::make_shared<Gpt>(c);
}

torch::Tensor generate(Gpt& model, const torch::Tensor& prompt, const SamplingOptions& options,
                       at::Generator generator) {
  const int64_t vocab = model.config().vocab_size;
  if (prompt.dim() != 1 || prompt.numel() == 0) {
    throw std::invalid_argument("generate: the prompt must hold at least one token");
  }
  if (!(options.temperature > 0) || !std::isfinite(options.temperature)) {
    throw std::invalid_argument(
        fmt::format("generate: temperature {} is not > 0", options.temperature));
  }
  if (options.context < 0) {
    throw std::invalid_argument(fmt::format("generate: context {} is negative", options.context));
  }
  if (options.top_k < 0 || options.top_k > vocab) {
    throw std::invalid_argument(
        fmt::format("generate: top_k {} is not in 0..{}", options.top_k, vocab));
  }
  torch::NoGradGuard no_grad;
  const bool training = model.is_training();
  model.eval();
  const torch::Device device = model.lm_head_weight().device();
  torch::Tensor ids = prompt.to(torch::kLong).to(device).unsqueeze(0);
  const int64_t block = model.config().block_size;
  const int64_t window =
      options.context > 0 ? std::min(options.context, block) : std::max<int64_t>(1, block - 1);
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t T = ids.size(1);
    torch::Tensor context = T > window ? ids.slice(1, T - window, T) : ids;
    torch::Tensor logits =
        model.logits(context).select(1, context.size(1) - 1).to(torch::kFloat).cpu() /
        options.temperature;
    if (options.top_k > 0 && options.top_k < vocab) {
      torch::Tensor kth = std::get<0>(logits.topk(options.top_k, -1)).select(1, options.top_k - 1);
      logits = logits.masked_fill(logits < kth.unsqueeze(1), -INFINITY);
    }
    torch::Tensor probs = torch::softmax(logits, -1);
    torch::Tensor next = torch::multinomial(probs, 1, /*replacement=*/false, generator);
    ids = torch::cat({ids, next.to(device)}, 1);
  }
  model.train(training);
  return ids.squeeze(0).cpu();
}

}  // namespace trainer::models
