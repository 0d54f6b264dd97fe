// The tasks' losses and metrics, the model registry with its options, and token-weighted gradient
// accumulation for causal language models (Transformers' num_items_in_batch, without its bug
// #34191: accumulated micro-batches of unequal length make the update of one large batch).
#include <cmath>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/json_fields.h"
#include "lib/data/registry.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "tests/test_util.h"
#include "trainer/trainer.h"
#include "trainer/training_args.h"

namespace trainer {
namespace tasks_test {

using data::TaskKind;
using json = nlohmann::ordered_json;

// A causal language model without dropout: embedding, then a projection to the vocabulary.
class TinyLM : public models::Model {
 public:
  static constexpr int64_t kVocab = 17;
  TinyLM() {
    embed = register_module("embed", torch::nn::Embedding(kVocab, 8));
    head = register_module("head", torch::nn::Linear(8, kVocab));
    task_.kind = TaskKind::kCausalLM;
  }
  models::ModelOutput forward(const data::Batch& inputs) override {
    torch::Tensor logits = head->forward(torch::tanh(embed->forward(inputs.at("input_ids"))));
    models::ModelOutput out{logits, {}};
    // Like Transformers' causal LMs: given labels, the model scores them itself.
    if (inputs.contains("labels"))
      out.loss = loss(logits, inputs.at("labels"), inputs.num_items_in_batch);
    return out;
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear head{nullptr};
};

// Sequences of 2 to 14 tokens: lengths that differ a lot between micro-batches.
class VariableLengthText : public data::Dataset {
 public:
  explicit VariableLengthText(int64_t n) {
    torch::manual_seed(3);
    for (int64_t i = 0; i < n; ++i) {
      int64_t length = 2 + (i * 7) % 13;
      sequences_.push_back(torch::randint(1, TinyLM::kVocab, {length}, torch::kLong));
    }
  }
  int64_t size() const override { return static_cast<int64_t>(sequences_.size()); }
  data::Example get(int64_t index) const override { return {sequences_[index], sequences_[index]}; }

