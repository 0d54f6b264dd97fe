// Transformers' evaluation keys of TrainingArguments, each by its effect: eval_on_start,
// eval_delay, prediction_loss_only, bf16_full_eval / fp16_full_eval, eval_accumulation_steps,
// eval_do_concat_batches, batch_eval_metrics and include_for_metrics.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/data/mnist.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"
#include "trainer/trainer.h"

namespace trainer {
namespace evaluation_keys_test {

std::shared_ptr<data::MnistDataset> random_dataset(int64_t n, int seed = 5) {
  return testing::random_mnist(n, seed);
}

TrainingArguments quiet_args(testing::TempDir& dir) {
  return TrainingArguments()
      .output_dir(dir.path())
      .disable_tqdm(true)
      .learning_rate(1e-2)
      .per_device_train_batch_size(8)
      .per_device_eval_batch_size(16)
      .save_strategy("no")
      .num_train_epochs(1);
}

std::shared_ptr<testing::TinyNet> fresh_model() { return testing::fresh_tiny_net(32); }

// The steps of log_history's evaluation entries.
std::vector<int64_t> eval_steps_of(const TrainerState& state) {
  std::vector<int64_t> steps;
  for (const auto& entry : state.log_history) {
    if (entry.contains("eval_loss")) steps.push_back(entry["step"].get<int64_t>());
  }
  return steps;
}

TEST(EvalKeys, EvalOnStartLogsTheUntrainedModelsLossAtStepZero) {
  testing::TempDir dir;
  auto eval = random_dataset(40, 4);
  // The untrained model's loss, as `trainer evaluate` of it gives it.
  Trainer untrained(fresh_model(), quiet_args(dir), nullptr, eval, nullptr, compute_accuracy);
  const Metrics before = untrained.evaluate();

  Trainer t(fresh_model(), quiet_args(dir).eval_on_start(true).max_steps(3), random_dataset(64),
            eval, nullptr, compute_accuracy);
  t.train();
  const auto& history = t.state().log_history;
  ASSERT_FALSE(history.empty());
  const auto& first = history.front();
  ASSERT_TRUE(first.contains("eval_loss")) << first.dump();
  EXPECT_EQ(first["step"].get<int64_t>(), 0);
  EXPECT_EQ(first["epoch"].get<double>(), 0.0);
  EXPECT_EQ(first["eval_loss"].get<double>(), before.at("eval_loss"));
  EXPECT_EQ(first["eval_accuracy"].get<double>(), before.at("eval_accuracy"));
  // eval_strategy "no": that was the only evaluation.
  EXPECT_EQ(eval_steps_of(t.state()), std::vector<int64_t>{0});
}

TEST(EvalKeys, EvalDelaySkipsTheEvaluationsBeforeItInStepsAndEpochs) {
  testing::TempDir dir;
  Trainer steps(fresh_model(),
                quiet_args(dir).eval_strategy("steps").eval_steps(2).eval_delay(5).max_steps(10),
                random_dataset(64), random_dataset(16, 4));
  steps.train();
  EXPECT_EQ(eval_steps_of(steps.state()), (std::vector<int64_t>{6, 8, 10}));
  // Without the delay: every second step.
  Trainer undelayed(fresh_model(),
                    quiet_args(dir).eval_strategy("steps").eval_steps(2).max_steps(6),
                    random_dataset(64), random_dataset(16, 4));
  undelayed.train();
  EXPECT_EQ(eval_steps_of(undelayed.state()), (std::vector<int64_t>{2, 4, 6}));
  // Epochs: 32 examples at batch 8 are 4 steps an epoch; a delay of 2 epochs skips the first.
  Trainer epochs(fresh_model(),
                 quiet_args(dir).eval_strategy("epoch").eval_delay(2).num_train_epochs(4),
                 random_dataset(32), random_dataset(16, 4));
  epochs.train();
  EXPECT_EQ(eval_steps_of(epochs.state()), (std::vector<int64_t>{8, 12, 16}));
}

// Transformers 5.x's DefaultFlowCallback: the last step is evaluated too when eval_steps does not
// divide it (once when it does), and not before eval_delay.
TEST(EvalKeys, TheLastStepIsEvaluatedWhenEvalStepsDoesNotDivideIt) {
  testing::TempDir dir;
  Trainer uneven(fresh_model(), quiet_args(dir).eval_strategy("steps").eval_steps(3).max_steps(7),
                 random_dataset(64), random_dataset(16, 4));
  uneven.train();
  EXPECT_EQ(eval_steps_of(uneven.state()), (std::vector<int64_t>{3, 6, 7}));
  Trainer even(fresh_model(), quiet_args(dir).eval_strategy("steps").eval_steps(3).max_steps(6),
               random_dataset(64), random_dataset(16, 4));
  even.train();
  EXPECT_EQ(eval_steps_of(even.state()), (std::vector<int64_t>{3, 6}));
  Trainer delayed(fresh_model(),
                  quiet_args(dir).eval_strategy("steps").eval_steps(3).eval_delay(8).max_steps(7),
                  random_dataset(64), random_dataset(16, 4));
  delayed.train();
  EXPECT_EQ(eval_steps_of(delayed.state()), std::vector<int64_t>{});
}

TEST(EvalKeys, PredictionLossOnlyReportsTheLossAndGathersNoOutputs) {
  testing::TempDir dir;
  auto eval = random_dataset(40, 4);
  Trainer full(fresh_model(), quiet_args(dir), nullptr, eval, nullptr, compute_accuracy);
  Trainer loss_only(fresh_model(), quiet_args(dir).prediction_loss_only(true), nullptr, eval,
                    nullptr, compute_accuracy);
  const Metrics all = full.evaluate(), only = loss_only.evaluate();
  EXPECT_EQ(all.count("eval_accuracy"), 1u);
  std::vector<std::string> keys;
  for (const auto& [key, value] : only) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"eval_loss", "eval_runtime", "eval_samples_per_second",
                                            "eval_steps_per_second"}));
  EXPECT_EQ(only.at("eval_loss"), all.at("eval_loss"));
  PredictionResult predicted = loss_only.predict(eval);
  EXPECT_FALSE(predicted.predictions.defined());
  EXPECT_FALSE(predicted.label_ids.defined());
  EXPECT_EQ(predicted.metrics.at("test_loss"), all.at("eval_loss"));
}

