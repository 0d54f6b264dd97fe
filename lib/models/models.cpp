// The tasks' losses, BasicNet, the MLP, the small ResNet and the model registry.
#include "lib/models/models.h"

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/autograd.h>
#include <torch/nn/functional.h>
#include <torch/nn/init.h>

#include "lib/base/config_reader.h"
#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/models/gpt.h"

namespace trainer::models {

namespace F = torch::nn::functional;

namespace {

// SplitMix64's k-th output for a seed: a counter-based stream, so a dropout mask depends only on
// the seed drawn from the generator and each element's index, not on threads or memory layout.
inline uint64_t splitmix64(uint64_t seed, uint64_t k) {
  uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Per output element of the fused op: bits 0-1 the window's first maximum (row-major, as LibTorch
// scans it), bit 2 set when the maximum passed the ReLU, bit 3 set when dropout kept the element.
constexpr int kPass = 4, kKeep = 8;

// Dropout's parameters for one call: element e (its index in (n, i, j, channel) order) is kept
// when the e%2-th 32-bit half of splitmix64(seed, e/2) is below threshold; kept ones are scaled.
struct Mask {
  bool drop = false;
  uint64_t seed = 0, threshold = uint64_t{1} << 32;
  float scale = 1.0f;
  // Whether element e is kept, given bits = splitmix64(seed, e / 2) (one draw serves a pair).
  bool keep(uint64_t bits, uint64_t e) const {
    return ((bits >> ((e & 1) * 32)) & 0xffffffffull) < threshold;
  }
};

// Pools one output row, (j, channel) order, from a 2x2 window per output whose four corners are
// at offsets 0, sw, sh, sh + sw; channel ch is at ch * sc.
// Dropout follows, for the row's first element index e0.
void pool_row_scalar(const float* base, int64_t c, int64_t ow, int64_t sc, int64_t sh, int64_t sw,
                     const Mask& mask, uint64_t e0, float* tile, uint8_t* code) {
  // One SplitMix64 output serves two consecutive elements (Mask::keep).
  uint64_t pair = ~uint64_t{0}, bits = 0;
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* q = base + 2 * j * sw + ch * sc;
      const float a = q[0], b = q[sw], d = q[sh], e = q[sh + sw];
      // LibTorch's scan: a later element wins only when greater (or NaN).
      float best = a;
      int index = 0;
      if (b > best || std::isnan(b)) best = b, index = 1;
      if (d > best || std::isnan(d)) best = d, index = 2;
      if (e > best || std::isnan(e)) best = e, index = 3;
      const bool pass = best > 0 || std::isnan(best);
      const uint64_t element = e0 + j * c + ch;
      bool keep = true;
      if (mask.drop) {
        if (element >> 1 != pair) pair = element >> 1, bits = splitmix64(mask.seed, pair);
        keep = mask.keep(bits, element);
      }
      tile[j * c + ch] = pass && keep ? best * mask.scale : 0.0f;
      code[j * c + ch] = static_cast<uint8_t>(index | (pass ? kPass : 0) | (keep ? kKeep : 0));
    }
  }
}

// The backward of pool_row: spreads one row of gradients ((j, channel) order, already scaled) to
// the window element each output came from, zeros elsewhere.
void unpool_row_scalar(const float* tile, const uint8_t* code, int64_t c, int64_t ow, int64_t sc,
                       int64_t sh, int64_t sw, float* base) {
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int m = code[j * c + ch];
      const float v = (m & (kPass | kKeep)) == (kPass | kKeep) ? tile[j * c + ch] : 0.0f;
      const int index = m & 3;
      float* q = base + 2 * j * sw + ch * sc;
      q[0] = index == 0 ? v : 0.0f;
      q[sw] = index == 1 ? v : 0.0f;
      q[sh] = index == 2 ? v : 0.0f;
      q[sh + sw] = index == 3 ? v : 0.0f;
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TRAINER_HAVE_AVX512 1
// GCC 12's AVX-512 headers start some intrinsics from an undefined vector and then warn that it
// may be used uninitialized (it is not: every lane is written).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The same two loops for channels-last input (sc == 1, an even number of channels), 16 channels
// at a time with AVX-512 (F, BW, VL, and DQ for the mask's 64-bit multiplies).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void pool_row_avx512(
    const float* base, int64_t c, int64_t ow, int64_t sh, int64_t sw, const Mask& mask, uint64_t e0,
    float* tile, uint8_t* code) {
  const __m512 zero = _mm512_setzero_ps(), scale = _mm512_set1_ps(mask.scale);
  const bool all_kept = !mask.drop || mask.threshold > 0xffffffffull;
  const __m512i threshold =
      _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(all_kept ? 0 : mask.threshold)));
  const __m512i seed = _mm512_set1_epi64(static_cast<long long>(mask.seed));
  const __m512i gamma = _mm512_set1_epi64(static_cast<long long>(0x9E3779B97F4A7C15ull));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull));
  const __m512i steps = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1);
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ch += 16) {
      const __mmask16 lanes = c - ch >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - ch)) - 1);
      const float* q = base + 2 * j * sw + ch;
      const __m512 a = _mm512_maskz_loadu_ps(lanes, q), b = _mm512_maskz_loadu_ps(lanes, q + sw),
                   d = _mm512_maskz_loadu_ps(lanes, q + sh),
                   e = _mm512_maskz_loadu_ps(lanes, q + sh + sw);
      __m512 best = a;
      __m512i index = _mm512_setzero_si512();
      // A later element wins when greater or NaN, as in the scalar loop.
      __mmask16 t =
          _mm512_cmp_ps_mask(b, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(t, best, b);
      index = _mm512_mask_blend_epi32(t, index, _mm512_set1_epi32(1));
      t = _mm512_cmp_ps_mask(d, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(t, best, d);
      index = _mm512_mask_blend_epi32(t, index, _mm512_set1_epi32(2));
      t = _mm512_cmp_ps_mask(e, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(e, e, _CMP_UNORD_Q);
      best = _mm512_mask_blend_ps(t, best, e);
      index = _mm512_mask_blend_epi32(t, index, _mm512_set1_epi32(3));
      const __mmask16 pass =
          _mm512_cmp_ps_mask(best, zero, _CMP_GT_OQ) | _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q);
      // Sixteen 32-bit halves of splitmix64(seed, k) for the eight pairs k this block covers,
      // lane 2i the low half of pair i: the scalar Mask::keep's order.
      __mmask16 keep = 0xffff;
      if (!all_kept) {
        const __m512i k = _mm512_add_epi64(
            _mm512_set1_epi64(static_cast<long long>((e0 + j * c + ch) >> 1)), steps);
        __m512i z = _mm512_add_epi64(seed, _mm512_mullo_epi64(k, gamma));
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
        z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
        keep = _mm512_cmplt_epu32_mask(z, threshold);
      }
      _mm512_mask_storeu_ps(tile + j * c + ch, lanes,
                            _mm512_maskz_mul_ps(pass & keep, best, scale));
      index = _mm512_mask_or_epi32(index, pass, index, _mm512_set1_epi32(kPass));
      index = _mm512_mask_or_epi32(index, keep, index, _mm512_set1_epi32(kKeep));
      _mm512_mask_cvtepi32_storeu_epi8(code + j * c + ch, lanes, index);
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void unpool_row_avx512(const float* tile,
                                                                            const uint8_t* code,
                                                                            int64_t c, int64_t ow,
                                                                            int64_t sh, int64_t sw,
                                                                            float* base) {
  const __m512i both = _mm512_set1_epi32(kPass | kKeep), three = _mm512_set1_epi32(3);
  for (int64_t j = 0; j < ow; ++j) {
    for (int64_t ch = 0; ch < c; ch += 16) {
      const __mmask16 lanes = c - ch >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - ch)) - 1);
      const __m512i m =
          _mm512_maskz_cvtepu8_epi32(lanes, _mm_maskz_loadu_epi8(lanes, code + j * c + ch));
      const __mmask16 live = _mm512_cmpeq_epi32_mask(_mm512_and_si512(m, both), both);
      const __m512 v = _mm512_maskz_loadu_ps(live & lanes, tile + j * c + ch);
      const __m512i index = _mm512_and_si512(m, three);
      float* q = base + 2 * j * sw + ch;
      _mm512_mask_storeu_ps(
          q, lanes, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, _mm512_set1_epi32(0)), v));
      _mm512_mask_storeu_ps(
          q + sw, lanes,
          _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, _mm512_set1_epi32(1)), v));
      _mm512_mask_storeu_ps(
          q + sh, lanes,
          _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, _mm512_set1_epi32(2)), v));
      _mm512_mask_storeu_ps(q + sh + sw, lanes,
                            _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(index, three), v));
    }
  }
}

bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return yes;
}
#pragma GCC diagnostic pop
#endif

void pool_row(const float* base, int64_t c, int64_t ow, int64_t sc, int64_t sh, int64_t sw,
              const Mask& mask, uint64_t e0, float* tile, uint8_t* code) {
#ifdef TRAINER_HAVE_AVX512
  if (sc == 1 && c % 2 == 0 && have_avx512())
    return pool_row_avx512(base, c, ow, sh, sw, mask, e0, tile, code);
#endif
  pool_row_scalar(base, c, ow, sc, sh, sw, mask, e0, tile, code);
}

void unpool_row(const float* tile, const uint8_t* code, int64_t c, int64_t ow, int64_t sc,
                int64_t sh, int64_t sw, float* base) {
#ifdef TRAINER_HAVE_AVX512
  if (sc == 1 && have_avx512()) return unpool_row_avx512(tile, code, c, ow, sh, sw, base);
#endif
  unpool_row_scalar(tile, code, c, ow, sc, sh, sw, base);
}

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

torch::Tensor task_loss(const Task& task, const torch::Tensor& outputs, const torch::Tensor& labels,
                        const torch::Tensor& num_items_in_batch) {
  const bool summed = num_items_in_batch.defined();
  const auto reduction = summed ? torch::Reduction::Sum : torch::Reduction::Mean;
  torch::Tensor loss;
  switch (task.kind) {
    case data::TaskKind::kClassification:
      loss = task.log_probs ? torch::nll_loss(outputs, labels, {}, reduction, -100)
                            : torch::cross_entropy_loss(outputs, labels, {}, reduction, -100, 0.0);
      break;
    case data::TaskKind::kRegression:
      loss = torch::mse_loss(outputs.reshape(labels.sizes()), labels.to(outputs.scalar_type()),
                             reduction);
      break;
    case data::TaskKind::kCausalLM: {
      if (outputs.dim() != 3 || labels.dim() != 2) {
        throw std::invalid_argument(fmt::format(
            "causal_lm loss: outputs must be [batch, length, vocabulary] and labels [batch, "
            "length], not {} and {}",
            base::shape_text(outputs.sizes().vec()), base::shape_text(labels.sizes().vec())));
      }
      const int64_t vocab = outputs.size(2);
      torch::Tensor logits = outputs.slice(1, 0, -1).reshape({-1, vocab});
      torch::Tensor targets = labels.slice(1, 1).reshape({-1});
      loss = torch::cross_entropy_loss(logits, targets, {}, reduction, -100, 0.0);
      break;
    }
  }
  return summed ? loss / num_items_in_batch.to(loss.scalar_type()) : loss;
}

