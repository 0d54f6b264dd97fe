// config.json of GPT-2 and the Llama family: fields, Transformers' defaults, and what is refused.
#include "lib/models/hf_config.h"
#include "lib/models/hf_config_rope.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_fields.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::models {

namespace {

using json = nlohmann::ordered_json;

// model_type (one of hf_model_types()) and dtype (one this loads, or none).
void read_model_type(base::JsonFields& f, HfConfig& c) {
  const std::string supported = fmt::format("supported: {}", fmt::join(hf_model_types(), ", "));
  c.model_type = f.string("model_type", "");
  if (c.model_type.empty()) f.fail("model_type", fmt::format("is missing ({})", supported));
  const auto& types = hf_model_types();
  if (std::find(types.begin(), types.end(), c.model_type) == types.end()) {
    f.fail("model_type", fmt::format("\"{}\" is not supported ({})", c.model_type, supported));
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

// The head that config.json's architectures names, and a classifier's labels (PretrainedConfig's
// num_labels, id2label, problem_type) and pad_token_id.
void read_head(base::JsonFields& f, HfConfig& c) {
  const std::vector<std::string> names = f.strings("architectures");
  const std::string name = names.empty() ? "" : names.front();
  auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with("ForSequenceClassification")) {
    f.fail_if(!hf_has_sequence_classifier(c.model_type), "architectures",
              fmt::format("\"{}\" is not supported (Transformers 5.24 has no sequence classifier "
                          "for model_type {})",
                          name, c.model_type));
    c.sequence_classification = true;
    const std::string expected = hf_architecture(c);
    f.fail_if(name != expected, "architectures",
              fmt::format("\"{}\" does not match model_type {} (its classifier is {})", name,
                          c.model_type, expected));
  } else if (ends_with("ForTokenClassification") || ends_with("ForQuestionAnswering") ||
             (ends_with("Model") && !ends_with("LMHeadModel"))) {
    f.fail("architectures",
           fmt::format("\"{}\" is not supported (a causal language model: {}, or a sequence "
                       "classifier: {}ForSequenceClassification)",
                       name, hf_architecture(c), hf_class_prefix(c.model_type)));
  }
  int64_t labels = 2;
  if (f.has("id2label")) {
    const json& id2label = f.at("id2label");
    f.fail_if(
        !id2label.is_object() || id2label.empty(), "id2label",
        fmt::format("{} is not allowed (an object of label names by id)", base::shown(id2label)));
    labels = static_cast<int64_t>(id2label.size());
  }
  c.num_labels = f.positive("num_labels", labels);
  c.problem_type =
      f.choice("problem_type", "",
               {"regression", "single_label_classification", "multi_label_classification"});
  if (f.has("pad_token_id")) {
    const json& pad = f.at("pad_token_id");
    f.fail_if(!pad.is_number_integer(), "pad_token_id",
              fmt::format("{} is not a token id", base::shown(pad)));
    c.pad_token_id = pad.get<int64_t>();
  }
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

// Transformers' defaults of the fields the Llama family shares, by model type (LlamaConfig,
// Qwen2Config, Qwen3Config, MistralConfig, Gemma3TextConfig, Phi3Config, Gemma2Config,
// Olmo2Config, SmolLM3Config, GraniteConfig): kv_heads 0 is num_attention_heads, head_dim 0
// hidden_size / num_attention_heads.
struct FamilyDefaults {
  int64_t hidden, layers, heads, kv_heads, head_dim, intermediate, positions;
  const char* activation;
  bool tied;
  double theta, local_theta, eps;
};

FamilyDefaults family_defaults(const std::string& type) {
  if (type == "qwen2") return {4096, 32, 32, 32, 0, 22016, 32768, "silu", false, 1e4, 1e4, 1e-6};
  if (type == "qwen3") return {4096, 32, 32, 32, 128, 22016, 32768, "silu", false, 1e4, 1e4, 1e-6};
  if (type == "mistral") return {4096, 32, 32, 8, 0, 14336, 131072, "silu", false, 1e4, 1e4, 1e-6};
  if (type == "gemma3_text") {
    return {2304, 26, 8, 4, 256, 9216, 131072, "gelu_pytorch_tanh", true, 1e6, 1e4, 1e-6};
  }
  if (type == "gemma2") {
    return {2304, 26, 8, 4, 256, 9216, 8192, "gelu_pytorch_tanh", true, 1e4, 1e4, 1e-6};
  }
  if (type == "phi3") return {3072, 32, 32, 0, 0, 8192, 4096, "silu", false, 1e4, 1e4, 1e-5};
  if (type == "olmo2") return {4096, 32, 32, 0, 0, 11008, 2048, "silu", false, 1e4, 1e4, 1e-5};
  if (type == "smollm3") return {2048, 36, 16, 4, 0, 11008, 32768, "silu", true, 2e6, 2e6, 1e-6};
  if (type == "mixtral") return {4096, 32, 32, 8, 0, 14336, 131072, "silu", false, 1e6, 1e6, 1e-5};
  if (type == "qwen3_moe") return {2048, 24, 32, 4, 0, 6144, 32768, "silu", false, 1e4, 1e4, 1e-6};
  return {4096, 32, 32, 0, 0, 11008, 2048, "silu", false, 1e4, 1e4, 1e-6};  // llama, granite
}

bool is_gemma_type(const std::string& type) { return type == "gemma3_text" || type == "gemma2"; }

// layer_types (qwen2, qwen3, gemma3_text): sliding_attention or full_attention, one per layer.
void read_layer_types(base::JsonFields& f, HfConfig& c) {
  if (!f.has("layer_types")) return;
  const std::vector<std::string> types = f.strings("layer_types");
  if (static_cast<int64_t>(types.size()) != c.num_hidden_layers) {
    f.fail("layer_types", fmt::format("lists {} layers where num_hidden_layers is {}", types.size(),
                                      c.num_hidden_layers));
  }
  for (const std::string& type : types) {
    if (type != "sliding_attention" && type != "full_attention") {
      f.fail("layer_types", fmt::format("\"{}\" is not supported (sliding_attention, "
                                        "full_attention)",
                                        type));
    }
    c.layer_sliding.push_back(type == "sliding_attention");
  }
}

// sliding_window as Transformers reads it: `fallback` when absent, none when null.
int64_t read_sliding_window(base::JsonFields& f, const HfConfig& c, int64_t fallback) {
  if (c.json.contains("sliding_window") && c.json["sliding_window"].is_null()) return 0;
  return f.positive("sliding_window", fallback);
}

// Which layers slide: qwen2/qwen3's use_sliding_window and max_window_layers, mistral's and
// phi3's sliding_window on every layer, gemma3_text's sliding_window_pattern and gemma2's
// alternation (even layers slide), smollm3's use_sliding_window on its layers without rotary;
// layer_types over the rule.
void read_sliding(base::JsonFields& f, HfConfig& c) {
  const std::string& type = c.model_type;
  if (type == "qwen2" || type == "qwen3") {
    const bool use = f.boolean("use_sliding_window", false);
    const int64_t window = read_sliding_window(f, c, 4096);
    c.sliding_window = use ? window : 0;
    c.sliding_from_layer = f.integer("max_window_layers", 28, 0);
    read_layer_types(f, c);
  } else if (type == "mistral") {
    c.sliding_window = read_sliding_window(f, c, 4096);
  } else if (type == "phi3" || type == "mixtral") {
    c.sliding_window = f.has("sliding_window") ? f.positive("sliding_window", 1) : 0;
  } else if (type == "qwen3_moe") {
    // Qwen3MoeConfig: sliding_window (4096 by default) only with use_sliding_window, then on every
    // layer (its max_window_layers is not read).
    const bool use = f.boolean("use_sliding_window", false);
    const int64_t window = read_sliding_window(f, c, 4096);
    c.sliding_window = use ? window : 0;
  } else if (type == "gemma3_text" || type == "gemma2") {
    c.sliding_window = read_sliding_window(f, c, 4096);
    c.sliding_pattern = type == "gemma2" ? 2 : f.positive("sliding_window_pattern", 6);
    f.fail_if(f.boolean("use_bidirectional_attention", false), "use_bidirectional_attention",
              "true is not supported (causal attention only)");
    read_layer_types(f, c);
  } else if (type == "smollm3") {
    const bool use = f.boolean("use_sliding_window", false);
    c.sliding_window = f.has("sliding_window") ? f.positive("sliding_window", 1) : 0;
    read_layer_types(f, c);
    // Without layer_types: the layers without rotary slide, with use_sliding_window (the rule,
    // not a list: a config may say 10^9 layers).
    if (c.layer_sliding.empty()) {
      c.sliding_without_rope = use;
      if (!use) c.sliding_window = 0;
    }
  }
  bool any_sliding = false;
  if (!c.layer_sliding.empty()) {
    any_sliding =
        std::find(c.layer_sliding.begin(), c.layer_sliding.end(), true) != c.layer_sliding.end();
  } else if (is_gemma_type(type)) {
    any_sliding = c.sliding_pattern != 1 && c.num_hidden_layers > 0;
  }
  if (any_sliding && c.sliding_window == 0) {
    f.fail(c.layer_sliding.empty() ? "sliding_window" : "layer_types",
           is_gemma_type(type)
               ? "has sliding_attention layers but sliding_window is null"
               : "has sliding_attention layers but no sliding window (use_sliding_window false "
                 "or sliding_window null)");
  }
}

// smollm3's no_rope_layers (1: the layer rotates, 0: it does not), derived from
// no_rope_layer_interval when absent (every interval-th layer without).
void read_rope_layers(base::JsonFields& f, HfConfig& c) {
  if (c.model_type != "smollm3") return;
  const int64_t interval = f.positive("no_rope_layer_interval", 4);
  if (f.has("no_rope_layers")) {
    const std::vector<int64_t> flags = f.integers("no_rope_layers", {}, 0);
    if (static_cast<int64_t>(flags.size()) != c.num_hidden_layers) {
      f.fail("no_rope_layers", fmt::format("lists {} layers where num_hidden_layers is {}",
                                           flags.size(), c.num_hidden_layers));
    }
    for (int64_t flag : flags) {
      f.fail_if(flag > 1, "no_rope_layers", fmt::format("holds {} (1: rotary, 0: none)", flag));
      c.layer_rope.push_back(flag == 1);
    }
  } else {
    c.no_rope_interval = interval;
  }
}

// The mixtures of experts' fields: mixtral's num_local_experts (also num_experts), qwen3_moe's
// num_experts (written num_local_experts, as Transformers writes it), the router's and its loss's.
void read_experts(base::JsonFields& f, HfConfig& c) {
  const std::string& type = c.model_type;
  if (type != "mixtral" && type != "qwen3_moe") return;
  const bool mixtral = type == "mixtral";
  const char* key = f.has("num_local_experts") ? "num_local_experts"
                    : f.has("num_experts")     ? "num_experts"
                                               : (mixtral ? "num_local_experts" : "num_experts");
  c.num_experts = f.positive(key, mixtral ? 8 : 128);
  // Each expert is tensors of its own in the folder: a bound that no published model nears.
  f.fail_if(c.num_experts > 4096, key,
            fmt::format("{} is more than 4096 experts (the most this reads)", c.num_experts));
  c.num_experts_per_tok = f.positive("num_experts_per_tok", mixtral ? 2 : 8);
  if (c.num_experts_per_tok > c.num_experts) {
    f.fail("num_experts_per_tok", fmt::format("{} is more than the {} experts ({})",
                                              c.num_experts_per_tok, c.num_experts, key));
  }
  c.moe_intermediate_size =
      mixtral ? c.intermediate_size : f.positive("moe_intermediate_size", 768);
  c.norm_topk_prob = mixtral || f.boolean("norm_topk_prob", false);
  c.router_weights_in_float = mixtral;
  if (mixtral) {
    c.router_jitter_noise = f.number("router_jitter_noise", 0.0);
    f.fail_if(!(c.router_jitter_noise >= 0 && c.router_jitter_noise < 1), "router_jitter_noise",
              fmt::format("{} is not in [0, 1)", c.router_jitter_noise));
  } else {
    c.decoder_sparse_step = f.positive("decoder_sparse_step", 1);
    c.mlp_only_layers = f.integers("mlp_only_layers", {}, 0);
    for (int64_t layer : c.mlp_only_layers) {
      f.fail_if(layer >= c.num_hidden_layers, "mlp_only_layers",
                fmt::format("names layer {} of {}", layer, c.num_hidden_layers));
    }
  }
  c.output_router_logits = f.boolean("output_router_logits", false);
  c.router_aux_loss_coef = f.number("router_aux_loss_coef", 0.001);
  f.fail_if(!std::isfinite(c.router_aux_loss_coef), "router_aux_loss_coef",
            fmt::format("{} is not a finite number", c.router_aux_loss_coef));
  if (std::string(key) == "num_experts") {
    c.json.erase("num_experts");
    c.json["num_local_experts"] = c.num_experts;
  }
}

// The shape of each family's layers beyond Llama's (HfConfig's norm_style, norm_places, ...).
void read_family_shape(base::JsonFields& f, HfConfig& c) {
  const std::string& type = c.model_type;
  if (is_gemma_type(type)) {
    c.norm_style = "gemma";
    c.norm_places = "sandwich";
    c.scaled_embedding = true;
    c.query_pre_attn_scalar = f.number("query_pre_attn_scalar", 256.0);
    f.fail_if(!(c.query_pre_attn_scalar > 0), "query_pre_attn_scalar",
              fmt::format("{} is not > 0", c.query_pre_attn_scalar));
    // A soft-capping value: null is none (0), absent the type's default (gemma2's 30 and 50).
    auto softcap = [&](const char* key, double gemma2_default) {
      const bool null = c.json.contains(key) && c.json[key].is_null();
      const double cap = null ? 0.0 : f.number(key, type == "gemma2" ? gemma2_default : 0.0);
      f.fail_if(f.has(key) && !(cap > 0), key, fmt::format("{} is not > 0 (or null)", cap));
      return cap;
    };
    c.final_logit_softcapping = softcap("final_logit_softcapping", 30.0);
    c.attn_logit_softcapping = softcap("attn_logit_softcapping", 50.0);
    // Gemma 2 caps its attention logits (eager attention); Transformers 5.24's Gemma 3 keeps the
    // key but does not apply it.
    c.attn_softcapping = type == "gemma2" && c.attn_logit_softcapping > 0;
  } else if (type == "olmo2") {
    c.norm_style = "olmo2";
    c.norm_places = "post";
    c.qk_norm = c.qk_norm_whole = true;
    c.rotary_in_float = true;
  } else if (type == "phi3") {
    c.fused_projections = true;
    // Phi3Config's own field (what its longrope's factor and attention factor start from),
    // written back as Transformers writes it.
    c.original_max_position_embeddings = f.positive("original_max_position_embeddings", 4096);
    c.json["original_max_position_embeddings"] = c.original_max_position_embeddings;
    c.resid_pdrop = f.number("resid_pdrop", 0.0);
    f.fail_if(!(c.resid_pdrop >= 0 && c.resid_pdrop < 1), "resid_pdrop",
              fmt::format("{} is not in [0, 1)", c.resid_pdrop));
    f.number("embd_pdrop", 0.0);  // Phi3Model never applies it
  } else if (type == "granite") {
    c.embedding_multiplier = f.number("embedding_multiplier", 1.0);
    c.attention_multiplier = f.number("attention_multiplier", 1.0);
    c.residual_multiplier = f.number("residual_multiplier", 1.0);
    c.logits_scaling = f.number("logits_scaling", 1.0);
    f.fail_if(!(c.logits_scaling != 0 && std::isfinite(c.logits_scaling)), "logits_scaling",
              fmt::format("{} is not a finite non-zero number", c.logits_scaling));
  }
}

// The Llama family's fields: LlamaConfig's names, each model type's defaults and its own
// fields (biases, q/k norms, sliding windows, rotary layers, the families' shapes).
void read_llama_fields(base::JsonFields& f, const std::string& source, HfConfig& c) {
  const std::string& type = c.model_type;
  const FamilyDefaults d = family_defaults(type);
  c.hidden_size = f.positive("hidden_size", d.hidden);
  c.num_hidden_layers = f.positive("num_hidden_layers", d.layers);
  c.num_attention_heads = f.positive("num_attention_heads", d.heads);
  c.num_key_value_heads =
      f.positive("num_key_value_heads", d.kv_heads > 0 ? d.kv_heads : c.num_attention_heads);
  const bool divisible = c.hidden_size % c.num_attention_heads == 0;
  if ((is_gemma_type(type) || (!f.has("head_dim") && d.head_dim == 0)) && !divisible) {
    f.fail("hidden_size",
           fmt::format("{} is not a multiple of num_attention_heads {}{}", c.hidden_size,
                       c.num_attention_heads, is_gemma_type(type) ? "" : " (give head_dim)"));
  }
  c.head_dim =
      f.positive("head_dim", d.head_dim > 0 ? d.head_dim : c.hidden_size / c.num_attention_heads);
  if (c.head_dim % 2 != 0)
    f.fail("head_dim", fmt::format("{} is odd (rotary needs pairs)", c.head_dim));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    f.fail("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}",
                                              c.num_key_value_heads, c.num_attention_heads));
  }
  c.intermediate_size = f.positive("intermediate_size", d.intermediate);
  c.max_position_embeddings = f.positive("max_position_embeddings", d.positions);
  c.norm_eps = f.number("rms_norm_eps", d.eps);
  c.activation = f.string(is_gemma_type(type) ? "hidden_activation" : "hidden_act", d.activation);
  if (type == "qwen2") {
    c.attention_bias = true;  // Qwen2Attention: q, k and v with biases, o_proj without
  } else if (type != "mistral" && type != "phi3" && type != "mixtral") {
    c.attention_bias = c.o_proj_bias = f.boolean("attention_bias", false);
  }
  if (type == "llama" || type == "smollm3" || type == "granite") {
    c.mlp_bias = f.boolean("mlp_bias", false);
  }
  c.qk_norm = type == "qwen3" || type == "gemma3_text" || type == "qwen3_moe";
  c.attention_dropout = f.number("attention_dropout", 0.0);
  f.fail_if(!(c.attention_dropout >= 0 && c.attention_dropout < 1), "attention_dropout",
            fmt::format("{} is not in [0, 1)", c.attention_dropout));
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", d.tied);
  read_family_shape(f, c);
  read_experts(f, c);
  read_rope(f, source, c, d.theta, d.local_theta);
  read_rope_layers(f, c);
  read_sliding(f, c);
}

// What both models check once read: the activation, the norm's epsilon, the special tokens in
// the vocabulary.
void check_shared_fields(const base::JsonFields& f, const HfConfig& c) {
  const bool gpt2 = c.model_type == "gpt2";
  if (c.activation != "gelu_new" && c.activation != "gelu" && c.activation != "relu" &&
      c.activation != "silu" && c.activation != "gelu_pytorch_tanh") {
    f.fail(gpt2                          ? "activation_function"
           : is_gemma_type(c.model_type) ? "hidden_activation"
                                         : "hidden_act",
           fmt::format("\"{}\" is not supported (gelu_new, gelu_pytorch_tanh, gelu, relu, silu)",
                       c.activation));
  }
  f.fail_if(!(c.norm_eps > 0), gpt2 ? "layer_norm_epsilon" : "rms_norm_eps",
            fmt::format("{} is not > 0", c.norm_eps));
  for (int64_t id : c.eos_token_ids) {
    f.fail_if(id < 0 || id >= c.vocab_size, "eos_token_id",
              fmt::format("{} is outside the vocabulary (0..{})", id, c.vocab_size - 1));
  }
  // The Llama family's embedding is nn.Embedding(padding_idx=pad_token_id), which refuses an id
  // outside [-vocab_size, vocab_size).
  if (!gpt2 && f.has("pad_token_id")) {
    const json& pad = f.at("pad_token_id");
    f.fail_if(!pad.is_number_integer(), "pad_token_id",
              fmt::format("{} is not a token id", base::shown(pad)));
    const int64_t id = pad.get<int64_t>();
    f.fail_if(id < -c.vocab_size || id >= c.vocab_size, "pad_token_id",
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
  read_head(f, c);
  if (c.model_type == "gpt2") {
    read_gpt2_fields(f, c);
  } else {
    read_llama_fields(f, source, c);
  }
  check_shared_fields(f, c);
  check_parameter_count(f, c);
  return c;
}

HfConfig read_hf_config(const std::string& dir) {
  const std::string path = base::join_path(dir, base::hf::kConfig);
  return parse_hf_config(base::read_json_object(path), path);
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
