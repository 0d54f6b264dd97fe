// The data sets make_data_source() builds, by name: one table, torch-free, so that argument
// validation can check dataset_name without LibTorch. The registry (registry.cpp) makes its
// factories from the same table (<name>_source), so a name without a factory does not compile.
#pragma once

#include <string>
#include <vector>

#define TRAINER_DATASETS(X) X(fashion_mnist) X(mnist) X(csv) X(text)

namespace trainer::data {

inline const std::vector<std::string>& dataset_names() {
#define TRAINER_DATASET_NAME(name) #name,
  static const std::vector<std::string> names = {TRAINER_DATASETS(TRAINER_DATASET_NAME)};
#undef TRAINER_DATASET_NAME
  return names;
}

}  // namespace trainer::data
