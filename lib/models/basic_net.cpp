// The tutorial's BasicNet: its forward op for op, or with the fused pooling on channels-last input.
#include "lib/models/basic_net.h"

#include <torch/nn/functional.h>

#include "lib/models/fused_pool.h"

namespace trainer::models {

namespace F = torch::nn::functional;

BasicNet::BasicNet(bool fused) : fused_(fused) {
  task_.log_probs = true;
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).stride(1)));
  conv2 =
      register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).stride(1)));
  dropout1 = register_module("dropout1", torch::nn::Dropout(0.25));
  dropout2 = register_module("dropout2", torch::nn::Dropout(0.5));
  fc1 = register_module("fc1", Linear(9216, 128));
  fc2 = register_module("fc2", Linear(128, 10));
}

torch::Tensor BasicNet::forward(const torch::Tensor& input) {
  if (!fused_) {  // the tutorial's forward, op for op
    torch::Tensor x = torch::relu(conv1->forward(input));
    x = torch::relu(conv2->forward(x));
    x = F::max_pool2d(x, F::MaxPool2dFuncOptions(2));
    x = dropout1->forward(x);
    x = torch::flatten(x, 1);
    x = torch::relu(fc1->forward(x));
    x = dropout2->forward(x);
    x = fc2->forward(x);
    return F::log_softmax(x, F::LogSoftmaxFuncOptions(1));
  }
  // oneDNN's convolution is about twice as fast on channels-last input (conv1's single input
  // channel makes its own input layout moot); the fused pooling reads that layout and writes NCHW,
  // so flatten sees the tutorial's (channel, row, column) order.
  torch::Tensor x = input;
  if (x.dim() == 4 && x.size(1) == 1 && x.is_contiguous() && x.device().is_cpu() &&
      x.scalar_type() == torch::kFloat)
    x = x.as_strided(x.sizes(), {x.stride(0), 1, x.stride(2), 1});  // the same bytes, as NHWC
  x = conv1->forward(x);
  if (x.device().is_cpu() && x.scalar_type() == torch::kFloat)
    x = x.contiguous(torch::MemoryFormat::ChannelsLast);
  x = torch::relu(x);
  x = relu_max_pool2x2_dropout(conv2->forward(x), dropout1->options.p(), is_training());
  x = torch::flatten(x, 1);
  x = torch::relu(fc1->forward(x));
  x = dropout2->forward(x);
  x = fc2->forward(x);
  return F::log_softmax(x, F::LogSoftmaxFuncOptions(1));
}

}  // namespace trainer::models
