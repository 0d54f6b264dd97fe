// Activation checkpointing, as torch.utils.checkpoint does it for Transformers' decoder layers: a
// block runs without keeping its activations, and runs again in backward to make them, with the
// random state (dropout) and autocast of the first run, so that the gradients are those of the
// plain block.
#pragma once

#include <functional>

#include <torch/types.h>

namespace trainer::models {

// A block of a model: its input -> its output. What it reads besides its input (masks, rotary
// tables, the layer) it holds by value, since it runs again in backward.
using BlockFunction = std::function<torch::Tensor(const torch::Tensor&)>;

// block(x), keeping only x for backward. In backward, block runs again on x with gradients on,
// the CPU's and x's device's random generators as they were before the first run (restored after)
// and that run's autocast state; the gradients reach the block's parameters (accumulated into
// their .grad, as a reentrant checkpoint does, so DDP's and sharding's hooks see them) and x. The
// output requires grad even when x does not (a frozen embedding under LoRA), so that the block's
// trainable parameters still get theirs. Run it only with gradients on; exceptions of block
// propagate.
torch::Tensor checkpoint(BlockFunction block, const torch::Tensor& x);

}  // namespace trainer::models
