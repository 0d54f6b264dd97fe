// The memory savers against the plain computation: the chunked linear + cross-entropy gives the
// plain loss and gradients (chunk sizes, ignored labels, Gemma's softcap, a frozen weight, no
// grad, bad labels), and activation checkpointing and the chunked loss leave every model family's
// gradients as they were (fp32, dropout on, LoRA too).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/models/checkpoint.h"
#include "lib/models/gpt.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/hf_config.h"
#include "lib/models/linear_cross_entropy.h"
#include "lib/models/lora.h"
#include "lib/models/lora_config.h"
#include "lib/models/registry.h"

namespace trainer::memory_savers_test {
namespace {

using torch::Tensor;

// max |a - b| / max(max |b|, tiny).
double relative_diff(const Tensor& a, const Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>() / scale;
}

struct LossAndGrads {
  Tensor loss, grad_hidden, grad_weight;
};

LossAndGrads plain(const Tensor& hidden, const Tensor& weight, const Tensor& labels,
                   double softcap) {
  Tensor h = hidden.detach().requires_grad_(true), w = weight.detach().requires_grad_(true);
  Tensor z = torch::nn::functional::linear(h, w);
  if (softcap > 0) z = torch::tanh(z / softcap) * softcap;
  Tensor loss =
      torch::cross_entropy_loss(z.to(torch::kFloat), labels, {}, torch::Reduction::Sum, -100, 0.0);
  loss.backward();
  return {loss.detach(), h.grad(), w.grad()};
}

LossAndGrads chunked(const Tensor& hidden, const Tensor& weight, const Tensor& labels,
                     double softcap, int64_t rows) {
  Tensor h = hidden.detach().requires_grad_(true), w = weight.detach().requires_grad_(true);
  Tensor loss = models::linear_cross_entropy(h, w, labels, softcap, rows);
  loss.backward();
  return {loss.detach(), h.grad(), w.grad()};
}

TEST(LinearCrossEntropy, EqualsThePlainLossAndGradientsAtEveryChunkSize) {
  torch::manual_seed(1);
  const Tensor hidden = torch::randn({37, 16}), weight = torch::randn({50, 16}) * 0.5;
  Tensor labels = torch::randint(0, 50, {37}, torch::kLong);
  labels.index_put_({torch::tensor({0, 5, 6, 36})}, -100);
  for (double softcap : {0.0, 3.0}) {
    const LossAndGrads want = plain(hidden, weight, labels, softcap);
    for (int64_t rows : {1, 5, 36, 37, 0}) {
      const LossAndGrads got = chunked(hidden, weight, labels, softcap, rows);
      SCOPED_TRACE(::testing::Message() << "softcap " << softcap << ", rows " << rows);
      EXPECT_LT(relative_diff(got.loss, want.loss), 1e-6);
      EXPECT_LT(relative_diff(got.grad_hidden, want.grad_hidden), 1e-5);
      EXPECT_LT(relative_diff(got.grad_weight, want.grad_weight), 1e-5);
      // The ignored rows get no gradient at all.
      EXPECT_EQ(got.grad_hidden[5].abs().max().item<double>(), 0.0);
    }
  }
  // What the tolerance tells apart: the cap changes the gradients by far more.
  EXPECT_GT(relative_diff(chunked(hidden, weight, labels, 3.0, 5).grad_weight,
                          plain(hidden, weight, labels, 0.0).grad_weight),
            1e-2);
}

TEST(LinearCrossEntropy, AFrozenWeightNoGradAndAccumulation) {
  torch::manual_seed(2);
  const Tensor hidden = torch::randn({9, 8}), weight = torch::randn({11, 8});
  const Tensor labels = torch::randint(0, 11, {9}, torch::kLong);
  const LossAndGrads want = plain(hidden, weight, labels, 0.0);
  // A frozen weight (LoRA's lm_head): only the hidden states get a gradient.
  Tensor h = hidden.clone().requires_grad_(true);
  models::linear_cross_entropy(h, weight, labels, 0.0, 4).backward();
  EXPECT_LT(relative_diff(h.grad(), want.grad_hidden), 1e-5);
  // Twice into the same leaves: the gradients add up, as autograd's do; the scale of the output's
  // gradient (a loss divided by a token count) reaches them.
  Tensor w = weight.clone().requires_grad_(true);
  for (int k = 0; k < 2; ++k)
    (models::linear_cross_entropy(hidden, w, labels, 0.0, 4) / 4).backward();
  EXPECT_LT(relative_diff(w.grad(), want.grad_weight / 2), 1e-5);
  // Without gradients: the value alone.
  torch::NoGradGuard no_grad;
  Tensor value = models::linear_cross_entropy(hidden, w, labels, 0.0, 4);
  EXPECT_FALSE(value.requires_grad());
  EXPECT_LT(relative_diff(value, want.loss), 1e-6);
}

TEST(LinearCrossEntropy, ALabelOutsideTheVocabularyIsPyTorchsErrorAndNoLabelIsNan) {
  const Tensor hidden = torch::randn({3, 4}), weight = torch::randn({6, 4});
  try {
    models::linear_cross_entropy(hidden, weight, torch::tensor({1, 6, -100}, torch::kLong));
    FAIL() << "a label of 6 with 6 classes was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("Target 6 is out of bounds."),
              std::string::npos)
        << e.what_without_backtrace();
  }
  EXPECT_THROW(models::linear_cross_entropy(hidden, weight, torch::tensor({-1, 0, 0})), c10::Error);
  // Every label ignored: the mean is 0 / 0, as cross_entropy's.
  const Tensor none = torch::full({1, 3}, -100, torch::kLong);
  EXPECT_TRUE(std::isnan(
      models::causal_lm_linear_loss(hidden.unsqueeze(0), weight, none, {}).item<double>()));
}

TEST(LinearCrossEntropy, TheCausalLossShiftsAndWeighsAsTransformers) {
  torch::manual_seed(3);
  const Tensor hidden = torch::randn({2, 7, 8}), weight = torch::randn({13, 8});
  Tensor labels = torch::randint(0, 13, {2, 7}, torch::kLong);
  labels[1].slice(0, 4).fill_(-100);
  models::Task task;
  task.kind = data::TaskKind::kCausalLM;
  const Tensor logits = torch::nn::functional::linear(hidden, weight);
  for (const Tensor& items : {Tensor(), torch::tensor(20.0)}) {
    const Tensor want = models::task_loss(task, logits, labels, items);
    const Tensor got = models::causal_lm_linear_loss(hidden, weight, labels, items);
    EXPECT_LT(relative_diff(got, want), 1e-6);
  }
}

// ---- Whole models: the same gradients with the savers on ---------------------------------

std::shared_ptr<models::HfCausalLM> tiny(const std::string& type) {
  nlohmann::ordered_json overrides;
  if (type == "gpt2") {
    overrides = {{"n_layer", 3}, {"n_embd", 32}, {"n_head", 4}, {"n_positions", 64}};
  } else {
    overrides = {{"num_hidden_layers", 3},   {"hidden_size", 32},
                 {"intermediate_size", 64},  {"num_attention_heads", 4},
                 {"num_key_value_heads", 2}, {"max_position_embeddings", 64},
                 {"attention_dropout", 0.1}};
    if (type == "qwen3" || type == "gemma3_text") overrides["head_dim"] = 8;
    if (type == "mistral" || type == "gemma3_text") overrides["sliding_window"] = 4;
    if (type == "gemma3_text") overrides["final_logit_softcapping"] = 2.0;
  }
  torch::manual_seed(0);
  return models::make_hf_causal_lm(models::hf_config_from_defaults(type, overrides, 97));
}

// The loss and every parameter's gradient of one training step on a padded batch, with the
// dropout masks drawn from `dropout_seed`.
std::vector<Tensor> step(models::Model& model, const std::vector<std::string>& names,
                         uint64_t dropout_seed = 5) {
  model.train();
  model.zero_grad();
  torch::manual_seed(4);
  data::Batch batch;
  batch["input_ids"] = torch::randint(0, 97, {2, 12}, torch::kLong);
  Tensor mask = torch::ones({2, 12}, torch::kLong);
  mask[1].slice(0, 9).fill_(0);
  batch["attention_mask"] = mask;
  Tensor labels = batch.at("input_ids").clone();
  labels.masked_fill_(mask.eq(0), -100);
  batch["labels"] = labels;
  batch.num_items_in_batch = labels.slice(1, 1).ne(-100).sum();
  torch::manual_seed(dropout_seed);
  Tensor loss = model.forward(batch).loss;
  loss.backward();
  std::vector<Tensor> out{loss.detach()};
  auto params = model.named_parameters();
  for (const auto& name : names) {
    const Tensor& g = params[name].grad();
    out.push_back(g.defined() ? g.clone() : torch::zeros_like(params[name]));
  }
  return out;
}

std::vector<std::string> trainable(models::Model& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters())
    if (item.value().requires_grad()) names.push_back(item.key());
  return names;
}

