// The effects of Transformers' TrainingArguments keys that work inside the Trainer and the models:
// label_smoothing_factor (LabelSmoother's loss and gradients on every loss path), NEFTune's noise
// (its bound, training only), debug underflow_overflow (the first block holding inf named),
// full_determinism (LibTorch's deterministic mode), use_cache (config.json), the process's log
// level.
#include <cmath>

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/nn/functional.h>
#include <torch/torch.h>

#include "lib/base/warn.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/hf_config.h"
#include "lib/models/hf_pretrained.h"
#include "lib/models/linear_cross_entropy.h"
#include "lib/models/model.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"
#include "trainer/trainer.h"

namespace trainer {
namespace {

using torch::Tensor;

double relative_diff(const Tensor& a, const Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item<double>();
}

// Transformers' LabelSmoother written out: (1 - eps) of the label's -log p plus eps of the mean
// over classes of -log p, over the rows whose label is not -100, divided by `denominator` (their
// count when 0).
Tensor label_smoother(const Tensor& logits, const Tensor& labels, double eps,
                      double denominator = 0) {
  const Tensor logp = torch::log_softmax(logits.to(torch::kFloat), -1);
  const Tensor valid = labels.ne(-100);
  const Tensor target = labels.clamp_min(0).unsqueeze(-1);
  const Tensor nll = -logp.gather(-1, target).squeeze(-1).masked_fill(valid.logical_not(), 0);
  const Tensor smooth = -logp.sum(-1).masked_fill(valid.logical_not(), 0);
  const double n = denominator > 0 ? denominator : valid.sum().item<double>();
  return (1 - eps) * nll.sum() / n + eps * smooth.sum() / (n * logits.size(-1));
}

TEST(TrainingKeys, LabelSmoothingIsTransformersLabelSmootherOnEveryLossPath) {
  torch::manual_seed(1);
  const double eps = 0.1;
  // Classification: logits and log-probabilities (BasicNet's outputs) alike.
  models::Task ce;
  ce.kind = data::TaskKind::kClassification;
  const Tensor logits = torch::randn({6, 10});
  Tensor labels = torch::randint(0, 10, {6}, torch::kLong);
  labels[2] = -100;
  const Tensor want = label_smoother(logits, labels, eps);
  EXPECT_LT(relative_diff(models::task_loss(ce, logits, labels, {}, eps), want), 1e-6);
  models::Task nll = ce;
  nll.log_probs = true;
  EXPECT_LT(
      relative_diff(models::task_loss(nll, torch::log_softmax(logits, 1), labels, {}, eps), want),
      1e-6);
  // Without smoothing it is the plain loss.
  EXPECT_LT(relative_diff(models::task_loss(ce, logits, labels, {}, 0.0),
                          torch::nn::functional::cross_entropy(logits, labels)),
            1e-6);

  // A causal LM: the plain logits path and the chunked one, its value and its gradients, divided
  // by num_items_in_batch as Transformers 5.15+ divides.
  const Tensor hidden = torch::randn({2, 7, 8}, torch::requires_grad());
  const Tensor weight = torch::randn({13, 8}, torch::requires_grad());
  Tensor ids = torch::randint(0, 13, {2, 7}, torch::kLong);
  ids[1].slice(0, 4).fill_(-100);
  models::Task lm;
  lm.kind = data::TaskKind::kCausalLM;
  for (const Tensor& items : {Tensor(), torch::tensor(20.0)}) {
    const Tensor z = torch::nn::functional::linear(hidden, weight);
    const Tensor shifted_logits = z.slice(1, 0, -1);
    const Tensor shifted_labels = ids.slice(1, 1);
    const Tensor expected = label_smoother(shifted_logits, shifted_labels, eps,
                                           items.defined() ? items.item<double>() : 0);
    const auto [want_h, want_w] = [&] {
      auto g = torch::autograd::grad({expected}, {hidden, weight});
      return std::make_pair(g[0], g[1]);
    }();
    const Tensor plain =
        models::task_loss(lm, torch::nn::functional::linear(hidden, weight), ids, items, eps);
    EXPECT_LT(relative_diff(plain, expected), 1e-6);
    const Tensor from_logits = models::causal_lm_logits_loss(
        torch::nn::functional::linear(hidden, weight), ids, items, false, nullptr, eps);
    EXPECT_LT(relative_diff(from_logits, expected), 1e-6);
    const Tensor chunked =
        models::causal_lm_linear_loss(hidden, weight, ids, items, 0.0, false, nullptr, eps);
    EXPECT_LT(relative_diff(chunked, expected), 1e-6);
    auto got = torch::autograd::grad({chunked}, {hidden, weight});
    EXPECT_LT(relative_diff(got[0], want_h), 1e-5);
    EXPECT_LT(relative_diff(got[1], want_w), 1e-5);
    // Smoothing raises the loss of confident predictions: it is not the plain cross-entropy.
    EXPECT_GT(relative_diff(chunked, models::causal_lm_linear_loss(hidden, weight, ids, items)),
              1e-3);
  }
}

std::shared_ptr<models::HfCausalLM> tiny_llama() {
  nlohmann::ordered_json overrides = {{"num_hidden_layers", 2},   {"hidden_size", 32},
                                      {"intermediate_size", 64},  {"num_attention_heads", 4},
                                      {"num_key_value_heads", 2}, {"max_position_embeddings", 64}};
  torch::manual_seed(0);
  return models::make_hf_causal_lm(models::hf_config_from_defaults("llama", overrides, 97));
}

data::Batch lm_batch() {
  data::Batch batch;
  batch["input_ids"] = torch::randint(0, 97, {2, 12}, torch::kLong);
  batch["labels"] = batch.at("input_ids").clone();
  return batch;
}

TEST(TrainingKeys, NeftuneNoiseIsBoundedByAlphaOverRootOfTokensTimesHiddenAndOnlyInTraining) {
  auto model = tiny_llama();
  torch::NoGradGuard no_grad;
  const data::Batch batch = lm_batch();
  const Tensor ids = batch.at("input_ids");
  model->eval();
  const Tensor clean = model->hidden_states(ids, Tensor(), nullptr, Tensor());
  model->set_neftune_noise_alpha(5.0);
  // Evaluation: no noise.
  EXPECT_TRUE(torch::equal(model->hidden_states(ids, Tensor(), nullptr, Tensor()), clean));
  model->train();
  const Tensor noisy = model->hidden_states(ids, Tensor(), nullptr, Tensor());
  EXPECT_FALSE(torch::allclose(noisy, clean));
  // Two training forwards draw different noise.
  EXPECT_FALSE(torch::equal(model->hidden_states(ids, Tensor(), nullptr, Tensor()), noisy));
  // The noise itself: uniform in [-m, m], m = alpha / sqrt(tokens x hidden size).
  const Tensor x = torch::randn({4, 50, 64});
  const Tensor n = models::neftune_noise(x, 5.0, true) - x;
  const double m = 5.0 / std::sqrt(50.0 * 64.0);
  EXPECT_LE(n.abs().max().item<double>(), m * (1 + 1e-6));
  EXPECT_GT(n.abs().max().item<double>(), 0.99 * m);
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.02 * m);
  EXPECT_TRUE(torch::equal(models::neftune_noise(x, 5.0, false), x));
}

TEST(TrainingKeys, DebugUnderflowOverflowNamesTheFirstBlockThatHoldsInf) {
  auto model = tiny_llama();
  const data::Batch batch = lm_batch();
  models::set_detect_overflow(*model, true);
  model->train();
  // A finite forward passes.
  EXPECT_NO_THROW(model->forward(batch));
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      if (item.key().find("layers.1.mlp.down_proj.weight") != std::string::npos) {
        item.value().fill_(INFINITY);
      }
    }
  }
  try {
    model->forward(batch);
    FAIL() << "an inf went through";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("debug underflow_overflow: the output of block 1 holds "),
              std::string::npos)
        << what;
  }
  models::set_detect_overflow(*model, false);
  EXPECT_NO_THROW(model->forward(batch));
}

