// Models the trainer can train, created by name: the Model interface (forward and its default
// loss) and the tutorial's BasicNet.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "lib/models/names.h"

namespace trainer::models {

// A module with one tensor input, whose outputs a default loss can score against labels.
class Model : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // The loss the Trainer uses when compute_loss is not overridden: cross-entropy on logits.
  virtual torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels);
};

// The tutorial's network: conv1 1->32 3x3, ReLU, conv2 32->64 3x3, ReLU, max-pool 2,
// dropout 0.25, flatten 9216, fc1 ->128, ReLU, dropout 0.5, fc2 ->10, log_softmax.
// Parameter names are PyTorch's: conv1.weight ... fc2.bias (1,199,882 trainable parameters).
// `fused` (the default) runs ReLU, max-pool and dropout1 as relu_max_pool2x2_dropout, whose
// dropout mask is its own SplitMix64 stream; unfused, forward is LibTorch's plain ops in the
// tutorial's order, drawing its dropout masks from the default generator as PyTorch's BasicNet
// (and a TorchScript BasicNet) does, so the two train alike from the same weights and seed.
class BasicNet : public Model {
 public:
  explicit BasicNet(bool fused = true);
  torch::Tensor forward(const torch::Tensor& x) override;
  // Outputs are log-probabilities, so the loss is nll_loss as in the tutorial.
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels) override;

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Dropout dropout1{nullptr}, dropout2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  bool fused() const { return fused_; }

 private:
  bool fused_ = true;
};

// relu(max_pool2d(x, 2)), which equals max_pool2d(relu(x), 2) with the same gradients, bit for
// bit (ReLU is monotone; a window whose maximum is not positive passes no gradient either way).
// For contiguous float32 CPU input with even height and width it is one pass that keeps a 2-bit
// argmax per output instead of LibTorch's int64 indices, and a backward that writes each
// gradient once; anything else goes through LibTorch's max_pool2d and relu.
torch::Tensor relu_max_pool2x2(const torch::Tensor& x);

// dropout(relu_max_pool2x2(x), p) in one pass, with a contiguous NCHW result; x may be NCHW or
// channels-last. Pooling and ReLU are exactly LibTorch's; the dropout mask is drawn from a
// SplitMix64 stream seeded by one 64-bit draw from LibTorch's default CPU generator (so
// manual_seed and the saved generator state reproduce it), keeping each element with probability
// (1-p) to 2^-32 and scaling kept ones by 1/(1-p). Not the same random stream as LibTorch's
// bernoulli_, which costs ~6 ms a BasicNet step on one core against ~0.3 ms here. Other dtypes,
// devices and odd sizes take LibTorch's ops. Throws std::invalid_argument for p outside [0, 1].
torch::Tensor relu_max_pool2x2_dropout(const torch::Tensor& x, double p, bool train);

// A new model with freshly initialised parameters. Throws InputError for an unknown name,
// listing the known ones.
std::shared_ptr<Model> make_model(const std::string& name);

// Number of trainable parameters (requires_grad).
int64_t num_trainable_parameters(const torch::nn::Module& model);

}  // namespace trainer::models
