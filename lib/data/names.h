// The names of the data sets make_data_source() builds, torch-free so that argument validation
// can check dataset_name without LibTorch.
#pragma once

#include <string>
#include <vector>

namespace trainer::data {

inline const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = {"fashion_mnist", "mnist", "csv", "text"};
  return names;
}

}  // namespace trainer::data
