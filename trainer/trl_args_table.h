// The tables of TRL's configs' own arguments (TRL 1.16's names, defaults and help), in the
// X(type, name, default, help) form of training_args_table.h, which includes this file:
// TRAINER_SFT_ARGUMENTS (SFTConfig), TRAINER_DPO_ARGUMENTS (DPOConfig),
// TRAINER_GRPO_ARGUMENTS (GRPOConfig), TRAINER_REWARD_ARGUMENTS (RewardConfig) and
// TRAINER_RLOO_ARGUMENTS (RLOOConfig).
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

// GRPOConfig's own arguments (TRL 1.16's names and defaults) and the script's reward_funcs:
// `trainer grpo` takes them with the DPO and SFT arguments GRPOConfig shares
// (TrainingArguments::grpo_shared_keys).
#define TRAINER_GRPO_ARGUMENTS(X) \
  X(int64_t, num_generations, 8,                                                                   \
    "GRPO: completions sampled per prompt (a group; at least 2).")                                 \
  X(std::optional<int64_t>, num_generations_eval, std::nullopt,                                    \
    "GRPO: completions per prompt in evaluation (null: num_generations).")                         \
  X(std::optional<int64_t>, generation_batch_size, std::nullopt,                                   \
    "GRPO: completions sampled at once over all processes (null: per_device_train_batch_size x "   \
    "processes x steps_per_generation).")                                                          \
  X(std::optional<int64_t>, steps_per_generation, std::nullopt,                                    \
    "GRPO: micro-batches each generation feeds (null: gradient_accumulation_steps).")              \
  X(std::optional<int64_t>, max_completion_length, int64_t{512},                                   \
    "GRPO: the most tokens sampled per completion.")                                               \
  X(bool, ds3_gather_for_generation, true,                                                         \
    "GRPO: under ZeRO-3 the full weights are gathered for sampling (true only).")                  \
  X(double, temperature, 1.0,                                                                      \
    "GRPO: sampling temperature (also divides the logits the loss scores).")                       \
  X(double, top_p, 1.0,                                                                            \
    "GRPO: nucleus sampling's probability mass (1: off).")                                         \
  X(int64_t, top_k, 0,                                                                             \
    "GRPO: sample among the k most likely tokens (0: off).")                                       \
  X(std::optional<double>, min_p, std::nullopt,                                                    \
    "GRPO: drop tokens below min_p times the top probability (null: the model's "                  \
    "generation_config).")                                                                         \
  X(double, repetition_penalty, 1.0,                                                               \
    "GRPO: Transformers' repetition penalty over the prompt and completion (1: off).")             \
  X(nlohmann::ordered_json, generation_kwargs, nlohmann::ordered_json(),                           \
    "GRPO: more of generate()'s keys, over the ones above (do_sample, max_new_tokens, "            \
    "temperature, top_p, top_k, min_p, repetition_penalty, no_repeat_ngram_size, bad_words_ids, "  \
    "eos_token_id).")                                                                              \
  X(nlohmann::ordered_json, chat_template_kwargs, nlohmann::ordered_json(),                        \
    "GRPO: variables of the chat template for conversational prompts (e.g. "                       \
    "{\"enable_thinking\": false}).")                                                              \
  X(std::optional<std::string>, cache_implementation, std::nullopt,                                \
    "GRPO: null only (the KV cache is the one built here).")                                       \
  X(bool, use_transformers_continuous_batching, false,                                             \
    "GRPO: false only.")                                                                           \
  X(nlohmann::ordered_json, transformers_continuous_batching_config, nlohmann::ordered_json(),     \
    "GRPO: null only.")                                                                            \
  X(bool, use_transformers_paged, false,                                                           \
    "GRPO: false only.")                                                                           \
  X(std::optional<int64_t>, max_tool_calling_iterations, std::nullopt,                             \
    "GRPO: null only (no tools).")                                                                 \
  X(int64_t, num_iterations, 1,                                                                    \
    "GRPO: updates per generation (mu); above 1 the old policy's log-probabilities weigh them.")   \
  X(double, epsilon, 0.2,                                                                          \
    "GRPO: the ratio's lower clip (1 - epsilon).")                                                 \
  X(std::optional<double>, epsilon_high, std::nullopt,                                             \
    "GRPO: the ratio's upper clip (1 + epsilon_high; cispo's cap; null: epsilon).")                \
  X(std::optional<double>, delta, std::nullopt,                                                    \
    "GRPO: two-sided clipping's cap on the ratio (null: none).")                                   \
  X(std::string, importance_sampling_level, "token",                                               \
    "GRPO: token (a ratio per token) or sequence (GSPO: one per completion).")                     \
  X(double, sapo_temperature_neg, 1.05,                                                            \
    "GRPO: sapo's temperature for negative advantages.")                                           \
  X(double, sapo_temperature_pos, 1.0,                                                             \
    "GRPO: sapo's temperature for positive advantages.")                                           \
  X(double, vespo_k_pos, 2.0,                                                                      \
    "GRPO: vespo's k for positive advantages.")                                                    \
  X(double, vespo_lambda_pos, 3.0,                                                                 \
    "GRPO: vespo's lambda for positive advantages.")                                               \
  X(double, vespo_k_neg, 3.0,                                                                      \
    "GRPO: vespo's k for negative advantages.")                                                    \
  X(double, vespo_lambda_neg, 2.0,                                                                 \
    "GRPO: vespo's lambda for negative advantages.")                                               \
  X(std::string, scale_rewards, "group",                                                           \
    "GRPO: group (advantages over the group's std), batch (the batch's std) or none (true: "       \
    "group, false: none).")                                                                        \
  X(std::vector<double>, reward_weights, {},                                                       \
    "GRPO: each reward function's weight ([]: 1 each).")                                           \
  X(std::string, multi_objective_aggregation, "sum_then_normalize",                                \
    "GRPO: sum_then_normalize or normalize_then_sum (each reward normalised in its group "         \
    "first).")                                                                                     \
  X(bool, mask_truncated_completions, false,                                                       \
    "GRPO: completions without an EOS take no part in the loss.")                                  \
  X(double, top_entropy_quantile, 1.0,                                                             \
    "GRPO: only the tokens of the top quantile of entropy take part in the policy loss (1: "       \
    "all).")                                                                                       \
  X(double, entropy_coef, 0.0,                                                                     \
    "GRPO: 0 only (no entropy bonus).")                                                            \
  X(bool, use_adaptive_entropy, false,                                                             \
    "GRPO: false only.")                                                                           \
  X(std::optional<double>, off_policy_mask_threshold, std::nullopt,                                \
    "GRPO: null only.")                                                                            \
  X(bool, use_bias_correction_kl, true,                                                            \
    "GRPO: the KL term times the importance ratio.")                                               \
  X(bool, cast_lm_head_to_fp32, false,                                                             \
    "GRPO: false only.")                                                                           \
  X(bool, log_completions, false,                                                                  \
    "GRPO: each logged step's prompts, completions, rewards and advantages as a table "            \
    "(completions/completions_<step>.jsonl in output_dir, printed, and in TensorBoard).")          \
  X(std::optional<int64_t>, num_completions_to_print, std::nullopt,                                \
    "GRPO: how many of them to print (null: all).")                                                \
  X(bool, log_unique_prompts, false,                                                               \
    "GRPO: accepted (a table of each prompt once is for wandb; not used here).")                   \
  X(bool, log_multimodal, true,                                                                    \
    "GRPO: accepted (no images here).")                                                            \
  X(std::optional<std::string>, log_completions_hub_repo, std::nullopt,                            \
    "GRPO: null only (no Hub here).")                                                              \
  X(nlohmann::ordered_json, reward_funcs, nlohmann::ordered_json::array(),                         \
    "GRPO: the rewards, a list: TRL's built-ins by name (think_format_reward, accuracy_reward, "   \
    "reasoning_accuracy_reward, get_soft_overlong_punishment(max_completion_len=..., "             \
    "soft_punish_cache=...), get_repetition_penalty_reward(...), get_cosine_scaled_reward(...)) "  \
    "or exec:COMMAND (a program reading JSON lines, writing a number a line).")                    \
  X(double, reward_timeout, 600.0,                                                                 \
    "GRPO: seconds an exec: reward program may take to answer (ours; TRL has no such key).")       \
  X(bool, use_vllm, false,                                                                         \
    "GRPO: false only (sampling runs in the process).")                                            \
  X(std::string, vllm_mode, "colocate",                                                            \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::string, vllm_model_impl, "vllm",                                                          \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(bool, vllm_enable_sleep_mode, false,                                                           \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::optional<std::string>, vllm_structured_outputs_regex, std::nullopt,                       \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::optional<std::string>, vllm_server_base_url, std::nullopt,                                \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::string, vllm_server_host, "0.0.0.0",                                                      \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(int64_t, vllm_server_port, 8000,                                                               \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(double, vllm_server_timeout, 240.0,                                                            \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(int64_t, vllm_group_port, 51216,                                                               \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(double, vllm_gpu_memory_utilization, 0.3,                                                      \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::optional<int64_t>, vllm_max_model_length, std::nullopt,                                   \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(int64_t, vllm_tensor_parallel_size, 1,                                                         \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(bool, vllm_importance_sampling_correction, true,                                               \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::string, vllm_importance_sampling_mode, "sequence_mask",                                   \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(double, vllm_importance_sampling_clip_max, 3.0,                                                \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::optional<double>, vllm_importance_sampling_clip_min, std::nullopt,                        \
    "GRPO: vLLM's; accepted at its default only.")                                                 \
  X(std::optional<double>, vllm_importance_sampling_cap, std::nullopt,                             \
    "GRPO: vLLM's; accepted at its default only.")                                                 \

// RewardConfig's own argument (TRL 1.16's name and default): `trainer reward` takes it with the
// SFT and DPO arguments RewardConfig shares (TrainingArguments::reward_shared_keys).
#define TRAINER_REWARD_ARGUMENTS(X) \
  X(std::optional<double>, center_rewards_coefficient, std::nullopt,                               \
    "Reward: the weight of the mean squared sum of each pair's rewards added to the loss, which "  \
    "keeps the rewards centred on 0 (null: none).")
// RLOOConfig's own arguments (TRL 1.16's names and defaults): `trainer rloo` takes them with
// GRPOConfig's but those only GRPO has (TrainingArguments::grpo_only_keys).
#define TRAINER_RLOO_ARGUMENTS(X) \
  X(bool, normalize_advantages, false,                                                             \
    "RLOO: the advantages of each generation batch standardised over all processes.")              \
  X(std::vector<double>, reward_clip_range, {},                                                    \
    "RLOO: [min, max] the weighted reward is clamped to before the KL penalty ([]: none).")
// clang-format on
