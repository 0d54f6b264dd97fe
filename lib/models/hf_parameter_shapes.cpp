// The parameters a config.json implies, torch-free: their names and shapes as Transformers names
// them (what a folder's weights must be) and their count.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/models/hf_config.h"

namespace trainer::models {

namespace {

using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

void add(Shapes& shapes, std::string name, std::vector<int64_t> shape) {
  shapes.emplace_back(std::move(name), std::move(shape));
}

// GPT-2's block `h` (its Conv1D holds a weight as [in, out]).
void gpt2_block(const HfConfig& c, const std::string& h, Shapes& s) {
  const int64_t E = c.hidden_size, I = c.intermediate_size;
  add(s, h + "ln_1.weight", {E});
  add(s, h + "ln_1.bias", {E});
  add(s, h + "attn.c_attn.weight", {E, 3 * E});
  add(s, h + "attn.c_attn.bias", {3 * E});
  add(s, h + "attn.c_proj.weight", {E, E});
  add(s, h + "attn.c_proj.bias", {E});
  add(s, h + "ln_2.weight", {E});
  add(s, h + "ln_2.bias", {E});
  add(s, h + "mlp.c_fc.weight", {E, I});
  add(s, h + "mlp.c_fc.bias", {I});
  add(s, h + "mlp.c_proj.weight", {I, E});
  add(s, h + "mlp.c_proj.bias", {E});
}

// A decoder layer's attention (its projections, fused or not, and its q/k norms).
void attention(const HfConfig& c, const std::string& h, Shapes& s) {
  const int64_t E = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  if (c.fused_projections) {
    add(s, h + "self_attn.qkv_proj.weight", {q + 2 * kv, E});
    if (c.attention_bias) add(s, h + "self_attn.qkv_proj.bias", {q + 2 * kv});
  } else {
    for (const auto& [name, rows] :
         {std::pair<const char*, int64_t>{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}}) {
      add(s, h + "self_attn." + name + ".weight", {rows, E});
      if (c.attention_bias) add(s, h + "self_attn." + name + ".bias", {rows});
    }
  }
  add(s, h + "self_attn.o_proj.weight", {E, q});
  if (c.o_proj_bias) add(s, h + "self_attn.o_proj.bias", {E});
  if (c.qk_norm) {
    add(s, h + "self_attn.q_norm.weight", {c.qk_norm_whole ? q : c.head_dim});
    add(s, h + "self_attn.k_norm.weight", {c.qk_norm_whole ? kv : c.head_dim});
  }
}

// A sparse layer's router and experts, in the Hub's layout as save_pretrained writes them
// (Transformers 5 fuses them in memory only).
void experts(const HfConfig& c, const std::string& h, Shapes& s) {
  const int64_t E = c.hidden_size, X = c.moe_intermediate_size;
  const bool mixtral = c.model_type == "mixtral";
  const std::string moe = h + (mixtral ? "block_sparse_moe." : "mlp.");
  add(s, moe + "gate.weight", {c.num_experts, E});
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string expert = fmt::format("{}experts.{}.", moe, e);
    add(s, expert + (mixtral ? "w1" : "gate_proj") + ".weight", {X, E});
    add(s, expert + (mixtral ? "w2" : "down_proj") + ".weight", {E, X});
    add(s, expert + (mixtral ? "w3" : "up_proj") + ".weight", {X, E});
  }
}

// A dense layer's MLP (gate and up fused or not).
void mlp(const HfConfig& c, const std::string& h, Shapes& s) {
  const int64_t E = c.hidden_size, I = c.intermediate_size;
  if (c.fused_projections) {
    add(s, h + "mlp.gate_up_proj.weight", {2 * I, E});
    if (c.mlp_bias) add(s, h + "mlp.gate_up_proj.bias", {2 * I});
  } else {
    for (const char* name : {"gate_proj", "up_proj"}) {
      add(s, h + "mlp." + name + ".weight", {I, E});
      if (c.mlp_bias) add(s, h + "mlp." + name + ".bias", {I});
    }
  }
  add(s, h + "mlp.down_proj.weight", {E, I});
  if (c.mlp_bias) add(s, h + "mlp.down_proj.bias", {E});
}

// The decoder's layer `l` (the Llama family): its norms where the family puts them, attention,
// and its MLP or experts.
void decoder_layer(const HfConfig& c, int64_t l, Shapes& s) {
  const int64_t E = c.hidden_size;
  const std::string h = fmt::format("model.layers.{}.", l);
  if (c.norm_places != "post") add(s, h + "input_layernorm.weight", {E});
  attention(c, h, s);
  add(s, h + "post_attention_layernorm.weight", {E});
  if (c.norm_places == "sandwich") add(s, h + "pre_feedforward_layernorm.weight", {E});
  if (c.norm_places != "pre") add(s, h + "post_feedforward_layernorm.weight", {E});
  if (c.is_sparse_layer(l)) {
    experts(c, h, s);
  } else {
    mlp(c, h, s);
  }
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> hf_parameter_shapes(const HfConfig& c,
                                                                              int64_t max_layers) {
  const int64_t layers = std::min(c.num_hidden_layers, max_layers);
  const int64_t E = c.hidden_size, V = c.vocab_size;
  Shapes shapes;
  if (c.model_type == "gpt2") {
    add(shapes, "transformer.wte.weight", {V, E});
    add(shapes, "transformer.wpe.weight", {c.max_position_embeddings, E});
    for (int64_t l = 0; l < layers; ++l) gpt2_block(c, fmt::format("transformer.h.{}.", l), shapes);
    add(shapes, "transformer.ln_f.weight", {E});
    add(shapes, "transformer.ln_f.bias", {E});
  } else {
    add(shapes, "model.embed_tokens.weight", {V, E});
    for (int64_t l = 0; l < layers; ++l) decoder_layer(c, l, shapes);
    add(shapes, "model.norm.weight", {E});
  }
  if (c.sequence_classification) {
    add(shapes, "score.weight", {c.num_labels, E});
  } else if (!c.tie_word_embeddings) {
    add(shapes, "lm_head.weight", {V, E});
  }
  return shapes;
}

namespace {

// The parameters of `shapes`, -1 past 64 bits.
int64_t count_parameters(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  int64_t total = 0;
  for (const auto& [name, shape] : shapes) {
    int64_t size = 1;
    for (int64_t d : shape) {
      if (__builtin_mul_overflow(size, d, &size)) return -1;
    }
    if (__builtin_add_overflow(total, size, &total)) return -1;
  }
  return total;
}

}  // namespace

int64_t hf_num_parameters(const HfConfig& c) {
  // The tensors outside the layers, and one layer of each kind (dense, sparse), each counted once:
  // the layers of a kind are alike. A sparse layer is counted with one expert, and the other
  // experts as that one's size each (a config may say 10^9 experts).
  const int64_t outside = count_parameters(hf_parameter_shapes(c, 0));
  HfConfig dense = c;
  dense.num_experts = 0;
  const int64_t dense_layer = count_parameters(hf_parameter_shapes(dense, 1)) - outside;
  int64_t sparse_layers = 0, sparse_layer = 0;
  if (c.num_experts > 0) {
    sparse_layers = c.num_hidden_layers / c.decoder_sparse_step;
    std::vector<int64_t> only = c.mlp_only_layers;
    std::sort(only.begin(), only.end());
    only.erase(std::unique(only.begin(), only.end()), only.end());
    for (int64_t layer : only) sparse_layers -= (layer + 1) % c.decoder_sparse_step == 0;
    HfConfig one = c;
    one.num_experts = 1;
    one.decoder_sparse_step = 1;
    one.mlp_only_layers.clear();
    const int64_t with_one = count_parameters(hf_parameter_shapes(one, 1)) - outside;
    int64_t expert = 0;
    if (with_one < 0 || __builtin_mul_overflow(c.moe_intermediate_size, c.hidden_size, &expert) ||
        __builtin_mul_overflow(expert, 3, &expert) ||
        __builtin_add_overflow(expert, c.hidden_size, &expert) ||
        __builtin_mul_overflow(expert, c.num_experts - 1, &sparse_layer) ||
        __builtin_add_overflow(sparse_layer, with_one, &sparse_layer)) {
      return -1;
    }
  }
  int64_t total = 0, part = 0;
  if (outside < 0 || dense_layer < 0 ||
      __builtin_mul_overflow(dense_layer, c.num_hidden_layers - sparse_layers, &total) ||
      __builtin_mul_overflow(sparse_layer, sparse_layers, &part) ||
      __builtin_add_overflow(total, part, &total) ||
      __builtin_add_overflow(total, outside, &total)) {
    return -1;
  }
  return total;
}

}  // namespace trainer::models
