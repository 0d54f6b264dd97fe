// DeepSpeed's plugin (parse_deepspeed_plan, load_deepspeed_config) and the deepspeed argument: each
// stage's plan, each "auto" filled, the values a config sets of arguments not given, and the one
// line each mismatch or refusal is.
#include "lib/accelerate/deepspeed_plugin.h"

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "tests/test_util.h"
#include "trainer/training_args.h"

namespace trainer {
namespace deepspeed_plugin_test {

using json = nlohmann::ordered_json;

// TrainingArguments' defaults, none given; `given` overrides some, given.
std::map<std::string, DeepSpeedArgument> arguments(const json& given = json::object()) {
  std::map<std::string, DeepSpeedArgument> out = {{"per_device_train_batch_size", {8, false}},
                                                  {"gradient_accumulation_steps", {1, false}},
                                                  {"max_grad_norm", {1.0, false}},
                                                  {"learning_rate", {5e-5, false}},
                                                  {"adam_beta1", {0.9, false}},
                                                  {"adam_beta2", {0.999, false}},
                                                  {"adam_epsilon", {1e-8, false}},
                                                  {"weight_decay", {0.0, false}},
                                                  {"bf16", {false, false}},
                                                  {"fp16", {false, false}},
                                                  {"optim", {"adamw_torch_fused", false}},
                                                  {"lr_scheduler_type", {"linear", false}},
                                                  {"warmup_steps", {0, false}},
                                                  {"warmup_ratio", {0.0, false}},
                                                  {"max_steps", {-1, false}},
                                                  {"auto_find_batch_size", {false, false}}};
  for (const auto& [key, value] : given.items()) out[key] = {value, true};
  return out;
}

DeepSpeedPlan plan(const std::string& config, const json& given = json::object(),
                   int64_t world = 2) {
  return parse_deepspeed_plan(json::parse(config), arguments(given), [world] { return world; });
}

// The one line parse_deepspeed_plan throws.
std::string error(const std::string& config, const json& given = json::object()) {
  try {
    plan(config, given);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

json settings(const DeepSpeedPlan& p) {
  json out = json::object();
  for (const auto& [name, value] : p.settings) out[name] = value;
  return out;
}

// The configs of the tests below keep gradient_clipping "auto" unless they are about it.
const std::string kAuto = R"("gradient_clipping": "auto")";

TEST(DeepSpeedPlugin, EachStageIsItsShardingStrategy) {
  EXPECT_FALSE(plan("{" + kAuto + "}").fsdp);
  EXPECT_EQ(plan("{" + kAuto + "}").stage, 0);
  EXPECT_FALSE(plan(R"({"zero_optimization": {"stage": 0}, )" + kAuto + "}").fsdp);
  const auto one = plan(R"({"zero_optimization": {"stage": 1}, )" + kAuto + "}");
  ASSERT_TRUE(one.fsdp);
  EXPECT_EQ(one.fsdp->strategy, "shard_optimizer");
  EXPECT_FALSE(one.fsdp->auto_wrap);
  const auto two = plan(R"({"zero_optimization": {"stage": 2}, )" + kAuto + "}");
  ASSERT_TRUE(two.fsdp);
  EXPECT_EQ(two.fsdp->strategy, "shard_grad_op");
  EXPECT_FALSE(two.fsdp->auto_wrap);
  const auto three = plan(R"({"zero_optimization": {"stage": 3}, )" + kAuto + "}");
  ASSERT_TRUE(three.fsdp);
  EXPECT_EQ(three.fsdp->strategy, "full_shard");
  EXPECT_TRUE(three.fsdp->auto_wrap);
  EXPECT_FALSE(three.fsdp->offload);
  EXPECT_TRUE(three.settings.empty());
  // CPU offload is what a CPU run's state is already; the plan says it.
  const auto offload = plan(
      R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "pin_memory": true},
          "offload_optimizer": {"device": "none"}}, )" +
      kAuto + "}");
  EXPECT_TRUE(offload.fsdp->offload);
  EXPECT_TRUE(plan(R"({"zero_optimization": {"stage": 2, "cpu_offload": true}, )" + kAuto + "}")
                  .fsdp->offload);
}

TEST(DeepSpeedPlugin, AutoEverywhereTakesTheArgumentsAndSetsNothing) {
  const auto p = plan(R"({
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                              "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto",
      "warmup_max_lr": "auto", "warmup_num_steps": "auto", "total_num_steps": "auto",
      "warmup_type": "linear"}},
    "zero_optimization": {"stage": 3, "overlap_comm": true, "contiguous_gradients": true,
      "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
      "stage3_param_persistence_threshold": "auto", "sub_group_size": 1e9,
      "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
      "stage3_gather_16bit_weights_on_model_save": true},
    "steps_per_print": 2000, "wall_clock_breakdown": false})");
  EXPECT_EQ(p.stage, 3);
  EXPECT_TRUE(p.settings.empty()) << settings(p).dump();
}

