// The Llama family's rotary embeddings: every rope type of Transformers 5.24's
// modeling_rope_utils.py (default, linear, dynamic, yarn, longrope, llama3, proportional), in
// float32 operation for operation as there, with dynamic_rope_update's per-forward changes.
#include <cmath>

#include <torch/torch.h>

#include "lib/models/hf_layers.h"

namespace trainer::models::hf {
namespace {

constexpr double kPi = 3.141592653589793;  // Python's math.pi

// arange(0, dim, 2) as float32 over dim: the exponents of the base.
Tensor exponents(int64_t dim) {
  return torch::arange(0, dim, 2, torch::kLong).to(torch::kFloat) / static_cast<double>(dim);
}

// 1 / base^exponents, base a Python float.
Tensor default_inv_freq(double base, int64_t dim) { return 1.0 / torch::pow(base, exponents(dim)); }

// YaRN's inverse frequencies and attention factor (_compute_yarn_parameters).
std::pair<Tensor, double> yarn(const RopeParameters& p, int64_t dim) {
  const double base = p.theta, factor = p.factor;
  auto get_mscale = [](double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
  };
  double attention_factor = p.attention_factor;
  if (attention_factor == 0) {
    attention_factor = p.mscale != 0 && p.mscale_all_dim != 0
                           ? get_mscale(factor, p.mscale) / get_mscale(factor, p.mscale_all_dim)
                           : get_mscale(factor, 1.0);
  }
  const auto original = static_cast<double>(p.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) * std::log(original / (rotations * 2 * kPi))) /
           (2 * std::log(base));
  };
  double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // Prevent singularity
  const Tensor pos_freqs = torch::pow(base, exponents(dim));
  const Tensor extrapolation = 1.0 / pos_freqs;
  const Tensor interpolation = 1.0 / (factor * pos_freqs);
  const Tensor ramp =
      torch::clamp((torch::arange(dim / 2, torch::kFloat) - low) / (high - low), 0, 1);
  const Tensor extrapolation_factor = 1 - ramp;
  return {interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor,
          attention_factor};
}

// Llama 3.1's smoothed scaling of the low frequencies (_compute_llama3_parameters).
Tensor llama3(const RopeParameters& p, int64_t dim) {
  const Tensor inv_freq = default_inv_freq(p.theta, dim);
  const auto old_context = static_cast<double>(p.original_max_position_embeddings);
  const double low_wavelen = old_context / p.low_freq_factor;
  const double high_wavelen = old_context / p.high_freq_factor;
  // A Python number over a tensor is the tensor's reciprocal times the number there.
  const Tensor wavelen = inv_freq.reciprocal() * (2 * kPi);
  Tensor scaled = torch::where(wavelen > low_wavelen, inv_freq / p.factor, inv_freq);
  const Tensor smooth = (wavelen.reciprocal() * old_context - p.low_freq_factor) /
                        (p.high_freq_factor - p.low_freq_factor);
  const Tensor smoothed = (1 - smooth) * scaled / p.factor + smooth * scaled;
  const Tensor medium =
      (wavelen < high_wavelen).logical_not() * (wavelen > low_wavelen).logical_not();
  return torch::where(medium, smoothed, scaled);
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const RopeParameters& rope, int64_t rotary_dim,
                                 int64_t max_position_embeddings)
    : rope_(rope),
      dim_(rotary_dim),
      max_positions_(max_position_embeddings),
      max_seq_len_cached_(max_position_embeddings) {
  std::tie(inv_freq_, attention_scaling_) = compute(0);
  original_inv_freq_ = inv_freq_;
  if (rope_.type == "longrope") {
    long_inv_freq_ = compute(rope_.original_max_position_embeddings + 1).first;
  }
}

std::pair<Tensor, double> RotaryEmbedding::compute(int64_t seq_len) const {
  const RopeParameters& p = rope_;
  const int64_t dim = dim_;
  if (p.type == "linear") return {default_inv_freq(p.theta, dim) / p.factor, 1.0};
  if (p.type == "dynamic") {
    if (seq_len == 0) return {default_inv_freq(p.theta, dim), 1.0};
    // At a forward, seq_len is a tensor there: the new base in float32.
    const Tensor length = torch::maximum(torch::scalar_tensor(seq_len, torch::kLong),
                                         torch::scalar_tensor(max_positions_, torch::kLong));
    const Tensor base =
        p.theta * torch::pow((p.factor * length / max_positions_) - (p.factor - 1),
                             static_cast<double>(dim) / static_cast<double>(dim - 2));
    return {1.0 / torch::pow(base, exponents(dim)), 1.0};
  }
  if (p.type == "yarn") return yarn(p, dim);
  if (p.type == "longrope") {
    const double factor = p.factor;
    const auto original = static_cast<double>(p.original_max_position_embeddings);
    double attention_factor = p.attention_factor;
    if (attention_factor == 0) {
      attention_factor = factor <= 1 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original));
    }
    const std::vector<double>& factors =
        seq_len > p.original_max_position_embeddings ? p.long_factor : p.short_factor;
    const Tensor ext = torch::tensor(factors, torch::kDouble).to(torch::kFloat);
    return {1.0 / (ext * torch::pow(p.theta, exponents(dim))), attention_factor};
  }
  if (p.type == "llama3") return {llama3(p, dim), 1.0};
  if (p.type == "proportional") {
    const auto angles =
        static_cast<int64_t>(p.partial_rotary_factor * static_cast<double>(dim) / 2);
    Tensor rotated =
        1.0 / torch::pow(p.theta, torch::arange(0, 2 * angles, 2, torch::kLong).to(torch::kFloat) /
                                      static_cast<double>(dim));
    const int64_t nope = dim / 2 - angles;
    if (nope > 0) rotated = torch::cat({rotated, torch::zeros({nope}, torch::kFloat)});
    return {rotated / p.factor, 1.0};
  }
  return {default_inv_freq(p.theta, dim), 1.0};
}

std::pair<Tensor, Tensor> RotaryEmbedding::operator()(const Tensor& positions, torch::Dtype dtype) {
  if (rope_.type == "dynamic" || rope_.type == "longrope") {
    const int64_t seq_len = static_cast<int64_t>(positions.max().item<double>()) + 1;
    if (rope_.type == "longrope") {
      inv_freq_ =
          seq_len > rope_.original_max_position_embeddings ? long_inv_freq_ : original_inv_freq_;
    } else {
      if (seq_len > max_seq_len_cached_) {  // growth
        std::tie(inv_freq_, attention_scaling_) = compute(seq_len);
        max_seq_len_cached_ = seq_len;
      }
      if (seq_len < max_positions_ && max_seq_len_cached_ > max_positions_) {  // reset
        inv_freq_ = original_inv_freq_;
        max_seq_len_cached_ = max_positions_;
      }
    }
  }
  const int64_t rows = positions.size(0), T = positions.size(1);
  Tensor freqs = positions.unsqueeze(2) * inv_freq_.to(positions.device()).view({1, 1, -1});
  Tensor emb = torch::cat({freqs, freqs}, -1);
  Tensor cos = emb.cos(), sin = emb.sin();
  if (attention_scaling_ != 1.0) {
    cos = cos * attention_scaling_;
    sin = sin * attention_scaling_;
  }
  return {cos.to(dtype).view({rows, 1, T, -1}), sin.to(dtype).view({rows, 1, T, -1})};
}

}  // namespace trainer::models::hf
