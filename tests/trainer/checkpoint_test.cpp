// Checkpoints in-process: a resumed run equals the uninterrupted one (parameters, optimizer state,
// log_history) without reading the skipped batches; rotation keeps the newest and the best; a
// non-finite loss skips its update; early stopping; the manifest and what resume refuses.
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/data/mnist.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"
#include "trainer/callbacks.h"
#include "trainer/checkpoint_manifest.h"
#include "trainer/trainer.h"

namespace trainer {
namespace checkpoint_test {

using json = nlohmann::ordered_json;

// No dropout; the CLI tests cover BasicNet's, whose random state a checkpoint carries.
using testing::TinyNet;

std::shared_ptr<TinyNet> fresh_model() { return testing::fresh_tiny_net(); }

std::shared_ptr<data::MnistDataset> random_dataset(int64_t n, int seed = 5) {
  return testing::random_mnist(n, seed);
}

// Counts the examples read, one by one (a collator is given, so no batch fast path).
class CountingDataset : public data::Dataset {
 public:
  explicit CountingDataset(std::shared_ptr<const data::Dataset> inner) : inner_(std::move(inner)) {}
  int64_t size() const override { return inner_->size(); }
  data::Example get(int64_t index) const override {
    ++reads;
    return inner_->get(index);
  }
  mutable int64_t reads = 0;