TEST(DeepSpeedPlugin, ValuesSetTheArgumentsNotGiven) {
  const auto p = plan(R"({
    "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
    "train_batch_size": 16, "gradient_clipping": 0.5, "bf16": {"enabled": true},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.8, 0.95], "eps": 1e-6,
                                              "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3,
                                                 "warmup_num_steps": 5, "warmup_type": "linear"}}})");
  EXPECT_EQ(settings(p), json::parse(R"({"per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 2, "max_grad_norm": 0.5, "bf16": true,
    "learning_rate": 1e-3, "adam_beta1": 0.8, "adam_beta2": 0.95, "adam_epsilon": 1e-6,
    "weight_decay": 0.01, "lr_scheduler_type": "constant_with_warmup", "warmup_steps": 5})"));
  // The same values given as arguments: nothing to set.
  EXPECT_TRUE(plan(R"({"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 0.5})",
                   {{"per_device_train_batch_size", 4}, {"max_grad_norm", 0.5}})
                  .settings.empty());
  // DeepSpeed clips only where gradient_clipping says: left out, no clipping.
  EXPECT_EQ(settings(plan("{}")), json::parse(R"({"max_grad_norm": 0.0})"));
  EXPECT_TRUE(plan("{}", {{"max_grad_norm", 0.0}}).settings.empty());
  // fp16 in the config turns off a bf16 that was only a default (an SFTConfig's).
  auto sft = arguments();
  sft["bf16"] = {true, false};
  const auto fp16 = parse_deepspeed_plan(
      json::parse(R"({"fp16": {"enabled": true}, "gradient_clipping": "auto"})"), sft,
      [] { return int64_t{1}; });
  EXPECT_EQ(settings(fp16), json::parse(R"({"fp16": true, "bf16": false})"));
  // WarmupCosineLR is cosine; "Adam" is DeepSpeed's AdamW unless adam_w_mode is false.
  EXPECT_EQ(settings(plan(R"({"gradient_clipping": "auto",
      "optimizer": {"type": "Adam", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                    "weight_decay": "auto", "adam_w_mode": true, "torch_adam": true}},
      "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": "auto",
        "warmup_num_steps": "auto", "cos_min_ratio": 0, "warmup_type": "linear"}}})")),
            json::parse(R"({"lr_scheduler_type": "cosine"})"));
}

