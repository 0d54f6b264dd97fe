// config.json of GPT-2 and Llama: fields, Transformers' defaults, and what is refused.
#include "lib/models/hf_config.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_fields.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::models {
namespace {

using json = nlohmann::ordered_json;

// model_type (gpt2 or llama) and dtype (one this loads, or none).
void read_model_type(base::JsonFields& f, HfConfig& c) {
  c.model_type = f.string("model_type", "");
  if (c.model_type.empty()) {
    f.fail("model_type", "is missing (supported: gpt2, llama)");
  }
  if (c.model_type != "gpt2" && c.model_type != "llama") {
    f.fail("model_type",
           fmt::format("\"{}\" is not supported (supported: gpt2, llama)", c.model_type));
  }
  c.dtype = f.string("dtype", f.string("torch_dtype", ""));
  if (!c.dtype.empty() && c.dtype != "float32" && c.dtype != "bfloat16" && c.dtype != "float16") {
    f.fail(f.has("dtype") ? "dtype" : "torch_dtype",
           fmt::format("\"{}\" is not supported (float32, bfloat16 or float16)", c.dtype));
  }
}

// The fields both models name alike: the vocabulary, the special tokens, no cross-attention.
void read_shared_fields(base::JsonFields& f, HfConfig& c) {
  c.vocab_size = f.positive("vocab_size", 0);
  c.initializer_range = f.number("initializer_range", 0.02);
  c.eos_token_ids = f.ids("eos_token_id");
  const auto bos = f.ids("bos_token_id");
  c.bos_token_id = bos.empty() ? -1 : bos.front();
  f.fail_if(f.boolean("add_cross_attention", false), "add_cross_attention",
            "true is not supported (a decoder-only model has no cross-attention)");
  f.fail_if(f.boolean("is_encoder_decoder", false), "is_encoder_decoder",
            "true is not supported (decoder-only causal language models only)");
}

// GPT2Config's fields and defaults.
void read_gpt2_fields(base::JsonFields& f, HfConfig& c) {
  c.hidden_size = f.positive("n_embd", 768);
  c.num_hidden_layers = f.positive("n_layer", 12);
  c.num_attention_heads = f.positive("n_head", 12);
  c.num_key_value_heads = c.num_attention_heads;
  c.max_position_embeddings = f.positive("n_positions", 1024);
  f.fail_if(c.hidden_size > INT64_MAX / 4 && !f.has("n_inner"), "n_embd",
            fmt::format("{} is too large (n_inner, 4 n_embd by default, would not fit in 64 bits)",
                        c.hidden_size));
  c.intermediate_size = f.positive("n_inner", 4 * c.hidden_size);
  c.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  c.activation = f.string("activation_function", "gelu_new");
  c.scale_attn_weights = f.boolean("scale_attn_weights", true);
  c.scale_attn_by_inverse_layer_idx = f.boolean("scale_attn_by_inverse_layer_idx", false);
  c.resid_pdrop = f.number("resid_pdrop", 0.1);
  c.embd_pdrop = f.number("embd_pdrop", 0.1);
  c.attn_pdrop = f.number("attn_pdrop", 0.1);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  if (c.hidden_size % c.num_attention_heads != 0) {
    f.fail("n_embd",
           fmt::format("{} is not a multiple of n_head {}", c.hidden_size, c.num_attention_heads));
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  for (const char* p : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) {
    const double v = f.number(p, 0.0);
    f.fail_if(!(v >= 0 && v < 1), p, fmt::format("{} is not in [0, 1)", v));
  }
}

// rope_scaling and rope_parameters: the default rotary embedding only, its theta.
void read_rope(base::JsonFields& f, const std::string& source, HfConfig& c) {
  c.rope_theta = f.number("rope_theta", 10000.0);
  if (f.has("rope_scaling")) {
    const json& s = f.at("rope_scaling");
    const bool plain = s.is_object() && s.value("rope_type", s.value("type", "")) == "default";
    f.fail_if(
        !plain, "rope_scaling",
        fmt::format("{} is not supported (only the default rotary embedding)", base::shown(s)));
  }
  if (f.has("rope_parameters")) {
    const json& r = f.at("rope_parameters");
    if (!r.is_object()) f.fail("rope_parameters", "is not an object");
    base::JsonFields rf(r, source + ": rope_parameters");
    const std::string type = rf.string("rope_type", "default");
    f.fail_if(type != "default", "rope_parameters",
              fmt::format("rope_type \"{}\" is not supported (only \"default\")", type));
    c.rope_theta = rf.number("rope_theta", c.rope_theta);
    if (const std::optional<std::string> key = rf.unread()) {
      f.fail("rope_parameters", fmt::format("key \"{}\" is not supported (only rope_type "
                                            "\"default\" and rope_theta)",
                                            *key));
    }
  }
  f.fail_if(!(c.rope_theta > 0), "rope_theta", fmt::format("{} is not > 0", c.rope_theta));
}

// LlamaConfig's fields and defaults.
void read_llama_fields(base::JsonFields& f, const std::string& source, HfConfig& c) {
  c.hidden_size = f.positive("hidden_size", 4096);
  c.num_hidden_layers = f.positive("num_hidden_layers", 32);
  c.num_attention_heads = f.positive("num_attention_heads", 32);
  c.num_key_value_heads = f.positive("num_key_value_heads", c.num_attention_heads);
  if (!f.has("head_dim") && c.hidden_size % c.num_attention_heads != 0) {
    f.fail("hidden_size", fmt::format("{} is not a multiple of num_attention_heads {} (give "
                                      "head_dim)",
                                      c.hidden_size, c.num_attention_heads));
  }
  c.head_dim = f.positive("head_dim", c.hidden_size / c.num_attention_heads);
  if (c.head_dim % 2 != 0)
    f.fail("head_dim", fmt::format("{} is odd (rotary needs pairs)", c.head_dim));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    f.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}",
                                              c.num_key_value_heads, c.num_attention_heads));
  }
  c.intermediate_size = f.positive("intermediate_size", 11008);
  c.max_position_embeddings = f.positive("max_position_embeddings", 2048);
  c.norm_eps = f.number("rms_norm_eps", 1e-6);
  c.activation = f.string("hidden_act", "silu");
  c.attention_bias = f.boolean("attention_bias", false);
  c.mlp_bias = f.boolean("mlp_bias", false);
  c.attention_dropout = f.number("attention_dropout", 0.0);
  f.fail_if(!(c.attention_dropout >= 0 && c.attention_dropout < 1), "attention_dropout",
            fmt::format("{} is not in [0, 1)", c.attention_dropout));
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  read_rope(f, source, c);
}

