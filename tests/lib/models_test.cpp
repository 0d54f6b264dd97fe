// BasicNet: the tutorial's architecture, PyTorch's parameter names and count, and the registry.
#include "lib/models/models.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/io/errors.h"

namespace trainer::models {
namespace models_test {

TEST(BasicNet, ParameterNamesShapesAndCount) {
  auto model = make_model("basic_net");
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"conv1.weight", {32, 1, 3, 3}},  {"conv1.bias", {32}},
      {"conv2.weight", {64, 32, 3, 3}}, {"conv2.bias", {64}},
      {"fc1.weight", {128, 9216}},      {"fc1.bias", {128}},
      {"fc2.weight", {10, 128}},        {"fc2.bias", {10}}};
  auto params = model->named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(params[i].key(), expected[i].first);
    EXPECT_EQ(params[i].value().sizes().vec(), expected[i].second);
  }
  EXPECT_EQ(num_trainable_parameters(*model), 1199882);
}

TEST(BasicNet, OutputsLogProbabilities) {
  auto model = make_model("basic_net");
  model->eval();
  torch::Tensor out = model->forward(torch::randn({5, 1, 28, 28}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{5, 10}));
  EXPECT_TRUE(torch::allclose(out.exp().sum(1), torch::ones({5}), 1e-5, 1e-5));
  torch::Tensor labels = torch::tensor({0, 1, 2, 3, 4}, torch::kLong);
  EXPECT_NEAR(model->loss(out, labels).item<double>(), torch::nll_loss(out, labels).item<double>(),
              1e-7);
}

TEST(BasicNet, DropoutOnlyWhileTraining) {
  auto model = make_model("basic_net");
  torch::Tensor x = torch::randn({4, 1, 28, 28});
  model->eval();
  EXPECT_TRUE(torch::equal(model->forward(x), model->forward(x)));
  model->train();
  EXPECT_FALSE(torch::equal(model->forward(x), model->forward(x)));
}

TEST(Models, UnknownNameListsKnownOnes) {
  try {
    make_model("resnet50");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "model_name: unknown model 'resnet50' (allowed: basic_net)");
  }
}

}  // namespace models_test
}  // namespace trainer::models
