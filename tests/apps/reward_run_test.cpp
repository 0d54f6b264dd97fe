// `trainer reward` against TRL 1.16's RewardTrainer
// (tests/reference/scripts/reward_trl_reference.py) on the same classifiers (reward_fixtures.py),
// preference pairs and order, fp32: each step's loss, gradient norm and TRL's metrics
// (min/mean/max_reward, accuracy, margin) within relative 1e-4, num_tokens exactly, the trained
// weights' sums; for plain, conversational and implicit-prompt pairs, margins, the centring term,
// max_length's filter, evaluation, accumulation and LoRA (PEFT's SEQ_CLS), on one process and
// (some) on two; the folders as Transformers and PEFT read them; a causal folder made a reward
// model; the bad input refused in one line.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/io/safetensors.h"
#include "tests/test_util.h"

namespace trainer::reward_run_test {
namespace {

using json = nlohmann::ordered_json;
using testing::run;

struct Case {
  std::string name, model, train, extra;
  bool two_processes = false;  // also compared on two processes
};

// {rm}: reward_fixtures' folder, {sft}: sft_fixtures'.
const Case kCases[] = {
    {"conv", "{rm}/qwen3_rm", "{sft}/data/pref_conv.jsonl", "", true},
    {"plain", "{rm}/llama_rm", "{sft}/data/pref_plain.jsonl", ""},
    {"implicit", "{rm}/qwen3_rm", "{sft}/data/pref_implicit.jsonl", ""},
    {"center", "{rm}/qwen3_rm", "{sft}/data/pref_conv.jsonl", "--center_rewards_coefficient 0.01",
     true},
    {"margin", "{rm}/qwen3_rm", "{rm}/data/pref_margin.jsonl", "", true},
    {"max_length", "{rm}/qwen3_rm", "{sft}/data/pref_conv.jsonl", "--max_length 100"},
    {"eval", "{rm}/qwen3_rm", "{sft}/data/pref_conv.jsonl",
     "--validation_file {sft}/data/pref_eval.jsonl --eval_strategy steps --eval_steps 3"},
    {"lora", "{rm}/qwen3_rm", "{sft}/data/pref_conv.jsonl",
     "--use_peft true --lora_r 8 --lora_alpha 16 --lora_dropout 0 --learning_rate 5e-3"},
    {"accum", "{rm}/qwen3_rm", "{sft}/data/pref_conv.jsonl",
     "--per_device_train_batch_size 1 --gradient_accumulation_steps 2"},
};

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string fixtures(std::string text) {
  text = replaced(text, "{rm}", testing::reference_dir("reward_fixtures"));
  return replaced(text, "{sft}", testing::sft_fixtures_dir());
}

json reference(const Case& c, int processes) {
  const std::string dir =
      testing::reference_dir("reward_trl_" + c.name + "_np" + std::to_string(processes));
  if (dir.empty()) return json();
  std::ifstream in(dir + "/reference.json");
  return json::parse(in);
}

// `trainer reward` with the reference script's COMMON settings and `arguments`.
testing::ProcessResult reward(const std::string& arguments, int processes = 1) {
  const std::string common =
      " --use_cpu true --bf16 false --gradient_checkpointing false --logging_steps 1 --seed 42"
      " --lr_scheduler_type linear --warmup_steps 0 --per_device_eval_batch_size 4"
      " --save_strategy no --report_to none --disable_tqdm true ";
  const std::string command =
      processes == 1 ? "OMP_NUM_THREADS=1 " + testing::kTrainerBin + " reward " + common + arguments
                     : testing::launch("--nproc-per-node " + std::to_string(processes) + " " +
                                       testing::kTrainerBin + " reward " + common + arguments);
  return run(command + " 2>&1");
}

json ours(const Case& c, int processes, const std::string& out) {
  std::string defaults = " --max_steps 6";
  for (const char* option : {"--learning_rate 1e-3", "--per_device_train_batch_size 2"}) {
    const std::string text = option;
    if (c.extra.find(text.substr(0, text.find(' ') + 1)) == std::string::npos)
      defaults += " " + text;
  }
  const auto r = reward(fixtures("--model_name_or_path " + c.model + " --train_file " + c.train +
                                 defaults + " " + c.extra + " --output_dir " + out),
                        processes);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(out + "/trainer_state.json");
  if (!in) return json();
  return json::parse(in);
}

void expect_near(const json& ours, const json& want, const std::string& key,
                 const std::string& where) {
  ASSERT_TRUE(ours.contains(key)) << where << ": no " << key << " in " << ours.dump();
  const double a = ours[key].get<double>(), b = want[key].get<double>();
  EXPECT_NEAR(a, b, 1e-4 * std::abs(b) + 2e-6) << where << ", " << key;
}

void expect_trl_steps(const json& state, const json& ref, const std::string& what) {
  static const char* const keys[] = {"loss",       "grad_norm", "min_reward", "mean_reward",
                                     "max_reward", "accuracy",  "margin"};
  for (const std::string first : {"loss", "eval_loss"}) {
    const std::string prefix = first == "loss" ? "" : "eval_";
    std::vector<json> got, want;
    for (const auto& e : state["log_history"]) {
      if (e.contains(first)) got.push_back(e);
    }
    for (const auto& e : ref["logs"]) {
      if (e.contains(first)) want.push_back(e);
    }
    ASSERT_EQ(got.size(), want.size()) << what << " " << first;
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string where = what + ", " + first + " " + std::to_string(i + 1);
      for (const std::string key : keys) {
        if (prefix.empty() || key != "grad_norm") expect_near(got[i], want[i], prefix + key, where);
      }
      EXPECT_EQ(got[i][prefix + "num_tokens"].get<double>(),
                want[i][prefix + "num_tokens"].get<double>())
          << where;
      // TRL's keys and no others (no perplexity, no token accuracy).
      for (const auto& [key, value] : got[i].items()) {
        EXPECT_TRUE(want[i].contains(key) || key.find("runtime") != std::string::npos ||
                    key.find("per_second") != std::string::npos)
            << where << ": " << key;
      }
    }
  }
}

// The trained weights' sums and sums of squares, relative 1e-4, named as TRL's saved file names
// them (the adapter's too).
void expect_trl_parameters(const std::string& out, const json& ref, const std::string& what) {
  const bool adapter = !ref["config"]["lora"].is_null();
  const io::NamedTensors tensors =
      io::load_safetensors(out + (adapter ? "/adapter_model.safetensors" : "/model.safetensors"));
  ASSERT_EQ(tensors.size(), ref["params"].size()) << what;
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(ref["params"].contains(name)) << what << ": " << name;
    const json& want = ref["params"][name];
    const double sum = tensor.to(torch::kDouble).sum().item<double>();
    const double sq = tensor.to(torch::kDouble).pow(2).sum().item<double>();
    EXPECT_NEAR(sum, want[0].get<double>(), 1e-4 * std::abs(want[0].get<double>()) + 1e-4)
        << what << ", " << name;
    EXPECT_NEAR(sq, want[1].get<double>(), 1e-4 * std::abs(want[1].get<double>()) + 1e-5)
        << what << ", " << name;
  }
}

