// BasicNet and the model registry.
#include "lib/models/models.h"

#include <fmt/format.h>
#include <torch/nn/functional.h>

#include "lib/io/errors.h"

namespace trainer::models {

namespace F = torch::nn::functional;

torch::Tensor Model::loss(const torch::Tensor& outputs, const torch::Tensor& labels) {
  return F::cross_entropy(outputs, labels);
}

BasicNet::BasicNet() {
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).stride(1)));
  conv2 =
      register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).stride(1)));
  dropout1 = register_module("dropout1", torch::nn::Dropout(0.25));
  dropout2 = register_module("dropout2", torch::nn::Dropout(0.5));
  fc1 = register_module("fc1", torch::nn::Linear(9216, 128));
  fc2 = register_module("fc2", torch::nn::Linear(128, 10));
}

torch::Tensor BasicNet::forward(const torch::Tensor& input) {
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

torch::Tensor BasicNet::loss(const torch::Tensor& outputs, const torch::Tensor& labels) {
  return F::nll_loss(outputs, labels);
}

std::shared_ptr<Model> make_model(const std::string& name) {
  if (name == "basic_net") return std::make_shared<BasicNet>();
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(fmt::format("model_name: unknown model '{}' (allowed: {})", name, known));
}

int64_t num_trainable_parameters(const torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) count += p.numel();
  }
  return count;
}

}  // namespace trainer::models
