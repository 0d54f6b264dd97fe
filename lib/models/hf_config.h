// A Hugging Face model's config.json, read and checked without LibTorch: the fields of GPT-2
// (GPT2LMHeadModel) and the Llama family (LlamaForCausalLM, Qwen2, Qwen3, Mistral, Gemma3 text,
// Phi3, Gemma2, Olmo2, SmolLM3, Granite, and the mixtures of experts Mixtral and Qwen3-MoE) that
// decide the computation, each with Transformers
// 5.24's default, and every field that would make a different model refused by name.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::models {

// One rotary embedding's parameters, as Transformers 5.24 standardizes rope_parameters (or the
// Hub's rope_scaling beside rope_theta) for one layer type: the type (a key of its
// ROPE_INIT_FUNCTIONS, or "default") and what that type reads.
struct RopeParameters {
  std::string type = "default";  // default, linear, dynamic, yarn, longrope, llama3, proportional
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  // linear, dynamic, yarn, llama3, proportional; yarn and longrope: 0 when null or absent (then
  // max_position_embeddings / original_max_position_embeddings).
  double factor = 0.0;
  int64_t original_max_position_embeddings = 0;          // yarn, longrope, llama3
  double attention_factor = 0.0;                         // yarn, longrope: 0 when not given
  double beta_fast = 32.0, beta_slow = 1.0;              // yarn
  double mscale = 0.0, mscale_all_dim = 0.0;             // yarn: 0 when not given
  bool truncate = true;                                  // yarn
  std::vector<double> short_factor, long_factor;         // longrope: head_dim / 2 each
  double low_freq_factor = 0.0, high_freq_factor = 0.0;  // llama3
};

// The rope types built (Transformers' ROPE_INIT_FUNCTIONS and "default"), in messages' order.
const std::vector<std::string>& rope_types();

