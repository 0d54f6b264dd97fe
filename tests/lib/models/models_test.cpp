// BasicNet: the tutorial's architecture, PyTorch's parameter names and count, and the registry.
#include "lib/models/models.h"

#include <cmath>
#include <stdexcept>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/base/errors.h"

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

// The same on channels-last input (the layout BasicNet feeds it, through the AVX-512 loop where the
// processor has it): the same values and gradients, an NCHW result and a channels-last gradient.
TEST(ReluMaxPool2x2, ChannelsLastInputGivesTheSameValuesAndGradients) {
  torch::manual_seed(4);
  for (int64_t channels : {64, 19, 1}) {  // full 16-lane blocks, a partial block, one channel
    torch::Tensor x = torch::randn({3, channels, 6, 8}).round(1);
    x.index_put_({1, 0, 2, 2}, NAN);
    torch::Tensor a = x.clone(torch::MemoryFormat::ChannelsLast).requires_grad_(true);
    torch::Tensor b = x.clone().requires_grad_(true);
    torch::Tensor ya = models::relu_max_pool2x2(a);
    torch::Tensor yb = torch::relu(torch::max_pool2d(b, {2, 2}));
    EXPECT_TRUE(ya.is_contiguous());
    EXPECT_TRUE(torch::equal(ya.nan_to_num(7), yb.nan_to_num(7))) << channels;
    torch::Tensor g = torch::randn_like(yb);
    ya.backward(g);
    yb.backward(g);
    EXPECT_TRUE(torch::equal(a.grad(), b.grad())) << channels;
    if (channels > 1) {
      EXPECT_TRUE(a.grad().is_contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
}

// Dropout fused into the pooling: with dropout off it is the pooling; on, every output is the
// pooled value either dropped or scaled by 1/(1-p), about (1-p) of them kept, gradients following
// the same mask; the mask depends on the generator's seed only, not on the input's layout or on
// which loop (AVX-512 or scalar) computed it.
TEST(ReluMaxPool2x2Dropout, KeepsOneMinusPScalesAndRoutesGradientsThroughTheMask) {
  torch::manual_seed(5);
  torch::Tensor x = torch::randn({16, 64, 24, 24}).abs() + 0.5;  // every window passes the ReLU
  EXPECT_TRUE(
      torch::equal(models::relu_max_pool2x2_dropout(x, 0.25, false), models::relu_max_pool2x2(x)));
  EXPECT_TRUE(
      torch::equal(models::relu_max_pool2x2_dropout(x, 0.0, true), models::relu_max_pool2x2(x)));
  torch::Tensor pooled = models::relu_max_pool2x2(x);
  for (double p : {0.25, 0.5, 0.9}) {
    torch::manual_seed(6);
    torch::Tensor a = x.clone(torch::MemoryFormat::ChannelsLast).requires_grad_(true);
    torch::Tensor ya = models::relu_max_pool2x2_dropout(a, p, true);
    torch::manual_seed(6);
    torch::Tensor b = x.clone().requires_grad_(true);
    torch::Tensor yb = models::relu_max_pool2x2_dropout(b, p, true);
    EXPECT_TRUE(torch::equal(ya, yb)) << "the mask depends on the layout, p " << p;
    torch::Tensor kept = ya.detach() != 0;
    const double fraction = kept.to(torch::kDouble).mean().item<double>();
    const double sigma = std::sqrt(p * (1 - p) / static_cast<double>(kept.numel()));
    EXPECT_NEAR(fraction, 1 - p, 5 * sigma) << "p " << p;
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    EXPECT_TRUE(
        torch::equal(ya.detach(), torch::where(kept, pooled * scale, torch::zeros_like(pooled))));
    // Gradients: LibTorch's pooling of the masked, scaled gradient.
    torch::Tensor g = torch::randn_like(yb);
    ya.backward(g);
    yb.backward(g);
    torch::Tensor c = x.clone().requires_grad_(true);
    torch::Tensor yc = torch::relu(torch::max_pool2d(c, {2, 2}));
    yc.backward(torch::where(kept, g * scale, torch::zeros_like(g)));
    EXPECT_TRUE(torch::equal(a.grad(), c.grad())) << "p " << p;
    EXPECT_TRUE(torch::equal(b.grad(), c.grad())) << "p " << p;
  }
  // An odd channel count takes the scalar loop on channels-last input too: the same mask.
  torch::Tensor odd = torch::randn({4, 7, 10, 10}).abs() + 0.5;
  torch::manual_seed(7);
  torch::Tensor m1 = models::relu_max_pool2x2_dropout(
      odd.contiguous(torch::MemoryFormat::ChannelsLast), 0.5, true);
  torch::manual_seed(7);
  torch::Tensor m2 = models::relu_max_pool2x2_dropout(odd, 0.5, true);
  EXPECT_TRUE(torch::equal(m1, m2));
  // Seeded: the same seed, the same mask; the next call, another one.
  torch::manual_seed(8);
  torch::Tensor first = models::relu_max_pool2x2_dropout(x, 0.5, true);
  torch::Tensor second = models::relu_max_pool2x2_dropout(x, 0.5, true);
  torch::manual_seed(8);
  EXPECT_TRUE(torch::equal(first, models::relu_max_pool2x2_dropout(x, 0.5, true)));
  EXPECT_FALSE(torch::equal(first, second));
  // p = 1 drops everything; p outside [0, 1] is refused.
  torch::Tensor all = x.clone().requires_grad_(true);
  torch::Tensor none = models::relu_max_pool2x2_dropout(all, 1.0, true);
  EXPECT_EQ(none.abs().sum().item<float>(), 0.0f);
  none.sum().backward();
  EXPECT_EQ(all.grad().abs().sum().item<float>(), 0.0f);
  EXPECT_THROW(models::relu_max_pool2x2_dropout(x, 1.5, true), std::invalid_argument);
  EXPECT_THROW(models::relu_max_pool2x2_dropout(x, -0.1, true), std::invalid_argument);
}

// The fused BasicNet computes the tutorial's function: in eval mode, the same log-probabilities
// and parameter gradients as the tutorial's forward written with LibTorch's own ops on NCHW
// tensors (to float rounding: oneDNN sums in another order on channels-last input).
TEST(BasicNet, EqualsTheTutorialsForwardWrittenWithLibTorchOps) {
  torch::manual_seed(9);
  auto model = std::dynamic_pointer_cast<BasicNet>(make_model("basic_net"));
  ASSERT_TRUE(model);
  model->eval();
  torch::Tensor x = torch::randn({8, 1, 28, 28});
  torch::Tensor labels = torch::randint(0, 10, {8}, torch::kLong);
  torch::Tensor out = model->forward(x);
  torch::nll_loss(out, labels).backward();
  std::vector<torch::Tensor> fused;
  for (const auto& p : model->parameters()) fused.push_back(p.grad().clone());
  model->zero_grad();
  namespace F = torch::nn::functional;
  torch::Tensor y = torch::relu(
      F::conv2d(x, model->conv1->weight, F::Conv2dFuncOptions().bias(model->conv1->bias)));
  y = torch::relu(
      F::conv2d(y, model->conv2->weight, F::Conv2dFuncOptions().bias(model->conv2->bias)));
  y = torch::flatten(torch::max_pool2d(y, {2, 2}), 1);
  y = torch::relu(F::linear(y, model->fc1->weight, model->fc1->bias));
  y = torch::log_softmax(F::linear(y, model->fc2->weight, model->fc2->bias), 1);
  EXPECT_TRUE(torch::allclose(out, y, 1e-5, 1e-5)) << (out - y).abs().max().item<float>();
  torch::nll_loss(y, labels).backward();
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(fused[i], params[i].grad(), 1e-4, 1e-5))
        << model->named_parameters()[i].key() << " "
        << (fused[i] - params[i].grad()).abs().max().item<float>();
    EXPECT_TRUE(fused[i].is_contiguous()) << model->named_parameters()[i].key();
  }
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
    EXPECT_STREQ(e.what(), "model_name: unknown model 'resnet50' (allowed: basic_net, mlp, resnet, gpt)");
  }
}

}  // namespace models_test
}  // namespace trainer::models
