// A tiny gpt on a tiny text through the real `trainer`: two processes at batch 4 end where one at
// batch 8 ends, a run resumed from its mid-run checkpoint ends with the uninterrupted run's
// weights byte for byte, and the sample a run prints is what `trainer generate` prints.
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/io/safetensors.h"
#include "tests/test_util.h"

namespace trainer {
namespace gpt_run_test {

using nlohmann::json;
using testing::run;
using testing::slurp;
using testing::TempDir;

class GptRun : public ::testing::Test {
 protected:
  // 24 KB of words drawn from a small vocabulary: 750 blocks of 32 bytes.
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    const std::vector<std::string> words = {"the",  "cat", "sat", "on",   "a",    "mat",
                                            "and",  "dog", "ran", "far",  "away", "from",
                                            "home", "we",  "all", "like", "tea",  "."};
    std::mt19937 random(11);
    std::string text;
    while (text.size() < 24000) {
      text += words[random() % words.size()];
      text += random() % 9 == 0 ? "\n" : " ";
    }
    std::ofstream(tmp_->file("corpus.txt")) << text;
  }
  static void TearDownTestSuite() { delete tmp_; }

  // `trainer train` arguments for the tiny gpt into `out`, with `extra` after them.
  static std::string args(const std::string& out, int batch, const std::string& extra,
                          const std::string& dropout) {
    return " train --model_name gpt --model_config '{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": "
           "32, \"dropout\": " +
           dropout + "}' --dataset_name text --dataset_config '{\"path\": \"" +
           tmp_->file("corpus.txt") +
           "\", \"context_length\": 32}' --per_device_train_batch_size " + std::to_string(batch) +
           " --per_device_eval_batch_size 8 --max_eval_samples 24 --max_steps 8 --logging_steps "
           "2 --eval_strategy steps --eval_steps 4 --learning_rate 3e-3 --warmup_steps 2 "
           "--disable_tqdm true --output_dir " +
           out + " " +
           (extra.find("--save_strategy") == std::string::npos ? "--save_strategy no " : "") +
           extra;
  }
  // Dropout 0.1 by default; the processes of a distributed run draw other masks than one process
  // would, so runs compared across world sizes use none.
  static testing::ProcessResult train(const std::string& out, int batch, int processes,
                                      const std::string& extra = "",
                                      const std::string& dropout = "0.1") {
    const std::string command =
        processes == 1 ? testing::kTrainerBin + args(out, batch, extra, dropout)
                       : testing::launch("--nproc-per-node " + std::to_string(processes) + " " +
                                         testing::kTrainerBin + args(out, batch, extra, dropout));
    auto result = run("OMP_NUM_THREADS=1 " + command);
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    return result;
  }
  // max over tensors of |a - b| / |a|.
  static double relative_difference(const std::string& a, const std::string& b) {
    auto x = io::load_safetensors(a + "/model.safetensors");
    auto y = io::load_safetensors(b + "/model.safetensors");
    EXPECT_EQ(x.size(), y.size());
    double most = 0;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      EXPECT_EQ(x[i].first, y[i].first);
      most =
          std::max(most, ((x[i].second - y[i].second).norm() / x[i].second.norm()).item<double>());
    }
    return most;
  }
  static json state(const std::string& out) {
    return json::parse(slurp(out + "/trainer_state.json"));
  }

  static TempDir* tmp_;
};
TempDir* GptRun::tmp_ = nullptr;

TEST_F(GptRun, TwoProcessesAtBatch4EndWhereOneAtBatch8Ends) {
  const std::string one = tmp_->file("one"), two = tmp_->file("two"), wide = tmp_->file("wide");
  train(one, 8, 1, "", "0");
  train(two, 4, 2, "", "0");
  // Float32 arithmetic in another order, which 8 AdamW steps amplify where gradients are tiny
  // (its update divides by their root mean square): equal to 1e-4 of each tensor's norm.
  const double two_ranks = relative_difference(one, two);
  EXPECT_LT(two_ranks, 1e-4);
  const json h1 = state(one)["log_history"], h2 = state(two)["log_history"];
  ASSERT_EQ(h1.size(), h2.size());
  ASSERT_EQ(h1.size(), 4u + 2u + 1u);  // 4 training logs, 2 evaluations, the summary
  for (size_t i = 0; i + 1 < h1.size(); ++i) {
    const char* key = h1[i].contains("loss") ? "loss" : "eval_loss";
    EXPECT_NEAR(h1[i][key].get<double>(), h2[i][key].get<double>(), 1e-5) << i;
  }
  // The loss fell from ln(256) = 5.55 at the start.
  EXPECT_LT(h1[h1.size() - 2]["eval_loss"].get<double>(), 5.2);
  EXPECT_NEAR(h1[h1.size() - 2]["eval_perplexity"].get<double>(),
              std::exp(h1[h1.size() - 2]["eval_loss"].get<double>()), 1e-6);
  // What the tolerance tells apart: 2 processes at batch 8 (twice the examples a step).
  train(wide, 8, 2, "", "0");
  const double other_batch = relative_difference(one, wide);
  EXPECT_GT(other_batch, 1e-2) << "two ranks at batch 4 differ by " << two_ranks;
  EXPECT_GT(other_batch, 100 * two_ranks);
}

