// The multilayer perceptron's layers and forward.
#include "lib/models/mlp.h"

#include <torch/nn/functional.h>

#include "lib/models/linear.h"

namespace trainer::models {

namespace F = torch::nn::functional;

Mlp::Mlp(int64_t in_features, std::vector<int64_t> hidden_sizes, int64_t out_features,
         std::string activation, double dropout, Task task)
    : activation_(std::move(activation)), dropout_(dropout) {
  task_ = task;
  layers = register_module("layers", torch::nn::ModuleList());
  int64_t in = in_features;
  hidden_sizes.push_back(out_features);
  for (int64_t out : hidden_sizes) {
    layers->push_back(Linear(in, out));
    in = out;
  }
}

torch::Tensor Mlp::forward(const torch::Tensor& input) {
  torch::Tensor x = input.flatten(1);
  const size_t n = layers->size();
  for (size_t i = 0; i < n; ++i) {
    x = layers->ptr<LinearImpl>(i)->forward(x);
    if (i + 1 == n) break;
    if (activation_ == "relu") {
      x = torch::relu(x);
    } else if (activation_ == "gelu") {
      x = torch::gelu(x);
    } else {
      x = torch::tanh(x);
    }
    if (dropout_ > 0)
      x = F::dropout(x, F::DropoutFuncOptions().p(dropout_).training(is_training()));
  }
  return x;
}

}  // namespace trainer::models
