// The optimizers optim names against PyTorch's and Transformers' own: each case of
// tests/reference/scripts/optimizers.py built here as TrainingArguments' optim and optim_args
// choose it (optim::make_optimizer over two groups, weight decay on one), stepped 20 times with the
// same gradients, the parameters within 1e-6 of Python's after every step.
#include "lib/optim/optimizers.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/io/safetensors.h"
#include "tests/test_util.h"
#include "trainer/trainer.h"
#include "trainer/training_args.h"

namespace trainer::optim {
namespace optimizers_test {

// Every case the script writes (a case missing from its output fails).
const std::vector<std::string> kCases = {"adamw_torch_fused",
                                         "adamw_torch",
                                         "sgd_nesterov",
                                         "sgd_dampening",
                                         "sgd_plain",
                                         "adagrad_lr_decay",
                                         "adagrad_initial_accumulator",
                                         "rmsprop_centered_momentum",
                                         "rmsprop_plain",
                                         "adafactor",
                                         "adafactor_bf16"};
constexpr int kSteps = 20;
constexpr double kTolerance = 1e-6;

// The script's gradient of parameter i before step k: float32, cast to the parameter's dtype.
torch::Tensor gradient(const torch::Tensor& p, int k, int i) {
  torch::Tensor idx = torch::arange(p.numel(), torch::kFloat).reshape(p.sizes());
  torch::Tensor g =
      p.detach().to(torch::kFloat) * 0.3 + torch::cos(idx * 0.37 + (1.3 * k + i)) * 0.5;
  return g.to(p.scalar_type());
}

// The optimizer the case's metadata names, over the script's two groups.
std::shared_ptr<torch::optim::Optimizer> make(const io::Metadata& meta,
                                              const std::vector<torch::Tensor>& params) {
  const std::vector<ParamGroup> groups = {{{params[0], params[2]}, 0.1}, {{params[1]}, 0.0}};
  const auto extra = nlohmann::json::parse(meta.at("extra"));
  const double lr = std::stod(meta.at("learning_rate"));
  if (extra.contains("initial_accumulator_value")) {
    // LibTorch's Adagrad itself: Transformers passes no initial_accumulator_value.
    const double start = extra["initial_accumulator_value"].get<double>();
    auto options = [&](double weight_decay) {
      return torch::optim::AdagradOptions(lr).initial_accumulator_value(start).weight_decay(
          weight_decay);
    };
    std::vector<torch::optim::OptimizerParamGroup> built;
    for (const auto& group : groups) {
      built.emplace_back(group.params, std::make_unique<torch::optim::AdagradOptions>(
                                           options(group.weight_decay)));
    }
    return std::make_shared<torch::optim::Adagrad>(built, options(0.0));
  }
  TrainingArguments args = TrainingArguments().optim(meta.at("optim")).learning_rate(lr);
  if (!meta.at("optim_args").empty()) args.optim_args(meta.at("optim_args"));
  return make_optimizer(trainer::optimizer_choice(args), groups);
}

TEST(Optimizers, EveryCaseStepsAsPyTorchAndTransformersWithinAMillionth) {
  const std::string ref = testing::reference_dir("optimizers");
  ASSERT_FALSE(ref.empty());
  for (const std::string& name : kCases) {
    SCOPED_TRACE(name);
    io::MappedSafetensors file = io::map_safetensors(ref + "/" + name + ".safetensors");
    std::map<std::string, torch::Tensor> saved(file.tensors.begin(), file.tensors.end());
    std::vector<torch::Tensor> params;
    for (int i = 0; i < 3; ++i)
      params.push_back(saved.at(fmt::format("p{}.0", i)).clone().requires_grad_());
    auto optimizer = make(file.metadata, params);
    double worst = 0;
    for (int k = 1; k <= kSteps; ++k) {
      for (int i = 0; i < 3; ++i) params[i].mutable_grad() = gradient(params[i], k, i);
      optimizer->step();
      for (int i = 0; i < 3; ++i) {
        const torch::Tensor expected = saved.at(fmt::format("p{}.{}", i, k));
        ASSERT_EQ(params[i].scalar_type(), expected.scalar_type());
        const double diff = (params[i].detach().to(torch::kDouble) - expected.to(torch::kDouble))
                                .abs()
                                .max()
                                .item<double>();
        EXPECT_LE(diff, kTolerance) << "parameter " << i << " after step " << k;
        worst = std::max(worst, diff);
      }
    }
    // The parameters moved well beyond the tolerance: the comparison means something.
    for (int i = 0; i < 3; ++i) {
      EXPECT_GT((params[i] - saved.at(fmt::format("p{}.0", i))).abs().max().item<double>(), 1e-2)
          << "parameter " << i;
    }
    std::cout << fmt::format("{:<28} {:<12} largest difference {:.3g}\n", name,
                             file.metadata.at("class"), worst);
  }
}

}  // namespace optimizers_test
}  // namespace trainer::optim