class RewardAgainstTrl : public ::testing::TestWithParam<int> {};

TEST_P(RewardAgainstTrl, EachStepsLossMetricsAndWeightsEqualTrls) {
  ASSERT_FALSE(testing::reference_dir("reward_fixtures").empty());
  const int processes = GetParam();
  size_t compared = 0;
  for (const Case& c : kCases) {
    if (processes == 2 && !c.two_processes) continue;
    const json ref = reference(c, processes);
    ASSERT_FALSE(ref.is_null()) << c.name;
    testing::TempDir tmp;
    const std::string what = c.name + " on " + std::to_string(processes);
    const json state = ours(c, processes, tmp.file("out"));
    expect_trl_steps(state, ref, what);
    expect_trl_parameters(tmp.file("out"), ref, what);
    ++compared;
  }
  EXPECT_EQ(compared, processes == 1 ? 9u : 3u);
}

INSTANTIATE_TEST_SUITE_P(Processes, RewardAgainstTrl, ::testing::Values(1, 2));

// A reward model trained here: Transformers reads the folder as a classifier of one label and
// scores as we do; the LoRA run's adapter reads in PEFT over its base with its trained score.
TEST(RewardRun, FoldersLoadInTransformersAndPeft) {
  testing::TempDir tmp;
  auto r = reward(
      fixtures("--model_name_or_path {rm}/qwen3_rm --train_file "
               "{sft}/data/pref_conv.jsonl --learning_rate 1e-3 --max_steps 6 --output_dir " +
               tmp.file("full")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json config = json::parse(std::ifstream(tmp.file("full/config.json")));
  EXPECT_EQ(config["architectures"], json::array({"Qwen3ForSequenceClassification"}));
  EXPECT_EQ(config["pad_token_id"], 514);
  auto python = testing::transformers_classifies(tmp.file("full"));
  ASSERT_EQ(python.exit_code, 0) << python.out;
  EXPECT_NE(python.out.find("[["), std::string::npos) << python.out;

  r =
      reward(fixtures("--model_name_or_path {rm}/qwen3_rm --train_file "
                      "{sft}/data/pref_conv.jsonl --use_peft true --lora_r 8 --lora_alpha 16 "
                      "--lora_dropout 0 --learning_rate 5e-3 --max_steps 6 --output_dir " +
                      tmp.file("lora")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json adapter = json::parse(std::ifstream(tmp.file("lora/adapter_config.json")));
  EXPECT_EQ(adapter["task_type"], "SEQ_CLS");
  EXPECT_EQ(adapter["modules_to_save"], json::array({"score"}));
  // PEFT's scores of our adapter equal the full classifier's after merging in PEFT itself.
  python = run(std::string(TRAINER_PYTHON) +
               " -c \"import sys, torch; from transformers import "
               "AutoModelForSequenceClassification as A; from peft import PeftModel;"
               " m = PeftModel.from_pretrained(A.from_pretrained(sys.argv[1], num_labels=1), "
               "sys.argv[2]).eval(); s = m.base_model.model.score;"
               " print(tuple(s.modules_to_save['default'].weight.shape), "
               "torch.isfinite(m(torch.tensor([[1, 2, 3]])).logits).all().item())\" " +
               fixtures("{rm}/qwen3_rm ") + tmp.file("lora") + " 2>&1");
  ASSERT_EQ(python.exit_code, 0) << python.out;
  EXPECT_NE(python.out.find("(1, 64) True"), std::string::npos) << python.out;
}

// TRL's usual start: a causal language model's folder, given a fresh head of one label (drawn
// from the run's seed) and the tokenizer's pad id; the run learns (its loss falls).
TEST(RewardRun, ACausalFolderBecomesARewardModel) {
  testing::TempDir tmp;
  const auto r =
      reward(fixtures("--model_name_or_path {sft}/qwen3 --train_file "
                      "{sft}/data/pref_conv.jsonl --learning_rate 3e-3 --max_steps 24 "
                      "--output_dir " +
                      tmp.file("out")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("holds no score.weight"), std::string::npos) << r.out;
  const json config = json::parse(std::ifstream(tmp.file("out/config.json")));
  EXPECT_EQ(config["architectures"], json::array({"Qwen3ForSequenceClassification"}));
  EXPECT_EQ(config["id2label"], json({{"0", "LABEL_0"}}));
  const json state = json::parse(std::ifstream(tmp.file("out/trainer_state.json")));
  double first = 0, last = 0, accuracy = 0;
  for (const auto& e : state["log_history"]) {
    if (!e.contains("loss")) continue;
    if (first == 0) first = e["loss"].get<double>();
    last = e["loss"].get<double>();
    accuracy = e["accuracy"].get<double>();
  }
  EXPECT_LT(last, first - 0.05) << r.out;
  EXPECT_EQ(accuracy, 1.0) << r.out;
}

TEST(RewardRun, BadInputIsOneLine) {
  testing::TempDir tmp;
  // A classifier of three labels.
  const std::string three = testing::reference_dir("seq_cls") + "/llama";
  auto r = reward(fixtures("--model_name_or_path " + three +
                           " --tokenizer_name {sft}/llama --train_file {sft}/data/pref_plain.jsonl "
                           "--max_steps 6 --output_dir " +
                           tmp.file("a")));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("trainer: error: trainer reward: " + three +
                       " is a classifier of 3 labels; a reward model has one (num_labels=1: one "
                       "score a sequence, as TRL requires)"),
            std::string::npos)
      << r.out;
  // A pair with an empty side.
  std::ofstream(tmp.file("empty.jsonl"))
      << "{\"prompt\": \"Hi\", \"chosen\": \" there\", \"rejected\": \" you\"}\n"
      << "{\"prompt\": \"Hi\", \"chosen\": \" there\", \"rejected\": \"\"}\n";
  r = reward(fixtures("--model_name_or_path {rm}/llama_rm --train_file " + tmp.file("empty.jsonl") +
                      " --output_dir " + tmp.file("b")));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("trainer: error: " + tmp.file("empty.jsonl") +
                       " row 2: 'rejected' is an empty text: the reward model would score the "
                       "prompt and the EOS alone; give every pair two completions"),
            std::string::npos)
      << r.out;
  // A margin missing from one row, an argument of another config.
  std::ofstream(tmp.file("margin.jsonl"))
      << "{\"chosen\": \"a b\", \"rejected\": \"a c\", \"margin\": 1.0}\n"
      << "{\"chosen\": \"a d\", \"rejected\": \"a e\"}\n";
  r = reward(fixtures("--model_name_or_path {rm}/llama_rm --train_file " +
                      tmp.file("margin.jsonl") + " --output_dir " + tmp.file("c")));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find(" row 2 has no 'margin', which an earlier row has"), std::string::npos)
      << r.out;
  r =
      reward(fixtures("--model_name_or_path {rm}/llama_rm --train_file "
                      "{sft}/data/pref_plain.jsonl --beta 0.1 --output_dir " +
                      tmp.file("d")));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("argument beta: not a RewardConfig argument (TRL's)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(std::ifstream(tmp.file("a/trainer_state.json")).good());
}

}  // namespace
}  // namespace trainer::reward_run_test
