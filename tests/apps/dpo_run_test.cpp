// `trainer dpo` against TRL 1.16's DPOTrainer (tests/reference/scripts/dpo_trl_reference.py) on the
// same tiny models, preference pairs and order, fp32: each step's loss, gradient norm and every
// metric TRL logs (rewards/*, logps/*, logits/*, entropy, mean_token_accuracy) within relative
// 1e-4, num_tokens exactly, for each loss, plain, conversational and implicit-prompt data, LoRA,
// precomputed reference log-probabilities, accumulation, keep_end truncation and evaluation, on
// one process and (some) on two; and the runs' folders as Transformers and PEFT read them.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace trainer::dpo_run_test {
namespace {

using json = nlohmann::ordered_json;
using testing::run;

struct Case {
  std::string name, model, train, extra;
  bool two_processes = false;  // also compared on two processes
};

// A case per path: ipo, hinge and robust alone (cases once) run what mixed (sigmoid + ipo),
// js_divergence (ipo + hinge) and forward_kl (robust + exo_pair) run; accumulation and keep_end
// truncation, which do not meet, run together.
const Case kCases[] = {
    {"sigmoid_conv", "qwen3", "pref_conv", "", true},
    {"sigmoid_plain", "llama", "pref_plain", ""},
    {"implicit", "qwen3", "pref_implicit", ""},
    {"mixed", "qwen3", "pref_conv", "--loss_type sigmoid,ipo --loss_weights 1.0,0.5"},
    {"lora", "qwen3", "pref_conv",
     "--use_peft true --lora_r 8 --lora_alpha 16 --lora_dropout 0 --learning_rate 5e-3", true},
    {"precompute", "qwen3", "pref_conv", "--precompute_ref_log_probs true", true},
    {"accum_keep_end", "qwen3", "pref_conv",
     "--per_device_train_batch_size 1 --gradient_accumulation_steps 2 --max_length 48"
     " --truncation_mode keep_end"},
    {"eval", "qwen3", "pref_conv",
     "--validation_file {fixtures}/data/pref_eval.jsonl --eval_strategy steps --eval_steps 3",
     true},
    {"all_losses", "qwen3", "pref_conv",
     "--loss_type exo_pair,nca_pair,bco_pair,sppo_hard,aot,aot_unpaired,apo_zero,apo_down,"
     "discopop,sft,sigmoid_norm --label_smoothing 0.1"},
    {"alpha_ld_wpo", "qwen3", "pref_conv",
     "--loss_type sigmoid,sigmoid_norm --f_divergence_type alpha_divergence"
     " --f_alpha_divergence_coef 0.5 --ld_alpha 0.5 --use_weighting true"},
    {"forward_kl", "qwen3", "pref_conv",
     "--loss_type robust,exo_pair --label_smoothing 0.1 --f_divergence_type forward_kl"},
    {"js_divergence", "llama", "pref_plain",
     "--loss_type ipo,hinge --f_divergence_type js_divergence"},
};

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// TRL's run of `c` on `processes` processes (dpo_trl_<case>_np<processes> of
// tests/reference/references).
json reference(const Case& c, int processes) {
  const std::string dir =
      testing::reference_dir("dpo_trl_" + c.name + "_np" + std::to_string(processes));
  if (dir.empty()) return json();
  std::ifstream in(dir + "/reference.json");
  return json::parse(in);
}

// Our run of `c`: its trainer_state.json.
json ours(const Case& c, const std::string& fixtures, int processes, const std::string& out,
          const std::string& more = "") {
  // The reference script's COMMON settings, but those the case sets itself.
  std::string defaults;
  for (const char* option : {"--learning_rate 1e-3", "--per_device_train_batch_size 2",
                             "--gradient_accumulation_steps 1", "--max_length 1024"}) {
    const std::string text = option;
    if (c.extra.find(text.substr(0, text.find(' ') + 1)) == std::string::npos)
      defaults += " " + text;
  }
  const std::string arguments =
      "--model_name_or_path " + (c.model.front() == '/' ? c.model : fixtures + "/" + c.model) +
      " --train_file " + fixtures + "/data/" + c.train +
      ".jsonl --use_cpu true --bf16 false --gradient_checkpointing false" +
      " --logging_steps 1 --seed 42 --lr_scheduler_type linear --warmup_steps 0" +
      " --per_device_eval_batch_size 4 --max_steps 6 --save_strategy no --report_to none" +
      " --disable_tqdm true" + defaults + " " + replaced(c.extra, "{fixtures}", fixtures) + " " +
      more + " --output_dir " + out;
  const std::string command =
      processes == 1 ? "OMP_NUM_THREADS=1 " + testing::kTrainerBin + " dpo " + arguments
                     : testing::launch("--nproc-per-node " + std::to_string(processes) + " " +
                                       testing::kTrainerBin + " dpo " + arguments);
  auto r = run(command + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(out + "/trainer_state.json");
  if (!in) return json();
  return json::parse(in);
}

const char* const kStepKeys[] = {"loss",
                                 "grad_norm",
                                 "entropy",
                                 "logits/chosen",
                                 "logits/rejected",
                                 "mean_token_accuracy",
                                 "rewards/chosen",
                                 "rewards/rejected",
                                 "rewards/accuracies",
                                 "rewards/margins",
                                 "logps/chosen",
                                 "logps/rejected"};

// Relative 1e-4, with room for our loss's 4 decimals and for the rewards near 0: a reward is beta
// times the difference of two log-probabilities of about -150, which float32 holds to about 1e-5
// each (the margin the difference of two rewards).
void expect_near(const json& ours, const json& want, const std::string& key,
                 const std::string& where) {
  ASSERT_TRUE(ours.contains(key)) << where << ": no " << key << " in " << ours.dump();
  const double a = ours[key].get<double>(), b = want[key].get<double>();
  const double slack = key.find("loss") != std::string::npos       ? 5e-5
                       : key.find("rewards/") != std::string::npos ? 1e-5
                                                                   : 2e-6;
  EXPECT_NEAR(a, b, 1e-4 * std::abs(b) + slack) << where << ", " << key;
}

void expect_trl_steps(const json& state, const json& ref, const std::string& what) {
  std::vector<json> steps, want_steps, evals, want_evals;
  for (const auto& e : state["log_history"]) {
    if (e.contains("loss")) steps.push_back(e);
    if (e.contains("eval_loss")) evals.push_back(e);
  }
  for (const auto& e : ref["logs"]) {
    if (e.contains("loss")) want_steps.push_back(e);
    if (e.contains("eval_loss")) want_evals.push_back(e);
  }
  ASSERT_EQ(steps.size(), want_steps.size()) << what;
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string where = what + ", step " + std::to_string(i + 1);
    for (const char* key : kStepKeys) expect_near(steps[i], want_steps[i], key, where);
    EXPECT_EQ(steps[i]["num_tokens"].get<double>(), want_steps[i]["num_tokens"].get<double>())
        << where;
  }
  ASSERT_EQ(evals.size(), want_evals.size()) << what;
  for (size_t i = 0; i < evals.size(); ++i) {
    const std::string where = what + ", evaluation " + std::to_string(i + 1);
    for (const char* key : kStepKeys) {
      if (std::string(key) != "grad_norm")
        expect_near(evals[i], want_evals[i], "eval_" + std::string(key), where);
    }
    EXPECT_FALSE(evals[i].contains("eval_perplexity")) << where;
  }
}

class DpoAgainstTrl : public ::testing::TestWithParam<int> {};

TEST_P(DpoAgainstTrl, EachStepsLossAndMetricsEqualTrls) {
  const std::string fixtures = testing::sft_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  const int processes = GetParam();
  for (const Case& c : kCases) {
    if (processes == 2 && !c.two_processes) continue;
    const json ref = reference(c, processes);
    ASSERT_FALSE(ref.is_null()) << c.name;
    testing::TempDir tmp;
    const json state = ours(c, fixtures, processes, tmp.file("out"));
    expect_trl_steps(state, ref, c.name + " on " + std::to_string(processes));
  }
}

INSTANTIATE_TEST_SUITE_P(Processes, DpoAgainstTrl, ::testing::Values(1, 2));

// A mixture of experts (hf_families.py's Qwen3-MoE, its router loss on: dpo_trl_moe_np1): TRL's
// router_aux_loss_coef from the config, the policy's weighted load-balancing loss over the chosen
// and rejected rows added, each step's loss, metrics and aux_loss as TRL's.
TEST(DpoRun, MixtureOfExpertsRouterLossEqualsTrls) {
  const std::string fixtures = testing::sft_fixtures_dir();
  const std::string families = testing::reference_dir("hf_families");
  ASSERT_FALSE(fixtures.empty());
  ASSERT_FALSE(families.empty());
  const std::string dir = testing::reference_dir("dpo_trl_moe_np1");
  ASSERT_FALSE(dir.empty());
  std::ifstream in(dir + "/reference.json");
  const json ref = json::parse(in);
  testing::TempDir tmp;
  const Case c{"moe", families + "/qwen3_moe", "pref_plain", ""};
  const json state = ours(c, fixtures, 1, tmp.file("out"));
  expect_trl_steps(state, ref, "moe");
  size_t step = 0;
  for (const auto& e : state["log_history"]) {
    if (!e.contains("loss")) continue;
    const json& want = ref["logs"][step++];
    expect_near(e, want, "aux_loss", "moe, step " + std::to_string(step));
  }
}

// `trainer dpo` on the conversational pairs with `extra`, into tmp/`out`: its output.
testing::ProcessResult dpo(const std::string& fixtures, testing::TempDir& tmp,
                           const std::string& out, const std::string& extra, int processes = 1,
                           const std::string& train = "") {
  const std::string arguments =
      "--model_name_or_path " + fixtures + "/qwen3 --train_file " +
      (train.empty() ? fixtures + "/data/pref_conv.jsonl" : train) +
      " --bf16 false --gradient_checkpointing false" +
      (extra.find("--learning_rate") == std::string::npos ? " --learning_rate 1e-3" : "") +
      " --logging_steps 1 --disable_tqdm true"
      " --per_device_train_batch_size 2 --output_dir " +
      tmp.file(out) + " " + extra;
  if (processes == 1)
    return run("OMP_NUM_THREADS=1 " + testing::kTrainerBin + " dpo " + arguments + " 2>&1");
  return run(testing::launch("--nproc-per-node " + std::to_string(processes) + " " +
                             testing::kTrainerBin + " dpo " + arguments) +
             " 2>&1");
}

// Each step's log of tmp/`out` (loss, gradient norm, the metrics), as text.
std::vector<json> logged_steps(testing::TempDir& tmp, const std::string& out) {
  std::vector<json> steps;
  const std::string text = testing::slurp(tmp.file(out) + "/trainer_state.json");
  if (text.empty()) return steps;
  const json state = json::parse(text);  // held: the loop's range is a reference into it
  for (const auto& e : state["log_history"])
    if (e.contains("loss")) steps.push_back(e);
  return steps;
}

// The folder of a full DPO run is a Transformers model folder (its weights load and score), and
// of a LoRA run a PEFT adapter (8 tensors, the B matrices trained); `trainer chat` answers from
// both; the rewards and log-probabilities reach the table and TensorBoard.
TEST(DpoRun, TheFoldersLoadInTransformersAndPeftAndChatAnswers) {
  const std::string fixtures = testing::sft_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  testing::TempDir tmp;
  auto full = dpo(
      fixtures, tmp, "full",
      "--max_steps 3 --save_strategy no --report_to tensorboard --logging_dir " + tmp.file("tb"));
  ASSERT_EQ(full.exit_code, 0) << full.out;
  EXPECT_NE(full.out.find("'rewards/margins': "), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("Chat sample (trainer generate " + tmp.file("full") + " --chat"),
            std::string::npos)
      << full.out;
  std::string events;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.file("tb")))
    events += testing::slurp(entry.path().string());
  for (const char* tag :
       {"train/rewards/chosen", "train/rewards/accuracies", "train/logps/rejected"})
    EXPECT_NE(events.find(tag), std::string::npos) << tag;
  auto loads = testing::transformers_loads(tmp.file("full"));
  ASSERT_EQ(loads.exit_code, 0) << loads.out;
  EXPECT_NE(loads.out.find("True"), std::string::npos) << loads.out;

  auto lora = dpo(fixtures, tmp, "lora",
                  "--max_steps 3 --save_strategy no --use_peft true --lora_r 4 --lora_alpha 8"
                  " --learning_rate 1e-2");
  ASSERT_EQ(lora.exit_code, 0) << lora.out;
  auto peft =
      run(std::string(TRAINER_PYTHON) +
          " -c \"import sys, torch; from transformers import AutoModelForCausalLM;"
          " from peft import PeftModel; from safetensors import safe_open;"
          " m = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(sys.argv[1]),"
          " sys.argv[2]); f = safe_open(sys.argv[2] + '/adapter_model.safetensors', 'pt');"
          " print(len(list(f.keys())), sum(p.abs().sum().item() > 0 for n, p in"
          " m.named_parameters() if 'lora_B' in n))\" " +
          fixtures + "/qwen3 " + tmp.file("lora") + " 2>&1");
  ASSERT_EQ(peft.exit_code, 0) << peft.out;
  EXPECT_NE(peft.out.find("8 4"), std::string::npos) << peft.out;
  for (const char* folder : {"full", "lora"}) {
    auto chat = run("echo 'Tell me a fortune.' | " + testing::kTrainerBin + " chat " +
                    tmp.file(folder) + " --max_new_tokens 8 2>&1");
    EXPECT_EQ(chat.exit_code, 0) << folder << ": " << chat.out;
    EXPECT_FALSE(chat.out.empty()) << folder;
  }
}

