// The names of the models make_model() builds, torch-free so that argument validation can check
// model_name without LibTorch.
#pragma once

#include <string>
#include <vector>

namespace trainer::models {

inline const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"basic_net", "mlp", "resnet", "gpt"};
  return names;
}

}  // namespace trainer::models
