// BasicNet and the model registry.
#include "lib/models/models.h"

#include <cmath>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/autograd.h>
#include <torch/nn/functional.h>

#include "lib/io/errors.h"

namespace trainer::models {

namespace F = torch::nn::functional;

namespace {

// The fused forward and backward of relu_max_pool2x2 on contiguous float32 NCHW planes.
class ReluMaxPool2x2 : public torch::autograd::Function<ReluMaxPool2x2> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const int64_t oh = h / 2, ow = w / 2;
    torch::Tensor out = torch::empty({n, c, oh, ow}, x.options());
    // Per output: which of the window's four elements was the first maximum (0..3, in row-major
    // order as LibTorch scans it), or 4 when the maximum was not positive (no gradient).
    torch::Tensor which = torch::empty({n, c, oh, ow}, x.options().dtype(torch::kUInt8));
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    uint8_t* k = which.data_ptr<uint8_t>();
    at::parallel_for(0, n * c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const float* src = in + plane * h * w;
        float* dst = o + plane * oh * ow;
        uint8_t* arg = k + plane * oh * ow;
        for (int64_t i = 0; i < oh; ++i) {
          const float* r0 = src + (2 * i) * w;
          const float* r1 = r0 + w;
          for (int64_t j = 0; j < ow; ++j) {
            const float a = r0[2 * j], b = r0[2 * j + 1], d = r1[2 * j], e = r1[2 * j + 1];
            // LibTorch's scan: a later element wins only when greater (or NaN).
            float best = a;
            uint8_t index = 0;
            if (b > best || std::isnan(b)) best = b, index = 1;
            if (d > best || std::isnan(d)) best = d, index = 2;
            if (e > best || std::isnan(e)) best = e, index = 3;
            const bool pass = best > 0 || std::isnan(best);
            dst[i * ow + j] = pass ? best : 0.0f;
            arg[i * ow + j] = pass ? index : 4;
          }
        }
      }
    });
    ctx->save_for_backward({which});
    ctx->saved_data["h"] = h;
    ctx->saved_data["w"] = w;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    torch::Tensor which = ctx->get_saved_variables()[0];
    const int64_t h = ctx->saved_data["h"].toInt(), w = ctx->saved_data["w"].toInt();
    const int64_t n = which.size(0), c = which.size(1), oh = which.size(2), ow = which.size(3);
    torch::Tensor grad = grads[0].contiguous();
    torch::Tensor result = torch::empty({n, c, h, w}, grad.options());
    const float* g = grad.data_ptr<float>();
    const uint8_t* k = which.data_ptr<uint8_t>();
    float* r = result.data_ptr<float>();
    at::parallel_for(0, n * c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const float* src = g + plane * oh * ow;
        const uint8_t* arg = k + plane * oh * ow;
        float* dst = r + plane * h * w;
        for (int64_t i = 0; i < oh; ++i) {
          float* r0 = dst + (2 * i) * w;
          float* r1 = r0 + w;
          for (int64_t j = 0; j < ow; ++j) {
            const uint8_t index = arg[i * ow + j];
            const float v = src[i * ow + j];
            r0[2 * j] = index == 0 ? v : 0.0f;
            r0[2 * j + 1] = index == 1 ? v : 0.0f;
            r1[2 * j] = index == 2 ? v : 0.0f;
            r1[2 * j + 1] = index == 3 ? v : 0.0f;
          }
        }
      }
    });
    return {result};
  }
};

}  // namespace

torch::Tensor relu_max_pool2x2(const torch::Tensor& x) {
  const bool fused = x.dim() == 4 && x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
                     x.is_contiguous() && x.size(2) % 2 == 0 && x.size(3) % 2 == 0 && x.numel() > 0;
  if (!fused) return torch::relu(F::max_pool2d(x, F::MaxPool2dFuncOptions(2)));
  return ReluMaxPool2x2::apply(x);
}

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
  x = relu_max_pool2x2(conv2->forward(x));
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
