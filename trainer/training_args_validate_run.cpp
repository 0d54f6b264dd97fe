// TrainingArguments::validate() for what a run runs on: Transformers' keys that cannot apply here,
// the data-loading keys, Accelerate's accelerator_config, and the accumulation the run takes.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/data/names.h"
#include "lib/io/safetensors_header.h"
#include "lib/models/hf_config.h"
#include "lib/models/lora_config.h"
#include "lib/models/names.h"
#include "lib/optim/schedules.h"
#include "trainer/training_args.h"
#include "trainer/training_args_checks.h"
#include "trainer/training_args_specs.h"

namespace trainer {

using namespace validate;

namespace {

// Keys of Transformers' TrainingArguments that ask for what a program without Python, network or
// a TPU cannot have: accepted as their default (which asks for nothing), otherwise refused with
// the reason.
struct InertKey {
  const char* name;
  const char* why;
};
constexpr InertKey kInertKeys[] = {
    {"push_to_hub", "there is no Hugging Face Hub here (save to output_dir and upload it)"},
    {"hub_token", "there is no Hugging Face Hub here"},
    {"hub_private_repo", "there is no Hugging Face Hub here"},
    {"hub_model_id", "there is no Hugging Face Hub here"},
    {"hub_strategy", "there is no Hugging Face Hub here"},
    {"hub_always_push", "there is no Hugging Face Hub here"},
    {"hub_revision", "there is no Hugging Face Hub here"},
    {"torch_compile",
     "torch.compile is Python's (TorchDynamo); the C++ kernels here run as they are"},
    {"torch_compile_backend", "torch.compile is Python's (TorchDynamo)"},
    {"torch_compile_mode", "torch.compile is Python's (TorchDynamo)"},
    {"trackio_space_id", "trackio is a Python integration, not built here"},
    {"trackio_bucket_id", "trackio is a Python integration, not built here"},
    {"trackio_static_space_id", "trackio is a Python integration, not built here"},
    {"optim_target_modules",
     "it names the modules of GaLore's, APOLLO's and similar optimizers, not built here"},
    {"liger_kernel_config",
     "Liger's kernels beyond use_liger_kernel's fused linear cross-entropy are Triton's"},
    {"parallelism_config",
     "tensor, context and sequence parallelism are not built here (fsdp and deepspeed shard "
     "data-parallel runs)"},
};

}  // namespace

void TrainingArguments::validate_transformers_keys() const {
  const TrainingArguments defaults;
  for (const InertKey& key : kInertKeys) {
    const args::Spec& spec = args::lookup(key.name);
    const json value = spec.get(*this);
    const json allowed = spec.get(defaults);
    if (value == allowed) continue;
    throw InputError(fmt::format("argument {}: {} is not supported: {}; accepted only as {}",
                                 key.name, shown(value), key.why,
                                 allowed.is_object() && allowed.empty()  ? "null or {}"
                                 : allowed.is_array() && allowed.empty() ? "null"
                                                                         : shown(allowed)));
  }
  check(std::isfinite(label_smoothing_factor_) && label_smoothing_factor_ >= 0 &&
            label_smoothing_factor_ < 1,
        "label_smoothing_factor", num(label_smoothing_factor_), "0 <= epsilon < 1");
  check(label_smoothing_factor_ == 0 || !is_sft() || loss_type_.front() != "dft",
        "label_smoothing_factor", num(label_smoothing_factor_),
        "0 with loss_type dft: DFT weighs each token's own loss, with nothing to smooth");
  if (neftune_noise_alpha_) {
    check(std::isfinite(*neftune_noise_alpha_) && *neftune_noise_alpha_ > 0, "neftune_noise_alpha",
          num(*neftune_noise_alpha_), "a number > 0, or null");
  }
  for (const std::string& name : label_names_) {
    check(name == "labels" || name == "label", "label_names", shown(json(label_names_)),
          "[\"labels\"] or [\"label\"]: the batches here carry their labels under one key");
  }
  const std::vector<std::string> levels = {"debug", "info",     "warning",
                                           "error", "critical", "passive"};
  check_choice("log_level", log_level_, levels);
  check_choice("log_level_replica", log_level_replica_, levels);
  check_choice("include_num_input_tokens_seen", include_num_input_tokens_seen_,
               {"no", "all", "non_padding"});
  if (torch_empty_cache_steps_) {
    check(*torch_empty_cache_steps_ > 0, "torch_empty_cache_steps",
          std::to_string(*torch_empty_cache_steps_), "a positive integer, or null");
  }
  check(local_rank_ >= -1, "local_rank", std::to_string(local_rank_),
        "-1, or the process's rank on its node");
  for (const std::string& option : debug_) {
    check(option == "underflow_overflow", "debug", shown(option),
          option == "tpu_metrics_debug" ? "tpu_metrics_debug asks for a TPU; underflow_overflow"
                                        : "underflow_overflow, or empty");
  }
}

// The data-loading keys, as Transformers and PyTorch's DataLoader check them.
void TrainingArguments::validate_data_loading() const {
  check(dataloader_num_workers_ >= 0 && dataloader_num_workers_ <= 1024, "dataloader_num_workers",
        std::to_string(dataloader_num_workers_), "must be in 0..1024; 0 loads on the main thread");
  if (dataloader_prefetch_factor_) {
    // Transformers' own check, then PyTorch's.
    check(dataloader_num_workers_ > 0, "dataloader_prefetch_factor",
          std::to_string(*dataloader_prefetch_factor_),
          "only with dataloader_num_workers > 0 (data loaded in other workers), else null");
    check(*dataloader_prefetch_factor_ >= 1 && *dataloader_prefetch_factor_ <= 1024,
          "dataloader_prefetch_factor", std::to_string(*dataloader_prefetch_factor_),
          "must be in 1..1024, or null");
  }
  check(!dataloader_persistent_workers_ || dataloader_num_workers_ > 0,
        "dataloader_persistent_workers", "true", "only with dataloader_num_workers > 0");
  if (dataloader_multiprocessing_context_) {
    check_choice("dataloader_multiprocessing_context", *dataloader_multiprocessing_context_,
                 {"fork", "spawn", "forkserver"});
    check(dataloader_num_workers_ > 0, "dataloader_multiprocessing_context",
          shown(json(*dataloader_multiprocessing_context_)),
          "only with dataloader_num_workers > 0, else null");
  }
  if (train_sampling_strategy_ == "batch_rebalance") {
    throw InputError(
        "argument train_sampling_strategy: \"batch_rebalance\" is not supported: Transformers' "
        "BatchRebalanceSampler is not implemented here (allowed: random, sequential, "
        "group_by_length)");
  }
  check_choice("train_sampling_strategy", train_sampling_strategy_,
               {"random", "sequential", "group_by_length"});
  check(!length_column_name_.empty(), "length_column_name", "\"\"", "a column name");
  accelerator_config_plan();
  const int64_t steps = effective_accumulation_steps();
  check(steps >= 1 && steps <= kMaxCount, "accelerator_config",
        fmt::format("gradient_accumulation_kwargs num_steps {}", steps),
        "must be in 1..2147483647");
}

namespace {

// accelerator_config's gradient_accumulation_kwargs, as Accelerate's GradientAccumulationPlugin
// takes them: num_steps (with gradient_accumulation_steps 1), and the others at their defaults.
void read_accumulation_kwargs(const json& kwargs, int64_t accumulation_steps,
                              AcceleratorConfigPlan& plan) {
  if (!kwargs.is_object()) {
    throw InputError(fmt::format(
        "argument accelerator_config: gradient_accumulation_kwargs {} is not allowed (a JSON "
        "object: num_steps, adjust_scheduler, sync_with_dataloader, sync_each_batch)",
        shown(kwargs)));
  }
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "num_steps") {
      check(value.is_number_integer() && value.get<int64_t>() >= 1 &&
                value.get<int64_t>() <= kMaxCount,
            "accelerator_config", "gradient_accumulation_kwargs num_steps " + shown(value),
            "an integer in 1..2147483647");
      // (Equal is what the Trainer makes of it, Transformers' args.gradient_accumulation_steps
      // set to num_steps.)
      check(accumulation_steps == 1 || accumulation_steps == value, "accelerator_config",
            "gradient_accumulation_kwargs num_steps " + shown(value),
            fmt::format("only with gradient_accumulation_steps 1 (it is {}), as Transformers "
                        "does not know which one is meant",
                        accumulation_steps));
      plan.num_steps = value.get<int64_t>();
    } else if (key == "adjust_scheduler" || key == "sync_with_dataloader") {
      // The Trainer steps the schedule once per optimizer step and ends each epoch's last
      // window at the end of the data, which is what true means; Accelerate's default.
      check(value == json(true), "accelerator_config",
            fmt::format("gradient_accumulation_kwargs {} {}", key, shown(value)),
            "true (the default): the Trainer steps the schedule per optimizer step and ends "
            "an epoch's last window with its data");
    } else if (key == "sync_each_batch") {
      check(value == json(false), "accelerator_config",
            "gradient_accumulation_kwargs sync_each_batch " + shown(value),
            "false (the default): gradients are synchronised on each window's last batch");
    } else {
      throw InputError(fmt::format(
          "argument accelerator_config: gradient_accumulation_kwargs key {} is not allowed "
          "(num_steps, adjust_scheduler, sync_with_dataloader, sync_each_batch)",
          shown(json(key))));
    }
  }
}

}  // namespace

