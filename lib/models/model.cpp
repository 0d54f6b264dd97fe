// The Model interface's defaults and the tasks' losses.
#include "lib/models/model.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/io/safetensors.h"

namespace trainer::models {

torch::Tensor task_loss(const Task& task, const torch::Tensor& outputs, const torch::Tensor& labels,
                        const torch::Tensor& num_items_in_batch, double label_smoothing) {
  const bool summed = num_items_in_batch.defined();
  const auto reduction = summed ? torch::Reduction::Sum : torch::Reduction::Mean;
  torch::Tensor loss;
  switch (task.kind) {
    case data::TaskKind::kClassification:
      // Log-probabilities are their own log_softmax: cross_entropy smooths them as it smooths
      // logits.
      loss = task.log_probs && label_smoothing == 0
                 ? torch::nll_loss(outputs, labels, {}, reduction, -100)
                 : torch::cross_entropy_loss(outputs, labels, {}, reduction, -100, label_smoothing);
      break;
    case data::TaskKind::kRegression:
      loss = torch::mse_loss(outputs.reshape(labels.sizes()), labels.to(outputs.scalar_type()),
                             reduction);
      break;
    case data::TaskKind::kCausalLM: {
      if (outputs.dim() != 3 || labels.dim() != 2) {
        throw std::invalid_argument(fmt::format(
            "causal_lm loss: outputs must be [batch, length, vocabulary] and labels [batch, "
            "length], not {} and {}",
            base::shape_text(outputs.sizes().vec()), base::shape_text(labels.sizes().vec())));
      }
      const int64_t vocab = outputs.size(2);
      torch::Tensor logits = outputs.slice(1, 0, -1).reshape({-1, vocab});
      torch::Tensor targets = labels.slice(1, 1).reshape({-1});
      loss = torch::cross_entropy_loss(logits, targets, {}, reduction, -100, label_smoothing);
      break;
    }
  }
  return summed ? loss / num_items_in_batch.to(loss.scalar_type()) : loss;
}

ModelOutput Model::forward(const data::Batch& inputs) { return {forward(inputs.at("x")), {}}; }

torch::Tensor Model::forward(const torch::Tensor& x) {
  throw std::logic_error(
      "this model reads several inputs: call forward with the batch of named tensors");
}

torch::Tensor Model::loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                          const torch::Tensor& num_items_in_batch) {
  return task_loss(task(), outputs, labels, num_items_in_batch);
}

void set_activation_checkpointing(Model& model, int64_t every_n_layers) {
  // The innermost model runs its blocks (a wrapper such as PeftModel only lists them).
  Model* inner = &model;
  while (auto* wrapper = dynamic_cast<ModelWrapper*>(inner)) inner = &wrapper->unwrap();
  if (every_n_layers > 0 && inner->blocks().empty()) {
    throw InputError(
        "argument activation_checkpointing: true is not allowed (the model has no transformer "
        "blocks to recompute: gpt and the Hugging Face models have; basic_net, mlp, resnet and "
        "TorchScript models do not support activation checkpointing)");
  }
  inner->checkpoint_every_ = static_cast<size_t>(std::max<int64_t>(every_n_layers, 0));
}

namespace {

// `model` and every model it wraps, going down (a setting that each level may read).
template <typename F>
void for_each_level(Model& model, F&& f) {
  for (Model* m = &model; m;) {
    f(*m);
    auto* wrapper = dynamic_cast<ModelWrapper*>(m);
    m = wrapper ? &wrapper->unwrap() : nullptr;
  }
}

}  // namespace

void set_chunked_loss(Model& model, bool on) {
  for_each_level(model, [on](Model& m) { m.chunked_loss_ = on; });
}

void set_detect_overflow(Model& model, bool on) {
  for_each_level(model, [on](Model& m) { m.detect_overflow_ = on; });
}

void Model::check_block_output(size_t index, const torch::Tensor& y) const {
  torch::NoGradGuard no_grad;
  if (torch::isfinite(y).all().item<bool>()) return;
  const torch::Tensor finite = y.masked_select(torch::isfinite(y)).abs();
  throw std::runtime_error(fmt::format(
      "debug underflow_overflow: the output of block {} holds {} ({} inf, {} nan of {} values; "
      "the largest finite |value| {})",
      index, torch::isnan(y).any().item<bool>() ? "nan" : "inf",
      torch::isinf(y).sum().item<int64_t>(), torch::isnan(y).sum().item<int64_t>(), y.numel(),
      finite.numel() > 0 ? base::python_float(finite.max().item<double>()) : "none"));
}

int64_t num_trainable_parameters(const torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) count += p.numel();
  }
  return count;
}

std::string tensor_text(const torch::Tensor& x) {
  std::string dtype = c10::toString(x.scalar_type());
  switch (x.scalar_type()) {
    case torch::kFloat:
      dtype = "float32";
      break;
    case torch::kDouble:
      dtype = "float64";
      break;
    case torch::kHalf:
      dtype = "float16";
      break;
    case torch::kBFloat16:
      dtype = "bfloat16";
      break;
    case torch::kLong:
      dtype = "int64";
      break;
    case torch::kInt:
      dtype = "int32";
      break;
    case torch::kByte:
      dtype = "uint8";
      break;
    case torch::kBool:
      dtype = "bool";
      break;
    default:
      break;
  }
  return fmt::format("{} {}", dtype, base::shape_text(x.sizes().vec()));
}

std::vector<std::string> Model::save_weights(const std::string& dir, uint64_t max_shard_bytes,
                                             base::WriteBatch* batch) const {
  return io::save_model_weights(dir, io::state_dict(*this), max_shard_bytes, batch);
}

void Model::load_weights(const std::string& dir) {
  torch::NoGradGuard no_grad;
  io::load_state_dict(*this, io::map_model_weights(dir), base::join_path(dir, weights_file()));
}

std::string unknown_block_class(const std::vector<Block>& blocks,
                                const std::vector<std::string>& classes) {
  std::set<std::string> present;
  for (const auto& block : blocks) present.insert(block.class_name);
  for (const std::string& name : classes) {
    if (present.count(name)) continue;
    return fmt::format(
        "{} is not a layer of this model ({})", name,
        present.empty() ? std::string("it has no blocks to wrap; without it the model is one unit")
                        : fmt::format("its blocks are {}", fmt::join(present, ", ")));
  }
  return "";
}

}  // namespace trainer::models