// What both models check once read: the activation, the norm's epsilon, the special tokens in
// the vocabulary.
void check_shared_fields(const base::JsonFields& f, const HfConfig& c) {
  const bool gpt2 = c.model_type == "gpt2";
  if (c.activation != "gelu_new" && c.activation != "gelu" && c.activation != "relu" &&
      c.activation != "silu" && c.activation != "gelu_pytorch_tanh") {
    f.fail(gpt2 ? "activation_function" : "hidden_act",
           fmt::format("\"{}\" is not supported (gelu_new, gelu_pytorch_tanh, gelu, relu, silu)",
                       c.activation));
  }
  f.fail_if(!(c.norm_eps > 0), gpt2 ? "layer_norm_epsilon" : "rms_norm_eps",
            fmt::format("{} is not > 0", c.norm_eps));
  for (int64_t id : c.eos_token_ids) {
    f.fail_if(id < 0 || id >= c.vocab_size, "eos_token_id",
              fmt::format("{} is outside the vocabulary (0..{})", id, c.vocab_size - 1));
  }
  f.fail_if(f.has("bos_token_id") && (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size),
            "bos_token_id",
            fmt::format("{} is outside the vocabulary (0..{})", c.bos_token_id, c.vocab_size - 1));
}

// A model of more than 2^63 parameters is refused by the largest of its sizes, the one to blame.
void check_parameter_count(const base::JsonFields& f, const HfConfig& c) {
  if (hf_num_parameters(c) >= 0) return;
  const bool gpt2 = c.model_type == "gpt2";
  std::pair<const char*, int64_t> largest{gpt2 ? "n_embd" : "hidden_size", c.hidden_size};
  for (const std::pair<const char*, int64_t>& size :
       {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
        {gpt2 ? "n_inner" : "intermediate_size", c.intermediate_size},
        {gpt2 ? "n_layer" : "num_hidden_layers", c.num_hidden_layers},
        {gpt2 ? "n_positions" : "max_position_embeddings", c.max_position_embeddings},
        {gpt2 ? "n_head" : "num_attention_heads", c.num_attention_heads},
        {"head_dim", c.head_dim}}) {
    if (size.second > largest.second) largest = size;
  }
  f.fail(largest.first, fmt::format("{} is too large: the model would hold more than 2^63 "
                                    "parameters",
                                    largest.second));
}

}  // namespace

