// `trainer grpo` end to end on grpo_fixtures.py's tiny Qwen3: a run learns what its reward asks
// (ending early: the mean reward of the last steps clearly above the first), the same run with
// the reward as an exec: program logs the same numbers, a resumed run ends byte for byte as the
// run that was never stopped, and bad input (a reward program that dies, hangs or prints junk,
// num_generations that does not divide the generation batch, a prompt longer than the model,
// vLLM asked for) is one line with exit 2 or 1, the checkpoints already saved kept.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace trainer::grpo_cli_test {
namespace {

using json = nlohmann::ordered_json;
using testing::run;

std::string fixture() { return testing::reference_dir("grpo_fixtures") + "/qwen3_eos"; }
std::string prompts() {
  return testing::paths::source_dir() + "/tests/reference/inputs/grpo/prompts.jsonl";
}

// `trainer grpo` (or `command`) on the prompts into `out`, with `extra` (over the defaults
// below): its result.
testing::ProcessResult grpo(const std::string& out, const std::string& extra,
                            const std::string& command = "grpo") {
  std::string defaults;
  for (const char* option :
       {"--bf16 false", "--gradient_checkpointing false", "--logging_steps 1",
        "--disable_tqdm true", "--report_to none", "--per_device_train_batch_size 8",
        "--num_generations 4", "--max_completion_length 8", "--learning_rate 3e-3"}) {
    const std::string text = option;
    if (extra.find(text.substr(0, text.find(' ') + 1)) == std::string::npos) defaults += " " + text;
  }
  return run("OMP_NUM_THREADS=1 " + testing::kTrainerBin + " " + command +
             " --model_name_or_path " + fixture() + " --train_file " + prompts() +
             " --output_dir " + out + defaults + " " + extra + " 2>&1");
}

std::vector<json> steps_of(const std::string& out) {
  std::vector<json> steps;
  std::ifstream in(out + "/trainer_state.json");
  if (!in) return steps;
  const json state = json::parse(in);
  for (const auto& e : state["log_history"])
    if (e.contains("loss")) steps.push_back(e);
  return steps;
}

double mean_reward(const std::vector<json>& steps, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += steps[i]["reward"].get<double>();
  return sum / static_cast<double>(to - from);
}

// Ending early pays: soft_overlong_punishment over 8 tokens with a cache of 6 is 0 up to 2 tokens,
// then falls to -1 at 8.
const char* const kShortReward =
    "--reward_funcs 'get_soft_overlong_punishment(max_completion_len=8, soft_punish_cache=6)'";

TEST(GrpoRun, ARunLearnsToEndEarlyAndAnExecRewardLogsTheSameNumbers) {
  testing::TempDir tmp;
  const auto r = grpo(tmp.file("builtin"), std::string(kShortReward) + " --max_steps 30");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<json> steps = steps_of(tmp.file("builtin"));
  ASSERT_EQ(steps.size(), 30u);
  const double first = mean_reward(steps, 0, 5), last = mean_reward(steps, 25, 30);
  EXPECT_GT(last, first + 0.2) << "first five steps " << first << ", last five " << last;
  EXPECT_TRUE(steps[0].contains("rewards/soft_overlong_punishment_reward/mean"));
  EXPECT_TRUE(steps[0].contains("completions/mean_length"));
  // The same reward computed by a program: the same numbers, step for step.
  const std::string program = tmp.file("short.py");
  std::ofstream(program) << "import json, sys\n"
                            "for line in sys.stdin:\n"
                            "    n = len(json.loads(line)['completion_ids'])\n"
                            "    print(0.0 if n <= 2 else ((2 - n) / 6 if n <= 8 else -1.0), "
                            "flush=True)\n";
  const auto e =
      grpo(tmp.file("exec"), "--reward_funcs 'exec:python3 " + program + "' --max_steps 30");
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const std::vector<json> exec_steps = steps_of(tmp.file("exec"));
  ASSERT_EQ(exec_steps.size(), 30u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_NEAR(exec_steps[i]["reward"].get<double>(), steps[i]["reward"].get<double>(), 1e-6)
        << "step " << i + 1;
    EXPECT_NEAR(exec_steps[i]["loss"].get<double>(), steps[i]["loss"].get<double>(), 1e-6)
        << "step " << i + 1;
    EXPECT_TRUE(exec_steps[i].contains("rewards/short/mean"));
  }
}

TEST(GrpoRun, AResumedRunEndsAsTheRunThatWasNeverStopped) {
  testing::TempDir tmp;
  // num_iterations 2: checkpoint-3 falls inside a generation's two updates, its samples kept.
  const std::string common = std::string(kShortReward) +
                             " --max_steps 6 --num_iterations 2 --save_strategy steps"
                             " --save_steps 3 --beta 0.04";
  ASSERT_EQ(grpo(tmp.file("whole"), common).exit_code, 0);
  const auto r = grpo(tmp.file("resumed"),
                      common + " --resume_from_checkpoint " + tmp.file("whole") + "/checkpoint-3");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(testing::slurp(tmp.file("whole") + "/model.safetensors"),
            testing::slurp(tmp.file("resumed") + "/model.safetensors"));
  const auto a = steps_of(tmp.file("whole")), b = steps_of(tmp.file("resumed"));
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(a[5]["loss"], b[5]["loss"]);
  EXPECT_EQ(a[4]["kl"], b[4]["kl"]);
}

// LoRA with bf16 autocast, activation checkpointing and the reference as the adapters off, and a
// full run with TensorBoard and log_completions: the folders load in Transformers and PEFT, the
// completion tables are written, printed and in the event file.
TEST(GrpoRun, TheFoldersLoadInTransformersAndPeftWithTheCompletionTables) {
  testing::TempDir tmp;
  const auto full = grpo(tmp.file("full"), std::string(kShortReward) +
                                               " --max_steps 2 --log_completions true"
                                               " --num_completions_to_print 2 --report_to "
                                               "tensorboard --logging_dir " +
                                               tmp.file("tb"));
  ASSERT_EQ(full.exit_code, 0) << full.out;
  EXPECT_NE(full.out.find("Step 2: completions"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("GRPO time: sampling "), std::string::npos) << full.out;
  const std::string table =
      testing::slurp(tmp.file("full") + "/completions/completions_00002.jsonl");
  EXPECT_NE(table.find("\"soft_overlong_punishment_reward\":"), std::string::npos) << table;
  EXPECT_NE(table.find("\"advantage\":"), std::string::npos) << table;
  std::string events;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.file("tb")))
    events += testing::slurp(entry.path().string());
  for (const char* tag :
       {"train/reward", "train/completions/mean_length", "completions/text_summary"})
    EXPECT_NE(events.find(tag), std::string::npos) << tag;
  auto loads = testing::transformers_loads(tmp.file("full"));
  ASSERT_EQ(loads.exit_code, 0) << loads.out;
  EXPECT_NE(loads.out.find("True"), std::string::npos) << loads.out;

