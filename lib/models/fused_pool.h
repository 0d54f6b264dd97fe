// BasicNet's ReLU, 2x2 max-pool and dropout as one autograd op on CPU (LibTorch's ops elsewhere).
#pragma once

#include <torch/types.h>

namespace trainer::models {

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
// bernoulli_ (see fused_pool.cpp for why). Other dtypes,
// devices and odd sizes take LibTorch's ops. Throws std::invalid_argument for p outside [0, 1].
torch::Tensor relu_max_pool2x2_dropout(const torch::Tensor& x, double p, bool train);

}  // namespace trainer::models
