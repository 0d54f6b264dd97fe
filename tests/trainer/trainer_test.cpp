// The Trainer loop: gradient accumulation equivalence, Transformers' step counts and logged
// losses, callbacks and their control flags, compute_loss overrides.
#include "trainer/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/data/mnist.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"
#include "trainer/callbacks.h"

namespace trainer {
namespace trainer_test {

using testing::TinyNet;

std::shared_ptr<data::MnistDataset> random_dataset(int64_t n, int seed = 5) {
  return testing::random_mnist(n, seed);
}

TrainingArguments quiet_args(testing::TempDir& dir) {
  return TrainingArguments()
      .output_dir(dir.path())
      .disable_tqdm(true)
      .learning_rate(1e-2)
      .num_train_epochs(1);
}

std::shared_ptr<TinyNet> fresh_model() { return testing::fresh_tiny_net(32); }

TEST(Trainer, AccumulatingTwoBatchesOf32MakesTheUpdateOfOneBatchOf64) {
  testing::TempDir dir;
  auto data = random_dataset(256);
  auto one = fresh_model(), two = fresh_model();
  Trainer a(one, quiet_args(dir).per_device_train_batch_size(64), data);
  Trainer b(two, quiet_args(dir).per_device_train_batch_size(32).gradient_accumulation_steps(2),
            data);
  TrainOutput ra = a.train();
  TrainOutput rb = b.train();
  EXPECT_EQ(ra.global_step, 4);
  EXPECT_EQ(rb.global_step, 4);
  EXPECT_NEAR(ra.training_loss, rb.training_loss, 1e-5 * std::abs(ra.training_loss));
  auto pa = one->named_parameters(), pb = two->named_parameters();
  for (const auto& item : pa) {
    const torch::Tensor& x = item.value();
    const torch::Tensor& y = pb[item.key()];
    double rel = (x - y).norm().item<double>() / x.norm().item<double>();
    EXPECT_LT(rel, 1e-5) << item.key();
  }
  // And the runs did move the parameters.
  EXPECT_FALSE(torch::allclose(one->fc1->weight, fresh_model()->fc1->weight));
}

TEST(Trainer, StepsPerEpochAreCeilOfBatchesOverAccumulation) {
  testing::TempDir dir;
  // 130 examples at batch 32: 5 batches; accumulation 2: 3 optimizer steps per epoch.
  Trainer t(fresh_model(),
            quiet_args(dir)
                .per_device_train_batch_size(32)
                .gradient_accumulation_steps(2)
                .num_train_epochs(2),
            random_dataset(130));
  TrainOutput out = t.train();
  EXPECT_EQ(out.global_step, 6);
  EXPECT_EQ(t.state().max_steps, 6);
  EXPECT_DOUBLE_EQ(t.state().epoch, 2.0);
}

TEST(Trainer, MaxStepsOverridesEpochsAndLogsEveryLoggingSteps) {
  testing::TempDir dir;
  Trainer t(fresh_model(),
            quiet_args(dir)
                .per_device_train_batch_size(16)
                .max_steps(7)
                .logging_steps(3)
                .num_train_epochs(50),
            random_dataset(64));
  TrainOutput out = t.train();
  EXPECT_EQ(out.global_step, 7);
  const auto& history = t.state().log_history;
  ASSERT_EQ(history.size(), 3u);  // steps 3 and 6, then the final summary
  EXPECT_EQ(history[0]["step"], 3);
  EXPECT_EQ(history[1]["step"], 6);
  for (const char* key : {"loss", "grad_norm", "learning_rate", "epoch", "step"}) {
    EXPECT_TRUE(history[0].contains(key)) << key;
  }
  // Linear decay from 1e-2 over 7 steps: step 3 trained at 1e-2 * 5/7 (Transformers 5 logs the
  // rate a step trained with, read before the schedule steps).
  EXPECT_NEAR(history[0]["learning_rate"].get<double>(), 1e-2 * 5 / 7, 1e-12);
  EXPECT_NEAR(history[0]["epoch"].get<double>(), 0.75, 1e-12);
  for (const char* key :
       {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}) {
    EXPECT_TRUE(history[2].contains(key)) << key;
  }
  // The final train_loss is the mean step loss; the logged losses are means over their windows.
  double logged = history[0]["loss"].get<double>() * 3 + history[1]["loss"].get<double>() * 3;
  EXPECT_GT(out.training_loss * 7, logged - 1e-2);
}

class StopAtThree : public TrainerCallback {
 public:
  void on_step_end(const TrainingArguments&, TrainerState& state,
                   TrainerControl& control) override {
    ++steps;
    if (state.global_step == 3) control.should_training_stop = true;
  }
  void on_evaluate(const TrainingArguments&, TrainerState& state, TrainerControl&,
                   const Metrics& metrics) override {
    evaluations.push_back(metrics);
  }
  void on_epoch_begin(const TrainingArguments&, TrainerState&, TrainerControl&) override {
    ++epochs;
  }
  int steps = 0, epochs = 0;
  std::vector<Metrics> evaluations;
};

TEST(Trainer, CallbacksSeeEventsAndCanStopTraining) {
  testing::TempDir dir;
  auto callback = std::make_shared<StopAtThree>();
  Trainer t(fresh_model(),
            quiet_args(dir).per_device_train_batch_size(8).eval_strategy("steps").eval_steps(2),
            random_dataset(80), random_dataset(20, 9), nullptr, compute_accuracy, {callback});
  t.train();
  EXPECT_EQ(t.state().global_step, 3);
  EXPECT_EQ(callback->steps, 3);
  EXPECT_EQ(callback->epochs, 1);
  ASSERT_EQ(callback->evaluations.size(), 1u);  // at step 2
  const Metrics& m = callback->evaluations[0];
  for (const char* key :
       {"eval_loss", "eval_accuracy", "eval_runtime", "eval_samples_per_second", "epoch"}) {
    EXPECT_EQ(m.count(key), 1u) << key;
  }
  EXPECT_GE(m.at("eval_accuracy"), 0.0);
  EXPECT_LE(m.at("eval_accuracy"), 1.0);
}

TEST(Trainer, EvaluateMatchesAHandComputedLossAndAccuracy) {
  testing::TempDir dir;
  auto model = fresh_model();
  auto eval = random_dataset(50, 4);
  Trainer t(model, quiet_args(dir).per_device_eval_batch_size(16), nullptr, eval, nullptr,
            compute_accuracy);
  Metrics m = t.evaluate();
  torch::NoGradGuard no_grad;
  model->eval();
  torch::Tensor out = model->forward(data::normalize_images(eval->images()));
  EXPECT_NEAR(m.at("eval_loss"), torch::nll_loss(out, eval->labels()).item<double>(), 1e-5);
  EXPECT_DOUBLE_EQ(m.at("eval_accuracy"),
                   out.argmax(1).eq(eval->labels()).sum().item<double>() / 50.0);
}

class ConstantLossTrainer : public Trainer {
 public:
  using Trainer::Trainer;
  LossOutput compute_loss(models::Model& model, const data::Batch& inputs, bool return_outputs,
                          const torch::Tensor& num_items_in_batch = {}) override {
    ++calls;
    torch::Tensor outputs = model.forward(inputs.at("x"));
    return {outputs.sum() * 0 + 2.5, outputs};
  }
  int calls = 0;
};

TEST(Trainer, ASubclassesComputeLossIsWhatTrains) {
  testing::TempDir dir;
  ConstantLossTrainer t(fresh_model(), quiet_args(dir).per_device_train_batch_size(10),
                        random_dataset(40));
  TrainOutput out = t.train();
  EXPECT_EQ(t.calls, 4);
  EXPECT_DOUBLE_EQ(out.training_loss, 2.5);
}

// Overrides each of Transformers' steps, counting the calls, with a plain SGD and a constant rate.
class StepsTrainer : public Trainer {
 public:
  using Trainer::Trainer;
  torch::Tensor training_step(models::Model& model, const data::Batch& inputs,
                              const torch::Tensor& num_items_in_batch = {}) override {
    ++training_steps;
    return Trainer::training_step(model, inputs, num_items_in_batch);
  }
  PredictionOutput prediction_step(models::Model& model, const data::Batch& inputs,
                                   bool prediction_loss_only) override {
    ++prediction_steps;
    return Trainer::prediction_step(model, inputs, prediction_loss_only);
  }
  std::shared_ptr<torch::optim::Optimizer> create_optimizer() override {
    sgd = std::make_shared<torch::optim::SGD>(model().parameters(), torch::optim::SGDOptions(0.1));
    return sgd;
  }
  std::shared_ptr<optim::LRScheduler> create_scheduler(
      int64_t steps, torch::optim::Optimizer& optimizer) override {
    scheduled_steps = steps;
    return Trainer::create_scheduler(steps, optimizer);
  }
  int training_steps = 0, prediction_steps = 0;
  int64_t scheduled_steps = 0;
  std::shared_ptr<torch::optim::SGD> sgd;
};

TEST(Trainer, EachOfTransformersStepsCanBeOverridden) {
  testing::TempDir dir;
  StepsTrainer t(fresh_model(),
                 quiet_args(dir)
                     .per_device_train_batch_size(10)
                     .per_device_eval_batch_size(8)
                     .gradient_accumulation_steps(2)
                     .lr_scheduler_type("constant")
                     .max_grad_norm(0),
                 random_dataset(40), random_dataset(20, 9), nullptr, compute_accuracy);
  t.train();
  EXPECT_EQ(t.training_steps, 4);   // 4 micro-batches of 10
  EXPECT_EQ(t.scheduled_steps, 2);  // 2 optimization steps
  EXPECT_EQ(t.optimizer().get(), t.sgd.get());
  EXPECT_DOUBLE_EQ(t.lr_scheduler()->get_last_lr().at(0), 0.1);  // the SGD's own rate, constant
  t.evaluate();
  EXPECT_EQ(t.prediction_steps, 3);             // 20 at batch 8
  EXPECT_EQ(t.state().log_history.size(), 2u);  // the summary, then the evaluation
}

TEST(Trainer, BuildsItsAcceleratorFromTheArguments) {
  testing::TempDir dir;
  Trainer plain(fresh_model(), quiet_args(dir), random_dataset(8));
  EXPECT_EQ(plain.accelerator().mixed_precision(), "no");
  EXPECT_EQ(plain.accelerator().num_processes(), 1);
  EXPECT_EQ(plain.device().type(), torch::kCPU);
  Trainer bf16(fresh_model(), quiet_args(dir).bf16(true).use_cpu(true), random_dataset(8));
  EXPECT_EQ(bf16.accelerator().mixed_precision(), "bf16");
  EXPECT_EQ(bf16.device().type(), torch::kCPU);
}

TEST(Trainer, TheProgressLineReadsTheLatestStepLossFromTheDevice) {
  testing::TempDir dir;
  ConstantLossTrainer t(fresh_model(), quiet_args(dir).per_device_train_batch_size(10),
                        random_dataset(40));
  EXPECT_FALSE(t.state().read_last_step_loss);
  t.train();
  ASSERT_TRUE(t.state().read_last_step_loss);
  EXPECT_DOUBLE_EQ(t.state().read_last_step_loss(), 2.5);
}

TEST(Callbacks, MetricsPrintLikeTransformers) {
  Metrics m = {{"eval_accuracy", 0.88431},
               {"eval_runtime", 62.345},
               {"eval_samples", 10000},
               {"epoch", 1.0}};
  EXPECT_EQ(format_metrics("eval", m),
            "***** eval metrics *****\n"
            "  epoch         =        1.0\n"
            "  eval_accuracy =     0.8843\n"
            "  eval_runtime  = 0:01:02.34\n"
            "  eval_samples  =      10000\n");
}

}  // namespace trainer_test
}  // namespace trainer
