// The tables of TRL's configs' own arguments (TRL 1.16's names, defaults and help), in the
// X(type, name, default, help) form of training_args_table.h, which includes this file:
// TRAINER_SFT_ARGUMENTS (SFTConfig) and TRAINER_DPO_ARGUMENTS (DPOConfig).
#pragma once

// clang-format off
// SFTConfig's own arguments (TRL 1.16's names and defaults): `trainer sft` takes them, `trainer
// train` refuses them by name.
#define TRAINER_SFT_ARGUMENTS(X) \
  X(std::optional<int64_t>, max_length, int64_t{1024},                                             \
    "SFT: longest tokenized sequence; longer ones are cut (truncation_mode), or packed rows' "     \
    "length (null: no truncation, no packing; TRL's old name: max_seq_length).")                   \
  X(std::string, truncation_mode, "keep_start",                                                    \
    "SFT: keep_start (cut the end) or keep_end (cut the start; TRL deprecates it).")               \
  X(bool, packing, false,                                                                          \
    "SFT: pack sequences into max_length rows (packing_strategy).")                                \
  X(std::string, packing_strategy, "bfd",                                                          \
    "SFT: bfd (best-fit decreasing: whole sequences, overflow cut; padding-free, attention "       \
    "never crosses sequences), bfd_split (overflow split into more sequences) or wrapped "         \
    "(sequences cut anywhere; attention crosses them, as TRL).")                                   \
  X(bool, padding_free, false,                                                                     \
    "SFT: each batch one row of its sequences end to end (no padding; attention within each "      \
    "sequence); on with bfd packing.")                                                             \
  X(std::optional<int64_t>, pad_to_multiple_of, std::nullopt,                                      \
    "SFT: pad each batch's length to a multiple of this (TRL's \"auto\": null).")                  \
  X(std::optional<bool>, eval_packing, std::nullopt,                                               \
    "SFT: pack the eval data (null: as packing).")                                                 \
  X(std::optional<bool>, completion_only_loss, std::nullopt,                                       \
    "SFT: prompt-completion data: the loss on the completion only (null: true for "                \
    "prompt-completion data).")                                                                    \
  X(bool, assistant_only_loss, false,                                                              \
    "SFT: conversations: the loss on the assistant's tokens only (the chat template's {% "         \
    "generation %} blocks).")                                                                      \
  X(std::vector<std::string>, loss_type, {"nll"},                                                  \
    "SFT: nll (cross-entropy) or dft (each token's loss weighted by its probability: Dynamic "     \
    "Fine-Tuning). DPO: sigmoid (its default), hinge, ipo, robust, exo_pair, nca_pair, bco_pair, " \
    "sppo_hard, aot, aot_unpaired, apo_zero, apo_down, discopop, sft, sigmoid_norm, or a list of " \
    "them summed with loss_weights.")                                                              \
  X(std::string, dataset_text_field, "text",                                                       \
    "SFT: the column of language-modeling text.")                                                  \
  X(std::optional<std::string>, eos_token, std::nullopt,                                           \
    "SFT: the token appended to plain text and completions (null: the tokenizer's eos_token).")    \
  X(std::optional<std::string>, chat_template_path, std::nullopt,                                  \
    "SFT: the chat template: a .jinja file or a tokenizer folder holding one (null: the "          \
    "tokenizer's).")                                                                               \
  X(bool, shuffle_dataset, false,                                                                  \
    "SFT: shuffle the prepared rows (before packing too) with seed.")                              \
  X(std::optional<int64_t>, dataset_num_proc, std::nullopt,                                        \
    "SFT: accepted; the data is tokenized once per node and cached.")                              \
  X(nlohmann::ordered_json, dataset_kwargs, nlohmann::ordered_json::object(),                      \
    "SFT: {skip_prepare_dataset false} (only that: the data is prepared here).")                   \
  X(nlohmann::ordered_json, model_init_kwargs, nlohmann::ordered_json::object(),                   \
    "SFT: options of the model's loading: dtype or torch_dtype (as torch_dtype).")                 \
  X(bool, activation_offloading, false,                                                            \
    "SFT: keep saved activations in host memory: what they are on the CPU already (refused on "    \
    "CUDA).")                                                                                      \
  X(std::optional<std::string>, pad_token, std::nullopt,                                           \
    "SFT: the padding token (null: the tokenizer's pad_token, else its eos_token).")               \
  X(bool, trust_remote_code, false,                                                                \
    "SFT, DPO: false only (no model here runs Python code).")                                      \
  X(std::optional<double>, router_aux_loss_coef, std::nullopt,                                     \
    "SFT, DPO: the weight of a Mixture-of-Experts model's router load-balancing loss added to "   \
    "the loss (null: the model config's router_aux_loss_coef; 0: off; refused for a dense model), " \
    "and logged as aux_loss.")                                                                     \

// DPOConfig's own arguments (TRL 1.16's names and defaults): `trainer dpo` takes them with the
// SFT arguments DPOConfig shares (TrainingArguments::dpo_shared_keys), the others refuse them.
#define TRAINER_DPO_ARGUMENTS(X) \
  X(double, beta, 0.1,                                                                             \
    "DPO: how far the policy may move from the reference (the loss's temperature; IPO's tau).")    \
  X(double, label_smoothing, 0.0,                                                                  \
    "DPO: the probability that a preference is flipped (robust, exo_pair, aot losses).")           \
  X(std::vector<double>, loss_weights, {},                                                         \
    "DPO: each loss_type's weight in their sum ([]: 1 each).")                                     \
  X(bool, precompute_ref_log_probs, false,                                                         \
    "DPO: the reference log-probabilities computed once before training (kept with the data and "  \
    "in checkpoints); no reference model in memory while training.")                               \
  X(std::optional<int64_t>, precompute_ref_batch_size, std::nullopt,                               \
    "DPO: the batch of that precomputation (null: per_device_train_batch_size, for evaluation "    \
    "per_device_eval_batch_size).")                                                                \
  X(bool, disable_dropout, true,                                                                   \
    "DPO: dropout off in the model (and so in the reference).")                                    \
  X(bool, use_weighting, false,                                                                    \
    "DPO: each pair's loss weighted by its length-normalised probability (WPO).")                  \
  X(std::optional<double>, ld_alpha, std::nullopt,                                                 \
    "DPO: LD-DPO's weight of the completion tokens past the shorter one's length (null: 1).")      \
  X(std::string, f_divergence_type, "reverse_kl",                                                  \
    "DPO: reverse_kl (DPO), forward_kl, js_divergence or alpha_divergence.")                       \
  X(double, f_alpha_divergence_coef, 0.5,                                                          \
    "DPO: alpha of alpha_divergence.")                                                             \
  X(double, discopop_tau, 0.05,                                                                    \
    "DPO: the discopop loss's temperature.")                                                       \
  X(bool, sync_ref_model, false,                                                                   \
    "DPO: false only (TR-DPO's reference updates are not supported).")                            \
  X(double, ref_model_mixup_alpha, 0.6,                                                            \
    "DPO: accepted (used only by sync_ref_model).")                                                \
  X(int64_t, ref_model_sync_steps, 512,                                                            \
    "DPO: accepted (used only by sync_ref_model).")                                                \
// clang-format on
