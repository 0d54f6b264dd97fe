// A multilayer perceptron, laid out as PyTorch's nn.ModuleList of Linear layers.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include "lib/models/model.h"

namespace trainer::models {

// A multilayer perceptron on flattened inputs: Linear layers held as PyTorch's
// `self.layers = nn.ModuleList([...])` holds them (layers.0.weight ...), the activation and dropout
// between them; logits for classification, values for regression.
class Mlp : public Model {
 public:
  Mlp(int64_t in_features, std::vector<int64_t> hidden_sizes, int64_t out_features,
      std::string activation, double dropout, Task task);
  using Model::forward;
  torch::Tensor forward(const torch::Tensor& x) override;
  std::string output_layer() const override {
    return "layers." + std::to_string(layers->size() - 1);
  }

  torch::nn::ModuleList layers{nullptr};

 private:
  std::string activation_;
  double dropout_;
};

}  // namespace trainer::models
