// TrainingArguments: Transformers' defaults, JSON and --name value parsing, the builder, and the
// exact one-line message of every kind of bad argument.
#include "trainer/training_args.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/data/mnist_defaults.h"
#include "tests/test_util.h"

namespace trainer {
namespace training_args_test {

std::string error_of(const std::string& json_text,
                     const std::vector<std::pair<std::string, std::string>>& overrides = {}) {
  try {
    TrainingArguments args = TrainingArguments::from_json_text(json_text, "config.json");
    for (const auto& [name, value] : overrides) args.set_from_text(name, value);
    args.validate();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(TrainingArguments, TransformersDefaults) {
  TrainingArguments a;
  EXPECT_EQ(a.num_train_epochs(), 3.0);
  EXPECT_EQ(a.max_steps(), -1);
  EXPECT_EQ(a.per_device_train_batch_size(), 8);
  EXPECT_EQ(a.per_device_eval_batch_size(), 8);
  EXPECT_EQ(a.learning_rate(), 5e-5);
  EXPECT_EQ(a.weight_decay(), 0.0);
  EXPECT_EQ(a.adam_beta1(), 0.9);
  EXPECT_EQ(a.adam_beta2(), 0.999);
  EXPECT_EQ(a.adam_epsilon(), 1e-8);
  EXPECT_EQ(a.max_grad_norm(), 1.0);
  EXPECT_EQ(a.gradient_accumulation_steps(), 1);
  EXPECT_EQ(a.lr_scheduler_type(), "linear");
  EXPECT_EQ(a.logging_steps(), 500);
  EXPECT_EQ(a.eval_strategy(), "no");
  EXPECT_EQ(a.seed(), 42);
  EXPECT_EQ(a.sampler_seed(), 42);
  EXPECT_EQ(a.effective_eval_steps(), 500);
  EXPECT_EQ(a.effective_dataset_dir(), data::kFashionMnistDir);
  EXPECT_NO_THROW(a.validate());
}

TEST(TrainingArguments, BuilderChains) {
  auto a = TrainingArguments().learning_rate(1e-3).num_train_epochs(1).data_seed(7);
  EXPECT_EQ(a.learning_rate(), 1e-3);
  EXPECT_EQ(a.num_train_epochs(), 1);
  EXPECT_EQ(a.sampler_seed(), 7);
}

TEST(TrainingArguments, JsonThenOverrides) {
  auto a = TrainingArguments::from_json_text(
      R"({"per_device_train_batch_size": 64, "evaluation_strategy": "epoch", "learning_rate": 0.001,
          "report_to": [], "data_seed": null})");
  EXPECT_EQ(a.per_device_train_batch_size(), 64);
  EXPECT_EQ(a.eval_strategy(), "epoch");
  a.set_from_text("learning_rate", "2e-4");
  a.set_from_text("output_dir", "123");
  a.set_from_text("disable_tqdm", "True");
  a.set_from_text("run_name", "None");
  a.set_from_text("report_to", "none");
  a.set_from_text("max_train_samples", "2000");
  EXPECT_EQ(a.learning_rate(), 2e-4);
  EXPECT_EQ(a.output_dir(), "123");
  EXPECT_TRUE(a.disable_tqdm());
  EXPECT_FALSE(a.run_name().has_value());
  EXPECT_EQ(a.report_to(), std::vector<std::string>{"none"});
  EXPECT_EQ(a.max_train_samples(), 2000);
}

TEST(TrainingArguments, ReportToSpellsOutAllAndDropsNoneAndRepeats) {
  auto integrations = [](const std::string& text) {
    TrainingArguments a;
    a.set_from_text("report_to", text);
    a.validate();
    return a.effective_report_to();
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(TrainingArguments().effective_report_to(), Names{});
  EXPECT_EQ(integrations("none"), Names{});
  EXPECT_EQ(integrations("[]"), Names{});
  EXPECT_EQ(integrations("all"), (Names{"tensorboard", "jsonl"}));
  EXPECT_EQ(integrations("jsonl,tensorboard,jsonl"), (Names{"tensorboard", "jsonl"}));
  EXPECT_EQ(integrations("[\"jsonl\"]"), Names{"jsonl"});
  EXPECT_EQ(TrainingArguments::report_integrations(), (Names{"tensorboard", "jsonl"}));
}

TEST(TrainingArguments, ToJsonRoundTrips) {
  auto a = TrainingArguments()
               .learning_rate(3e-4)
               .eval_strategy("steps")
               .eval_steps(50.0)
               .max_eval_samples(10);
  auto b = TrainingArguments::from_json_text(a.to_json());
  EXPECT_EQ(a.to_json(), b.to_json());
  auto j = nlohmann::json::parse(a.to_json());
  EXPECT_EQ(j["learning_rate"], 3e-4);
  EXPECT_TRUE(j["data_seed"].is_null());
  // Every argument but SFTConfig's, DPOConfig's, GRPOConfig's, RewardConfig's, RLOOConfig's and
  // TRL's script arguments, which their runs' files have.
  EXPECT_EQ(j.size(), TrainingArguments::describe().size() - TrainingArguments::sft_keys().size() -
                          TrainingArguments::dpo_keys().size() -
                          TrainingArguments::grpo_keys().size() -
                          TrainingArguments::reward_keys().size() -
                          TrainingArguments::rloo_keys().size() -
                          TrainingArguments::script_keys().size());
}

TEST(TrainingArguments, UnknownKeyNamesTheNearest) {
  EXPECT_EQ(error_of(R"({"lerning_rate": 0.1})"),
            "unknown argument lerning_rate (did you mean learning_rate?)");
  EXPECT_EQ(error_of(R"({"zzzzzzzzzzzzzzzzzzzzzz": 1})"),
            "unknown argument zzzzzzzzzzzzzzzzzzzzzz (see trainer train --help)");
}

// Every field of Transformers 5.24's TrainingArguments with its default, as
// dataclasses.fields(TrainingArguments) gives them (114).
const char* const kTransformersDefaults = R"({
"output_dir": null, "per_device_train_batch_size": 8, "num_train_epochs": 3.0,
"max_steps": -1, "learning_rate": 5e-05, "lr_scheduler_type": "linear",
"lr_scheduler_kwargs": null, "warmup_steps": 0, "optim": "adamw_torch_fused",
"optim_args": null, "weight_decay": 0.0, "adam_beta1": 0.9, "adam_beta2": 0.999,
"adam_epsilon": 1e-08, "optim_target_modules": null, "gradient_accumulation_steps": 1,
"average_tokens_across_devices": true, "max_grad_norm": 1.0, "label_smoothing_factor": 0.0,
"bf16": false, "fp16": false, "bf16_full_eval": false, "fp16_full_eval": false, "tf32": null,
"activation_checkpointing": null, "activation_checkpointing_kwargs": null,
"gradient_checkpointing": null, "gradient_checkpointing_kwargs": null,
"torch_compile": false, "torch_compile_backend": null, "torch_compile_mode": null,
"use_liger_kernel": false, "liger_kernel_config": null, "use_cache": false,
"neftune_noise_alpha": null, "torch_empty_cache_steps": null, "auto_find_batch_size": false,
"logging_strategy": "steps", "logging_steps": 500, "logging_first_step": false,
"log_on_each_node": true, "logging_nan_inf_filter": true,
"include_num_input_tokens_seen": "no", "log_level": "passive",
"log_level_replica": "warning", "disable_tqdm": null, "report_to": "none", "run_name": null,
"project": "huggingface", "trackio_space_id": null, "trackio_bucket_id": null,
"trackio_static_space_id": null, "eval_strategy": "no", "eval_steps": null, "eval_delay": 0,
"per_device_eval_batch_size": 8, "prediction_loss_only": false, "eval_on_start": false,
"eval_do_concat_batches": true, "eval_use_gather_object": false,
"eval_accumulation_steps": null, "include_for_metrics": [], "batch_eval_metrics": false,
"save_only_model": false, "save_strategy": "steps", "save_steps": 500,
"save_on_each_node": false, "save_total_limit": null, "enable_jit_checkpoint": false,
"push_to_hub": false, "hub_token": null, "hub_private_repo": null, "hub_model_id": null,
"hub_strategy": "every_save", "hub_always_push": false, "hub_revision": null,
"load_best_model_at_end": false, "metric_for_best_model": null, "greater_is_better": null,
"ignore_data_skip": false, "restore_callback_states_from_checkpoint": false,
"full_determinism": false, "seed": 42, "data_seed": null, "use_cpu": false,
"accelerator_config": null, "parallelism_config": null, "dataloader_drop_last": false,
"dataloader_num_workers": 0, "dataloader_pin_memory": true,
"dataloader_persistent_workers": false, "dataloader_prefetch_factor": null,
"dataloader_multiprocessing_context": null, "dataloader_in_order": true,
"remove_unused_columns": true, "label_names": null, "train_sampling_strategy": "random",
"length_column_name": "length", "ddp_find_unused_parameters": null,
"ddp_bucket_cap_mb": null, "ddp_broadcast_buffers": null, "ddp_static_graph": null,
"ddp_backend": null, "ddp_timeout": 1800, "fsdp": null, "fsdp_config": null,
"deepspeed": null, "debug": "", "skip_memory_metrics": true, "do_train": false,
"do_eval": false, "do_predict": false, "resume_from_checkpoint": null, "local_rank": -1
})";

TEST(TrainingArguments, EveryKeyOfTransformersIsKnownAndItsDefaultAccepted) {
  const auto defaults = nlohmann::ordered_json::parse(kTransformersDefaults);
  ASSERT_EQ(defaults.size(), 114u);
  // Each alone, with Transformers' default: none is unknown, none refused.
  for (const auto& [key, value] : defaults.items()) {
    nlohmann::ordered_json one = {{key, value}};
    EXPECT_EQ(error_of(one.dump()), "no error") << key;
  }
  // All of them in one file (a TrainingArguments dumped by Transformers), with an output_dir.
  nlohmann::ordered_json all = defaults;
  all["output_dir"] = "out";
  EXPECT_EQ(error_of(all.dump()), "no error");
}

TEST(TrainingArguments, WhatAProgramWithoutTheHubOrPythonCannotDoIsAcceptedOnlyAsNothing) {
  EXPECT_EQ(error_of(R"({"push_to_hub": true})"),
            "argument push_to_hub: true is not supported: there is no Hugging Face Hub here (save "
            "to output_dir and upload it); accepted only as false");
  EXPECT_EQ(error_of(R"({"hub_model_id": "me/model"})"),
            "argument hub_model_id: \"me/model\" is not supported: there is no Hugging Face Hub "
            "here; accepted only as null");
  EXPECT_EQ(error_of(R"({"torch_compile": true})"),
            "argument torch_compile: true is not supported: torch.compile is Python's "
            "(TorchDynamo); the C++ kernels here run as they are; accepted only as false");
  EXPECT_EQ(error_of(R"({"optim_target_modules": ["attn"]})"),
            "argument optim_target_modules: [\"attn\"] is not supported: it names the modules of "
            "GaLore's, APOLLO's and similar optimizers, not built here; accepted only as null");
  EXPECT_EQ(error_of(R"({"parallelism_config": {"tp_size": 2}})"),
            "argument parallelism_config: {\"tp_size\":2} is not supported: tensor, context and "
            "sequence parallelism are not built here (fsdp and deepspeed shard data-parallel "
            "runs); accepted only as null or {}");
  EXPECT_EQ(error_of(R"({"debug": "tpu_metrics_debug"})"),
            "argument debug: \"tpu_metrics_debug\" is not allowed (tpu_metrics_debug asks for a "
            "TPU; underflow_overflow)");
  // Accepted: what asks for nothing, and the project's name.
  EXPECT_EQ(error_of(R"({"push_to_hub": false, "hub_strategy": "every_save", "project": "x",
                        "debug": "underflow_overflow", "enable_jit_checkpoint": true})"),
            "no error");
}

TEST(TrainingArguments, KeysRemovedFromTransformersNameWhatReplacedThem) {
  EXPECT_EQ(error_of(R"({"no_cuda": true})"),
            "argument no_cuda: Transformers' TrainingArguments no longer has it (removed before "
            "5.x); use use_cpu");
  EXPECT_EQ(error_of(R"({"jit_mode_eval": true})"),
            "argument jit_mode_eval: Transformers' TrainingArguments no longer has it (removed "
            "before 5.x); nothing replaces it");
}

TEST(TrainingArguments, NewerKeysReadAsTransformersReadsThem) {
  // include_num_input_tokens_seen's older booleans, debug's string of options.
  auto args = TrainingArguments::from_json_text(
      R"({"include_num_input_tokens_seen": true, "debug": "underflow_overflow"})");
  EXPECT_EQ(args.include_num_input_tokens_seen(), "all");
  EXPECT_EQ(args.debug(), std::vector<std::string>{"underflow_overflow"});
  EXPECT_EQ(
      TrainingArguments::from_json_text(R"({"group_by_length": true})").train_sampling_strategy(),
      "group_by_length");
  args.set_from_text("include_num_input_tokens_seen", "false");
  EXPECT_EQ(args.include_num_input_tokens_seen(), "no");
  EXPECT_EQ(error_of(R"({"include_num_input_tokens_seen": "some"})"),
            "argument include_num_input_tokens_seen: \"some\" is not allowed (allowed: no, all, "
            "non_padding)");
  EXPECT_EQ(error_of(R"({"label_smoothing_factor": 1.0})"),
            "argument label_smoothing_factor: 1.0 is not allowed (0 <= epsilon < 1)");
  EXPECT_EQ(error_of(R"({"log_level": "loud"})"),
            "argument log_level: \"loud\" is not allowed (allowed: debug, info, warning, error, "
            "critical, passive)");
  EXPECT_EQ(error_of(R"({"label_names": ["start_positions"]})"),
            "argument label_names: [\"start_positions\"] is not allowed ([\"labels\"] or "
            "[\"label\"]: the batches here carry their labels under one key)");
  EXPECT_EQ(error_of(R"({"torch_empty_cache_steps": 0})"),
            "argument torch_empty_cache_steps: 0 is not allowed (a positive integer, or null)");
}

TEST(TrainingArguments, TheProcessLogLevelIsTransformers) {
  TrainingArguments args;
  // passive keeps warning on the main process; replicas warning.
  EXPECT_EQ(args.process_log_level(true, true), 30);
  EXPECT_EQ(args.process_log_level(false, false), 30);
  args.log_level("info").log_level_replica("error");
  EXPECT_EQ(args.process_log_level(true, true), 20);
  EXPECT_EQ(args.process_log_level(false, false), 40);
  // log_on_each_node: a node's first process logs as the main one; false: only the run's first.
  EXPECT_EQ(args.process_log_level(true, false), 20);
  args.log_on_each_node(false);
  EXPECT_EQ(args.process_log_level(true, false), 40);
  EXPECT_EQ(args.process_log_level(true, true), 20);
}

TEST(TrainingArguments, WrongTypes) {
  EXPECT_EQ(error_of(R"({"per_device_train_batch_size": "64"})"),
            "argument per_device_train_batch_size: \"64\" is a string, expected an integer");
  EXPECT_EQ(error_of(R"({"per_device_train_batch_size": 6.5})"),
            "argument per_device_train_batch_size: 6.5 is a number, expected an integer");
  EXPECT_EQ(error_of(R"({"learning_rate": true})"),
            "argument learning_rate: true is a boolean, expected a number");
  EXPECT_EQ(error_of("{}", {{"learning_rate", "fast"}}),
            "argument learning_rate: \"fast\" is a string, expected a number");
  // Bytes that are not UTF-8 (found by fuzz_cli): one line, not nlohmann's type_error, and never
  // a training_args.json that cannot be written.
  EXPECT_EQ(error_of("{}", {{"learning_rate", "\xff"}}),
            "argument learning_rate: \"\xef\xbf\xbd\" is a string, expected a number");
  EXPECT_EQ(error_of("{}", {{"output_dir", "run\xff"}}),
            "argument output_dir: \"run\xef\xbf\xbd\" is not valid UTF-8 text");
  EXPECT_EQ(error_of(R"([1, 2])"),
            "config.json must hold one flat JSON object of arguments, not an array");
  EXPECT_EQ(error_of(R"({"a": )"),
            "config.json is not valid JSON: parse error at line 1, column 7: syntax error while "
            "parsing value - unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(error_of(R"({"output_dir": {"x": 1}})"),
            "argument output_dir: an object is not allowed, expected a string");
  EXPECT_EQ(error_of(R"({"max_steps": 3, "max_steps": 4})"),
            "config.json: max_steps is given twice (first 3); give it once");
  // Transformers 5's output_dir None: "trainer_output".
  EXPECT_EQ(TrainingArguments::from_json_text(R"({"output_dir": null})").output_dir(),
            "trainer_output");
  EXPECT_EQ(error_of(R"({"learning_rate": null})"),
            "argument learning_rate: null, expected a number");
}

// A million keys: read in one pass (an ordered object checking each insertion against all the
// keys before it would take minutes), the first bad key reported after the syntax is checked.
TEST(TrainingArguments, AHugeConfigIsReadInOnePass) {
  std::string text = "{";
  for (int i = 0; i < 1000000; ++i) text += fmt::format("\"not_an_argument_{}\": {}, ", i, i);
  text += "\"max_steps\": 1}";
  EXPECT_EQ(error_of(text), "unknown argument not_an_argument_0 (see trainer train --help)");
  EXPECT_EQ(error_of(text.substr(0, text.size() - 1)),
            "config.json is not valid JSON: parse error at line 1, column " +
                std::to_string(text.size()) +
                ": syntax error while parsing object - unexpected end of input; expected '}'");
}

TEST(TrainingArguments, ValuesOutOfRange) {
  EXPECT_EQ(error_of(R"({"per_device_train_batch_size": 0})"),
            "argument per_device_train_batch_size: 0 is not allowed (must be in 1..2147483647)");
  EXPECT_EQ(
      error_of(R"({"learning_rate": -0.001})"),
      "argument learning_rate: -0.001 is not allowed (must be in 0..3.4e38, float32's range)");
  EXPECT_EQ(error_of(R"({"lr_scheduler_type": "exponential"})"),
            "argument lr_scheduler_type: \"exponential\" is not allowed (allowed: linear, cosine, "
            "cosine_with_restarts, polynomial, constant, constant_with_warmup, inverse_sqrt, "
            "reduce_lr_on_plateau, cosine_with_min_lr, cosine_warmup_with_min_lr, "
            "warmup_stable_decay)");
  EXPECT_EQ(error_of(R"({"lr_scheduler_type": "cosine", "lr_scheduler_kwargs": {"power": 2}})"),
            "argument lr_scheduler_kwargs: power is not an option of lr_scheduler_type cosine "
            "(its options: num_cycles)");
  EXPECT_EQ(error_of(R"({"gradient_accumulation_steps": 0})"),
            "argument gradient_accumulation_steps: 0 is not allowed (must be in 1..2147483647)");
  EXPECT_EQ(error_of(R"({"eval_strategy": "sometimes"})"),
            "argument eval_strategy: \"sometimes\" is not allowed (allowed: no, steps, epoch)");
  EXPECT_EQ(error_of(R"({"max_steps": 0})"),
            "argument max_steps: 0 is not allowed (-1 to train for num_train_epochs, or 1..2^53)");
  EXPECT_EQ(error_of(R"({"warmup_ratio": 1.5})"),
            "argument warmup_ratio: 1.5 is not allowed (must be in [0, 1])");
  EXPECT_EQ(
      error_of(R"({"logging_steps": 2.5})"),
      "argument logging_steps: 2.5 is not allowed (an integer in 1..2^53, or a fraction in (0, 1) "
      "of the total steps)");
  EXPECT_EQ(error_of(R"({"model_name": "gpt2"})"),
            "argument model_name: \"gpt2\" is not allowed (allowed: basic_net, mlp, resnet, gpt)");
  EXPECT_EQ(error_of(R"({"report_to": "wandb"})"),
            "argument report_to: \"wandb\" is not allowed (allowed: none, all, tensorboard, "
            "jsonl)");
  EXPECT_EQ(error_of(R"({"report_to": ["tensorboard", "none"]})"),
            "argument report_to: [\"tensorboard\",\"none\"] is not allowed (\"none\" goes "
            "alone)");
  EXPECT_EQ(error_of(R"({"report_to": ["all", "jsonl"]})"),
            "argument report_to: [\"all\",\"jsonl\"] is not allowed (\"all\" goes alone)");
  EXPECT_EQ(error_of(R"({"logging_dir": ""})"),
            "argument logging_dir: \"\" is not allowed (a directory path, or null)");
  EXPECT_EQ(error_of(R"({"save_strategy": "always"})"),
            "argument save_strategy: \"always\" is not allowed (allowed: no, steps, epoch, best)");
  EXPECT_EQ(error_of(R"({"save_steps": 2.5})"),
            "argument save_steps: 2.5 is not allowed (an integer in 1..2^53, or a fraction in (0, "
            "1) of the total steps)");
  EXPECT_EQ(error_of(R"({"save_total_limit": 0})"),
            "argument save_total_limit: 0 is not allowed (must be >= 1, or null to keep every "
            "checkpoint)");
  EXPECT_EQ(
      error_of(
          R"({"load_best_model_at_end": true, "eval_strategy": "steps", "save_strategy": "epoch"})"),
      "argument load_best_model_at_end: true is not allowed (it needs save_strategy to match "
      "eval_strategy, but save_strategy is \"epoch\" and eval_strategy \"steps\")");
  EXPECT_EQ(
      error_of(
          R"({"load_best_model_at_end": true, "eval_strategy": "steps", "eval_steps": 3, "save_steps": 10})"),
      "argument load_best_model_at_end: true is not allowed (it needs save_steps (10) to be a "
      "multiple of eval_steps (3))");
  EXPECT_EQ(
      error_of(
          R"({"load_best_model_at_end": true, "eval_strategy": "steps", "eval_steps": 0.1, "save_steps": 3})"),
      "argument load_best_model_at_end: true is not allowed (it needs save_steps to be a "
      "multiple of eval_steps, which cannot be told when one is a ratio and the other a "
      "step count (save_steps 3.0, eval_steps 0.1))");
  EXPECT_EQ(
      error_of(
          R"({"load_best_model_at_end": true, "eval_strategy": "steps", "eval_steps": 0.2, "save_steps": 0.1})"),
      "argument load_best_model_at_end: true is not allowed (it needs save_steps (0.1) to be "
      "a multiple of eval_steps (0.2))");
  EXPECT_EQ(
      error_of(
          R"({"load_best_model_at_end": true, "eval_strategy": "steps", "eval_steps": 0.1, "save_steps": 0.3})"),
      "no error");
  EXPECT_EQ(error_of(R"({"save_strategy": "best", "eval_strategy": "epoch"})"),
            "argument save_strategy: \"best\" is not allowed (it needs metric_for_best_model)");
  EXPECT_EQ(
      error_of(R"({"early_stopping_patience": 2})"),
      "argument early_stopping_patience: 2 is not allowed (it needs metric_for_best_model (or "
      "load_best_model_at_end))");
  EXPECT_EQ(error_of(R"({"max_nonfinite_steps": -1})"),
            "argument max_nonfinite_steps: -1 is not allowed (must be in 0..2^53; 0 never stops)");
  EXPECT_EQ(error_of(R"({"resume_from_checkpoint": ""})"),
            "argument resume_from_checkpoint: \"\" is not allowed (a checkpoint folder, or true "
            "for the newest in output_dir)");
  EXPECT_EQ(error_of(R"({"resume_from_checkpoint": 3})"),
            "argument resume_from_checkpoint: 3 is an integer, expected a string");
  EXPECT_EQ(error_of(R"({"eval_strategy": "epoch", "evaluation_strategy": "steps"})"),
            "config.json: eval_strategy \"epoch\" and its old name evaluation_strategy \"steps\" "
            "disagree (give one)");
}

TEST(TrainingArguments, WarmupFromRatioOrSteps) {
  EXPECT_EQ(TrainingArguments().warmup_ratio(0.1).get_warmup_steps(938), 94);
  EXPECT_EQ(TrainingArguments().warmup_ratio(0.1).warmup_steps(5).get_warmup_steps(938), 5);
}

TEST(TrainingArguments, ActivationCheckpointingAndTransformersOlderNames) {
  TrainingArguments defaults;
  EXPECT_FALSE(defaults.checkpointing_plan().enabled);
  EXPECT_TRUE(defaults.chunked_loss());
  // The older name alone, with its kwargs; the new name wins where both are given.
  auto old_names = TrainingArguments::from_json_text(
      R"({"gradient_checkpointing": true, "gradient_checkpointing_kwargs":
          {"use_reentrant": false, "every_n_layers": 3}})");
  EXPECT_TRUE(old_names.checkpointing_plan().enabled);
  EXPECT_EQ(old_names.checkpointing_plan().every_n_layers, 3);
  auto both = TrainingArguments::from_json_text(
      R"({"gradient_checkpointing": true, "activation_checkpointing": false,
          "gradient_checkpointing_kwargs": {"every_n_layers": 3},
          "activation_checkpointing_kwargs": {"every_n_layers": 2}})");
  EXPECT_FALSE(both.checkpointing_plan().enabled);
  EXPECT_EQ(both.checkpointing_plan().every_n_layers, 2);
  TrainingArguments cli;
  cli.set_from_text("activation_checkpointing_kwargs", R"({"every_n_layers": 4})");
  cli.set_from_text("activation_checkpointing", "True");
  EXPECT_EQ(cli.checkpointing_plan().every_n_layers, 4);
  EXPECT_EQ(error_of(R"({"activation_checkpointing_kwargs": {"every_n_layers": 0}})"),
            "argument activation_checkpointing_kwargs: every_n_layers 0 is not allowed (an "
            "integer >= 1)");
  EXPECT_EQ(error_of(R"({"gradient_checkpointing_kwargs": {"use_reentrant": "no"}})"),
            "argument gradient_checkpointing_kwargs: use_reentrant \"no\" is not allowed (true "
            "or false)");
  EXPECT_EQ(error_of(R"({"gradient_checkpointing_kwargs": {"preserve_rng_state": false}})"),
            "argument gradient_checkpointing_kwargs: preserve_rng_state false is not allowed "
            "(true: the recomputation always replays the forward's dropout masks)");
  EXPECT_EQ(error_of(R"({"activation_checkpointing_kwargs": {"context_fn": 1}})"),
            "argument activation_checkpointing_kwargs: context_fn is not an option of "
            "activation checkpointing (allowed: every_n_layers, use_reentrant, "
            "preserve_rng_state, offload)");
  EXPECT_EQ(error_of(R"({"gradient_checkpointing": true, "ddp_find_unused_parameters": true})"),
            "argument ddp_find_unused_parameters: true is not allowed with activation "
            "checkpointing (a recomputed block's parameters are not in the forward's graph; leave "
            "it false or null)");
  // use_liger_kernel: null and true chunk the loss, false is Transformers' plain one.
  EXPECT_FALSE(TrainingArguments::from_json_text(R"({"use_liger_kernel": false})").chunked_loss());
  EXPECT_TRUE(TrainingArguments::from_json_text(R"({"use_liger_kernel": true})").chunked_loss());
}

