// The fused AdamW against LibTorch's own: the same parameters after 20 steps with weight decay,
// in several parameter groups, and the fall-back path for what it does not fuse.
#include "lib/optim/adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace trainer::optim {
namespace adamw_test {

std::vector<torch::Tensor> make_params() {
  torch::manual_seed(3);
  return {torch::randn({300, 70}).requires_grad_(), torch::randn({70}).requires_grad_(),
          torch::randn({5, 3, 3, 3}).requires_grad_()};
}

template <typename Optimizer>
std::vector<torch::Tensor> run(bool amsgrad = false) {
  auto params = make_params();
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3)
                                                            .betas({0.9, 0.999})
                                                            .eps(1e-8)
                                                            .weight_decay(wd)
                                                            .amsgrad(amsgrad));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{params[0], params[2]}, options(0.01));
  groups.emplace_back(std::vector<torch::Tensor>{params[1]}, options(0.0));
  Optimizer optimizer(groups);
  for (int step = 0; step < 20; ++step) {
    torch::manual_seed(100 + step);
    torch::Tensor loss;
    for (const auto& p : params) {
      torch::Tensor term = (p * torch::randn_like(p)).sum().pow(2) * 1e-3;
      loss = loss.defined() ? loss + term : term;
    }
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
  }
  return params;
}

TEST(FusedAdamW, MatchesLibTorchsAdamW) {
  auto ours = run<AdamW>();
  auto reference = run<torch::optim::AdamW>();
  for (size_t i = 0; i < ours.size(); ++i) {
    double rel =
        (ours[i] - reference[i]).norm().item<double>() / reference[i].norm().item<double>();
    EXPECT_LT(rel, 1e-6) << i;
    EXPECT_FALSE(torch::equal(ours[i], make_params()[i])) << "parameter " << i << " did not move";
  }
}

TEST(FusedAdamW, FallsBackForAmsgrad) {
  auto ours = run<AdamW>(true);
  auto reference = run<torch::optim::AdamW>(true);
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(torch::equal(ours[i], reference[i])) << i;
}

}  // namespace adamw_test
}  // namespace trainer::optim