// The loss of the model's weights rounded to `dtype`, on inputs rounded so, batch by batch of 16
// (each batch's loss weighs its rows, as the evaluation loop counts it).
double loss_in(torch::Dtype dtype, const data::MnistDataset& eval) {
  auto model = fresh_model();
  model->to(dtype);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = data::normalize_images(eval.images()).to(dtype);
  double sum = 0;
  for (int64_t start = 0; start < eval.size(); start += 16) {
    const int64_t end = std::min<int64_t>(eval.size(), start + 16);
    torch::Tensor out = model->forward(x.slice(0, start, end));
    sum += torch::nll_loss(out, eval.labels().slice(0, start, end)).item<double>() *
           static_cast<double>(end - start);
  }
  return sum / static_cast<double>(eval.size());
}

TEST(EvalKeys, Bf16FullEvalScoresTheWeightsRoundedToBf16AndRestoresThem) {
  testing::TempDir dir;
  auto eval = random_dataset(40, 4);
  auto model = fresh_model();
  const torch::Tensor weight = model->fc1->weight.detach().clone();
  Trainer fp32(fresh_model(), quiet_args(dir), nullptr, eval);
  Trainer bf16(model, quiet_args(dir).bf16_full_eval(true), nullptr, eval);
  const double full = fp32.evaluate().at("eval_loss");
  const double rounded = bf16.evaluate().at("eval_loss");
  EXPECT_EQ(rounded, loss_in(torch::kBFloat16, *eval));
  // bf16's 8 bits of mantissa: a difference, within a few of its relative steps of 2^-8.
  EXPECT_NE(rounded, full);
  EXPECT_LT(std::abs(rounded - full), 0.02 * std::abs(full));
  // The model is float32 again, its weights exactly as before.
  EXPECT_EQ(model->fc1->weight.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(model->fc1->weight, weight));
  // fp16 on the CPU too (Transformers refuses only bf16 on a GPU without it).
  Trainer fp16(fresh_model(), quiet_args(dir).fp16_full_eval(true), nullptr, eval);
  const double half = fp16.evaluate().at("eval_loss");
  EXPECT_EQ(half, loss_in(torch::kHalf, *eval));
  EXPECT_LT(std::abs(half - full), 0.005 * std::abs(full));
}