struct HfConfig {
  std::string model_type;  // one of hf_model_types()
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // llama (grouped-query attention); gpt2: num_attention_heads
  int64_t head_dim = 0;             // hidden_size / num_attention_heads unless given (llama)
  int64_t intermediate_size = 0;    // gpt2: n_inner, 4 * hidden_size when null
  int64_t max_position_embeddings = 0;
  double norm_eps = 1e-5;  // gpt2 layer_norm_epsilon, llama rms_norm_eps
  double initializer_range = 0.02;
  std::string activation;  // gpt2 activation_function, llama hidden_act
  bool tie_word_embeddings = true;
  // gpt2
  bool scale_attn_weights = true;
  bool scale_attn_by_inverse_layer_idx = false;
  double resid_pdrop = 0.0, embd_pdrop = 0.0, attn_pdrop = 0.0;
  // The Llama family (every model_type but gpt2).
  RopeParameters rope;          // full-attention layers' rotary embedding
  RopeParameters local_rope;    // sliding layers' (gemma3_text: its own; others: rope)
  bool attention_bias = false;  // q_proj, k_proj and v_proj have biases
  bool o_proj_bias = false;     // o_proj has one (qwen2: never, unlike q, k and v)
  bool mlp_bias = false;
  double attention_dropout = 0.0;
  bool qk_norm = false;  // qwen3, gemma3_text: an RMSNorm over each head of q and k, before rotary
  // olmo2: the q and k norms span the whole projection (all heads together), before the heads
  // split.
  bool qk_norm_whole = false;
  // How the decoder's layers differ from Llama's (each the shape of a family, never a copy):
  //   norm_style   "llama" (weight * normed in the input's type), "gemma" ((1 + weight) in
  //                float32), "olmo2" (weight * normed in float32, then the input's type)
  //   norm_places  "pre" (Llama: before attention and MLP), "sandwich" (gemma2, gemma3_text: also
  //                after each), "post" (olmo2: after each only, none before)
  std::string norm_style = "llama";
  std::string norm_places = "pre";
  bool fused_projections = false;  // phi3: qkv_proj (q, k, v rows) and gate_up_proj (gate, up)
  int64_t original_max_position_embeddings = 0;  // phi3's own field (4096 by default)
  // Rotary dimensions of each head (phi3's partial_rotary_factor: the first rotary_dim rotate, the
  // rest pass); head_dim for the others.
  int64_t rotary_dim = 0;
  bool rotary_in_float = false;  // olmo2: q and k rotated in float32, then their type
  // smollm3's no_rope_layers: a layer whose entry is false has no rotary embedding; without the
  // list, every no_rope_interval-th layer has none (0: every layer has one). Its windows
  // (use_sliding_window) are on those layers only (sliding_without_rope).
  std::vector<bool> layer_rope;
  int64_t no_rope_interval = 0;
  bool sliding_without_rope = false;
  bool has_rope(int64_t layer) const {
    if (!layer_rope.empty()) return layer_rope.at(static_cast<size_t>(layer));
    return no_rope_interval <= 0 || (layer + 1) % no_rope_interval != 0;
  }
  // The embedding times embedding_multiplier (granite) or sqrt(hidden_size) in the weights' type
  // (gemma2, gemma3_text: scaled_embedding); 0: neither.
  bool scaled_embedding = false;
  double embedding_multiplier = 0.0;
  double attention_multiplier = 0.0;  // granite: the attention scale itself; 0: none
  double residual_multiplier = 1.0;   // granite: each block's output before the residual add
  double logits_scaling = 1.0;        // granite: the logits divided by it
  bool attn_softcapping = false;      // gemma2: attn_logit_softcapping applied (eager attention)
  // Sparse mixtures of experts (mixtral, qwen3_moe; num_experts 0: dense). A sparse layer's MLP is
  // a router over num_experts SwiGLU experts of moe_intermediate_size, each token through its
  // num_experts_per_tok likeliest, their outputs weighted by the router's probabilities
  // (renormalised over the chosen with norm_topk_prob; mixtral always): in float32 for mixtral,
  // in the hidden states' type for qwen3_moe (router_weights_in_float). Which layers are sparse:
  // every decoder_sparse_step-th (layer i when (i + 1) % step == 0) but mlp_only_layers.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  bool router_weights_in_float = true;
  double router_jitter_noise = 0.0;  // mixtral: the hidden states times U(1 - j, 1 + j) in training
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // The router's load-balancing loss (Transformers' load_balancing_loss_func) added to the loss
  // times router_aux_loss_coef when output_router_logits is on.
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;
  bool is_sparse_layer(int64_t layer) const {
    if (num_experts <= 0 || (layer + 1) % decoder_sparse_step != 0) return false;
    return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) ==
           mlp_only_layers.end();
  }
  // The attention scale is query_pre_attn_scalar^-1/2 (gemma3_text), head_dim^-1/2 when 0.
  double query_pre_attn_scalar = 0.0;
  double final_logit_softcapping = 0.0;  // gemma3_text: logits = c tanh(logits / c); 0: none
  // gemma3_text's config key, kept as read: Transformers 5.24's Gemma3 does not apply it.
  double attn_logit_softcapping = 0.0;
  // A query of a sliding layer sees the last sliding_window keys (itself included); 0: no layer
  // slides. Which layers slide: layer_sliding when the config lists layer_types, otherwise those
  // from sliding_from_layer on (qwen2/qwen3's max_window_layers; mistral: all), except every
  // sliding_pattern-th (gemma3_text's sliding_window_pattern: layer i is full when (i + 1) %
  // pattern == 0).
  int64_t sliding_window = 0;
  std::vector<bool> layer_sliding;
  int64_t sliding_from_layer = 0;
  int64_t sliding_pattern = 0;
  bool is_sliding_layer(int64_t layer) const {
    if (!layer_sliding.empty()) return layer_sliding.at(static_cast<size_t>(layer));
    if (sliding_without_rope) return sliding_window > 0 && !has_rope(layer);
    return sliding_window > 0 && layer >= sliding_from_layer &&
           (sliding_pattern <= 0 || (layer + 1) % sliding_pattern != 0);
  }
  // The head, from config.json's architectures: a language model's (...ForCausalLM,
  // GPT2LMHeadModel: lm_head) or a classifier's (...ForSequenceClassification: `score`, a linear
  // layer [num_labels, hidden_size] without bias, read at each row's rightmost token that is not
  // pad_token_id, as Transformers' GenericForSequenceClassification and
  // GPT2ForSequenceClassification read it).
  bool sequence_classification = false;
  int64_t num_labels = 2;  // num_labels, else id2label's size, else 2 (PretrainedConfig's)
  // "" (decided by the first loss, as Transformers decides it: regression for one label,
  // single_label_classification for integer labels, multi_label_classification otherwise),
  // "regression", "single_label_classification" or "multi_label_classification".
  std::string problem_type;
  int64_t pad_token_id = -1;  // config.json's (-1: none; a negative one counted from the end)
  // "float32", "bfloat16", "float16" (config's dtype or torch_dtype), "" when absent.
  std::string dtype;
  std::vector<int64_t> eos_token_ids;  // config's eos_token_id (one or a list)
  int64_t bos_token_id = -1;
  // config.json as read (or as built from defaults), written back by save_pretrained.
  nlohmann::ordered_json json;
};

