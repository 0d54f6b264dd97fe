// A small ResNet with torchvision's layout and names.
#pragma once

#include <vector>

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include "lib/models/linear.h"
#include "lib/models/model.h"

namespace trainer::models {

// A small ResNet for 28x28 or 32x32 images, torchvision's layout at CIFAR scale: conv1 (3x3) and
// bn1, then `stages` stages of `blocks` BasicBlocks (layer1.0.conv1 ... with downsample.0/1 where
// the shape changes), channels doubling and the size halving from stage 2, global average
// pooling and fc. Logits.
class ResNet : public Model {
 public:
  ResNet(int64_t in_channels, int64_t num_classes, int64_t width, int64_t stages, int64_t blocks);
  using Model::forward;
  torch::Tensor forward(const torch::Tensor& x) override;
  std::string output_layer() const override { return "fc"; }

 private:
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  std::vector<torch::nn::Sequential> stages_;
  Linear fc{nullptr};
};

}  // namespace trainer::models