HfConfig parse_hf_config(const json& j, const std::string& source) {
  if (!j.is_object()) {
    throw InputError(fmt::format("{}: not a JSON object (a Hugging Face config.json)", source));
  }
  base::JsonFields f(j, source);
  HfConfig c;
  c.json = j;
  read_model_type(f, c);
  read_shared_fields(f, c);
  if (c.model_type == "gpt2") {
    read_gpt2_fields(f, c);
  } else {
    read_llama_fields(f, source, c);
  }
  check_shared_fields(f, c);
  check_parameter_count(f, c);
  return c;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> hf_parameter_shapes(const HfConfig& c,
                                                                              int64_t max_layers) {
  const int64_t layers = std::min(c.num_hidden_layers, max_layers);
  const int64_t E = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    shapes.emplace_back(std::move(name), std::move(shape));
  };
  if (c.model_type == "gpt2") {
    // GPT-2's Conv1D holds its weight as [in, out].
    add("transformer.wte.weight", {V, E});
    add("transformer.wpe.weight", {c.max_position_embeddings, E});
    for (int64_t l = 0; l < layers; ++l) {
      const std::string h = fmt::format("transformer.h.{}.", l);
      add(h + "ln_1.weight", {E});
      add(h + "ln_1.bias", {E});
      add(h + "attn.c_attn.weight", {E, 3 * E});
      add(h + "attn.c_attn.bias", {3 * E});
      add(h + "attn.c_proj.weight", {E, E});
      add(h + "attn.c_proj.bias", {E});
      add(h + "ln_2.weight", {E});
      add(h + "ln_2.bias", {E});
      add(h + "mlp.c_fc.weight", {E, I});
      add(h + "mlp.c_fc.bias", {I});
      add(h + "mlp.c_proj.weight", {I, E});
      add(h + "mlp.c_proj.bias", {E});
    }
    add("transformer.ln_f.weight", {E});
    add("transformer.ln_f.bias", {E});
  } else {
    const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
    add("model.embed_tokens.weight", {V, E});
    for (int64_t l = 0; l < layers; ++l) {
      const std::string h = fmt::format("model.layers.{}.", l);
      add(h + "input_layernorm.weight", {E});
      for (const auto& [name, rows] :
           {std::pair<const char*, int64_t>{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}}) {
        add(h + "self_attn." + name + ".weight", {rows, E});
        if (c.attention_bias) add(h + "self_attn." + name + ".bias", {rows});
      }
      add(h + "self_attn.o_proj.weight", {E, q});
      if (c.attention_bias) add(h + "self_attn.o_proj.bias", {E});
      add(h + "post_attention_layernorm.weight", {E});
      for (const char* name : {"gate_proj", "up_proj"}) {
        add(h + "mlp." + name + ".weight", {I, E});
        if (c.mlp_bias) add(h + "mlp." + name + ".bias", {I});
      }
      add(h + "mlp.down_proj.weight", {E, I});
      if (c.mlp_bias) add(h + "mlp.down_proj.bias", {E});
    }
    add("model.norm.weight", {E});
  }
  if (!c.tie_word_embeddings) add("lm_head.weight", {V, E});
  return shapes;
}

int64_t hf_num_parameters(const HfConfig& c) {
  // The tensors outside the layers, and one layer's, each counted once: the layers are alike.
  auto count = [&](int64_t layers) {
    int64_t total = 0;
    for (const auto& [name, shape] : hf_parameter_shapes(c, layers)) {
      int64_t size = 1;
      for (int64_t d : shape) {
        if (__builtin_mul_overflow(size, d, &size)) return int64_t{-1};
      }
      if (__builtin_add_overflow(total, size, &total)) return int64_t{-1};
    }
    return total;
  };
  const int64_t outside = count(0), with_one = count(1);
  int64_t total = 0;
  if (outside < 0 || with_one < 0 ||
      __builtin_mul_overflow(with_one - outside, c.num_hidden_layers, &total) ||
      __builtin_add_overflow(total, outside, &total)) {
    return -1;
  }
  return total;
}

