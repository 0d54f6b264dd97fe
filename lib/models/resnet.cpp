// torchvision's BasicBlock and the small ResNet built of them, with torchvision's initialisation.
#include "lib/models/resnet.h"

#include <fmt/format.h>
#include <torch/nn/init.h>

namespace trainer::models {

namespace {

// torchvision's BasicBlock: conv1 3x3 (stride), bn1, ReLU, conv2 3x3, bn2, plus the input (through
// downsample.0 1x1 conv and downsample.1 batch norm where the shape changes), ReLU.
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    using torch::nn::Conv2dOptions;
    conv1 = register_module(
        "conv1",
        torch::nn::Conv2d(Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out));
    conv2 = register_module(
        "conv2", torch::nn::Conv2d(Conv2dOptions(out, out, 3).stride(1).padding(1).bias(false)));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample", torch::nn::Sequential(
                            torch::nn::Conv2d(Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                            torch::nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out = torch::relu(bn1->forward(conv1->forward(x)));
    out = bn2->forward(conv2->forward(out));
    return torch::relu(out + (downsample ? downsample->forward(x) : x));
  }

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

}  // namespace

ResNet::ResNet(int64_t in_channels, int64_t num_classes, int64_t width, int64_t stages,
               int64_t blocks) {
  using torch::nn::Conv2dOptions;
  conv1 = register_module(
      "conv1",
      torch::nn::Conv2d(Conv2dOptions(in_channels, width, 3).stride(1).padding(1).bias(false)));
  bn1 = register_module("bn1", torch::nn::BatchNorm2d(width));
  int64_t channels = width;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t out = width << s;
    torch::nn::Sequential stage;
    for (int64_t b = 0; b < blocks; ++b) {
      stage->push_back(BasicBlock(b == 0 ? channels : out, out, b == 0 && s > 0 ? 2 : 1));
    }
    channels = out;
    stages_.push_back(register_module(fmt::format("layer{}", s + 1), stage));
  }
  fc = register_module("fc", Linear(channels, num_classes));
  // torchvision's initialisation: Kaiming normal (fan_out, ReLU) for convolutions, ones and zeros
  // for batch norms.
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = module->as<torch::nn::BatchNorm2d>()) {
      torch::nn::init::ones_(bn->weight);
      torch::nn::init::zeros_(bn->bias);
    }
  }
}

torch::Tensor ResNet::forward(const torch::Tensor& input) {
  torch::Tensor x = torch::relu(bn1->forward(conv1->forward(input)));
  for (auto& stage : stages_) x = stage->forward(x);
  return fc->forward(torch::flatten(torch::adaptive_avg_pool2d(x, {1, 1}), 1));
}

}  // namespace trainer::models
