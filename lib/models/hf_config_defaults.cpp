// Transformers' defaults of each model type's config class, for a fresh model (model_type and
// model_config), and the tables by model type: the types built, PEFT's default LoRA targets.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/models/hf_config.h"

namespace trainer::models {

using json = nlohmann::ordered_json;

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> types = {
      "gpt2",   "llama", "qwen2",   "qwen3",   "mistral", "gemma3_text", "phi3",
      "gemma2", "olmo2", "smollm3", "granite", "mixtral", "qwen3_moe"};
  return types;
}

int64_t hf_padding_idx(const HfConfig& c) {
  const auto pad = c.json.find("pad_token_id");
  if (c.model_type == "gpt2" || pad == c.json.end() || !pad->is_number_integer()) return -1;
  // nn.Embedding counts a negative padding_idx from the end (parse_hf_config refuses one outside
  // the vocabulary).
  const int64_t id = pad->get<int64_t>();
  if (id < -c.vocab_size || id >= c.vocab_size) return -1;
  return id < 0 ? id + c.vocab_size : id;
}

std::string hf_class_prefix(const std::string& model_type) {
  if (model_type == "gpt2") return "GPT2";
  if (model_type == "qwen2") return "Qwen2";
  if (model_type == "qwen3") return "Qwen3";
  if (model_type == "mistral") return "Mistral";
  if (model_type == "gemma3_text") return "Gemma3";
  if (model_type == "phi3") return "Phi3";
  if (model_type == "gemma2") return "Gemma2";
  if (model_type == "olmo2") return "Olmo2";
  if (model_type == "smollm3") return "SmolLM3";
  if (model_type == "granite") return "Granite";
  if (model_type == "mixtral") return "Mixtral";
  if (model_type == "qwen3_moe") return "Qwen3Moe";
  return "Llama";
}

std::string hf_architecture(const HfConfig& config) {
  const std::string& type = config.model_type;
  if (config.sequence_classification) {
    return (type == "gemma3_text" ? std::string("Gemma3Text") : hf_class_prefix(type)) +
           "ForSequenceClassification";
  }
  return type == "gpt2" ? "GPT2LMHeadModel" : hf_class_prefix(type) + "ForCausalLM";
}

bool hf_has_sequence_classifier(const std::string& model_type) { return model_type != "granite"; }

HfConfig as_sequence_classifier(HfConfig config, int64_t num_labels, int64_t pad_token_id) {
  if (!hf_has_sequence_classifier(config.model_type)) {
    throw InputError(fmt::format(
        "model_type {} has no sequence classifier (Transformers 5.24 builds none for it; "
        "supported: every other model type)",
        config.model_type));
  }
  const bool relabel = !config.sequence_classification || config.num_labels != num_labels;
  config.sequence_classification = true;
  config.json["architectures"] = {hf_architecture(config)};
  if (relabel) {
    // PretrainedConfig's num_labels setter: LABEL_i names.
    config.num_labels = num_labels;
    json id2label = json::object(), label2id = json::object();
    for (int64_t i = 0; i < num_labels; ++i) {
      id2label[std::to_string(i)] = fmt::format("LABEL_{}", i);
      label2id[fmt::format("LABEL_{}", i)] = i;
    }
    config.json["id2label"] = id2label;
    config.json["label2id"] = label2id;
    config.json.erase("num_labels");
  }
  if (config.pad_token_id < 0 && pad_token_id >= 0) {
    config.pad_token_id = pad_token_id;
    config.json["pad_token_id"] = pad_token_id;
  }
  return config;
}

std::vector<std::string> peft_default_target_modules(const std::string& model_type) {
  // PEFT 0.21's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, for the types built here.
  static const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"gpt2", {"c_attn"}},
      {"llama", {"q_proj", "v_proj"}},
      {"qwen2", {"q_proj", "v_proj"}},
      {"qwen3", {"q_proj", "v_proj"}},
      {"mistral", {"q_proj", "v_proj"}},
      {"gemma3_text", {"q_proj", "v_proj"}},
      {"gemma2", {"q_proj", "v_proj"}}};
  for (const auto& [type, modules] : table) {
    if (type == model_type) return modules;
  }
  return {};
}

