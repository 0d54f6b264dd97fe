// Models the trainer can train, created by name with options: the Model interface (forward on a
// batch of named tensors, the task's default loss), the tasks' losses, the tutorial's BasicNet,
// an MLP and a small ResNet.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <nlohmann/json.hpp>

#include "lib/data/dataset.h"
#include "lib/models/names.h"

namespace trainer::models {

// What a model's forward returns: its outputs and, when it scores the batch's "labels" itself (as
// Transformers' models do when given labels), that loss.
struct ModelOutput {
  torch::Tensor logits;  // logits, log-probabilities or regression values, [B, ...]
  torch::Tensor loss;    // undefined: the Trainer scores logits with Model::loss
};

// A model's task and the kind of its outputs, which pick its default loss.
struct Task {
  data::TaskKind kind = data::TaskKind::kClassification;
  bool log_probs = false;  // classification outputs are log-probabilities (NLL), not logits
};

// The task's loss; labels equal to -100 are ignored (classification, causal_lm):
// - classification: cross_entropy on logits, nll_loss on log-probabilities;
// - regression: mse_loss of the outputs (reshaped as the labels) against the labels as float;
// - causal_lm: cross_entropy of outputs[:, :-1] against labels[:, 1:] (the labels are the
//   input_ids, shifted here as Transformers shifts them inside the loss).
// With num_items_in_batch defined (a scalar): the summed loss divided by it, so that micro-batches
// of unequal length weigh each token once; otherwise the mean.
torch::Tensor task_loss(const Task& task, const torch::Tensor& outputs, const torch::Tensor& labels,
                        const torch::Tensor& num_items_in_batch = {});

// A trainable module: forward on a batch of named tensors, and the task's loss.
class Model : public torch::nn::Module {
 public:
  // The batch's named tensors ("x", "input_ids", "attention_mask", "labels", ...). Default: the
  // one-tensor forward on "x", no loss.
  virtual ModelOutput forward(const data::Batch& inputs);
  // The forward of a model with one input tensor. Default: throws std::logic_error (a model that
  // reads several inputs overrides the batch forward only).
  virtual torch::Tensor forward(const torch::Tensor& x);
  // The loss the default compute_loss uses when forward returns none: task_loss(task(), ...).
  virtual torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                             const torch::Tensor& num_items_in_batch = {});
  virtual Task task() const { return task_; }
  void set_task(Task task) { task_ = task; }

 protected:
  Task task_;
};

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

// A multilayer perceptron on flattened inputs: Linear layers held as PyTorch's
// `self.layers = nn.ModuleList([...])` holds them (layers.0.weight ...), the activation and dropout
// between them; logits for classification, values for regression.
class Mlp : public Model {
 public:
  Mlp(int64_t in_features, std::vector<int64_t> hidden_sizes, int64_t out_features,
      std::string activation, double dropout, Task task);
  using Model::forward;
  torch::Tensor forward(const torch::Tensor& x) override;

  torch::nn::ModuleList layers{nullptr};

 private:
  std::string activation_;
  double dropout_;
};

// A small ResNet for 28x28 or 32x32 images, torchvision's layout at CIFAR scale: conv1 (3x3) and
// bn1, then `stages` stages of `blocks` BasicBlocks (layer1.0.conv1 ... with downsample.0/1 where
// the shape changes), channels doubling and the size halving from stage 2, global average
// pooling and fc. Logits.
class ResNet : public Model {
 public:
  ResNet(int64_t in_channels, int64_t num_classes, int64_t width, int64_t stages, int64_t blocks);
  using Model::forward;
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  std::vector<torch::nn::Sequential> stages_;
  torch::nn::Linear fc{nullptr};
};

// A new model with freshly initialised parameters, shaped for `info` (its input shape, classes or
// vocabulary), with options from `config` (model_config, a JSON object; null: defaults). Throws
// InputError for an unknown name (listing the known ones), an unknown option (naming the nearest
// known one), a bad option value, or data the model cannot take (naming both).
std::shared_ptr<Model> make_model(const std::string& name, const nlohmann::ordered_json& config,
                                  const data::DataInfo& info);
// The same with default options for Fashion-MNIST-shaped data (1x28x28 images, 10 classes).
std::shared_ptr<Model> make_model(const std::string& name);

// Number of trainable parameters (requires_grad).
int64_t num_trainable_parameters(const torch::nn::Module& model);

}  // namespace trainer::models