TEST(EvalKeys, EvalAccumulationStepsGivesTheSameResults) {
  testing::TempDir dir;
  auto eval = random_dataset(50, 4);
  Trainer plain(fresh_model(), quiet_args(dir), nullptr, eval, nullptr, compute_accuracy);
  Trainer every(fresh_model(), quiet_args(dir).eval_accumulation_steps(1), nullptr, eval, nullptr,
                compute_accuracy);
  Trainer third(fresh_model(), quiet_args(dir).eval_accumulation_steps(3), nullptr, eval, nullptr,
                compute_accuracy);
  const PredictionResult a = plain.predict(eval), b = every.predict(eval), c = third.predict(eval);
  for (const PredictionResult* r : {&b, &c}) {
    EXPECT_TRUE(torch::equal(r->predictions, a.predictions));
    EXPECT_TRUE(torch::equal(r->label_ids, a.label_ids));
    EXPECT_EQ(r->metrics.at("test_loss"), a.metrics.at("test_loss"));
    EXPECT_EQ(r->metrics.at("test_accuracy"), a.metrics.at("test_accuracy"));
  }
  EXPECT_EQ(a.predictions.size(0), 50);
}

TEST(EvalKeys, EvalDoConcatBatchesFalseKeepsEachBatch) {
  testing::TempDir dir;
  auto eval = random_dataset(50, 4);
  Trainer concat(fresh_model(), quiet_args(dir), nullptr, eval, nullptr, compute_accuracy);
  std::vector<size_t> seen;
  Trainer apart(fresh_model(), quiet_args(dir).eval_do_concat_batches(false), nullptr, eval,
                nullptr, [&](const EvalPrediction& p) {
                  seen.push_back(p.prediction_batches.size());
                  EXPECT_FALSE(p.predictions.defined());
                  return compute_accuracy(p);
                });
  const PredictionResult a = concat.predict(eval), b = apart.predict(eval);
  EXPECT_FALSE(b.predictions.defined());
  ASSERT_EQ(b.prediction_batches.size(), 4u);  // 16, 16, 16, 2
  ASSERT_EQ(b.label_id_batches.size(), 4u);
  EXPECT_EQ(b.prediction_batches.back().size(0), 2);
  EXPECT_TRUE(torch::equal(torch::cat(b.prediction_batches), a.predictions));
  EXPECT_TRUE(torch::equal(torch::cat(b.label_id_batches), a.label_ids));
  EXPECT_EQ(seen, std::vector<size_t>{4});
  EXPECT_EQ(b.metrics.at("test_accuracy"), a.metrics.at("test_accuracy"));
}