// Precomputed reference log-probabilities train as the reference model does (each step's loss
// and rewards within float32's rounding of the padding), and a run stopped at a checkpoint and
// resumed, with them, ends exactly as the run that was never stopped.
TEST(DpoRun, PrecomputedReferenceEqualsTheModelAndResumesExactly) {
  const std::string fixtures = testing::sft_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  testing::TempDir tmp;
  const std::string common = "--lr_scheduler_type constant --save_strategy steps --save_steps 2";
  auto plain = dpo(fixtures, tmp, "plain", common + " --max_steps 4");
  auto whole =
      dpo(fixtures, tmp, "whole", common + " --max_steps 4 --precompute_ref_log_probs true");
  auto first =
      dpo(fixtures, tmp, "resumed", common + " --max_steps 2 --precompute_ref_log_probs true");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  ASSERT_EQ(whole.exit_code, 0) << whole.out;
  ASSERT_EQ(first.exit_code, 0) << first.out;
  auto second = dpo(fixtures, tmp, "resumed",
                    common +
                        " --max_steps 4 --precompute_ref_log_probs true"
                        " --resume_from_checkpoint " +
                        tmp.file("resumed/checkpoint-2"));
  ASSERT_EQ(second.exit_code, 0) << second.out;
  const auto a = logged_steps(tmp, "plain"), b = logged_steps(tmp, "whole"),
             c = logged_steps(tmp, "resumed");
  ASSERT_EQ(a.size(), 4u) << plain.out;
  ASSERT_EQ(b.size(), 4u);
  ASSERT_EQ(c.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    for (const char* key : {"loss", "rewards/chosen", "rewards/margins", "logps/chosen"}) {
      const double x = a[i][key].get<double>(), y = b[i][key].get<double>();
      EXPECT_NEAR(x, y, 1e-5 * std::abs(x) + 2e-6) << "step " << i + 1 << ", " << key;
    }
    EXPECT_EQ(c[i].dump(), b[i].dump()) << "step " << i + 1;
  }
  EXPECT_EQ(testing::slurp(tmp.file("resumed/model.safetensors")),
            testing::slurp(tmp.file("whole/model.safetensors")));
}

