// The tutorial's BasicNet, with PyTorch's parameter names.
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include "lib/models/linear.h"

#include "lib/models/model.h"

namespace trainer::models {

// The tutorial's network: conv1 1->32 3x3, ReLU, conv2 32->64 3x3, ReLU, max-pool 2,
// dropout 0.25, flatten 9216, fc1 ->128, ReLU, dropout 0.5, fc2 ->10, log_softmax.
// Parameter names are PyTorch's: conv1.weight ... fc2.bias (1,199,882 trainable parameters).
// Its outputs are log-probabilities, so its loss is nll_loss as in the tutorial.
// `fused` (the default) runs ReLU, max-pool and dropout1 as relu_max_pool2x2_dropout, whose
// dropout mask is its own SplitMix64 stream; unfused (model_config "fused": false), forward is
// LibTorch's plain ops in the tutorial's order, drawing its dropout masks from the default
// generator as PyTorch's BasicNet (and a TorchScript BasicNet) does, so the two train alike from
// the same weights and seed.
class BasicNet : public Model {
 public:
  explicit BasicNet(bool fused = true);
  using Model::forward;
  torch::Tensor forward(const torch::Tensor& x) override;
  std::string output_layer() const override { return "fc2"; }

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Dropout dropout1{nullptr}, dropout2{nullptr};
  Linear fc1{nullptr}, fc2{nullptr};
  bool fused() const { return fused_; }

 private:
  bool fused_ = true;
};

}  // namespace trainer::models