 private:
  std::shared_ptr<const data::Dataset> inner_;
};

TrainingArguments args_in(const std::string& dir) {
  return TrainingArguments()
      .output_dir(dir)
      .disable_tqdm(true)
      .learning_rate(1e-2)
      .per_device_train_batch_size(32)
      .num_train_epochs(2)
      .logging_steps(3)
      .save_steps(5);
}

// log_history without the entries' timings, which no two runs share.
json without_timings(std::vector<json> history) {
  json out = json::array();
  for (auto& entry : history) {
    for (const char* key : {"train_runtime", "train_samples_per_second", "train_steps_per_second"})
      entry.erase(key);
    out.push_back(entry);
  }
  return out;
}

void expect_same_parameters(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.named_parameters();
  auto pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  }
}

void expect_same_adam_state(torch::optim::Optimizer& a, torch::optim::Optimizer& b) {
  auto& ga = a.param_groups();
  auto& gb = b.param_groups();
  ASSERT_EQ(ga.size(), gb.size());
  for (size_t g = 0; g < ga.size(); ++g) {
    for (size_t i = 0; i < ga[g].params().size(); ++i) {
      auto& sa = static_cast<torch::optim::AdamWParamState&>(
          *a.state().at(ga[g].params()[i].unsafeGetTensorImpl()));
      auto& sb = static_cast<torch::optim::AdamWParamState&>(
          *b.state().at(gb[g].params()[i].unsafeGetTensorImpl()));
      EXPECT_EQ(sa.step(), sb.step());
      EXPECT_TRUE(torch::equal(sa.exp_avg(), sb.exp_avg()));
      EXPECT_TRUE(torch::equal(sa.exp_avg_sq(), sb.exp_avg_sq()));
    }
  }
}

TEST(Checkpoint, AResumedRunEqualsTheUninterruptedOneAndReadsNoSkippedBatch) {
  testing::TempDir dir;
  auto data = random_dataset(320);  // 10 steps of 32 per epoch, 20 in all
  auto full_data = std::make_shared<CountingDataset>(data);
  Trainer full(fresh_model(), args_in(dir.file("full")), full_data, nullptr, data::default_collate);
  full.train();
  EXPECT_EQ(full_data->reads, 640);
  EXPECT_EQ(testing::run("ls " + dir.file("full")).out,
            "checkpoint-10\ncheckpoint-15\ncheckpoint-20\ncheckpoint-5\n");

  // Resume from step 15 (mid-epoch: step 5 of the second epoch) in a copy.
  ASSERT_EQ(testing::run("mkdir " + dir.file("part") + " && cp -R " +
                         dir.file("full/checkpoint-15") + " " + dir.file("part/"))
                .exit_code,
            0);
  auto part_data = std::make_shared<CountingDataset>(data);
  auto model = fresh_model();
  Trainer part(model, args_in(dir.file("part")).resume_from_checkpoint("true"), part_data, nullptr,
               data::default_collate);
  part.train();
  EXPECT_EQ(part_data->reads, 5 * 32);  // the last 5 steps only: nothing skipped was read
  EXPECT_EQ(part.state().global_step, 20);
  expect_same_parameters(full.model(), part.model());
  expect_same_adam_state(*full.optimizer(), *part.optimizer());
  EXPECT_EQ(without_timings(part.state().log_history), without_timings(full.state().log_history));
  EXPECT_EQ(part.lr_scheduler()->get_last_lr(), full.lr_scheduler()->get_last_lr());
  // The same files, byte for byte, as far as they do not hold timings.
  EXPECT_EQ(testing::slurp(dir.file("part/checkpoint-20/model.safetensors")),
            testing::slurp(dir.file("full/checkpoint-20/model.safetensors")));
  EXPECT_EQ(testing::slurp(dir.file("part/checkpoint-20/rank_state_0.safetensors")),
            testing::slurp(dir.file("full/checkpoint-20/rank_state_0.safetensors")));

  // ignore_data_skip: the interrupted epoch starts again from its first batch.
  testing::TempDir again;
  ASSERT_EQ(
      testing::run("cp -R " + dir.file("full/checkpoint-15") + " " + again.path() + "/").exit_code,
      0);
  auto again_data = std::make_shared<CountingDataset>(data);
  Trainer ignore(fresh_model(),
                 args_in(again.path()).resume_from_checkpoint("true").ignore_data_skip(true),
                 again_data, nullptr, data::default_collate);
  ignore.train();
  EXPECT_EQ(again_data->reads, 5 * 32);  // stops at max_steps, 5 steps into the epoch
  EXPECT_EQ(ignore.state().global_step, 20);
}

TEST(Checkpoint, ACheckpointHoldsItsFilesUnderAManifestThatFindsDamage) {
  testing::TempDir dir;
  Trainer t(fresh_model(), args_in(dir.path()).max_steps(5), random_dataset(64));
  t.train();
  std::string ckpt = dir.file("checkpoint-5");
  Manifest m = verify_checkpoint(ckpt);
  EXPECT_EQ(m.global_step, 5);
  EXPECT_EQ(m.world_size, 1);
  EXPECT_EQ(m.total_batch_size, 32);
  EXPECT_EQ(m.model_name, "basic_net");
  std::vector<std::string> names;
  for (const auto& f : m.files) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"model.safetensors", "trainer_state.json",
                                             "training_args.json", "optimizer.pt", "scheduler.json",
                                             "rank_state_0.safetensors", "loss_curve.npy"}));
  json state = base::read_json(ckpt + "/trainer_state.json");
  EXPECT_EQ(state["global_step"], 5);
  EXPECT_TRUE(state.contains("best_metric"));
  EXPECT_TRUE(state.contains("best_model_checkpoint"));
  // No staging folder is left behind.
  EXPECT_EQ(testing::run("ls -A " + dir.path() + " | grep -c tmp-checkpoint").out, "0\n");

  // One flipped byte in the middle of the weights.
  {
    std::fstream f(ckpt + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1000);
    char c = 0;
    f.get(c);
    f.seekp(1000);
    f.put(static_cast<char>(c ^ 0x10));
  }
  try {
    verify_checkpoint(ckpt);
    FAIL() << "a flipped byte was not found";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors has CRC-32"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_manifest("{\"format\": \"trainer-checkpoint/1\"}", "m"), InputError);
  EXPECT_THROW(parse_manifest("[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]", "m"), InputError);
}

// Evaluation "scores" 1, 5, 2, 3, 1, 0, ... in turn, so that the best is neither the first nor
// the last.
ComputeMetrics scripted_score() {
  auto calls = std::make_shared<int>(0);
  return [calls](const EvalPrediction&) -> Metrics {
    static const double kScores[] = {1, 5, 2, 3, 1, 0};
    return {{"score", kScores[(*calls)++ % 6]}};
  };
}