AcceleratorConfigPlan TrainingArguments::accelerator_config_plan() const {
  AcceleratorConfigPlan plan;
  const json& config = accelerator_config_;
  if (config.is_null()) return plan;
  if (!config.is_object()) {
    throw InputError(fmt::format(
        "argument accelerator_config: {} is not allowed (a JSON object of AcceleratorConfig's "
        "keys, e.g. {{\"split_batches\": true}})",
        shown(config)));
  }
  const std::vector<std::string> keys = {"split_batches",       "dispatch_batches",
                                         "even_batches",        "use_seedable_sampler",
                                         "non_blocking",        "gradient_accumulation_kwargs",
                                         "use_configured_state"};
  auto flag = [&](const std::string& key, bool fallback) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) {
      throw InputError(fmt::format(
          "argument accelerator_config: {} {} is not allowed (true or false)", key, shown(*it)));
    }
    return it->get<bool>();
  };
  for (const auto& [key, value] : config.items()) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    throw InputError(fmt::format(
        "argument accelerator_config: key {} is not allowed (AcceleratorConfig's keys: {})",
        shown(json(key)), fmt::join(keys, ", ")));
  }
  plan.split_batches = flag("split_batches", false);
  plan.even_batches = flag("even_batches", true);
  plan.use_seedable_sampler = flag("use_seedable_sampler", true);
  plan.non_blocking = flag("non_blocking", false);
  if (flag("dispatch_batches", false)) {
    throw InputError(
        "argument accelerator_config: dispatch_batches true is not supported: every process reads "
        "its own share of the one order all of them draw, which gives the batches process 0 "
        "would send; accepted only as null or false");
  }
  if (flag("use_configured_state", false)) {
    throw InputError(
        "argument accelerator_config: use_configured_state true is not supported: the Trainer "
        "makes the one Accelerator of the process, there is no state configured before it; "
        "accepted only as false");
  }
  check(plan.even_batches, "accelerator_config", "even_batches false",
        "true: a process with fewer batches would leave the others waiting in DDP's and "
        "gather_for_metrics' collectives (Accelerate needs join_uneven_inputs for it)");
  if (auto it = config.find("gradient_accumulation_kwargs"); it != config.end() && !it->is_null()) {
    read_accumulation_kwargs(*it, gradient_accumulation_steps_, plan);
  }
  return plan;
}

int64_t TrainingArguments::effective_accumulation_steps() const {
  const auto& config = accelerator_config_;
  if (!config.is_object()) return gradient_accumulation_steps_;
  auto it = config.find("gradient_accumulation_kwargs");
  if (it == config.end() || !it->is_object()) return gradient_accumulation_steps_;
  auto steps = it->find("num_steps");
  if (steps == it->end() || !steps->is_number_integer()) return gradient_accumulation_steps_;
  return steps->get<int64_t>();
}

}  // namespace trainer
