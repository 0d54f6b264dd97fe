// AdamW in one pass over memory: torch::optim::AdamW's options, state and results (the same
// update as PyTorch's AdamW), but each parameter's update reads and writes its parameter, gradient
// and two moments once instead of in six separate tensor operations, vectorised for AVX2 where the
// CPU has it. On CUDA it is PyTorch's fused kernel with capturable state (step counts and learning
// rates on the device), so that a CUDA graph can hold the step.
#pragma once

#include <map>

#include <torch/optim/adamw.h>

namespace trainer::optim {

class AdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  // One update of every parameter with a gradient. Float32, contiguous CPU parameters take the
  // fused CPU path; float32 CUDA parameters PyTorch's _fused_adamw_ (fused=True,
  // capturable=True: bias corrections from a step count held on the device, the learning rate
  // read from a device tensor); anything else (amsgrad, other dtypes, mixed devices) LibTorch's
  // own step. On CUDA no value is read back to the host.
  torch::Tensor step(LossClosure closure = nullptr) override;

  // Whether step() takes the CUDA path for every parameter: all float32 on one CUDA device, no
  // amsgrad (what set_skip_flag and a CUDA graph need).
  bool capturable() const;
  // CUDA path only: a float32 scalar on the parameters' device; each following step() leaves
  // parameters, moments and step counts as they were where it is nonzero (the GradScaler's
  // found_inf), decided on the device. An undefined tensor turns it off.
  void set_skip_flag(torch::Tensor flag) { skip_flag_ = std::move(flag); }
  // Copies each group's learning rate into the device tensor the CUDA path reads. step() does it
  // itself, except while a CUDA graph is being captured: call it before each replay.
  void update_device_lrs();

  // Copies the step counts the CUDA path keeps on the device into the parameters' states (what
  // save() and a sharded checkpoint read); nothing on the CPU path.
  void read_device_steps() const;
  // LibTorch's archive, with the step counts the device holds (read back here, on save only).
  void save(torch::serialize::OutputArchive& archive) const override;
  // Loads LibTorch's archive; the device step counts start again from the loaded ones.
  void load(torch::serialize::InputArchive& archive) override;

 private:
  void step_cuda();
  torch::Tensor skip_flag_;
  std::map<const void*, torch::Tensor> device_steps_;  // per parameter: float32 scalar
  std::vector<torch::Tensor> device_lrs_;              // per group: float32 scalar
};

}  // namespace trainer::optim