TEST(Checkpoint, SaveTotalLimitTwoWithLoadBestKeepsExactlyTheNewestAndTheBest) {
  testing::TempDir dir;
  auto args = args_in(dir.path())
                  .num_train_epochs(1)
                  .per_device_train_batch_size(16)  // 10 steps
                  .eval_strategy("steps")
                  .eval_steps(2)
                  .save_steps(2)
                  .save_total_limit(2)
                  .load_best_model_at_end(true)
                  .metric_for_best_model("score");
  Trainer t(fresh_model(), args, random_dataset(160), random_dataset(16, 9), nullptr,
            scripted_score());
  t.train();
  // Scores 1, 5, 2, 3, 1 at steps 2, 4, 6, 8, 10: the best is step 4's.
  EXPECT_EQ(testing::run("ls " + dir.path()).out, "checkpoint-10\ncheckpoint-4\n");
  EXPECT_EQ(t.state().best_model_checkpoint.value_or(""), dir.file("checkpoint-4"));
  EXPECT_EQ(t.state().best_metric.value_or(0), 5.0);
  EXPECT_EQ(t.state().best_global_step.value_or(0), 4);
  // load_best_model_at_end: the model is step 4's.
  auto best = fresh_model();
  io::load_state_dict(*best, io::load_safetensors(dir.file("checkpoint-4/model.safetensors")),
                      "best");
  expect_same_parameters(t.model(), *best);
}

TEST(Checkpoint, TheBestCheckpointOfAMovedRunIsLookedForInThisOutputDir) {
  testing::TempDir dir;
  auto args = args_in(dir.file("a"))
                  .max_steps(6)
                  .per_device_train_batch_size(16)
                  .eval_strategy("steps")
                  .eval_steps(2)
                  .save_steps(2)
                  .load_best_model_at_end(true)
                  .metric_for_best_model("score");
  Trainer first(fresh_model(), args, random_dataset(160), random_dataset(16, 9), nullptr,
                scripted_score());
  first.train();
  EXPECT_EQ(first.state().best_model_checkpoint.value_or(""), dir.file("a/checkpoint-4"));
  // The run moves; resumed from its step 4, its best is the moved checkpoint-4.
  ASSERT_EQ(testing::run("mv " + dir.file("a") + " " + dir.file("b")).exit_code, 0);
  Trainer moved(fresh_model(),
                TrainingArguments(args)
                    .output_dir(dir.file("b"))
                    .resume_from_checkpoint(dir.file("b/checkpoint-4")),
                random_dataset(160), random_dataset(16, 9), nullptr, scripted_score());
  moved.train();
  EXPECT_EQ(moved.state().best_model_checkpoint.value_or(""), dir.file("b/checkpoint-4"));
}

TEST(Checkpoint, RotationNeverRemovesTheCheckpointJustSaved) {
  testing::TempDir dir;
  Trainer full(fresh_model(), args_in(dir.path()).max_steps(10).save_steps(2), random_dataset(320));
  full.train();
  // Resumed from step 4 and stopped at 5, with the later steps of the first run still there.
  Trainer resumed(fresh_model(),
                  args_in(dir.path())
                      .max_steps(5)
                      .save_steps(1000)
                      .save_total_limit(1)
                      .resume_from_checkpoint(dir.file("checkpoint-4")),
                  random_dataset(320));
  resumed.train();
  EXPECT_EQ(testing::run("ls " + dir.path()).out, "checkpoint-5\n");
}

TEST(Checkpoint, EarlyStoppingStopsAfterPatienceEvaluationsWithoutImprovement) {
  testing::TempDir dir;
  auto args = args_in(dir.path())
                  .num_train_epochs(1)
                  .per_device_train_batch_size(16)
                  .eval_strategy("steps")
                  .eval_steps(1)
                  .save_strategy("no")
                  .metric_for_best_model("score")
                  .early_stopping_patience(2);
  // Scores 1 (the first: best), 5 (better), 2, 3 (two evaluations without improving).
  Trainer t(fresh_model(), args, random_dataset(160), random_dataset(16, 9), nullptr,
            scripted_score());
  t.train();
  EXPECT_EQ(t.state().global_step, 4);
  EXPECT_EQ(t.state().best_metric.value_or(0), 5.0);
}

