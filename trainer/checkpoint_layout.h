// Inside the Trainer's checkpoints (checkpoint.cpp saves; checkpoint_find.cpp finds and checks,
// checkpoint_load.cpp loads): the names of a checkpoint folder's files, and what they all read or
// check.
#pragma once

#include <optional>
#include <string>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include "lib/io/safetensors.h"

namespace trainer::checkpoint {

inline constexpr const char* kOptimizerFile = "optimizer.pt";
inline constexpr const char* kSchedulerFile = "scheduler.json";
inline constexpr const char* kStateFile = "trainer_state.json";
inline constexpr const char* kArgsFile = "training_args.json";

// The generator dropout and other random layers draw from, on `device`.
at::Generator default_generator(const torch::Device& device);

// The name of a parameter that holds nan or inf, or nothing.
std::optional<std::string> nonfinite_parameter(const torch::nn::Module& model);

// A saved file's integer metadata `key` (InputError naming `source` when it has none).
int64_t metadata_integer(const io::Metadata& metadata, const std::string& key,
                         const std::string& source);
// The tensor `name` of a saved file (InputError naming `source` when it has none).
const torch::Tensor& named_tensor(const io::NamedTensors& tensors, const std::string& name,
                                  const std::string& source);
// A one-element tensor's value (a loss sum), or an InputError naming the file.
double scalar_value(const io::NamedTensors& tensors, const std::string& name,
                    const std::string& source);
// "checkpoint-12" of "/old/place/checkpoint-12" under `output_dir`: a best checkpoint recorded by
// a run that lived elsewhere (a copied or moved output_dir) is looked for here, never there.
std::optional<std::string> reroot(const std::optional<std::string>& path,
                                  const std::string& output_dir);

}  // namespace trainer::checkpoint