HfConfig read_hf_config(const std::string& dir) {
  const std::string path = base::join_path(dir, base::hf::kConfig);
  return parse_hf_config(base::read_json_object(path), path);
}

namespace {

// Transformers' GPT2Config or LlamaConfig as save_pretrained writes it, each default spelt out.
json transformers_defaults(const std::string& model_type) {
  if (model_type == "gpt2") {
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"activation_function", "gelu_new"},
            {"attn_pdrop", 0.1},
            {"bos_token_id", 50256},
            {"embd_pdrop", 0.1},
            {"eos_token_id", 50256},
            {"initializer_range", 0.02},
            {"layer_norm_epsilon", 1e-5},
            {"n_embd", 768},
            {"n_head", 12},
            {"n_inner", nullptr},
            {"n_layer", 12},
            {"n_positions", 1024},
            {"resid_pdrop", 0.1},
            {"scale_attn_by_inverse_layer_idx", false},
            {"scale_attn_weights", true},
            {"tie_word_embeddings", true},
            {"vocab_size", 50257}};
  }
  if (model_type == "llama") {
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"bos_token_id", 1},
            {"eos_token_id", 2},
            {"hidden_act", "silu"},
            {"hidden_size", 4096},
            {"initializer_range", 0.02},
            {"intermediate_size", 11008},
            {"max_position_embeddings", 2048},
            {"mlp_bias", false},
            {"num_attention_heads", 32},
            {"num_hidden_layers", 32},
            {"num_key_value_heads", nullptr},
            {"rms_norm_eps", 1e-6},
            {"rope_parameters", {{"rope_theta", 10000.0}, {"rope_type", "default"}}},
            {"tie_word_embeddings", false},
            {"vocab_size", 32000}};
  }
  throw InputError(fmt::format("model_type \"{}\" is not supported (gpt2, llama)", model_type));
}

// `overrides` (model_config: null, or an object of config.json keys) set in `j`, each key one of
// the model type's config.json.
void apply_overrides(json& j, const json& overrides, const std::string& model_type) {
  if (!overrides.is_null() && !overrides.is_object()) {
    throw InputError(fmt::format("model_config: {} is not a JSON object of config.json keys",
                                 base::shown(overrides)));
  }
  if (!overrides.is_object()) return;
  // Keys the config has without a default (None in Transformers' config classes).
  const std::vector<std::string> optional = {"head_dim",
                                             "rope_theta",
                                             "rope_scaling",
                                             "pad_token_id",
                                             "dtype",
                                             "torch_dtype",
                                             "add_cross_attention",
                                             "pretraining_tp",
                                             "reorder_and_upcast_attn",
                                             "use_cache"};
  std::vector<std::string> known;
  for (const auto& item : j.items()) known.push_back(item.key());
  known.insert(known.end(), optional.begin(), optional.end());
  for (const auto& item : overrides.items()) {
    if (std::find(known.begin(), known.end(), item.key()) == known.end()) {
      const std::string near = base::nearest(item.key(), known);
      throw InputError(fmt::format(
          "model_config: key \"{}\" is not a key of {}'s config.json{}", item.key(), model_type,
          near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
    }
    j[item.key()] = item.value();
  }
}

}  // namespace

HfConfig hf_config_from_defaults(const std::string& model_type, const json& overrides,
                                 int64_t vocab_size, int64_t bos_id, int64_t eos_id) {
  json j = transformers_defaults(model_type);
  if (vocab_size > 0) j["vocab_size"] = vocab_size;
  // The tokenizer's special tokens, not Transformers' defaults (50256 or 1 and 2), which may lie
  // outside a smaller vocabulary.
  j["bos_token_id"] = bos_id >= 0 ? json(bos_id) : json();
  j["eos_token_id"] = eos_id >= 0 ? json(eos_id) : json();
  apply_overrides(j, overrides, model_type);
  j["dtype"] = "float32";
  return parse_hf_config(j, "model_config");
}

bool is_hf_model_dir(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) &&
         std::filesystem::exists(base::join_path(dir, base::hf::kConfig), ec);
}

json hf_generation_config(const HfConfig& c) {
  json g = json::object();
  if (c.bos_token_id >= 0) g["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1) g["eos_token_id"] = c.eos_token_ids.front();
  if (c.eos_token_ids.size() > 1) g["eos_token_id"] = c.eos_token_ids;
  return g;
}

}  // namespace trainer::models