  const auto lora = grpo(tmp.file("lora"), std::string(kShortReward) +
                                               " --max_steps 3 --use_peft true --lora_r 4"
                                               " --lora_alpha 8 --learning_rate 5e-2 --beta 0.04"
                                               " --bf16 true --gradient_checkpointing true");
  ASSERT_EQ(lora.exit_code, 0) << lora.out;
  const auto steps = steps_of(tmp.file("lora"));
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_GT(steps[2]["kl"].get<double>(), 0.0) << steps[2].dump();
  auto peft =
      run(std::string(TRAINER_PYTHON) +
          " -c \"import sys, torch; from transformers import AutoModelForCausalLM;"
          " from peft import PeftModel;"
          " m = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(sys.argv[1]),"
          " sys.argv[2]); print('moved', sum(p.abs().sum().item() > 0 for n, p in"
          " m.named_parameters() if 'lora_B' in n))\" " +
          fixture() + " " + tmp.file("lora") + " 2>&1");
  ASSERT_EQ(peft.exit_code, 0) << peft.out;
  EXPECT_NE(peft.out.find("moved "), std::string::npos) << peft.out;
  EXPECT_EQ(peft.out.find("moved 0"), std::string::npos) << peft.out;
}

// sync_ref_model with alpha 1 every step: the reference is the policy of the step before, so
// the KL of an on-policy step after the first is 0; without it the KL grows from the start.
TEST(GrpoRun, SyncRefModelMovesTheReferenceToThePolicy) {
  testing::TempDir tmp;
  const std::string common = std::string(kShortReward) + " --max_steps 3 --beta 0.04";
  ASSERT_EQ(grpo(tmp.file("plain"), common).exit_code, 0);
  const auto r = grpo(tmp.file("synced"), common +
                                              " --sync_ref_model true --ref_model_sync_steps 1"
                                              " --ref_model_mixup_alpha 1.0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto plain = steps_of(tmp.file("plain")), synced = steps_of(tmp.file("synced"));
  ASSERT_EQ(plain.size(), 3u);
  ASSERT_EQ(synced.size(), 3u);
  EXPECT_EQ(synced[0]["kl"].get<double>(), plain[0]["kl"].get<double>());
  EXPECT_GT(plain[2]["kl"].get<double>(), 1e-7);
  EXPECT_LT(std::abs(synced[2]["kl"].get<double>()), 1e-9);
}

TEST(GrpoRun, BadInputIsOneLine) {
  testing::TempDir tmp;
  struct Bad {
    std::string extra, message;
    int code;
  };
  const std::vector<Bad> cases = {
      {"--reward_funcs 'exec:read line; exit 4' --max_steps 2",
       "trainer: error: reward program exec:read line; exit 4 exited with status 4 (at the "
       "training data's row ",
       1},
      {"--reward_funcs 'exec:while read l; do echo high; done' --max_steps 2",
       "answered 'high' (allowed: one number or null a line)", 1},
      {"--reward_funcs 'exec:sleep 60' --reward_timeout 1 --max_steps 2",
       "gave no answer within 1.0 s", 1},
      {std::string(kShortReward) + " --num_generations 3",
       "trainer: error: argument num_generations: generation_batch_size (8) must be divisible by "
       "num_generations (3)",
       2},
      {std::string(kShortReward) + " --num_generations 1",
       "trainer: error: argument num_generations: 1 is not allowed (at least 2", 2},
      {"--reward_funcs think_format", "trainer: error: argument reward_funcs", 2},
      {"--reward_funcs '[]'", "trainer: error: argument reward_funcs: no reward functions", 2},
      {std::string(kShortReward) + " --use_vllm true",
       "trainer: error: argument use_vllm: true is not allowed (false only", 2},
      {std::string(kShortReward) + " --vllm_server_port 9000",
       "trainer: error: argument vllm_server_port: 9000 is not allowed (8000 only", 2},
      {std::string(kShortReward) + " --generation_kwargs '{\"num_beams\": 2}'",
       "trainer: error: argument generation_kwargs: num_beams 2 is not built here (allowed: "
       "do_sample, max_new_tokens,",
       2},
      {std::string(kShortReward) + " --generation_kwargs '{\"temperature\": 0}'",
       "trainer: error: argument generation_kwargs: temperature 0 is not allowed (a number > 0)",
       2},
      {std::string(kShortReward) + " --loss_type sigmoid",
       "trainer: error: argument loss_type: \"sigmoid\" is not allowed (allowed: grpo, dr_grpo, "
       "dapo, bnpo, cispo, sapo, luspo, vespo)",
       2},
  };
  for (const Bad& c : cases) {
    const auto r = grpo(tmp.file("bad"), c.extra);
    EXPECT_EQ(r.exit_code, c.code) << c.extra << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.extra << "\n" << r.out;
  }
  // A prompt longer than the model's 256 positions.
  const std::string long_prompt = tmp.file("long.jsonl");
  std::string words;
  for (int i = 0; i < 300; ++i) words += "the ";
  std::ofstream(long_prompt) << "{\"prompt\": \"short\"}\n{\"prompt\": \"" << words << "\"}\n";
  const auto r = run("OMP_NUM_THREADS=1 " + testing::kTrainerBin + " grpo --model_name_or_path " +
                     fixture() + " --train_file " + long_prompt + " --output_dir " +
                     tmp.file("long") + " --bf16 false " + kShortReward + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("trainer grpo: the training data's row 2 has a prompt of "),
            std::string::npos)
      << r.out;
  // A program that dies after a checkpoint: the checkpoint stays.
  const std::string flaky = tmp.file("flaky.sh");
  std::ofstream(flaky) << "n=0\nwhile read line; do n=$((n+1)); [ $n -gt 24 ] && exit 5; "
                          "echo 0.5; done\n";
  const auto f =
      grpo(tmp.file("flaky"), "--reward_funcs 'exec:sh " + flaky +
                                  "' --max_steps 6 --save_strategy steps --save_steps 1");
  EXPECT_EQ(f.exit_code, 1) << f.out;
  EXPECT_NE(f.out.find("exited with status 5"), std::string::npos) << f.out;
  EXPECT_FALSE(testing::slurp(tmp.file("flaky") + "/checkpoint-3/model.safetensors").empty())
      << f.out;
}

// The whole loop of TRL's online toolkit: `trainer reward` makes a reward model of the policy's
// own kind (a causal folder given a head) from preference pairs, and `trainer rloo` scored by it
// (its folder in reward_funcs, as TRL takes a model id) raises the reward it gives.
TEST(RlooRun, ARewardModelFromTrainerRewardRaisesItsReward) {
  testing::TempDir tmp;
  const std::string rm = tmp.file("rm");
  auto r = run("OMP_NUM_THREADS=1 " + testing::kTrainerBin + " reward --model_name_or_path " +
               fixture() + " --train_file " + testing::paths::source_dir() +
               "/tests/reference/inputs/reward/pref_length.jsonl --output_dir " + rm +
               " --bf16 false --gradient_checkpointing false --logging_steps 10 --learning_rate "
               "3e-3 --num_train_epochs 4 --per_device_train_batch_size 8 --report_to none "
               "--disable_tqdm true 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = grpo(tmp.file("rloo"),
           "--reward_funcs " + rm +
               " --per_device_train_batch_size 16 --learning_rate 1e-2 --max_steps 60",
           "rloo");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<json> steps = steps_of(tmp.file("rloo"));
  ASSERT_EQ(steps.size(), 60u);
  EXPECT_TRUE(steps[0].contains("rewards/rm/mean")) << steps[0].dump();
  EXPECT_TRUE(steps[0].contains("kl")) << steps[0].dump();  // beta 0.05: RLOO's default
  const double first = mean_reward(steps, 0, 10), last = mean_reward(steps, 50, 60);
  EXPECT_GT(last, first + 0.3) << "first ten steps " << first << ", last ten " << last;
  EXPECT_NE(r.out.find("RLOO time: sampling"), std::string::npos) << r.out;
}

TEST(RlooRun, BadInputIsOneLine) {
  testing::TempDir tmp;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string(kShortReward) + " --loss_type dapo",
       "trainer: error: argument loss_type: a GRPOConfig argument that RLOOConfig lacks (TRL's "
       "RLOO has one loss: the clipped sequence-level ratio, the KL in the reward); only `trainer "
       "grpo` takes it"},
      {std::string(kShortReward) + " --reward_clip_range '[1, 0]'",
       "trainer: error: argument reward_clip_range: [1.0,0.0] is not allowed ([min, max]: two "
       "finite numbers, min <= max (or [] for none))"},
      {"--reward_funcs " + testing::reference_dir("seq_cls") + "/llama",
       "trainer: error: argument reward_funcs: " + testing::reference_dir("seq_cls") +
           "/llama is a classifier of 3 labels; a reward model is a sequence classifier of one "
           "label"},
      {"--reward_funcs " + fixture(),
       "trainer: error: argument reward_funcs: " + fixture() +
           " is not a sequence classifier (architectures: Qwen3ForCausalLM)"},
  };
  for (const auto& [extra, message] : cases) {
    const auto r = grpo(tmp.file("bad"), extra, "rloo");
    EXPECT_EQ(r.exit_code, 2) << extra << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << extra << "\n" << r.out;
  }
  const auto r = grpo(tmp.file("bad"), std::string(kShortReward) + " --normalize_advantages true");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("trainer: error: argument normalize_advantages: an RLOOConfig argument "
                       "(TRL's); only `trainer rloo` takes it"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace trainer::grpo_cli_test