TEST(DeepSpeedPlugin, AValueThatDiffersFromAGivenArgumentIsOneLine) {
  EXPECT_EQ(error(R"({"gradient_clipping": 0.5})", {{"max_grad_norm", 1.0}}),
            "argument deepspeed: gradient_clipping 0.5 differs from max_grad_norm 1.0 (give "
            "\"auto\" or the same value)");
  EXPECT_EQ(error(R"({"train_micro_batch_size_per_gpu": 4, "gradient_clipping": "auto"})",
                  {{"per_device_train_batch_size", 8}}),
            "argument deepspeed: train_micro_batch_size_per_gpu 4 differs from "
            "per_device_train_batch_size 8 (give \"auto\" or the same value)");
  EXPECT_EQ(error(R"({"gradient_accumulation_steps": 4, "gradient_clipping": "auto"})",
                  {{"gradient_accumulation_steps", 2}}),
            "argument deepspeed: gradient_accumulation_steps 4 differs from "
            "gradient_accumulation_steps 2 (give \"auto\" or the same value)");
  EXPECT_EQ(error(R"({"bf16": {"enabled": true}, "gradient_clipping": "auto"})", {{"bf16", false}}),
            "argument deepspeed: bf16.enabled true differs from bf16 false (give \"auto\" or the "
            "same value)");
  EXPECT_EQ(error(R"({"fp16": {"enabled": false}, "gradient_clipping": "auto"})", {{"fp16", true}}),
            "argument deepspeed: fp16.enabled false differs from fp16 true (give \"auto\" or the "
            "same value)");
  EXPECT_EQ(error("{}", {{"max_grad_norm", 1.0}}),
            "argument deepspeed: gradient_clipping is left out (DeepSpeed's default 0: no "
            "clipping) while max_grad_norm is 1.0 (give \"auto\" or the same value)");
  // train_batch_size: world size x micro batch x accumulation (2 x 8 x 1 here).
  EXPECT_EQ(error(R"({"train_batch_size": 32, "gradient_clipping": "auto"})"),
            "argument deepspeed: train_batch_size 32 differs from the world size 2 x "
            "per_device_train_batch_size 8 x gradient_accumulation_steps 1 = 16 (give \"auto\" "
            "or the same value)");
  EXPECT_EQ(plan(R"({"train_batch_size": 16, "gradient_clipping": "auto"})").stage, 0);
  EXPECT_EQ(error(R"({"gradient_clipping": "auto", "optimizer": {"type": "AdamW", "params": {
                    "lr": 1e-3, "betas": "auto", "eps": "auto", "weight_decay": "auto"}}})",
                  {{"learning_rate", 1e-4}}),
            "argument deepspeed: optimizer.params.lr 0.001 differs from learning_rate 0.0001 "
            "(give \"auto\" or the same value)");
  EXPECT_EQ(error(R"({"gradient_clipping": "auto", "optimizer": {"type": "AdamW", "params": {
                    "lr": "auto", "betas": [0.9, 0.95], "eps": "auto", "weight_decay": "auto"}}})",
                  {{"adam_beta2", 0.999}}),
            "argument deepspeed: optimizer.params.betas [0.9,0.95] differs from "
            "adam_beta1+adam_beta2 [0.9,0.999] (give \"auto\" or the same values)");
  EXPECT_EQ(error(R"({"gradient_clipping": "auto", "optimizer": {"type": "AdamW", "params": {
                    "lr": 1e-3, "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
                    "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 2e-3,
                    "warmup_type": "linear"}}})"),
            "argument deepspeed: scheduler.params.warmup_max_lr 0.002 differs from "
            "optimizer.params.lr 0.001 (both set learning_rate)");
  EXPECT_EQ(
      error(R"({"gradient_clipping": "auto", "optimizer": {"type": "AdamW"}})", {{"optim", "sgd"}}),
      "argument deepspeed: optimizer.type \"AdamW\" differs from optim \"sgd\" (give the "
      "same, or leave out optim)");
  EXPECT_EQ(error(R"({"gradient_clipping": "auto", "scheduler": {"type": "WarmupLR"}})",
                  {{"lr_scheduler_type", "linear"}}),
            "argument deepspeed: scheduler.type \"WarmupLR\" differs from lr_scheduler_type "
            "\"linear\" (give the same, or leave out lr_scheduler_type)");
}