class MemorySavers : public ::testing::TestWithParam<std::string> {};

TEST_P(MemorySavers, LeaveEveryGradientAsItWas) {
  auto model = tiny(GetParam());
  const auto names = trainable(*model);
  const std::vector<Tensor> want = step(*model, names);
  // Dropout is on (GPT-2's three, the family's attention dropout): the replay must draw the
  // forward's masks. A step with other masks is far away.
  torch::manual_seed(9);
  struct Setting {
    int64_t every;
    bool chunked;
  };
  for (Setting s : {Setting{1, false}, Setting{2, false}, Setting{0, true}, Setting{1, true}}) {
    models::set_activation_checkpointing(*model, s.every);
    models::set_chunked_loss(*model, s.chunked);
    const std::vector<Tensor> got = step(*model, names);
    const double tolerance = s.chunked ? 1e-5 : 1e-6;
    EXPECT_LT(relative_diff(got[0], want[0]), tolerance) << "every " << s.every;
    double worst = 0;
    std::string where;
    for (size_t i = 1; i < got.size(); ++i) {
      const double d = relative_diff(got[i], want[i]);
      if (d > worst) worst = d, where = names[i - 1];
    }
    EXPECT_LT(worst, tolerance) << GetParam() << ", every " << s.every << ", chunked " << s.chunked
                                << ": " << where;
  }
  models::set_activation_checkpointing(*model, 0);
  models::set_chunked_loss(*model, false);
}

