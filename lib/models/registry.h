// The models by name: make_model builds one, shaped for the data, from model_config's options.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/data/dataset.h"
#include "lib/models/model.h"
#include "lib/models/names.h"

namespace trainer::models {

// A new model with freshly initialised parameters, shaped for `info` (its input shape, classes or
// vocabulary), with options from `config` (model_config, a JSON object; null: defaults). Throws
// InputError for an unknown name (listing the known ones), an unknown option (naming the nearest
// known one), a bad option value, or data the model cannot take (naming both).
std::shared_ptr<Model> make_model(const std::string& name, const nlohmann::ordered_json& config,
                                  const data::DataInfo& info);
// The same with default options for Fashion-MNIST-shaped data (1x28x28 images, 10 classes).
std::shared_ptr<Model> make_model(const std::string& name);

}  // namespace trainer::models