TEST(TrainingKeys, FullDeterminismTurnsOnLibTorchsDeterministicAlgorithms) {
  testing::TempDir dir;
  ASSERT_FALSE(at::globalContext().deterministicAlgorithms());
  {
    Trainer t(testing::fresh_tiny_net(),
              TrainingArguments().output_dir(dir.path()).full_determinism(true).max_steps(1),
              testing::random_mnist(32, 1));
    EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
    EXPECT_TRUE(at::globalContext().deterministicCuDNN());
    t.train();
  }
  at::globalContext().setDeterministicAlgorithms(false, false);
}

TEST(TrainingKeys, UseCacheIsConfigJsonsAsSaved) {
  for (bool use_cache : {false, true}) {
    auto model = tiny_llama();
    testing::TempDir dir;
    Trainer t(model, TrainingArguments().output_dir(dir.path()).use_cache(use_cache).max_steps(1),
              nullptr);
    const auto files = models::hf_pretrained_files(*model, "");
    const auto config = nlohmann::json::parse(files.at("config.json"));
    EXPECT_EQ(config.at("use_cache"), use_cache);
  }
}

TEST(TrainingKeys, TheLogLevelSilencesWarningsAndLetsInfoThrough) {
  const int before = base::log_level();
  ::testing::internal::CaptureStderr();
  base::set_log_level(base::kLogError);
  base::warn("hidden warning");
  base::info("hidden info");
  base::set_log_level(base::kLogInfo);
  base::warn("shown warning");
  base::info("shown info");
  base::set_log_level(before);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "trainer: warning: shown warning\ntrainer: info: shown info\n");
}

}  // namespace
}  // namespace trainer
