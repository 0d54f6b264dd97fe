// The models make_model() builds, by name: one table, torch-free, so that argument validation can
// check model_name without LibTorch. The registry (registry.cpp) makes its factories from the same
// table (<name>_factory), so a name without a factory does not compile.
#pragma once

#include <string>
#include <vector>

#define TRAINER_MODELS(X) X(basic_net) X(mlp) X(resnet) X(gpt)

namespace trainer::models {

inline const std::vector<std::string>& model_names() {
#define TRAINER_MODEL_NAME(name) #name,
  static const std::vector<std::string> names = {TRAINER_MODELS(TRAINER_MODEL_NAME)};
#undef TRAINER_MODEL_NAME
  return names;
}

}  // namespace trainer::models
