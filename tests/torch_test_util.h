// Fixtures of the LibTorch test binary (test_util.h stays torch-free): a small dropout-free model,
// so that two runs can be compared exactly, random MNIST-shaped data, and the distance between
// two runs' weight files.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/data/mnist.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"

namespace trainer::testing {

// A JSON list of equal-length integer lists (a Python reference's token ids) as an int64
// [rows, width] tensor.
template <typename Json>
torch::Tensor long_rows(const Json& rows) {
  std::vector<int64_t> flat;
  const auto n = static_cast<int64_t>(rows.size());
  const auto width = n > 0 ? static_cast<int64_t>(rows[0].size()) : 0;
  for (const auto& row : rows)
    for (const auto& v : row) flat.push_back(v.template get<int64_t>());
  return torch::tensor(flat, torch::kLong).view({n, width});
}

// 784 -> hidden (tanh) -> 10, log-probabilities scored with NLL.
class TinyNet : public models::Model {
 public:
  explicit TinyNet(int64_t hidden = 16) {
    fc1 = register_module("fc1", torch::nn::Linear(784, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    return torch::log_softmax(fc2->forward(torch::tanh(fc1->forward(x.flatten(1)))), 1);
  }
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                     const torch::Tensor& = {}) override {
    return torch::nll_loss(outputs, labels);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// A TinyNet initialised from seed 11.
inline std::shared_ptr<TinyNet> fresh_tiny_net(int64_t hidden = 16) {
  torch::manual_seed(11);
  return std::make_shared<TinyNet>(hidden);
}

// `n` random 28x28 images and labels 0..9, drawn after torch::manual_seed(seed).
inline std::shared_ptr<data::MnistDataset> random_mnist(int64_t n, int seed) {
  torch::manual_seed(seed);
  return std::make_shared<data::MnistDataset>(torch::randint(0, 256, {n, 28, 28}).to(torch::kUInt8),
                                              torch::randint(0, 10, {n}));
}

// ‖a - b‖ / ‖a‖ over every tensor of two weight files with the same names (in the same order).
inline double relative_difference(const std::string& a_path, const std::string& b_path) {
  io::NamedTensors a = io::load_safetensors(a_path), b = io::load_safetensors(b_path);
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    torch::Tensor x = a[i].second.to(torch::kDouble), y = b[i].second.to(torch::kDouble);
    diff += (x - y).pow(2).sum().item<double>();
    norm += x.pow(2).sum().item<double>();
  }
  return std::sqrt(diff / norm);
}

}  // namespace trainer::testing