ModelOutput Model::forward(const data::Batch& inputs) { return {forward(inputs.at("x")), {}}; }

torch::Tensor Model::forward(const torch::Tensor& x) {
  throw std::logic_error(
      "this model reads several inputs: call forward with the batch of named tensors");
}

torch::Tensor Model::loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                          const torch::Tensor& num_items_in_batch) {
  return task_loss(task(), outputs, labels, num_items_in_batch);
}

BasicNet::BasicNet(bool fused) : fused_(fused) {
  task_.log_probs = true;
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).stride(1)));
  conv2 =
      register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).stride(1)));
  dropout1 = register_module("dropout1", torch::nn::Dropout(0.25));
  dropout2 = register_module("dropout2", torch::nn::Dropout(0.5));
  fc1 = register_module("fc1", torch::nn::Linear(9216, 128));
  fc2 = register_module("fc2", torch::nn::Linear(128, 10));
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

Mlp::Mlp(int64_t in_features, std::vector<int64_t> hidden_sizes, int64_t out_features,
         std::string activation, double dropout, Task task)
    : activation_(std::move(activation)), dropout_(dropout) {
  task_ = task;
  layers = register_module("layers", torch::nn::ModuleList());
  int64_t in = in_features;
  hidden_sizes.push_back(out_features);
  for (int64_t out : hidden_sizes) {
    layers->push_back(torch::nn::Linear(in, out));
    in = out;
  }
}

