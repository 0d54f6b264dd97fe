// `trainer dpo` against TRL 1.16's DPOTrainer (scripts/reference/dpo_trl_reference.py) on the
// same tiny models, preference pairs and order, fp32: each step's loss, gradient norm and every
// metric TRL logs (rewards/*, logps/*, logits/*, entropy, mean_token_accuracy) within relative
// 1e-4, num_tokens exactly, for each loss, plain, conversational and implicit-prompt data, LoRA,
// precomputed reference log-probabilities, accumulation, keep_end truncation and evaluation, on
// one process and (some) on two; and the runs' folders as Transformers and PEFT read them.
#include <cmath>
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

const Case kCases[] = {
    {"sigmoid_conv", "qwen3", "pref_conv", "", true},
    {"sigmoid_plain", "llama", "pref_plain", ""},
    {"implicit", "qwen3", "pref_implicit", ""},
    {"ipo", "qwen3", "pref_conv", "--loss_type ipo"},
    {"hinge", "qwen3", "pref_conv", "--loss_type hinge"},
    {"robust", "qwen3", "pref_conv", "--loss_type robust --label_smoothing 0.1"},
    {"mixed", "qwen3", "pref_conv", "--loss_type sigmoid,ipo --loss_weights 1.0,0.5"},
    {"lora", "qwen3", "pref_conv",
     "--use_peft true --lora_r 8 --lora_alpha 16 --lora_dropout 0 --learning_rate 5e-3", true},
    {"precompute", "qwen3", "pref_conv", "--precompute_ref_log_probs true", true},
    {"accum", "qwen3", "pref_conv",
     "--per_device_train_batch_size 1 --gradient_accumulation_steps 2"},
    {"keep_end", "qwen3", "pref_conv", "--max_length 48 --truncation_mode keep_end"},
    {"eval", "qwen3", "pref_conv",
     "--validation_file {fixtures}/data/pref_eval.jsonl --eval_strategy steps --eval_steps 3",
     true},
};

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// TRL's run of `c` on `processes` processes, cached.
json reference(const Case& c, const std::string& fixtures, int processes) {
  const std::string script = std::string(SOURCE_DIR) + "/scripts/reference/dpo_trl_reference.py";
  const std::string launcher = processes == 1
                                   ? std::string(TRAINER_PYTHON) + " "
                                   : testing::torchrun_path() + " --standalone --nproc_per_node " +
                                         std::to_string(processes) + " ";
  const std::string dir = testing::cached_reference(
      "dpo_trl_" + c.name + "_np" + std::to_string(processes),
      "mkdir -p {out} && OMP_NUM_THREADS=1 " + launcher + script + " --case " + c.name +
          " --fixtures " + fixtures + " --out {out}/reference.json > {out}/log.txt 2>&1");
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
      "--model_name_or_path " + fixtures + "/" + c.model + " --train_file " + fixtures + "/data/" +
      c.train + ".jsonl --use_cpu true --bf16 false --gradient_checkpointing false" +
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
  if (fixtures.empty()) GTEST_SKIP() << "TRAINER_PYTHON has no trl";
  const int processes = GetParam();
  for (const Case& c : kCases) {
    if (processes == 2 && !c.two_processes) continue;
    const json ref = reference(c, fixtures, processes);
    ASSERT_FALSE(ref.is_null()) << c.name;
    testing::TempDir tmp;
    const json state = ours(c, fixtures, processes, tmp.file("out"));
    expect_trl_steps(state, ref, c.name + " on " + std::to_string(processes));
  }
}

INSTANTIATE_TEST_SUITE_P(Processes, DpoAgainstTrl, ::testing::Values(1, 2));

}  // namespace
}  // namespace trainer::dpo_run_test