 private:
  std::vector<torch::Tensor> sequences_;
};

// Pads to the batch's longest sequence: pad id 0, labels -100 there, attention_mask 0.
data::Batch pad_collate(const std::vector<data::Example>& examples) {
  int64_t longest = 0;
  for (const auto& e : examples) longest = std::max(longest, e.input.size(0));
  const auto n = static_cast<int64_t>(examples.size());
  torch::Tensor ids = torch::zeros({n, longest}, torch::kLong);
  torch::Tensor labels = torch::full({n, longest}, -100, torch::kLong);
  torch::Tensor mask = torch::zeros({n, longest}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = examples[i].input.size(0);
    ids[i].slice(0, 0, length).copy_(examples[i].input);
    labels[i].slice(0, 0, length).copy_(examples[i].target);
    mask[i].slice(0, 0, length).fill_(1);
  }
  return data::Batch{{"input_ids", ids}, {"labels", labels}, {"attention_mask", mask}};
}

// Plain SGD at a constant rate, no clipping: the update is the gradient itself, so any change in
// how micro-batches are weighed shows in the parameters (AdamW's first step would hide it).
class SgdTrainer : public Trainer {
 public:
  using Trainer::Trainer;
  std::shared_ptr<torch::optim::Optimizer> create_optimizer() override {
    auto sgd =
        std::make_shared<torch::optim::SGD>(model().parameters(), torch::optim::SGDOptions(1.0));
    return sgd;
  }
};

TrainingArguments lm_args(testing::TempDir& dir) {
  return TrainingArguments()
      .output_dir(dir.path())
      .disable_tqdm(true)
      .max_grad_norm(0)
      .lr_scheduler_type("constant")
      .num_train_epochs(1)
      .logging_steps(1);
}

std::shared_ptr<TinyLM> fresh_lm() {
  torch::manual_seed(5);
  return std::make_shared<TinyLM>();
}

TEST(Tasks, AccumulatingFourBatchesOf8TokensWeighedMakesTheUpdateOfOneBatchOf32) {
  auto data = std::make_shared<VariableLengthText>(32);
  testing::TempDir dir_a, dir_b;
  auto one = fresh_lm(), four = fresh_lm();
  SgdTrainer a(one, lm_args(dir_a).per_device_train_batch_size(32), data, nullptr, pad_collate);
  SgdTrainer b(four, lm_args(dir_b).per_device_train_batch_size(8).gradient_accumulation_steps(4),
               data, nullptr, pad_collate);
  TrainOutput ra = a.train();
  TrainOutput rb = b.train();
  ASSERT_EQ(ra.global_step, 1);
  ASSERT_EQ(rb.global_step, 1);
  // The logged loss is the token mean of the 32 sequences either way.
  EXPECT_NEAR(ra.training_loss, rb.training_loss, 1e-6 * ra.training_loss);
  auto pa = one->named_parameters(), pb = four->named_parameters();
  for (const auto& item : pa) {
    double diff = (item.value() - pb[item.key()]).abs().max().item<double>();
    EXPECT_LT(diff, 1e-6) << item.key();
  }
  EXPECT_FALSE(torch::allclose(one->head->weight, fresh_lm()->head->weight));

  // The mean of the four micro-batches' own means (the old way) is not the token mean here, so
  // the test above tells the two apart.
  auto order = data::RandomSampler(32, 42).indices(0);
  auto model = fresh_lm();
  torch::NoGradGuard no_grad;
  double mean_of_means = 0, token_sum = 0, tokens = 0;
  for (int k = 0; k < 4; ++k) {
    std::vector<data::Example> examples;
    for (int i = 0; i < 8; ++i) examples.push_back(data->get(order[k * 8 + i]));
    data::Batch batch = pad_collate(examples);
    torch::Tensor logits = model->forward(batch).logits;
    models::Task task{TaskKind::kCausalLM, false};
    mean_of_means += models::task_loss(task, logits, batch.at("labels")).item<double>() / 4;
    token_sum +=
        models::task_loss(task, logits, batch.at("labels"), torch::tensor(1)).item<double>();
    tokens += batch.at("labels").slice(1, 1).ne(-100).sum().item<double>();
  }
  EXPECT_NEAR(token_sum / tokens, ra.training_loss, 1e-5);
  EXPECT_GT(std::abs(mean_of_means - token_sum / tokens), 1e-3);
}

// Transformers' grouping: no weight decay on biases and layer norms, GPT-2's ln_1, ln_2 and ln_f
// included; the tied lm_head is the embedding, decayed once.
TEST(Tasks, GptLayerNormsAndBiasesGetNoWeightDecay) {
  testing::TempDir dir;
  auto model =
      models::make_model("gpt", json::parse(R"({"n_layer": 2, "n_embd": 16, "n_head": 2})"),
                         {TaskKind::kCausalLM, {16}, 256});
  Trainer t(model, lm_args(dir).weight_decay(0.1), std::make_shared<VariableLengthText>(4));
  auto optimizer = t.create_optimizer();
  ASSERT_EQ(optimizer->param_groups().size(), 2u);
  std::set<const void*> no_decay;
  for (const auto& p : optimizer->param_groups()[1].params())
    no_decay.insert(p.unsafeGetTensorImpl());
  EXPECT_EQ(optimizer->param_groups()[1].options().get_lr(),
            optimizer->param_groups()[0].options().get_lr());
  int64_t decayed = 0;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    bool expected_no_decay = name.find(".ln_") != std::string::npos ||
                             (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0);
    EXPECT_EQ(no_decay.count(item.value().unsafeGetTensorImpl()) > 0, expected_no_decay) << name;
    decayed += expected_no_decay ? 0 : 1;
  }
  EXPECT_EQ(static_cast<int64_t>(optimizer->param_groups()[0].params().size()), decayed);
  EXPECT_TRUE(model->named_parameters().contains("transformer.ln_f.weight"));
}

TEST(Tasks, EvaluatingALanguageModelReportsPerplexity) {
  auto data = std::make_shared<VariableLengthText>(12);
  testing::TempDir dir;
  SgdTrainer t(fresh_lm(), lm_args(dir).per_device_eval_batch_size(4), data, data, pad_collate);
  Metrics m = t.evaluate();
  ASSERT_TRUE(m.count("eval_loss"));
  EXPECT_NEAR(m.at("eval_perplexity"), std::exp(m.at("eval_loss")), 1e-9);
  // An untrained model is close to uniform over 17 tokens.
  EXPECT_NEAR(m.at("eval_loss"), std::log(17.0), 0.5);
}

TEST(Tasks, LossesFollowTransformers) {
  torch::manual_seed(0);
  torch::Tensor logits = torch::randn({6, 4});
  torch::Tensor labels = torch::tensor({0, 3, -100, 1, 2, -100}, torch::kLong);
  models::Task ce{TaskKind::kClassification, false};
  // -100 is ignored; the mean is over the 4 others.
  torch::Tensor kept = torch::tensor({0, 1, 3, 4}, torch::kLong);
  double expected = torch::nn::functional::cross_entropy(logits.index_select(0, kept),
                                                         labels.index_select(0, kept))
                        .item<double>();
  EXPECT_NEAR(models::task_loss(ce, logits, labels).item<double>(), expected, 1e-6);
  // With num_items_in_batch: the sum over the kept labels divided by it.
  EXPECT_NEAR(models::task_loss(ce, logits, labels, torch::tensor(8)).item<double>(),
              expected * 4 / 8, 1e-6);
  models::Task nll{TaskKind::kClassification, true};
  torch::Tensor log_probs = torch::log_softmax(logits, 1);
  EXPECT_NEAR(models::task_loss(nll, log_probs, labels).item<double>(), expected, 1e-6);

  models::Task regression{TaskKind::kRegression, false};
  torch::Tensor values = torch::tensor({{1.0f}, {2.0f}, {4.0f}});
  torch::Tensor targets = torch::tensor({1.0f, 3.0f, 1.0f});
  EXPECT_NEAR(models::task_loss(regression, values, targets).item<double>(), (0 + 1 + 9) / 3.0,
              1e-6);

  // Causal LM: position t predicts label t+1.
  models::Task lm{TaskKind::kCausalLM, false};
  torch::Tensor lm_logits = torch::randn({2, 3, 5});
  torch::Tensor ids = torch::tensor({{1, 2, 3}, {4, 0, -100}}, torch::kLong);
  torch::Tensor flat = lm_logits.slice(1, 0, 2).reshape({4, 5});
  torch::Tensor targets_lm = torch::tensor({2, 3, 0, -100}, torch::kLong);
  double lm_expected =
      torch::nn::functional::cross_entropy(flat.slice(0, 0, 3), targets_lm.slice(0, 0, 3))
          .item<double>();
  EXPECT_NEAR(models::task_loss(lm, lm_logits, ids).item<double>(), lm_expected, 1e-6);
  EXPECT_THROW(models::task_loss(lm, logits, labels), std::invalid_argument);
}

TEST(Tasks, RegressionMetricsAreRmseAndMae) {
  Metrics m = compute_regression_metrics(
      {torch::tensor({{1.0f}, {2.0f}, {4.0f}}), torch::tensor({1.0f, 3.0f, 1.0f})});
  EXPECT_NEAR(m.at("rmse"), std::sqrt(10.0 / 3), 1e-6);
  EXPECT_NEAR(m.at("mae"), 4.0 / 3, 1e-6);
  EXPECT_EQ(metrics_for_task(TaskKind::kCausalLM), nullptr);
}

TEST(Registry, MlpTakesItsOptionsAndPyTorchNames) {
  data::DataInfo table{TaskKind::kClassification, {4}, 3};
  auto model = models::make_model(
      "mlp", json::parse(R"({"hidden_sizes": [16, 8], "activation": "gelu"})"), table);
  auto params = model->named_parameters();
  ASSERT_EQ(params.size(), 6u);
  EXPECT_EQ(params["layers.0.weight"].sizes(), torch::IntArrayRef({16, 4}));
  EXPECT_EQ(params["layers.1.weight"].sizes(), torch::IntArrayRef({8, 16}));
  EXPECT_EQ(params["layers.2.bias"].sizes(), torch::IntArrayRef({3}));
  EXPECT_EQ(model->forward(torch::randn({5, 4})).sizes(), torch::IntArrayRef({5, 3}));

  data::DataInfo regression{TaskKind::kRegression, {4}, 1};
  auto reg = models::make_model("mlp", json::object(), regression);
  EXPECT_EQ(reg->task().kind, TaskKind::kRegression);
  EXPECT_EQ(reg->forward(torch::randn({5, 4})).sizes(), torch::IntArrayRef({5, 1}));
}

TEST(Registry, ResNetHasTorchvisionNamesAndTakesBothImageSizes) {
  auto model = models::make_model("resnet", json::parse(R"({"width": 8})"),
                                  {TaskKind::kClassification, {3, 32, 32}, 10});
  auto params = model->named_parameters();
  for (const char* name :
       {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight", "layer1.1.bn2.bias",
        "layer2.0.downsample.0.weight", "layer3.0.downsample.1.weight", "fc.weight"}) {
    EXPECT_TRUE(params.contains(name)) << name;
  }
  EXPECT_EQ(params["fc.weight"].sizes(), torch::IntArrayRef({10, 32}));
  EXPECT_TRUE(model->named_buffers().contains("bn1.running_mean"));
  EXPECT_EQ(model->forward(torch::randn({2, 3, 32, 32})).sizes(), torch::IntArrayRef({2, 10}));
  auto mnist = models::make_model("resnet");
  EXPECT_EQ(mnist->forward(torch::randn({2, 1, 28, 28})).sizes(), torch::IntArrayRef({2, 10}));
}

// model.safetensors of mlp and resnet loads, strictly, into the equivalent PyTorch modules of
// tests/reference/scripts/models.py, which then compute the same outputs.
TEST(Registry, PyTorchLoadsMlpAndResNetIntoTheEquivalentModules) {
  std::string python = TRAINER_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python with torch and safetensors configured";
  struct Case {
    std::string name, config;
    data::DataInfo info;
  };
  std::vector<Case> cases = {{"mlp",
                              R"({"hidden_sizes": [16, 8], "activation": "gelu"})",
                              {TaskKind::kClassification, {1, 6, 6}, 5}},
                             {"resnet",
                              R"({"width": 8, "stages": 3, "blocks_per_stage": 2})",
                              {TaskKind::kClassification, {3, 32, 32}, 10}}};
  for (const auto& c : cases) {
    testing::TempDir dir;
    torch::manual_seed(1);
    auto model = models::make_model(c.name, json::parse(c.config), c.info);
    // A few training-mode forwards move the batch norms' running statistics off their defaults.
    std::vector<int64_t> shape = c.info.input_shape;
    shape.insert(shape.begin(), 4);
    for (int i = 0; i < 3; ++i) model->forward(torch::randn(shape));
    model->eval();
    torch::Tensor x = torch::randn(shape);
    torch::Tensor y = model->forward(x).detach();
    io::save_safetensors(dir.file("model.safetensors"), io::state_dict(*model));
    io::save_safetensors(dir.file("inputs.safetensors"), {{"x", x}, {"y", y}});
    auto checked = testing::run(python + " " + SOURCE_DIR + "/tests/reference/scripts/models.py " +
                                c.name + " " + dir.file("model.safetensors") + " " +
                                dir.file("inputs.safetensors") + " '" + c.config + "'");
    ASSERT_EQ(checked.exit_code, 0) << checked.err;
    json got = json::parse(checked.out);
    EXPECT_LT(got["max_abs_diff"].get<double>(), 1e-5) << c.name;
    EXPECT_EQ(got["parameters"].get<int64_t>(), models::num_trainable_parameters(*model)) << c.name;
  }
}

// `trainer train` builds the model model_name and model_config name, and learns Fashion-MNIST
// with it: the loss falls, and the accuracy is above chance (10%) after one short epoch.
TEST(Registry, TrainerTrainsMlpAndResNetFromTheirConfig) {
  for (std::string model : {"mlp", "resnet"}) {
    testing::TempDir dir;
    auto result = testing::run(
        testing::kTrainerBin + " train " + SOURCE_DIR + "/configs/fashion_mnist_resnet.json" +
        " --model_name " + model + " --model_config '" +
        (model == "mlp" ? R"({"hidden_sizes": [64]})" : R"({"width": 8, "stages": 2})") +
        "' --output_dir " + dir.path() +
        " --max_train_samples 640 --max_eval_samples 200 --per_device_train_batch_size 32"
        " --learning_rate 5e-3 --logging_steps 5 --disable_tqdm true");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    json eval = json::parse(testing::slurp(dir.file("eval_results.json")));
    EXPECT_GT(eval["eval_accuracy"].get<double>(), model == "mlp" ? 0.5 : 0.15) << model;
    json history = json::parse(testing::slurp(dir.file("trainer_state.json")))["log_history"];
    ASSERT_GE(history.size(), 4u);
    EXPECT_LT(history[3]["loss"].get<double>(), history[0]["loss"].get<double>() - 0.1) << model;
    json args = json::parse(testing::slurp(dir.file("training_args.json")));
    EXPECT_EQ(args["model_name"], model);
    auto tensors = io::load_safetensors(dir.file("model.safetensors"));
    EXPECT_EQ(tensors.front().first, model == "mlp" ? "layers.0.weight" : "conv1.weight");
  }
}

TEST(Registry, BadNamesOptionsAndDataAreOneLine) {
  data::DataInfo images{TaskKind::kClassification, {1, 28, 28}, 10};
  EXPECT_EQ(testing::input_error_of(
                [&] { models::make_model("mlp", json::parse(R"({"hiden_sizes": [8]})"), images); }),
            "model_config: unknown option 'hiden_sizes' for mlp (did you mean 'hidden_sizes'? "
            "known: hidden_sizes, activation, dropout)");
  EXPECT_EQ(testing::input_error_of(
                [&] { models::make_model("mlp", json::parse(R"({"dropout": 1})"), images); }),
            "model_config: option dropout of mlp is 1; must be in [0.0, 1.0)");
  EXPECT_EQ(testing::input_error_of([&] {
              models::make_model("mlp", json::parse(R"({"activation": "swish"})"), images);
            }),
            "model_config: option activation of mlp is \"swish\"; allowed: relu, gelu, tanh");
  EXPECT_EQ(testing::input_error_of(
                [&] { models::make_model("basic_net", json::parse(R"({"x": 1})"), images); }),
            "model_config: unknown option 'x' for basic_net (known: fused)");
  EXPECT_EQ(testing::input_error_of([&] { models::make_model("mlp", json::array({1}), images); }),
            "model_config: [1] is not a JSON object (options for mlp, e.g. {})");
  EXPECT_EQ(testing::input_error_of([&] {
              models::make_model("resnet", json::object(), {TaskKind::kRegression, {1, 28, 28}, 1});
            }),
            "model_name: model resnet does not fit a regression data set (it learns "
            "classification)");
  EXPECT_EQ(testing::input_error_of([&] {
              models::make_model("basic_net", json::object(),
                                 {TaskKind::kClassification, {3, 32, 32}, 10});
            }),
            "model_name: basic_net takes 1x28x28 images in 10 classes; the data set has examples "
            "of shape [3, 32, 32] in 10 classes (use mlp or resnet)");
  EXPECT_NE(testing::input_error_of([&] {
              models::make_model("gpt9", json::object(), images);
            }).find("model_name: unknown model 'gpt9' (allowed: basic_net, mlp, resnet"),
            std::string::npos);
  EXPECT_EQ(testing::input_error_of([&] {
              data::make_data_source("fashion_mnist", "", json::parse(R"({"path": "x"})"));
            }),
            "dataset_config: unknown option 'path' for fashion_mnist (it takes none)");
}

TEST(Registry, ModelConfigIsAJsonObjectArgument) {
  auto args = TrainingArguments::from_json_text(
      R"({"model_name": "mlp", "model_config": {"hidden_sizes": [32, 16]}})");
  EXPECT_EQ(args.model_config().at("hidden_sizes"), json::parse("[32, 16]"));
  args.set_from_text("model_config", R"({"dropout": 0.25})");
  EXPECT_EQ(args.model_config(), json::parse(R"({"dropout": 0.25})"));
  // training_args.json holds the object and reads back the same.
  auto again = TrainingArguments::from_json_text(args.to_json());
  EXPECT_EQ(again.model_config(), args.model_config());
  EXPECT_EQ(again.dataset_config(), json::object());
  EXPECT_EQ(testing::input_error_of(
                [] { TrainingArguments::from_json_text(R"({"model_config": [1]})"); }),
            "argument model_config: [1] is an array, expected a JSON object of options, e.g. "
            "{\"dropout\": 0.1}");
}

}  // namespace tasks_test
}  // namespace trainer
