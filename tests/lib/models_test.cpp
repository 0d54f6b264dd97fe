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

// relu_max_pool2x2 against LibTorch's relu then max_pool2d: the same values and gradients, bit for
// bit, with ties, windows of negatives, zeros and NaN.
TEST(ReluMaxPool2x2, EqualsReluThenMaxPoolValuesAndGradientsExactly) {
  torch::manual_seed(3);
  torch::Tensor x = torch::randn({3, 5, 8, 6});
  x.index_put_({0, 0, 0, 0}, 0.5);  // a tie with its neighbour
  x.index_put_({0, 0, 0, 1}, 0.5);
  x.index_put_({1, 1}, -torch::rand({8, 6}));  // a plane of negatives: no gradient
  x.index_put_({2, 2, 3, 3}, NAN);
  x.index_put_({2, 3, 0, 0}, 0.0);
  x = x.round(1);  // many ties
  torch::Tensor a = x.clone().requires_grad_(true);
  torch::Tensor b = x.clone().requires_grad_(true);
  torch::Tensor ya = models::relu_max_pool2x2(a);
  torch::Tensor yb = torch::relu(torch::max_pool2d(b, {2, 2}));
  ASSERT_EQ(ya.sizes(), yb.sizes());
  EXPECT_TRUE(torch::equal(ya.nan_to_num(7), yb.nan_to_num(7)));
  torch::Tensor g = torch::randn_like(ya);
  ya.backward(g);
  yb.backward(g);
  EXPECT_TRUE(torch::equal(a.grad(), b.grad()));
  // Odd sizes and other dtypes take LibTorch's path, with its results.
  torch::Tensor odd = torch::randn({2, 3, 5, 7});
  EXPECT_TRUE(
      torch::equal(models::relu_max_pool2x2(odd), torch::relu(torch::max_pool2d(odd, {2, 2}))));
  torch::Tensor half = torch::randn({2, 3, 4, 4}).to(torch::kBFloat16);
  EXPECT_TRUE(
      torch::equal(models::relu_max_pool2x2(half), torch::relu(torch::max_pool2d(half, {2, 2}))));
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
