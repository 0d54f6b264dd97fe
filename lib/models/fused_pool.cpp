// The fused ReLU, max-pool and dropout as an autograd Function over pool_kernel's row loops. Its
// dropout mask is a counter-based SplitMix64 stream instead of LibTorch's bernoulli_, which costs
// ~6 ms a BasicNet step on one core against ~0.3 ms here.
#include "lib/models/fused_pool.h"

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/autograd.h>
#include <torch/nn/functional.h>

#include "lib/models/pool_kernel.h"

namespace trainer::models {

namespace F = torch::nn::functional;

namespace {

// relu(max_pool2d(x, 2)) then dropout, on float32 CPU input in NCHW or channels-last layout;
// the output is contiguous NCHW (what flatten and a linear layer read).
class ReluMaxPoolDropout : public torch::autograd::Function<ReluMaxPoolDropout> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               double p, bool train) {
    const int64_t n = x.size(0), c = x.size(1), oh = x.size(2) / 2, ow = x.size(3) / 2;
    const int64_t sn = x.stride(0), sc = x.stride(1), sh = x.stride(2), sw = x.stride(3);
    Mask mask;
    mask.drop = train && p > 0;
    if (mask.drop) {
      // Kept with probability (1-p) to 2^-32 and scaled by 1/(1-p); p = 1 drops everything, as
      // LibTorch's dropout does.
      mask.threshold = static_cast<uint64_t>(std::llround((1 - p) * 4294967296.0));
      mask.scale = p >= 1 ? 0.0f : static_cast<float>(1.0 / (1.0 - p));
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      mask.seed = gen.get<at::CPUGeneratorImpl>()->random64();
    }
    torch::Tensor out = torch::empty({n, c, oh, ow}, x.options());
    // Codes are kept in (n, i, j, c) order, the order the backward writes channels-last input in.
    torch::Tensor codes = torch::empty({n, oh, ow, c}, x.options().dtype(torch::kUInt8));
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    uint8_t* k = codes.data_ptr<uint8_t>();
    at::parallel_for(0, n * oh, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> tile(ow * c);  // one output row, (j, channel) order
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / oh, i = row % oh;
        pool_row(in + b * sn + 2 * i * sh, c, ow, sc, sh, sw, mask,
                 static_cast<uint64_t>(row * ow * c), tile.data(), k + row * ow * c);
        for (int64_t ch = 0; ch < c; ++ch) {
          float* dst = o + ((b * c + ch) * oh + i) * ow;
          for (int64_t j = 0; j < ow; ++j) dst[j] = tile[j * c + ch];
        }
      }
    });
    ctx->save_for_backward({codes});
    ctx->saved_data["h"] = x.size(2);
    ctx->saved_data["w"] = x.size(3);
    ctx->saved_data["scale"] = static_cast<double>(mask.scale);
    ctx->saved_data["channels_last"] = sc == 1 && c > 1;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    torch::Tensor codes = ctx->get_saved_variables()[0];
    const int64_t h = ctx->saved_data["h"].toInt(), w = ctx->saved_data["w"].toInt();
    const float scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const int64_t n = codes.size(0), oh = codes.size(1), ow = codes.size(2), c = codes.size(3);
    torch::Tensor grad = grads[0].contiguous();
    auto format = ctx->saved_data["channels_last"].toBool() ? torch::MemoryFormat::ChannelsLast
                                                            : torch::MemoryFormat::Contiguous;
    torch::Tensor result = torch::empty({n, c, h, w}, grad.options().memory_format(format));
    const int64_t sn = result.stride(0), sc = result.stride(1), sh = result.stride(2),
                  sw = result.stride(3);
    const float* g = grad.data_ptr<float>();
    const uint8_t* k = codes.data_ptr<uint8_t>();
    float* r = result.data_ptr<float>();
    at::parallel_for(0, n * oh, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> tile(ow * c);
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / oh, i = row % oh;
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* src = g + ((b * c + ch) * oh + i) * ow;
          for (int64_t j = 0; j < ow; ++j) tile[j * c + ch] = src[j] * scale;
        }
        unpool_row(tile.data(), k + row * ow * c, c, ow, sc, sh, sw, r + b * sn + 2 * i * sh);
      }
    });
    return {result, torch::Tensor(), torch::Tensor()};
  }
};

bool fusable(const torch::Tensor& x) {
  return x.dim() == 4 && x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
         (x.is_contiguous() || x.is_contiguous(torch::MemoryFormat::ChannelsLast)) &&
         x.size(2) % 2 == 0 && x.size(3) % 2 == 0 && x.numel() > 0;
}

}  // namespace

torch::Tensor relu_max_pool2x2(const torch::Tensor& x) {
  if (!fusable(x)) return torch::relu(F::max_pool2d(x, F::MaxPool2dFuncOptions(2)));
  return ReluMaxPoolDropout::apply(x, 0.0, false);
}

torch::Tensor relu_max_pool2x2_dropout(const torch::Tensor& x, double p, bool train) {
  if (p < 0 || p > 1)
    throw std::invalid_argument(fmt::format("dropout probability {} is not in [0, 1]", p));
  if (!fusable(x))
    return F::dropout(relu_max_pool2x2(x), F::DropoutFuncOptions().p(p).training(train))
        .contiguous();
  return ReluMaxPoolDropout::apply(x, p, train);
}

}  // namespace trainer::models
