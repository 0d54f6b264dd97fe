// The model registry: one factory (<name>_factory) per row of names.h, each reading its
// model_config options with base::JsonFields::options and checking that the data fits the model.
#include "lib/models/registry.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/json_fields.h"
#include "lib/base/text.h"
#include "lib/models/basic_net.h"
#include "lib/models/gpt.h"
#include "lib/models/mlp.h"
#include "lib/models/resnet.h"

namespace trainer::models {
namespace {

using data::TaskKind;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Throws InputError unless the data's task is one of `tasks` for `model`.
void check_task(const std::string& model, const data::DataInfo& info,
                std::initializer_list<TaskKind> tasks) {
  for (auto kind : tasks) {
    if (kind == info.task) return;
  }
  std::vector<std::string> names;
  for (auto kind : tasks) names.emplace_back(task_name(kind));
  throw InputError(fmt::format("model_name: model {} does not fit a {} data set (it learns {})",
                               model, task_name(info.task), fmt::join(names, " or ")));
}

std::shared_ptr<Model> basic_net_factory(base::JsonFields& options, const data::DataInfo& info) {
  check_task("basic_net", info, {TaskKind::kClassification});
  bool fused = options.boolean("fused", true);
  options.finish();
  if (info.input_shape != std::vector<int64_t>{1, 28, 28} || info.num_labels != 10) {
    throw InputError(fmt::format(
        "model_name: basic_net takes 1x28x28 images in 10 classes; the data set has examples of "
        "shape {} in {} classes (use mlp or resnet)",
        base::shape_text(info.input_shape), info.num_labels));
  }
  return std::make_shared<BasicNet>(fused);
}

std::shared_ptr<Model> mlp_factory(base::JsonFields& options, const data::DataInfo& info) {
  check_task("mlp", info, {TaskKind::kClassification, TaskKind::kRegression});
  auto hidden = options.integers("hidden_sizes", {128}, 1);
  auto activation = options.choice("activation", "relu", {"relu", "gelu", "tanh"});
  double dropout = options.number("dropout", 0.0, 0.0, 1.0, /*max_open=*/true);
  options.finish();
  Task task{info.task, false};
  return std::make_shared<Mlp>(product(info.input_shape), hidden,
                               std::max<int64_t>(1, info.num_labels), activation, dropout, task);
}

std::shared_ptr<Model> resnet_factory(base::JsonFields& options, const data::DataInfo& info) {
  check_task("resnet", info, {TaskKind::kClassification});
  int64_t width = options.integer("width", 16, 1, 1024);
  int64_t stages = options.integer("stages", 3, 1, 4);
  int64_t blocks = options.integer("blocks_per_stage", 2, 1, 16);
  options.finish();
  const auto& shape = info.input_shape;
  if (shape.size() != 3 || shape[1] < 8 || shape[2] < 8) {
    throw InputError(fmt::format(
        "model_name: resnet takes images [channels, height, width] of at least 8x8; the data "
        "set's examples are {}",
        base::shape_text(shape)));
  }
  return std::make_shared<ResNet>(shape[0], info.num_labels, width, stages, blocks);
}

std::shared_ptr<Model> gpt_factory(base::JsonFields& options, const data::DataInfo& info) {
  check_task("gpt", info, {TaskKind::kCausalLM});
  return make_gpt(options, info);
}

using Factory = std::shared_ptr<Model> (*)(base::JsonFields&, const data::DataInfo&);

// <name>_factory for each model of names.h.
const std::map<std::string, Factory>& factories() {
#define TRAINER_MODEL_FACTORY(name) {#name, &name##_factory},
  static const std::map<std::string, Factory> table = {TRAINER_MODELS(TRAINER_MODEL_FACTORY)};
#undef TRAINER_MODEL_FACTORY
  return table;
}

}  // namespace

std::shared_ptr<Model> make_model(const std::string& name, const nlohmann::ordered_json& config,
                                  const data::DataInfo& info) {
  auto options = base::JsonFields::options("model_config", name, config);
  auto it = factories().find(name);
  if (it == factories().end()) {
    throw InputError(fmt::format("model_name: unknown model '{}' (allowed: {})", name,
                                 fmt::join(model_names(), ", ")));
  }
  return it->second(options, info);
}

std::shared_ptr<Model> make_model(const std::string& name) {
  data::DataInfo mnist{data::TaskKind::kClassification, {1, 28, 28}, 10};
  return make_model(name, nlohmann::ordered_json::object(), mnist);
}

}  // namespace trainer::models