// On two processes, full_shard (ZeRO-3) and shard_grad_op (ZeRO-2) train as DDP does, with the
// frozen reference copy, with precomputed log-probabilities, and under LoRA.
TEST(DpoRun, ShardedModesTrainAsDdpOnTwoProcesses) {
  const std::string fixtures = testing::sft_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  testing::TempDir tmp;
  const std::string common = "--max_steps 3 --save_strategy no --gradient_accumulation_steps 2";
  auto ddp = dpo(fixtures, tmp, "ddp", common, 2);
  auto zero3 = dpo(fixtures, tmp, "zero3", common + " --fsdp full_shard", 2);
  auto zero2 = dpo(fixtures, tmp, "zero2",
                   common + " --fsdp shard_grad_op --precompute_ref_log_probs true", 2);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.out;
  ASSERT_EQ(zero3.exit_code, 0) << zero3.out;
  ASSERT_EQ(zero2.exit_code, 0) << zero2.out;
  // Under LoRA, the reference is the sharded model itself with its adapters off.
  const std::string lora = " --use_peft true --lora_r 4 --lora_alpha 8 --learning_rate 1e-2";
  auto ddp_lora = dpo(fixtures, tmp, "ddp_lora", common + lora, 2);
  auto zero3_lora = dpo(fixtures, tmp, "zero3_lora", common + lora + " --fsdp full_shard", 2);
  ASSERT_EQ(ddp_lora.exit_code, 0) << ddp_lora.out;
  ASSERT_EQ(zero3_lora.exit_code, 0) << zero3_lora.out;
  for (const auto& [base, run_name] : {std::pair{"ddp", "zero3"}, std::pair{"ddp", "zero2"},
                                       std::pair{"ddp_lora", "zero3_lora"}}) {
    const auto a = logged_steps(tmp, base);
    ASSERT_EQ(a.size(), 3u) << base;
    const auto b = logged_steps(tmp, run_name);
    ASSERT_EQ(b.size(), 3u) << run_name;
    for (size_t i = 0; i < 3; ++i) {
      for (const char* key : {"loss", "grad_norm", "rewards/margins", "logps/rejected"}) {
        const double x = a[i][key].get<double>(), y = b[i][key].get<double>();
        EXPECT_NEAR(x, y, 1e-4 * std::abs(x) + 5e-5)
            << run_name << ", step " << i + 1 << ", " << key;
      }
    }
  }
}