TEST_F(GptRun, AResumedRunEndsWithTheUninterruptedRunsWeights) {
  const std::string whole = tmp_->file("whole"), resumed = tmp_->file("resumed");
  const std::string save = "--save_strategy steps --save_steps 4";
  train(whole, 8, 1, save);
  ASSERT_FALSE(slurp(whole + "/checkpoint-4/model.safetensors").empty());
  // Stopped after step 4 (its checkpoint, with the RNG state dropout draws from), then resumed.
  train(resumed, 8, 1, save + " --resume_from_checkpoint " + whole + "/checkpoint-4");
  EXPECT_TRUE(slurp(whole + "/model.safetensors") == slurp(resumed + "/model.safetensors"));
  const json h1 = state(whole)["log_history"], h2 = state(resumed)["log_history"];
  ASSERT_EQ(h1.size(), h2.size());
  for (size_t i = 0; i + 1 < h1.size(); ++i) {
    EXPECT_EQ(h1[i].value("loss", 0.0), h2[i].value("loss", 0.0)) << i;
    EXPECT_EQ(h1[i].value("eval_loss", 0.0), h2[i].value("eval_loss", 0.0)) << i;
  }
  // The tied embedding is one tensor under two names in every saved file.
  auto tensors = io::load_safetensors(whole + "/checkpoint-4/model.safetensors");
  torch::Tensor wte, head;
  for (const auto& [name, t] : tensors) {
    if (name == "transformer.wte.weight") wte = t;
    if (name == "lm_head.weight") head = t;
  }
  ASSERT_TRUE(wte.defined() && head.defined());
  EXPECT_TRUE(torch::equal(wte, head));
}

TEST_F(GptRun, ActivationCheckpointingChangesNothingAndResumesByteForByte) {
  // Dropout 0.1: the recomputed blocks replay the forward's masks. The chunked loss is on (the
  // default) in every run; Transformers' plain logits and loss (use_liger_kernel false) end
  // within float32 rounding of it.
  const std::string plain = tmp_->file("ckpt_plain"), logits = tmp_->file("ckpt_logits");
  const std::string whole = tmp_->file("ckpt_whole"), resumed = tmp_->file("ckpt_resumed");
  const std::string save = "--save_strategy steps --save_steps 4 ";
  const std::string on = "--activation_checkpointing true ";
  train(plain, 8, 1);
  train(logits, 8, 1, "--use_liger_kernel false");
  train(whole, 8, 1, save + on);
  train(resumed, 8, 1, save + on + "--resume_from_checkpoint " + whole + "/checkpoint-4");
  EXPECT_TRUE(slurp(whole + "/model.safetensors") == slurp(resumed + "/model.safetensors"));
  EXPECT_LT(relative_difference(plain, whole), 1e-6);
  // Float32 sums in another order, which 8 AdamW steps amplify where gradients are tiny (as
  // between world sizes above): 1e-4 of each tensor's norm (3.8e-5 seen).
  EXPECT_LT(relative_difference(plain, logits), 1e-4);
  const json h1 = state(plain)["log_history"], h2 = state(whole)["log_history"];
  ASSERT_EQ(h1.size(), h2.size());
  for (size_t i = 0; i + 1 < h1.size(); ++i) {
    EXPECT_NEAR(h1[i].value("loss", 0.0), h2[i].value("loss", 0.0), 1e-6) << i;
    EXPECT_NEAR(h1[i].value("eval_loss", 0.0), h2[i].value("eval_loss", 0.0), 1e-6) << i;
  }
  EXPECT_EQ(json::parse(slurp(whole + "/training_args.json"))["activation_checkpointing"], true);
}

TEST_F(GptRun, ActivationCheckpointingUnderDdpAndEachShardingEndsAsWithout) {
  // Two processes without dropout (their masks differ from one process's anyway): DDP and the
  // ZeRO stages, each with every block recomputed, end where the same run without it ends.
  for (const std::string fsdp : {"", "full_shard auto_wrap", "shard_grad_op auto_wrap"}) {
    const std::string mode = fsdp.empty() ? "" : "--fsdp '" + fsdp + "' ";
    const std::string tag = fsdp.empty() ? "ddp" : fsdp.substr(0, fsdp.find(' '));
    const std::string without = tmp_->file("dist_" + tag), with = tmp_->file("dist_ckpt_" + tag);
    train(without, 4, 2, mode, "0");
    train(with, 4, 2, mode + "--gradient_checkpointing true", "0");
    EXPECT_LT(relative_difference(without, with), 1e-6) << tag;
  }
}

TEST_F(GptRun, TheSampleARunPrintsIsWhatGenerateSamples) {
  const std::string out = tmp_->file("sampled");
  auto trained = train(out, 8, 1, "--seed 7");
  const std::string header = "Sample (trainer generate " + out + " --seed 7):\n";
  size_t at = trained.out.find(header);
  ASSERT_NE(at, std::string::npos) << trained.out;
  auto generated = run(testing::kTrainerBin + " generate " + out + " --seed 7");
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_EQ(trained.out.substr(at + header.size(), generated.out.size()), generated.out);
  EXPECT_GT(generated.out.size(), 200u);
}

}  // namespace gpt_run_test
}  // namespace trainer
