// Reading a Hugging Face model folder into HfCausalLM, and the files save_pretrained puts beside
// the weights.
#include "lib/models/hf_pretrained.h"

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/models/generation_config.h"

namespace trainer::models {
namespace {

// Transformers' name for a tensor of a GPT-2 file in the old spelling (no "transformer."
// prefix), "" for the buffers it ignores (attn.bias, attn.masked_bias: the causal masks).
std::string gpt2_name(const std::string& name) {
  if (base::ends_with(name, ".attn.bias") || base::ends_with(name, ".attn.masked_bias")) {
    return "";
  }
  if (base::starts_with(name, "transformer.") || base::starts_with(name, "lm_head.") ||
      base::starts_with(name, "score.")) {
    return name;
  }
  return "transformer." + name;
}

std::string llama_name(const std::string& name) {
  if (base::ends_with(name, "rotary_emb.inv_freq")) return "";
  return name;
}

// The config must describe the weights before a model of its size is allocated: a config of
// another model (or 10^9 layers) beside small weights says so here, naming the first tensor
// that is missing, left over or of another shape, not by running out of memory.
void check_weights_fit_config(const std::string& dir, const HfConfig& config,
                              const io::NamedTensors& weights) {
  // More layers than the file has tensors cannot all be there: the list stops one layer past.
  const int64_t layers =
      std::min<int64_t>(config.num_hidden_layers, static_cast<int64_t>(weights.size()) + 1);
  const auto expected = hf_parameter_shapes(config, layers);
  std::map<std::string, const torch::Tensor*> in_file;
  for (const auto& [name, tensor] : weights) in_file[name] = &tensor;
  const std::string model =
      fmt::format("config.json's {} of {} layer{}", config.model_type, config.num_hidden_layers,
                  config.num_hidden_layers == 1 ? "" : "s");
  auto more = [&](size_t count) {
    if (layers < config.num_hidden_layers) return std::string(" and more");
    return count > 1 ? fmt::format(" and {} more", count - 1) : std::string();
  };
  std::vector<std::string> missing;
  std::set<std::string> known;
  for (const auto& [name, shape] : expected) {
    known.insert(name);
    if (!in_file.count(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    throw InputError(fmt::format(
        "{}: the weights lack tensor '{}'{} that {} has: the config does not belong to these "
        "weights",
        dir, missing.front(), more(missing.size()), model));
  }
  std::vector<std::string> extra;
  for (const auto& [name, tensor] : weights) {
    if (!known.count(name)) extra.push_back(name);
  }
  if (!extra.empty()) {
    throw InputError(fmt::format(
        "{}: the weights hold tensor '{}'{} that {} has no place for: the config does not belong "
        "to these weights",
        dir, extra.front(), more(extra.size()), model));
  }
  for (const auto& [name, shape] : expected) {
    const torch::Tensor& tensor = *in_file.at(name);
    if (tensor.sizes().vec() != shape) {
      throw InputError(fmt::format(
          "{}: tensor '{}' is {}, where {} has {}: the config does not belong to these weights",
          dir, name, base::shape_text(tensor.sizes().vec()), model, base::shape_text(shape)));
    }
  }
}

// A classifier's weights from a folder that may be a language model's
// (AutoModelForSequenceClassification.from_pretrained over a ...ForCausalLM folder): its lm_head
// is not used, and a score the folder lacks is drawn as from_pretrained initialises a missing
// weight (normal(0, initializer_range)), with a warning.
void classifier_weights(const std::string& dir, const HfConfig& config, io::NamedTensors& weights) {
  bool has_score = false;
  for (auto it = weights.begin(); it != weights.end();) {
    has_score = has_score || it->first == "score.weight";
    it = it->first == "lm_head.weight" ? weights.erase(it) : it + 1;
  }
  if (has_score) return;
  base::warn(
      fmt::format("{} holds no score.weight: the classifier's head ({} labels) starts from "
                  "normal(0, {}), as Transformers initialises it; train it before using its "
                  "scores",
                  dir, config.num_labels, base::python_float(config.initializer_range)));
  torch::NoGradGuard no_grad;
  weights.emplace_back(
      "score.weight",
      torch::empty({config.num_labels, config.hidden_size}).normal_(0.0, config.initializer_range));
}

}  // namespace

torch::Dtype hf_dtype(const std::string& name, const std::string& what) {
  if (name == "float32") return torch::kFloat;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "float16") return torch::kHalf;
  throw InputError(
      fmt::format("{} \"{}\" is not allowed (auto, float32, bfloat16, float16)", what, name));
}

io::NamedTensors read_hf_weights(const std::string& dir, const HfConfig& config) {
  const bool bin = base::exists(base::join_path(dir, "pytorch_model.bin"));
  const std::vector<std::string> files = io::model_weight_files(
      dir, bin ? " (pytorch_model.bin is not read: save the model with safe_serialization, the "
                 "default of save_pretrained)"
               : "");
  io::NamedTensors out;
  std::set<std::string> names;
  torch::Tensor tied_head;  // lm_head.weight of a tied model's file
  for (const auto& file : files) {
    for (auto& [name, tensor] : io::map_safetensors(file).tensors) {
      const std::string renamed = config.model_type == "gpt2" ? gpt2_name(name) : llama_name(name);
      if (renamed.empty()) continue;
      // A tied model's file may still hold lm_head.weight (older saves): it must be the
      // embedding, which Transformers ties it to.
      if (config.tie_word_embeddings && renamed == "lm_head.weight") {
        tied_head = tensor;
        continue;
      }
      const auto type = tensor.scalar_type();
      if (type != torch::kFloat && type != torch::kBFloat16 && type != torch::kHalf) {
        throw InputError(fmt::format("{}: tensor '{}' is {} (F32, BF16 or F16 are read)", file,
                                     name, tensor_text(tensor)));
      }
      if (!names.insert(renamed).second) {
        throw InputError(fmt::format("{}: tensor '{}' is given twice", file, name));
      }
      out.emplace_back(renamed, tensor);
    }
  }
  if (tied_head.defined()) {
    const std::string embedding =
        config.model_type == "gpt2" ? "transformer.wte.weight" : "model.embed_tokens.weight";
    for (const auto& [name, tensor] : out) {
      if (name == embedding &&
          !(tensor.sizes() == tied_head.sizes() && torch::equal(tensor, tied_head))) {
        throw InputError(fmt::format(
            "{}: config.json says tie_word_embeddings true, but the file's lm_head.weight differs "
            "from {} (set tie_word_embeddings false to keep it)",
            dir, embedding));
      }
    }
  }
  return out;
}

std::shared_ptr<HfCausalLM> load_hf_model(const std::string& dir, const std::string& dtype) {
  return load_hf_model(dir, read_hf_config(dir), dtype);
}

std::shared_ptr<HfCausalLM> load_hf_model(const std::string& dir, const HfConfig& config,
                                          const std::string& dtype) {
  const std::string chosen =
      dtype == "auto" ? (config.dtype.empty() ? "float32" : config.dtype) : dtype;
  const torch::Dtype type = hf_dtype(chosen, dtype == "auto" ? "config.json dtype" : "torch_dtype");
  io::NamedTensors weights = read_hf_weights(dir, config);
  if (config.sequence_classification) classifier_weights(dir, config, weights);
  check_weights_fit_config(dir, config, weights);
  torch::NoGradGuard no_grad;
  std::shared_ptr<HfCausalLM> model;
  {
    // Every parameter is read below: the model is allocated, never drawn at random, and its
    // float32 memory, untouched, costs nothing before it becomes `type`.
    NoInitWeights no_init;
    model = make_hf_causal_lm(config);
  }
  model->to(type);
  // Tensor by tensor, each checked, copied and its file pages released: the model and its
  // checkpoint are never whole in memory together.
  io::load_state_dict(*model, weights, dir, [&](const std::string& name, const torch::Tensor& t) {
    if (!io::all_finite(t)) {
      throw InputError(fmt::format("{}: tensor '{}' holds NaN or infinite values", dir, name));
    }
  });
  return model;
}

std::map<std::string, std::string> hf_pretrained_files(const HfCausalLM& model,
                                                       const std::string& source_dir) {
  nlohmann::ordered_json config = model.config().json;
  config["architectures"] = {hf_architecture(model.config())};
  const auto type = model.dtype();
  config["dtype"] = type == torch::kBFloat16 ? "bfloat16"
                    : type == torch::kHalf   ? "float16"
                                             : "float32";
  config.erase("torch_dtype");
  std::map<std::string, std::string> files;
  files[base::hf::kConfig] = config.dump(2) + "\n";
  const std::string generation =
      source_dir.empty() ? "" : base::join_path(source_dir, base::hf::kGenerationConfig);
  if (!generation.empty() && base::exists(generation)) {
    // Checked as Transformers checks it when it loads the folder: a file it would refuse is
    // refused here, before training, not copied into the run's folder.
    files[base::hf::kGenerationConfig] = base::read_file(generation);
    parse_generation_config(base::parse_json(files[base::hf::kGenerationConfig], generation),
                            generation, model.config().vocab_size, /*decoding=*/false);
  } else {
    files[base::hf::kGenerationConfig] = hf_generation_config(model.config()).dump(2) + "\n";
  }
  return files;
}

}  // namespace trainer::models