torch::Tensor Mlp::forward(const torch::Tensor& input) {
  torch::Tensor x = input.flatten(1);
  const size_t n = layers->size();
  for (size_t i = 0; i < n; ++i) {
    x = layers->ptr<torch::nn::LinearImpl>(i)->forward(x);
    if (i + 1 == n) break;
    if (activation_ == "relu") {
      x = torch::relu(x);
    } else if (activation_ == "gelu") {
      x = torch::gelu(x);
    } else {
      x = torch::tanh(x);
    }
    if (dropout_ > 0)
      x = F::dropout(x, F::DropoutFuncOptions().p(dropout_).training(is_training()));
  }
  return x;
}

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
  fc = register_module("fc", torch::nn::Linear(channels, num_classes));
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

namespace {

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Throws InputError unless the data's task is one of `tasks` for `model`.
void check_task(const std::string& model, const data::DataInfo& info,
                std::initializer_list<data::TaskKind> tasks) {
  for (auto kind : tasks) {
    if (kind == info.task) return;
  }
  std::vector<std::string> names;
  for (auto kind : tasks) names.emplace_back(task_name(kind));
  const std::string allowed = fmt::format("{}", fmt::join(names, " or "));
  throw InputError(fmt::format("model_name: model {} does not fit a {} data set (it learns {})",
                               model, task_name(info.task), allowed));
}

}  // namespace

std::shared_ptr<Model> make_model(const std::string& name, const nlohmann::ordered_json& config,
                                  const data::DataInfo& info) {
  using data::TaskKind;
  base::ConfigReader options("model_config", name, config);
  std::shared_ptr<Model> model;
  if (name == "basic_net") {
    check_task(name, info, {TaskKind::kClassification});
    bool fused = options.boolean("fused", true);
    options.finish();
    if (info.input_shape != std::vector<int64_t>{1, 28, 28} || info.num_labels != 10) {
      throw InputError(fmt::format(
          "model_name: basic_net takes 1x28x28 images in 10 classes; the data set has examples of "
          "shape {} in {} classes (use mlp or resnet)",
          base::shape_text(info.input_shape), info.num_labels));
    }
    model = std::make_shared<BasicNet>(fused);
  } else if (name == "mlp") {
    check_task(name, info, {TaskKind::kClassification, TaskKind::kRegression});
    auto hidden = options.integers("hidden_sizes", {128}, 1);
    auto activation = options.choice("activation", "relu", {"relu", "gelu", "tanh"});
    double dropout = options.number("dropout", 0.0, 0.0, 1.0, /*max_open=*/true);
    options.finish();
    Task task{info.task, false};
    model = std::make_shared<Mlp>(product(info.input_shape), hidden,
                                  std::max<int64_t>(1, info.num_labels), activation, dropout, task);
  } else if (name == "resnet") {
    check_task(name, info, {TaskKind::kClassification});
    int64_t width = options.integer("width", 16, 1, 1024);
    int64_t stages = options.integer("stages", 3, 1, 4);
    int64_t blocks = options.integer("blocks_per_stage", 2, 1, 16);
    options.finish();
    const auto& shape = info.input_shape;
    if (shape.size() != 3 || shape[1] < 8 || shape[2] < 8) {
      throw InputError(fmt::format(
          "model_name: resnet takes images [channels, height, width] of at least 8x8; the data "
          "set's examples are {}",
          base::shape_text(shape)));
    }
    model = std::make_shared<ResNet>(shape[0], info.num_labels, width, stages, blocks);
  } else if (name == "gpt") {
    check_task(name, info, {TaskKind::kCausalLM});
    model = make_gpt(options, info);
  } else {
    throw InputError(fmt::format("model_name: unknown model '{}' (allowed: {})", name,
                                 fmt::join(model_names(), ", ")));
  }
  return model;
}

std::shared_ptr<Model> make_model(const std::string& name) {
  data::DataInfo mnist{data::TaskKind::kClassification, {1, 28, 28}, 10};
  return make_model(name, nlohmann::ordered_json::object(), mnist);
}

int64_t num_trainable_parameters(const torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) count += p.numel();
  }
  return count;
}

}  // namespace trainer::models
