// The `trainer` program's commands run in the test process (cli::run_program, as main runs it):
// what the sanitizer build checks of the program's own code (its set-up of a run, the outputs it
// writes, generation, tokenization, SFT), which its other tests reach only through processes. Each
// run does what the program does: train writes its folder and the banner, evaluate and predict
// read it back to the same numbers, generate gives Transformers' greedy tokens, tokenize gives
// `tokenizers`' ids, and sft trains a step.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/program_in_process.h"
#include "tests/test_util.h"

namespace trainer {
namespace program_in_process_test {

using json = nlohmann::json;
using testing::run_trainer_in_process;
using testing::slurp;
using testing::TempDir;

TEST(ProgramInProcess, TrainEvaluateAndPredictWriteAndReadTheRunsFolder) {
  TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 64, 32, false);
  const std::string out = dir.file("out");
  const std::vector<std::string> common = {"--dataset_dir",
                                           dir.file("data"),
                                           "--output_dir",
                                           out,
                                           "--per_device_train_batch_size",
                                           "16",
                                           "--per_device_eval_batch_size",
                                           "16",
                                           "--disable_tqdm",
                                           "true"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), common.begin(), common.end());
    return args;
  };
  const auto trained = run_trainer_in_process(
      with({"train", "--max_steps", "4", "--logging_steps", "2", "--eval_strategy", "steps",
            "--eval_steps", "4", "--save_steps", "2", "--report_to", "none"}));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.out.find("***** Running training *****"), std::string::npos) << trained.out;
  for (const char* file : {"model.safetensors", "trainer_state.json", "training_args.json",
                           "all_results.json", "checkpoint-4/model.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + file)) << file;
  }
  const json state = json::parse(slurp(out + "/trainer_state.json"));
  EXPECT_EQ(state["global_step"], 4);
  double eval_loss = -1;
  for (const auto& entry : state["log_history"]) {
    if (entry.contains("eval_loss")) eval_loss = entry["eval_loss"];
  }
  ASSERT_GE(eval_loss, 0) << state.dump();

  const auto evaluated = run_trainer_in_process(with({"evaluate"}));
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  const json eval = json::parse(slurp(out + "/eval_results.json"));
  EXPECT_NEAR(eval["eval_loss"].get<double>(), eval_loss, 1e-6);
  const auto predicted = run_trainer_in_process(with({"predict"}));
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  const json predict = json::parse(slurp(out + "/predict_results.json"));
  EXPECT_NEAR(predict["test_loss"].get<double>(), eval_loss, 1e-6);
  EXPECT_TRUE(std::filesystem::exists(out + "/predictions.npy"));
  // Bad input is one line and exit code 2 in-process too, and the run's folder stays.
  const auto bad = run_trainer_in_process(with({"train", "--max_steps", "x"}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(testing::count(bad.err, "\n"), 1u) << bad.err;
  EXPECT_TRUE(std::filesystem::exists(out + "/model.safetensors"));
}

TEST(ProgramInProcess, GenerateAndTokenizeGiveTheReferencesTokens) {
  const std::string fixtures = testing::hf_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  const std::string greedy = testing::reference_dir("hf_generate");
  ASSERT_FALSE(greedy.empty());
  const json theirs = json::parse(slurp(greedy + "/greedy.json"));
  for (const std::string model : {"gpt2", "llama"}) {
    const auto generated = run_trainer_in_process({"generate", fixtures + "/" + model, "--prompt",
                                                   "The meaning of life", "--max_new_tokens", "24",
                                                   "--output_ids", "true"});
    ASSERT_EQ(generated.exit_code, 0) << generated.err;
    EXPECT_EQ(generated.out, theirs[model].get<std::string>() + "\n") << model;
  }
  const auto tokenized = run_trainer_in_process(
      {"tokenize", "--no_special_tokens", "--tokenizer_name", fixtures + "/tokenizer_llama3",
       std::string(SOURCE_DIR) + "/tests/reference/inputs/few.txt"});
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.err;
  EXPECT_TRUE(testing::differing_id_blocks("few_plain", testing::lines_of(tokenized.out)).empty())
      << tokenized.out;
}

TEST(ProgramInProcess, SftTrainsAStepOnConversations) {
  const std::string fixtures = testing::sft_fixtures_dir();
  ASSERT_FALSE(fixtures.empty());
  TempDir dir;
  const auto trained = run_trainer_in_process({"sft",
                                               "--model_name_or_path",
                                               fixtures + "/qwen3",
                                               "--train_file",
                                               fixtures + "/data/conversations.jsonl",
                                               "--assistant_only_loss",
                                               "true",
                                               "--max_steps",
                                               "2",
                                               "--per_device_train_batch_size",
                                               "2",
                                               "--max_length",
                                               "128",
                                               "--bf16",
                                               "false",
                                               "--use_cpu",
                                               "true",
                                               "--report_to",
                                               "none",
                                               "--save_strategy",
                                               "no",
                                               "--disable_tqdm",
                                               "true",
                                               "--output_dir",
                                               dir.file("sft")});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const json state = json::parse(slurp(dir.file("sft/trainer_state.json")));
  EXPECT_EQ(state["global_step"], 2);
  EXPECT_TRUE(state["log_history"][0].contains("mean_token_accuracy")) << state.dump();
}

}  // namespace program_in_process_test
}  // namespace trainer