TEST(DeepSpeedPlugin, WhatIsNotBuiltHereIsOneLineNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"zero_optimization": {"stage": 4}})",
       "argument deepspeed: zero_optimization.stage 4 is not allowed (0, 1, 2 or 3)"},
      {R"({"zero_optimization": {"stage": "auto"}})",
       "argument deepspeed: zero_optimization.stage \"auto\" is not allowed (0, 1, 2 or 3)"},
      {R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme",
          "nvme_path": "/local_nvme"}}})",
       "argument deepspeed: zero_optimization.offload_param.device \"nvme\" is not allowed (cpu "
       "or none: offloading to NVMe is not built)"},
      {R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}})",
       "argument deepspeed: zero_optimization.offload_optimizer.device \"nvme\" is not allowed "
       "(cpu or none: offloading to NVMe is not built)"},
      {R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true}})",
       "argument deepspeed: zero_optimization.zero_quantized_weights true is not allowed (false: "
       "ZeRO++ and MiCS are not built)"},
      {R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}})",
       "argument deepspeed: zero_optimization.zero_hpz_partition_size 8 is not allowed (1: "
       "ZeRO++'s secondary partitions within a node are not built)"},
      {R"({"zero_optimization": {"stage": 3, "mics_shard_size": 8}})",
       "argument deepspeed: zero_optimization.mics_shard_size 8 is not allowed (-1: MiCS is not "
       "built)"},
      {R"({"zero_optimization": {"stage": 2, "bogus": 1}})",
       "argument deepspeed: zero_optimization.bogus is not a key it takes ("},
      {R"({"optimizer": {"type": "Lamb", "params": {"lr": "auto"}}})",
       "argument deepspeed: optimizer.type \"Lamb\" is not allowed (AdamW or Adam: the optimizers "
       "sharded here are the AdamWs; leave out the optimizer block to train with the optim "
       "argument's)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}})",
       "argument deepspeed: optimizer.params.betas is missing (DeepSpeed would use its "
       "optimizer's default; give \"auto\" or a value)"},
      {R"({"optimizer": {"type": "Adam", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
          "weight_decay": "auto", "adam_w_mode": false}}})",
       "argument deepspeed: optimizer.params.adam_w_mode false is not allowed (true: the AdamW "
       "built here)"},
      {R"({"scheduler": {"type": "OneCycle"}})",
       "argument deepspeed: scheduler.type \"OneCycle\" is not allowed (WarmupLR, WarmupDecayLR "
       "or WarmupCosineLR: Transformers' constant_with_warmup, linear and cosine; leave out the "
       "scheduler block to use lr_scheduler_type)"},
      {R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": "auto"}}})",
       "argument deepspeed: scheduler.params.warmup_type (left out: \"log\") is not allowed "
       "(\"linear\": DeepSpeed's default \"log\" warms up logarithmically, not built here)"},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"warmup_type": "linear"}}})",
       "argument deepspeed: scheduler.params.cos_min_ratio (left out: 0.0001) is not allowed (0: "
       "Transformers' cosine decays to 0; DeepSpeed's default is 0.0001)"},
      {R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_type": "linear",
          "total_num_steps": 100}}})",
       "argument deepspeed: scheduler.params.total_num_steps 100 differs from the run's steps "
       "(give \"auto\", or max_steps 100)"},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear",
          "warmup_min_lr": 1e-6}}})",
       "argument deepspeed: scheduler.params.warmup_min_lr 1e-06 is not allowed (0 or \"auto\": "
       "warmup starts at 0)"},
      {R"({"fp16": {"enabled": true}, "zero_optimization": {"stage": 2}})",
       "argument deepspeed: fp16 with ZeRO stage 2 is not built (fp16's loss scaling would need "
       "every process's overflow check of the sharded gradients): use bf16"},
      {R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})",
       "argument deepspeed: fp16.enabled and bf16.enabled are both true; choose one"},
      {R"({"fp16": {"enabled": true, "loss_scale": 128}})",
       "argument deepspeed: fp16.loss_scale 128 is not allowed (0: dynamic loss scaling, the "
       "GradScaler's; a static scale is not built)"},
      {R"({"train_micro_batch_size_per_gpu": 0})",
       "argument deepspeed: train_micro_batch_size_per_gpu 0 is not allowed (an integer >= 1 or "
       "\"auto\")"},
      {R"({"gradient_clipping": "none"})",
       "argument deepspeed: gradient_clipping \"none\" is not allowed (a number >= 0 or "
       "\"auto\")"},
      {R"({"tensorboard": {"enabled": true, "output_path": "logs"}})",
       "argument deepspeed: tensorboard {\"enabled\":true,\"output_path\":\"logs\"} is not "
       "allowed ({\"enabled\": false}: not built)"},
      {R"({"communication_data_type": "bf16"})",
       "argument deepspeed: communication_data_type \"bf16\" is not allowed (null or \"fp32\": "
       "the gradients are reduced in float32)"},
      {R"({"zero_optimization": 2})",
       "argument deepspeed: zero_optimization 2 is not allowed (a JSON object)"},
  };
  for (const auto& [config, message] : cases) {
    const std::string e = error(config, {{"max_grad_norm", 0.0}});
    EXPECT_EQ(e.substr(0, message.size()), message) << config;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(DeepSpeedPlugin, HarmlessKeysAreSilentAndUnknownTopLevelKeysAWarning) {
  ::testing::internal::CaptureStderr();
  const auto p = plan(R"({"steps_per_print": 10, "wall_clock_breakdown": false,
    "zero_allow_untested_optimizer": true, "tensorboard": {"enabled": false},
    "flops_profiler": {"enabled": false}, "zero_optimization": {"stage": 1,
    "allgather_bucket_size": 5e8, "reduce_bucket_size": 5e8, "overlap_comm": false}, )" +
                      kAuto + "}");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(p.stage, 1);
  ::testing::internal::CaptureStderr();
  plan(R"({"my_note": "x", )" + kAuto + "}");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "trainer: warning: argument deepspeed: my_note is not a key DeepSpeed reads; ignored, "
            "as DeepSpeed ignores it\n");
}