// Bad input: one line, exit 2, naming the row or the argument.
TEST(DpoRun, BadInputIsOneLineAndExitTwo) {
  const std::string fixtures = testing::sft_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  testing::TempDir tmp;
  std::ofstream(tmp.file("no_rejected.jsonl"))
      << "{\"prompt\": \"Q?\", \"chosen\": \"yes\", \"rejected\": \"no\"}\n"
         "{\"prompt\": \"Q?\", \"chosen\": \"yes\"}\n";
  struct Bad {
    std::string extra, line, train{};
  };
  const Bad cases[] = {
      {"", "row 2", tmp.file("no_rejected.jsonl")},
      {"--loss_type sigmoid,ipo --loss_weights 1.0",
       "argument loss_weights: 1 weight for 2 loss types (give one weight per loss_type)"},
      {"--sync_ref_model true", "argument sync_ref_model: true is not allowed"},
      {"--packing true",
       "argument packing: an SFTConfig argument (TRL's); only `trainer sft` takes it"},
      {"--beta 0", "argument beta: 0.0 is not allowed (a number > 0)", ""},
  };
  for (const Bad& c : cases) {
    auto r = dpo(fixtures, tmp, "bad", "--max_steps 1 " + c.extra, 1, c.train);
    EXPECT_EQ(r.exit_code, 2) << c.extra << ": " << r.out;
    EXPECT_NE(r.out.find(c.line), std::string::npos) << c.extra << ": " << r.out;
    EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  }
  auto train = run(testing::kTrainerBin + " train --beta 0.2 2>&1");
  EXPECT_EQ(train.exit_code, 2) << train.out;
  EXPECT_NE(train.out.find("argument beta: a DPOConfig argument (TRL's); only `trainer dpo` "
                           "takes it"),
            std::string::npos)
      << train.out;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("bad")));
}

}  // namespace
}  // namespace trainer::dpo_run_test