// Parses a config.json object. Its rotary embedding is read in both spellings (the Hub's
// rope_scaling beside rope_theta and partial_rotary_factor, and Transformers 5's rope_parameters,
// per layer type for gemma3_text) and kept in `json` as Transformers 5 writes it: rope_parameters
// alone, standardized. `source` names it in messages. Throws InputError, one line naming
// the field and what is supported, for: a model_type not listed above, a missing or
// non-positive size, a hidden size that the heads do not divide, a rope_type not in rope_types()
// or without the keys its type needs (factors of the wrong length, a non-positive factor),
// cross-attention, an activation other than gelu_new / gelu / relu / silu, a dtype
// other than float32 / bfloat16 / float16, num_attention_heads not a multiple of
// num_key_value_heads, a bos or eos token id outside the vocabulary (a pad_token_id too, but for
// gpt2, whose embedding has no padding row), layer_types other than
// sliding_attention / full_attention or of another length than the layers, a sliding layer
// without a sliding_window, gemma3_text's use_bidirectional_attention.
HfConfig parse_hf_config(const nlohmann::ordered_json& json, const std::string& source);

// The parameters a model of this config holds, by Transformers' names, with their shapes (the
// tied lm_head once, as the embedding), in the order of the model: what a folder's weights must
// be, from the config alone. Only the first `max_layers` layers are listed (a config may say
// 10^9).
std::vector<std::pair<std::string, std::vector<int64_t>>> hf_parameter_shapes(
    const HfConfig& config, int64_t max_layers = INT64_MAX);

// The number of parameters a model of this config holds (the tied lm_head counted once): what a
// fresh model will allocate. -1 when it does not fit in 64 bits (parse_hf_config refuses such a
// config).
int64_t hf_num_parameters(const HfConfig& config);

// DIR/config.json, parsed (InputError for a missing or invalid file, as above).
HfConfig read_hf_config(const std::string& dir);

// The Llama family's nn.Embedding padding_idx: config.json's pad_token_id (a negative one counted
// from the end, as nn.Embedding does), -1 when there is none (GPT-2's embedding has none).
int64_t hf_padding_idx(const HfConfig& config);

// The model types built here, in the order messages list them.
const std::vector<std::string>& hf_model_types();

// Transformers' class prefix of a model type: GPT2 (GPT2LMHeadModel, GPT2Block), Llama, Qwen2,
// Qwen3, Mistral, Gemma3 (Gemma3ForCausalLM, Gemma3DecoderLayer), Phi3, Gemma2, Olmo2, SmolLM3,
// Granite.
std::string hf_class_prefix(const std::string& model_type);
// The `architectures` entry save_pretrained writes: GPT2LMHeadModel, LlamaForCausalLM, ...; a
// classifier's GPT2ForSequenceClassification, LlamaForSequenceClassification, ...,
// Gemma3TextForSequenceClassification.
std::string hf_architecture(const HfConfig& config);

// The model types whose classifier Transformers 5.24 builds (all but granite).
bool hf_has_sequence_classifier(const std::string& model_type);

// The config of `config`'s model with a classifier's head of `num_labels` (as
// AutoModelForSequenceClassification.from_pretrained(folder, num_labels=...) makes one from a
// causal language model's folder: the same body, a fresh `score`), pad_token_id set to
// `pad_token_id` when it has none and that is >= 0; json updated as save_pretrained writes it
// (architectures, id2label, label2id). A classifier's config keeps its own labels unless
// `num_labels` differs. Throws InputError for a model type without a classifier.
HfConfig as_sequence_classifier(HfConfig config, int64_t num_labels, int64_t pad_token_id = -1);

// PEFT's default LoRA target modules for a model type
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING): gpt2 c_attn, the others q_proj and
// v_proj; empty for a type PEFT has none for.
std::vector<std::string> peft_default_target_modules(const std::string& model_type);

// A fresh model's config: Transformers' defaults of `model_type` (GPT2Config(), LlamaConfig(),
// Qwen2Config(), Qwen3Config(), MistralConfig(), Gemma3TextConfig())
// overlaid with `overrides` (config.json keys: n_layer, hidden_size, ...: a key the model's
// config does not have is refused, as run_clm's config_overrides refuses it); vocab_size defaults
// to `vocab_size` when positive, bos_token_id and eos_token_id to `bos_id` and `eos_id` (the
// tokenizer's; -1: none). The result's json is what config.json will hold.
HfConfig hf_config_from_defaults(const std::string& model_type,
                                 const nlohmann::ordered_json& overrides, int64_t vocab_size,
                                 int64_t bos_id = -1, int64_t eos_id = -1);

// Whether `dir` is a Hugging Face model folder (it holds config.json).
bool is_hf_model_dir(const std::string& dir);

// The generation_config.json save_pretrained writes for a model of this config (bos/eos ids).
nlohmann::ordered_json hf_generation_config(const HfConfig& config);

}  // namespace trainer::models