TEST(TrainingArguments, GpuArguments) {
  TrainingArguments defaults;
  EXPECT_EQ(defaults.tf32(), std::nullopt);
  EXPECT_FALSE(defaults.cuda_graphs());
  EXPECT_TRUE(defaults.data_on_device());
  auto a = TrainingArguments::from_json_text(
      R"({"tf32": true, "cuda_graphs": true, "data_on_device": false})");
  EXPECT_EQ(a.tf32(), true);
  EXPECT_TRUE(a.cuda_graphs());
  EXPECT_FALSE(a.data_on_device());
  a.set_from_text("tf32", "null");
  EXPECT_EQ(a.tf32(), std::nullopt);
  auto b = TrainingArguments::from_json_text(a.to_json());
  EXPECT_EQ(b.to_json(), a.to_json());
}

TEST(TrainingArguments, DistributedAndPrecisionArguments) {
  TrainingArguments defaults;
  EXPECT_FALSE(defaults.bf16());
  EXPECT_FALSE(defaults.fp16());
  EXPECT_FALSE(defaults.use_cpu());
  EXPECT_EQ(defaults.ddp_timeout(), 1800);
  EXPECT_EQ(defaults.ddp_bucket_cap_mb(), std::nullopt);
  EXPECT_EQ(defaults.mixed_precision(), "no");
  auto a = TrainingArguments::from_json_text(
      R"({"bf16": true, "use_cpu": true, "ddp_timeout": 60, "ddp_bucket_cap_mb": 50,
          "ddp_find_unused_parameters": true, "ddp_broadcast_buffers": false,
          "ddp_backend": "gloo"})");
  EXPECT_EQ(a.mixed_precision(), "bf16");
  EXPECT_TRUE(a.use_cpu());
  EXPECT_EQ(a.ddp_timeout(), 60);
  EXPECT_EQ(a.ddp_bucket_cap_mb(), 50);
  EXPECT_EQ(a.ddp_find_unused_parameters(), true);
  EXPECT_EQ(a.ddp_broadcast_buffers(), false);
  EXPECT_EQ(a.ddp_backend(), "gloo");
  auto written = nlohmann::json::parse(a.to_json());
  EXPECT_EQ(written["ddp_broadcast_buffers"], false);
  EXPECT_EQ(written["bf16"], true);
  TrainingArguments b = a;
  b.set_from_text("ddp_find_unused_parameters", "None");
  EXPECT_EQ(b.ddp_find_unused_parameters(), std::nullopt);
  EXPECT_EQ(error_of(R"({"bf16": true, "fp16": true})"),
            "argument fp16: true is not allowed (bf16 is true too; choose one mixed precision)");
  EXPECT_EQ(error_of(R"({"ddp_backend": "mpi"})"),
            "argument ddp_backend: \"mpi\" is not allowed (allowed: gloo, nccl)");
  for (const char* timeout : {"0", "2147484", "9223372036854775807"}) {
    EXPECT_EQ(error_of(std::string(R"({"ddp_timeout": )") + timeout + "}"),
              std::string("argument ddp_timeout: ") + timeout +
                  " is not allowed (must be in 1..2147483 seconds, about 24 days)");
  }
  EXPECT_EQ(error_of(R"({"ddp_bucket_cap_mb": 0})"),
            "argument ddp_bucket_cap_mb: 0 is not allowed (must be in 1..1048576)");
}

