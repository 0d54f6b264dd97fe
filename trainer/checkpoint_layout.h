// Inside the Trainer's checkpoints (checkpoint.cpp saves, checkpoint_load.cpp loads): the names
// of a checkpoint folder's files, and what both halves read or check.
#pragma once

#include <optional>
#include <string>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

namespace trainer::checkpoint {

inline constexpr const char* kOptimizerFile = "optimizer.pt";
inline constexpr const char* kSchedulerFile = "scheduler.json";
inline constexpr const char* kStateFile = "trainer_state.json";
inline constexpr const char* kArgsFile = "training_args.json";

// The generator dropout and other random layers draw from, on `device`.
at::Generator default_generator(const torch::Device& device);

// The name of a parameter that holds nan or inf, or nothing.
std::optional<std::string> nonfinite_parameter(const torch::nn::Module& model);

}  // namespace trainer::checkpoint