// Transformers' restore_callback_states_from_checkpoint: early stopping's count of evaluations
// without improvement comes back with the checkpoint only when asked for.
TEST(Checkpoint, RestoreCallbackStatesBringsBackEarlyStoppingsCount) {
  auto args = [](const std::string& dir) {
    return args_in(dir)
        .per_device_train_batch_size(16)
        .eval_strategy("steps")
        .eval_steps(1)
        .save_steps(3)
        .metric_for_best_model("score")
        .early_stopping_patience(2);
  };
  for (bool restore : {true, false}) {
    testing::TempDir dir;
    // Scores 1, 5 (the best), 2 at steps 1-3: one evaluation without improving when step 3 saves.
    Trainer first(fresh_model(), args(dir.path()).max_steps(3), random_dataset(160),
                  random_dataset(16, 9), nullptr, scripted_score());
    first.train();
    // Resumed, the scores start again at 1, 5, ...: with the count restored the next evaluation
    // (1) is the second without improving; without it, 1 and then 5 (not better than 5) are.
    Trainer resumed(fresh_model(),
                    args(dir.path())
                        .max_steps(10)
                        .restore_callback_states_from_checkpoint(restore)
                        .resume_from_checkpoint(dir.file("checkpoint-3")),
                    random_dataset(160), random_dataset(16, 9), nullptr, scripted_score());
    resumed.train();
    EXPECT_EQ(resumed.state().global_step, restore ? 4 : 5) << restore;
    EXPECT_EQ(resumed.state().best_metric.value_or(0), 5.0);
  }
}

// compute_loss returns NaN at the steps named (1-based), or at every step.
class NanTrainer : public Trainer {
 public:
  NanTrainer(std::shared_ptr<models::Model> model, TrainingArguments args,
             std::shared_ptr<const data::Dataset> data, std::set<int64_t> steps, bool always)
      : Trainer(std::move(model), std::move(args), std::move(data)),
        steps_(std::move(steps)),
        always_(always) {}
  LossOutput compute_loss(models::Model& model, const data::Batch& inputs, bool return_outputs,
                          const torch::Tensor& num_items_in_batch = {}) override {
    LossOutput out = Trainer::compute_loss(model, inputs, return_outputs, num_items_in_batch);
    if (always_ || steps_.count(state().global_step + 1)) out.loss = out.loss * NAN;
    return out;
  }

 private:
  std::set<int64_t> steps_;
  bool always_;
};