INSTANTIATE_TEST_SUITE_P(Families, MemorySavers,
                         ::testing::Values("gpt2", "llama", "qwen2", "qwen3", "mistral",
                                           "gemma3_text"));

TEST(MemorySavers, OtherDropoutMasksGiveOtherGradients) {
  // What the tolerances above tell apart: a replay that drew new masks.
  auto model = tiny("llama");
  const auto names = trainable(*model);
  const std::vector<Tensor> a = step(*model, names, 5), b = step(*model, names, 6);
  double most = 0;
  for (size_t i = 1; i < a.size(); ++i) most = std::max(most, relative_diff(a[i], b[i]));
  EXPECT_GT(most, 1e-2);
}

TEST(MemorySaversLora, AdaptersUnderAFrozenEmbeddingGetTheirGradients) {
  auto base = tiny("llama");
  models::LoraConfig config;
  config.r = 4;
  config.lora_alpha = 8;
  config.target_modules = {"q_proj", "v_proj"};
  config.init_lora_weights = "gaussian";
  torch::manual_seed(1);
  auto peft = std::make_shared<models::PeftModel>(base, config);
  // B starts at zero: give it values so that A's gradient is not zero either.
  {
    torch::NoGradGuard no_grad;
    for (auto& item : peft->named_parameters())
      if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0, 0.1);
  }
  const auto names = trainable(*peft);
  ASSERT_EQ(names.size(), 12u);
  const std::vector<Tensor> want = step(*peft, names);
  models::set_activation_checkpointing(*peft, 1);
  models::set_chunked_loss(*peft, true);
  const std::vector<Tensor> got = step(*peft, names);
  for (size_t i = 1; i < got.size(); ++i) {
    EXPECT_GT(want[i].abs().max().item<double>(), 0) << names[i - 1];
    EXPECT_LT(relative_diff(got[i], want[i]), 1e-5) << names[i - 1];
  }
}

TEST(MemorySaversGpt, TheRegistrysGptToo) {
  data::DataInfo info{data::TaskKind::kCausalLM, {16}, 97};
  torch::manual_seed(0);
  auto gpt = models::make_model(
      "gpt", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 16}, {"dropout", 0.1}}, info);
  const auto names = trainable(*gpt);
  const auto want = step(*gpt, names);
  models::set_activation_checkpointing(*gpt, 1);
  models::set_chunked_loss(*gpt, true);
  const auto got = step(*gpt, names);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(relative_diff(got[i], want[i]), 1e-5) << i;
}

TEST(MemorySaversRefused, AModelWithoutBlocksSaysSo) {
  data::DataInfo info{data::TaskKind::kClassification, {1, 28, 28}, 10};
  nlohmann::ordered_json options = nlohmann::ordered_json::object();
  auto net = models::make_model("basic_net", options, info);
  try {
    models::set_activation_checkpointing(*net, 1);
    FAIL() << "basic_net took activation checkpointing";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "argument activation_checkpointing: true is not allowed (the model has no "
              "transformer blocks to recompute: gpt and the Hugging Face models have; basic_net, "
              "mlp, resnet and TorchScript models do not support activation checkpointing)");
  }
  models::set_activation_checkpointing(*net, 0);  // off is always fine
}

}  // namespace
}  // namespace trainer::memory_savers_test
