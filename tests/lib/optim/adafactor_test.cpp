// Adafactor's own contracts (its numbers against Transformers' are optimizers_test.cpp's): the
// state's shapes, a save and load in the middle that changes nothing, bf16 parameters updated in
// float32, and the options it refuses.
#include "lib/optim/adafactor.h"

#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace trainer::optim {
namespace adafactor_test {

std::vector<torch::Tensor> make_params(torch::ScalarType dtype = torch::kFloat) {
  torch::manual_seed(7);
  return {torch::randn({6, 4}).to(dtype).requires_grad_(),
          torch::randn({4}).to(dtype).requires_grad_(),
          torch::randn({2, 3, 5}).to(dtype).requires_grad_()};
}

void set_gradients(const std::vector<torch::Tensor>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    torch::Tensor idx = torch::arange(p.numel(), torch::kFloat).reshape(p.sizes());
    p.mutable_grad() =
        (p.detach().to(torch::kFloat) * 0.2 + torch::sin(idx * 0.5 + step + i)).to(p.scalar_type());
  }
}

Adafactor make(const std::vector<torch::Tensor>& params) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{params[0], params[2]},
                      std::make_unique<AdafactorOptions>(AdafactorOptions(1e-2).weight_decay(0.1)));
  groups.emplace_back(std::vector<torch::Tensor>{params[1]},
                      std::make_unique<AdafactorOptions>(AdafactorOptions(1e-2).beta1(0.9)));
  return Adafactor(groups, AdafactorOptions(1e-2));
}

TEST(Adafactor, FactorsTheMomentsOfParametersOfTwoOrMoreDimensions) {
  auto params = make_params();
  Adafactor optimizer = make(params);
  set_gradients(params, 1);
  optimizer.step();
  auto state = [&](int i) -> const AdafactorParamState& {
    return static_cast<const AdafactorParamState&>(
        *optimizer.state().at(params[i].unsafeGetTensorImpl()));
  };
  EXPECT_EQ(state(0).step(), 1);
  EXPECT_EQ(state(0).exp_avg_sq_row().sizes(), torch::IntArrayRef({6}));
  EXPECT_EQ(state(0).exp_avg_sq_col().sizes(), torch::IntArrayRef({4}));
  EXPECT_FALSE(state(0).exp_avg_sq().defined());
  EXPECT_FALSE(state(0).exp_avg().defined());  // no beta1 in its group
  EXPECT_EQ(state(2).exp_avg_sq_row().sizes(), torch::IntArrayRef({2, 3}));
  EXPECT_EQ(state(2).exp_avg_sq_col().sizes(), torch::IntArrayRef({2, 5}));
  EXPECT_EQ(state(1).exp_avg_sq().sizes(), torch::IntArrayRef({4}));
  EXPECT_FALSE(state(1).exp_avg_sq_row().defined());
  EXPECT_EQ(state(1).exp_avg().sizes(), torch::IntArrayRef({4}));  // beta1 0.9
}

TEST(Adafactor, ASaveAndLoadMidwayChangesNothing) {
  auto straight = make_params();
  Adafactor a = make(straight);
  for (int step = 1; step <= 10; ++step) {
    set_gradients(straight, step);
    a.step();
  }

  auto first = make_params();
  Adafactor b = make(first);
  for (int step = 1; step <= 5; ++step) {
    set_gradients(first, step);
    b.step();
  }
  torch::serialize::OutputArchive out;
  b.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);

  // Another optimizer over copies of the parameters, loaded from the archive.
  std::vector<torch::Tensor> second;
  for (const auto& p : first) second.push_back(p.detach().clone().requires_grad_());
  Adafactor c = make(second);
  torch::serialize::InputArchive in;
  const std::string text = bytes.str();
  in.load_from(text.data(), text.size());
  c.load(in);
  for (int step = 6; step <= 10; ++step) {
    set_gradients(second, step);
    c.step();
  }
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_TRUE(torch::equal(straight[i], second[i])) << i;
  // The options came back too (beta1 of the second group).
  const auto& options = static_cast<const AdafactorOptions&>(c.param_groups()[1].options());
  ASSERT_TRUE(options.beta1().has_value());
  EXPECT_EQ(*options.beta1(), 0.9);
  EXPECT_FALSE(static_cast<const AdafactorOptions&>(c.param_groups()[0].options()).beta1());
}

TEST(Adafactor, UpdatesBf16ParametersInFloat32) {
  auto bf16 = make_params(torch::kBFloat16);
  std::vector<torch::Tensor> fp32;
  for (const auto& p : bf16) fp32.push_back(p.detach().to(torch::kFloat).requires_grad_());
  Adafactor a = make(bf16);
  Adafactor b = make(fp32);
  set_gradients(bf16, 1);
  // The same bf16 gradients, widened: the float32 run sees what the bf16 one computes with.
  for (size_t i = 0; i < fp32.size(); ++i)
    fp32[i].mutable_grad() = bf16[i].grad().to(torch::kFloat);
  a.step();
  b.step();
  for (size_t i = 0; i < bf16.size(); ++i) {
    EXPECT_EQ(bf16[i].scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(bf16[i], fp32[i].to(torch::kBFloat16))) << i;
    const auto& state =
        static_cast<const AdafactorParamState&>(*a.state().at(bf16[i].unsafeGetTensorImpl()));
    const torch::Tensor& moment = i == 1 ? state.exp_avg_sq() : state.exp_avg_sq_row();
    EXPECT_EQ(moment.scalar_type(), torch::kFloat) << i;
  }
}

TEST(Adafactor, RefusesOptionsOutOfRange) {
  auto params = make_params();
  EXPECT_THROW(Adafactor(params, AdafactorOptions(1e-2).clip_threshold(0)), c10::Error);
  EXPECT_THROW(Adafactor(params, AdafactorOptions(-1)), c10::Error);
  EXPECT_THROW(Adafactor(params, AdafactorOptions(1e-2).beta1(1.0)), c10::Error);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(params,
                      std::make_unique<AdafactorOptions>(AdafactorOptions(1e-2).weight_decay(-1)));
  EXPECT_THROW(Adafactor(groups, AdafactorOptions(1e-2)), c10::Error);
}

}  // namespace adafactor_test
}  // namespace trainer::optim