TEST(Checkpoint, ANanLossSkipsItsUpdateAndTrainingGoesOn) {
  testing::TempDir dir;
  // The host loop's check, at every step (the CUDA loop's: tests/lib/runtime/cuda_test.cpp).
  NanTrainer t(fresh_model(),
               args_in(dir.path()).max_steps(6).logging_steps(1).save_steps(100).use_cpu(true),
               random_dataset(320), {3}, false);
  auto before = fresh_model();
  t.train();
  EXPECT_EQ(t.state().global_step, 6);
  for (const auto& p : t.model().parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  // Every logged loss is finite (the NaN step logs the mean so far), and the schedule counted
  // the skipped step: learning rates fall linearly to 0 at step 6 (each log's the rate its step
  // trained with, as Transformers 5 logs it).
  const auto& history = t.state().log_history;
  ASSERT_GE(history.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(std::isfinite(history[i]["loss"].get<double>())) << i;
    EXPECT_NEAR(history[i]["learning_rate"].get<double>(), 1e-2 * (6 - i) / 6.0, 1e-12) << i;
  }
  // The optimizer stepped 5 times, not 6.
  auto& group = t.optimizer()->param_groups()[0];
  auto& state = static_cast<torch::optim::AdamWParamState&>(
      *t.optimizer()->state().at(group.params()[0].unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 5);
}

TEST(Checkpoint, LoggingNanInfFilterFalseLogsTheNanLoss) {
  testing::TempDir dir;
  NanTrainer t(fresh_model(),
               args_in(dir.path())
                   .max_steps(4)
                   .logging_steps(1)
                   .save_steps(100)
                   .use_cpu(true)
                   .logging_nan_inf_filter(false),
               random_dataset(320), {3}, false);
  t.train();
  const auto& history = t.state().log_history;
  ASSERT_GE(history.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(std::isnan(history[i]["loss"].get<double>()), i == 2) << i;
  }
}

TEST(Checkpoint, NanAtEveryStepStopsWithAnErrorAndWhatWasSavedIsFinite) {
  testing::TempDir dir;
  NanTrainer t(fresh_model(),
               args_in(dir.path()).max_steps(20).save_steps(2).max_nonfinite_steps(5).use_cpu(true),
               random_dataset(320), {}, true);
  try {
    t.train();
    FAIL() << "training went on";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("training stopped at step 5: the loss or gradient norm was not finite "
                        "for 5 steps in a row (max_nonfinite_steps); the last checkpoint is "),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("checkpoint-4"), std::string::npos) << what;
  }
  auto saved = io::load_safetensors(dir.file("checkpoint-4/model.safetensors"));
  for (const auto& [name, tensor] : saved) EXPECT_TRUE(torch::isfinite(tensor).all().item<bool>());

  // Weights that are not finite are never saved.
  {
    torch::NoGradGuard no_grad;
    t.model().parameters()[0].fill_(NAN);
  }
  EXPECT_THROW(t.save_checkpoint(), std::runtime_error);
  EXPECT_EQ(testing::run("ls -A " + dir.path()).out, "checkpoint-2\ncheckpoint-4\n");
}

TEST(Checkpoint, ResumeRefusesAnotherBatchSizeOrAModelOnlyCheckpoint) {
  testing::TempDir dir;
  Trainer t(fresh_model(), args_in(dir.path()).max_steps(2).save_steps(2), random_dataset(64));
  t.train();
  Trainer other(fresh_model(),
                args_in(dir.path())
                    .max_steps(4)
                    .per_device_train_batch_size(16)
                    .resume_from_checkpoint(dir.file("checkpoint-2")),
                random_dataset(64));
  try {
    other.train();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("total batch size of 32 (1 process); this run's is 16"),
              std::string::npos)
        << e.what();
  }
  // A checkpoint under another step's name.
  ASSERT_EQ(
      testing::run("cp -R " + dir.file("checkpoint-2") + " " + dir.file("checkpoint-9")).exit_code,
      0);
  Trainer renamed(
      fresh_model(),
      args_in(dir.path()).max_steps(12).resume_from_checkpoint(dir.file("checkpoint-9")),
      random_dataset(64));
  try {
    renamed.train();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint " + dir.file("checkpoint-9") +
                                         " holds global step 2, not the step its name says");
  }
  ASSERT_EQ(testing::run("rm -r " + dir.file("checkpoint-9")).exit_code, 0);
  // A checkpoint of another model: the first tensor that does not fit is named.
  Trainer other_model(std::make_shared<TinyNet>(8),
                      args_in(dir.path()).max_steps(4).resume_from_checkpoint("true"),
                      random_dataset(64));
  try {
    other_model.train();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight"), std::string::npos) << e.what();
  }
  testing::TempDir only;
  Trainer model_only(fresh_model(), args_in(only.path()).max_steps(2).save_only_model(true),
                     random_dataset(64));
  model_only.train();
  EXPECT_EQ(testing::run("ls " + only.file("checkpoint-2")).out,
            "loss_curve.npy\nmanifest.json\nmodel.safetensors\ntrainer_state.json\n"
            "training_args.json\n");
  Trainer resumed(fresh_model(), args_in(only.path()).max_steps(4).resume_from_checkpoint("true"),
                  random_dataset(64));
  EXPECT_THROW(resumed.train(), InputError);
}

}  // namespace checkpoint_test
}  // namespace trainer