namespace {

// Transformers 5.24's config classes by model type: each one's keys and defaults as
// save_pretrained writes them (a table, read once).
constexpr const char* kTransformersDefaults = R"json(
{
  "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "activation_function": "gelu_new", "attn_pdrop": 0.1, "bos_token_id": 50256,
    "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12,
    "n_positions": 1024, "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": false,
    "scale_attn_weights": true, "tie_word_embeddings": true, "vocab_size": 50257},
  "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 2048, "mlp_bias": false, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": null, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": false, "vocab_size": 32000},
  "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "attention_dropout": 0.0, "bos_token_id": null, "eos_token_id": null, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 22016,
    "max_position_embeddings": 32768, "max_window_layers": 28, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": null,
    "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936},
  "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": null, "eos_token_id": null, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 22016,
    "max_position_embeddings": 32768, "max_window_layers": 28, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": null,
    "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936,
    "head_dim": 128},
  "mistral": {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
    "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 4096,
    "tie_word_embeddings": false, "vocab_size": 32000},
  "gemma3_text": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": null,
    "bos_token_id": 2, "eos_token_id": 1, "final_logit_softcapping": null, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
    "intermediate_size": 9216, "max_position_embeddings": 131072, "num_attention_heads": 8,
    "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"}, "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
    "sliding_window": 4096, "tie_word_embeddings": true, "use_bidirectional_attention": false,
    "vocab_size": 262208},
  "phi3": {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_dropout": 0.0,
    "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
    "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
    "rope_parameters": {"partial_rotary_factor": 1.0, "rope_theta": 10000.0, "rope_type": "default"},
    "sliding_window": null, "tie_word_embeddings": false, "vocab_size": 32064},
  "gemma2": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
    "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": 50.0,
    "bos_token_id": 2, "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
    "intermediate_size": 9216, "max_position_embeddings": 8192, "num_attention_heads": 8,
    "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "sliding_window": 4096,
    "tie_word_embeddings": true, "use_bidirectional_attention": null, "vocab_size": 256000},
  "olmo2": {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": null, "eos_token_id": 50279, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 2048, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pad_token_id": 1, "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": false, "vocab_size": 50304},
  "smollm3": {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3",
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 11008, "max_position_embeddings": 32768, "mlp_bias": false,
    "no_rope_layer_interval": 4, "num_attention_heads": 16, "num_hidden_layers": 36,
    "num_key_value_heads": 4, "pad_token_id": 128004, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 2000000.0, "rope_type": "default"}, "sliding_window": null,
    "tie_word_embeddings": true, "use_sliding_window": false, "vocab_size": 128256},
  "granite": {"architectures": ["GraniteForCausalLM"], "model_type": "granite",
    "attention_bias": false, "attention_dropout": 0.0, "attention_multiplier": 1.0,
    "bos_token_id": 1, "embedding_multiplier": 1.0, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "logits_scaling": 1.0, "max_position_embeddings": 2048, "mlp_bias": false,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "pad_token_id": null, "residual_multiplier": 1.0, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": false, "vocab_size": 32000},
  "mixtral": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
    "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "head_dim": null,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "num_attention_heads": 32,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "output_router_logits": false, "pad_token_id": null,
    "rms_norm_eps": 1e-05, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "sliding_window": null,
    "tie_word_embeddings": false, "vocab_size": 32000},
  "qwen3_moe": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": null,
    "decoder_sparse_step": 1, "eos_token_id": null, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 32768,
    "mlp_only_layers": [], "moe_intermediate_size": 768, "norm_topk_prob": false,
    "num_attention_heads": 32, "num_experts_per_tok": 8, "num_hidden_layers": 24,
    "num_key_value_heads": 4, "num_local_experts": 128, "output_router_logits": false,
    "pad_token_id": null, "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false,
    "use_sliding_window": false, "vocab_size": 151936}
}
)json";

// Transformers' config class of the model type as save_pretrained writes it, each default spelt
// out (layer_types left to the rule each class computes them by).
json transformers_defaults(const std::string& model_type) {
  static const json all = json::parse(kTransformersDefaults);
  if (auto it = all.find(model_type); it != all.end()) return *it;
  throw InputError(fmt::format("model_type \"{}\" is not supported ({})", model_type,
                               fmt::join(hf_model_types(), ", ")));
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
                                             "partial_rotary_factor",
                                             "pad_token_id",
                                             "dtype",
                                             "torch_dtype",
                                             "add_cross_attention",
                                             "pretraining_tp",
                                             "reorder_and_upcast_attn",
                                             "use_cache",
                                             "layer_types",
                                             "sliding_window_pattern",
                                             "rope_local_base_freq",
                                             "no_rope_layers"};
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

}  // namespace trainer::models
