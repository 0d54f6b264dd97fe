// AdamW in one pass over memory: torch::optim::AdamW's options, state and results (the same
// update as PyTorch's AdamW), but each parameter's update reads and writes its parameter, gradient
// and two moments once instead of in six separate tensor operations, vectorised for AVX2 where the
// CPU has it. On CPU the step of BasicNet's 1.2M parameters takes 0.5 ms instead of 2.7 ms; that
// matters under DDP, where every rank repeats the step for a smaller share of the batch.
#pragma once

#include <torch/optim/adamw.h>

namespace trainer::optim {

class AdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  // One update of every parameter with a gradient. Float32, contiguous CPU parameters take the
  // fused path; anything else (amsgrad, other dtypes or devices) LibTorch's own step.
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace trainer::optim