// optim and optim_args read as Transformers reads them, and what each refuses in one line.
TEST(TrainingArguments, OptimAndOptimArgs) {
  EXPECT_EQ(TrainingArguments().optim(), "adamw_torch_fused");
  EXPECT_EQ(TrainingArguments().optimizer_plan().name, "adamw_torch_fused");
  EXPECT_TRUE(TrainingArguments().optimizer_plan().options.empty());
  // Spaces dropped; numbers; flags as words.
  const OptimizerPlan sgd =
      TrainingArguments::from_json_text(
          R"({"optim": "sgd", "optim_args": "momentum=0.9, nesterov=True,dampening=0"})")
          .optimizer_plan();
  EXPECT_EQ(sgd.name, "sgd");
  EXPECT_EQ(sgd.options,
            (std::map<std::string, double>{{"momentum", 0.9}, {"nesterov", 1}, {"dampening", 0}}));
  const OptimizerPlan rmsprop =
      TrainingArguments::from_json_text(
          R"({"optim": "rmsprop", "optim_args": "centered=no,alpha=0.95,eps=1e-6"})")
          .optimizer_plan();
  EXPECT_EQ(rmsprop.options,
            (std::map<std::string, double>{{"centered", 0}, {"alpha", 0.95}, {"eps", 1e-6}}));
  auto written = nlohmann::json::parse(
      TrainingArguments::from_json_text(R"({"optim": "adafactor"})").to_json());
  EXPECT_EQ(written["optim"], "adafactor");
  EXPECT_EQ(written["optim_args"], nullptr);

  EXPECT_EQ(error_of(R"({"optim": "adam"})"),
            "argument optim: \"adam\" is not allowed (allowed: adamw_torch_fused, adamw_torch, "
            "adafactor, sgd, adagrad, rmsprop)");
  EXPECT_EQ(error_of(R"({"optim": "sgd", "optim_args": "momentum=0.9,betas=0.5"})"),
            "argument optim_args: \"momentum=0.9,betas=0.5\" is not allowed (\"betas\" is not "
            "a key it reads; optim sgd reads momentum, dampening, weight_decay, nesterov as "
            "key=value,key=value)");
  EXPECT_EQ(error_of(R"({"optim": "adagrad", "optim_args": "lr_decay"})"),
            "argument optim_args: \"lr_decay\" is not allowed (optim adagrad reads lr_decay, "
            "weight_decay, eps as key=value,key=value)");
  EXPECT_EQ(error_of(R"({"optim": "rmsprop", "optim_args": "momentum=-0.5"})"),
            "argument optim_args: \"momentum=-0.5\" is not allowed (momentum must be a number "
            ">= 0, not \"-0.5\")");
  EXPECT_EQ(error_of(R"({"optim_args": "momentum=0.9"})"),
            "argument optim_args: \"momentum=0.9\" is not allowed (optim adamw_torch_fused reads "
            "no optim_args; sgd, adagrad and rmsprop do)");
  EXPECT_EQ(error_of(R"({"optim": "adafactor"})", {{"optim_args", "eps=1e-3"}}),
            "argument optim_args: \"eps=1e-3\" is not allowed (optim adafactor reads no "
            "optim_args; sgd, adagrad and rmsprop do)");
  EXPECT_EQ(error_of(R"({"optim": "sgd", "optim_args": "nesterov=maybe"})"),
            "argument optim_args: \"nesterov=maybe\" is not allowed (nesterov is true or false, "
            "not \"maybe\")");
  EXPECT_EQ(error_of(R"({"optim": "sgd", "optim_args": "nesterov=true"})"),
            "argument optim_args: \"nesterov=true\" is not allowed (nesterov needs a momentum > "
            "0 and dampening 0, as PyTorch's SGD)");
  // A sharded run's state is AdamW's: refused at start, before output_dir is touched.
  EXPECT_EQ(error_of(R"({"optim": "sgd", "fsdp": "full_shard"})"),
            "argument optim: \"sgd\" is not allowed (with fsdp full_shard only adamw_torch_fused "
            "and adamw_torch, whose moments a sharded run's checkpoints hold; leave out fsdp to "
            "train with sgd)");
  EXPECT_EQ(error_of(R"({"optim": "adamw_torch", "fsdp": "full_shard"})"), "no error");
  EXPECT_EQ(error_of(R"({"optim": "adafactor", "fsdp": "no_shard"})"), "no error");
}

// docs/arguments.md is generated from the argument table; a stale copy fails here, and
// TRAINER_UPDATE_DOCS=1 rewrites it.
TEST(Docs, ArgumentsMdIsUpToDate) {
  const std::string path = std::string(SOURCE_DIR) + "/docs/arguments.md";
  const std::string expected = TrainingArguments::arguments_markdown();
  if (std::getenv("TRAINER_UPDATE_DOCS")) {
    std::ofstream(path, std::ios::binary) << expected;
  }
  std::ifstream in(path, std::ios::binary);
  std::string actual((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(actual, expected) << path
                              << " is stale: rewrite it with TRAINER_UPDATE_DOCS=1 "
                                 "build/bin/trainer_base_tests --gtest_filter=Docs.*";
  // Every argument has a row, and each unsupported key a line.
  for (const auto& d : TrainingArguments::describe()) {
    EXPECT_NE(expected.find("| `" + d.name + "` |"), std::string::npos) << d.name;
  }
  for (const auto& key : TrainingArguments::unsupported_keys()) {
    EXPECT_NE(expected.find("- `" + key + "`"), std::string::npos) << key;
  }
}

}  // namespace training_args_test
}  // namespace trainer