TEST(DeepSpeedPlugin, AFileIsReadAndABadOneIsOneLine) {
  testing::TempDir tmp;
  const std::string good = tmp.file("ds.json"), corrupt = tmp.file("bad.json");
  base::write_file_atomic(good, R"({"zero_optimization": {"stage": 2}})");
  base::write_file_atomic(corrupt, R"({"zero_optimization": {"stage": 2})");
  EXPECT_EQ(load_deepspeed_config(good), json::parse(R"({"zero_optimization": {"stage": 2}})"));
  EXPECT_EQ(load_deepspeed_config(json::parse(R"({"a": 1})")), json::parse(R"({"a": 1})"));
  auto message = [](const json& deepspeed) {
    try {
      load_deepspeed_config(deepspeed);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message(corrupt).rfind("argument deepspeed: " + corrupt + " is not valid JSON: ", 0),
            0u)
      << message(corrupt);
  EXPECT_EQ(message(tmp.file("missing.json")).rfind("argument deepspeed: ", 0), 0u);
  EXPECT_NE(message(tmp.file("missing.json")).find(tmp.file("missing.json")), std::string::npos);
  base::write_file_atomic(corrupt, "[1]");
  EXPECT_EQ(message(corrupt),
            "argument deepspeed: " + corrupt + " holds an array, expected a JSON object");
}

// The deepspeed argument: the config's values take effect in the arguments, its stage is
// fsdp_plan(), and fsdp beside it is refused.
TEST(DeepSpeedPlugin, TheArgumentSetsTheArgumentsAndThePlan) {
  const auto args = TrainingArguments::from_json_text(R"({"deepspeed": {
      "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
      "gradient_clipping": 0.5, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 2}}})");
  EXPECT_EQ(args.per_device_train_batch_size(), 4);
  EXPECT_EQ(args.gradient_accumulation_steps(), 2);
  EXPECT_EQ(args.max_grad_norm(), 0.5);
  EXPECT_TRUE(args.bf16());
  ASSERT_TRUE(args.fsdp_plan());
  EXPECT_EQ(args.fsdp_plan()->strategy, "shard_grad_op");
  // training_args.json keeps the config as given.
  EXPECT_NE(args.to_json().find("\"deepspeed\": {"), std::string::npos);
  // A command-line value that differs is a mismatch; one that agrees is fine.
  testing::TempDir tmp;
  const std::string config = tmp.file("args.json"), ds = tmp.file("ds.json");
  base::write_file_atomic(ds, R"({"gradient_accumulation_steps": 2, "gradient_clipping": "auto",
                             "zero_optimization": {"stage": 3}})");
  base::write_file_atomic(config, "{\"deepspeed\": \"" + ds + "\"}");
  EXPECT_EQ(TrainingArguments::parse(config, {}).gradient_accumulation_steps(), 2);
  EXPECT_EQ(TrainingArguments::parse(config, {{"gradient_accumulation_steps", "2"}})
                .fsdp_plan()
                ->strategy,
            "full_shard");
  try {
    TrainingArguments::parse(config, {{"gradient_accumulation_steps", "3"}});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "argument deepspeed: gradient_accumulation_steps 2 differs from "
                 "gradient_accumulation_steps 3 (give \"auto\" or the same value)");
  }
  // Another config on the command line undoes the first one's settings.
  const std::string other = tmp.file("other.json");
  base::write_file_atomic(other, R"({"gradient_clipping": "auto"})");
  const auto replaced = TrainingArguments::parse(config, {{"deepspeed", other}});
  EXPECT_EQ(replaced.gradient_accumulation_steps(), 1);
  EXPECT_FALSE(replaced.fsdp_plan());
  // The object inline on the command line.
  EXPECT_EQ(
      TrainingArguments::parse(
          "", {{"deepspeed", R"({"zero_optimization": {"stage": 1}, "gradient_clipping": 1})"}})
          .fsdp_plan()
          ->strategy,
      "shard_optimizer");
  try {
    TrainingArguments::parse(config, {{"fsdp", "shard_grad_op"}});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "argument deepspeed: not with fsdp \"shard_grad_op\" (zero_optimization.stage "
                 "chooses the sharding; leave out fsdp)");
  }
  EXPECT_TRUE(TrainingArguments::parse(config, {{"fsdp", "no_shard"}}).fsdp_plan());
  try {
    TrainingArguments::parse("", {{"deepspeed", "3"}});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind("argument deepspeed: cannot open DeepSpeed config 3: ", 0), 0u)
        << e.what();
  }
}

}  // namespace deepspeed_plugin_test
}  // namespace trainer