TEST(EvalKeys, BatchEvalMetricsEqualTheWholeSetsAndEndWithComputeResult) {
  testing::TempDir dir;
  auto eval = random_dataset(50, 4);
  Trainer whole(fresh_model(), quiet_args(dir), nullptr, eval, nullptr,
                metrics_for_task(data::TaskKind::kClassification));
  Trainer batchwise(fresh_model(), quiet_args(dir).batch_eval_metrics(true), nullptr, eval, nullptr,
                    metrics_for_task(data::TaskKind::kClassification));
  const Metrics a = whole.evaluate(), b = batchwise.evaluate();
  EXPECT_GT(a.at("eval_accuracy"), 0.0);
  EXPECT_EQ(b.at("eval_accuracy"), a.at("eval_accuracy"));
  EXPECT_EQ(b.at("eval_loss"), a.at("eval_loss"));
  // A second evaluation starts its sums afresh.
  EXPECT_EQ(batchwise.evaluate().at("eval_accuracy"), a.at("eval_accuracy"));
  // Regression's running sums: rmse and mae as over the whole set.
  data::TaskKind regression = data::TaskKind::kRegression;
  torch::manual_seed(3);
  EvalPrediction all{torch::randn({50, 1}), torch::randn({50})};
  const Metrics expected = metrics_for_task(regression)(all);
  ComputeMetrics running = metrics_for_task(regression);
  Metrics last;
  for (int64_t start = 0; start < 50; start += 16) {
    EvalPrediction part{all.predictions.slice(0, start, std::min<int64_t>(50, start + 16)),
                        all.label_ids.slice(0, start, std::min<int64_t>(50, start + 16))};
    part.compute_result = start + 16 >= 50;
    last = running(part);
    if (!*part.compute_result) {
      EXPECT_TRUE(last.empty());
    }
  }
  EXPECT_NEAR(last.at("rmse"), expected.at("rmse"), 1e-12);
  EXPECT_NEAR(last.at("mae"), expected.at("mae"), 1e-12);
  // A compute_metrics of its own sees compute_result false after each batch, true after the last.
  std::vector<bool> results;
  Trainer custom(fresh_model(), quiet_args(dir).batch_eval_metrics(true), nullptr, eval, nullptr,
                 [&](const EvalPrediction& p) -> Metrics {
                   results.push_back(p.compute_result.value());
                   return {{"batches", static_cast<double>(results.size())}};
                 });
  EXPECT_EQ(custom.evaluate().at("eval_batches"), 4.0);
  EXPECT_EQ(results, (std::vector<bool>{false, false, false, true}));
}

TEST(EvalKeys, IncludeForMetricsHandsTheInputsAndLossesToComputeMetrics) {
  testing::TempDir dir;
  auto eval = random_dataset(50, 4);
  EvalPrediction seen;
  Trainer t(fresh_model(), quiet_args(dir).include_for_metrics({"inputs", "loss"}), nullptr, eval,
            nullptr, [&](const EvalPrediction& p) {
              seen = p;
              return Metrics{{"mean_loss", p.losses.to(torch::kDouble).mean().item<double>()}};
            });
  const Metrics m = t.evaluate();
  ASSERT_TRUE(seen.inputs.defined());
  ASSERT_TRUE(seen.losses.defined());
  // The inputs are the batches' "x", in order: the normalised images.
  EXPECT_TRUE(torch::equal(seen.inputs.reshape({50, 784}),
                           data::normalize_images(eval->images()).reshape({50, 784})));
  EXPECT_EQ(seen.losses.numel(), 50);
  EXPECT_NEAR(m.at("eval_mean_loss"), m.at("eval_loss"), 1e-12);
  // Without the key, neither.
  EvalPrediction plain;
  Trainer none(fresh_model(), quiet_args(dir), nullptr, eval, nullptr,
               [&](const EvalPrediction& p) {
                 plain = p;
                 return Metrics{};
               });
  none.evaluate();
  EXPECT_FALSE(plain.inputs.defined());
  EXPECT_FALSE(plain.losses.defined());
  // Batchwise, each call gets its batch's.
  std::vector<int64_t> sizes;
  Trainer batchwise(fresh_model(),
                    quiet_args(dir).include_for_metrics({"loss"}).batch_eval_metrics(true), nullptr,
                    eval, nullptr, [&](const EvalPrediction& p) {
                      sizes.push_back(p.losses.numel());
                      EXPECT_FALSE(p.inputs.defined());
                      return Metrics{};
                    });
  batchwise.evaluate();
  EXPECT_EQ(sizes, (std::vector<int64_t>{16, 16, 16, 2}));
}

}  // namespace evaluation_keys_test
}  // namespace trainer
