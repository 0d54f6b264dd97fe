// Reading a Hugging Face model folder into HfCausalLM, and the files save_pretrained puts beside
// the weights.
#include "lib/models/hf_pretrained.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/io/safetensors.h"

namespace trainer::models {
namespace {

namespace fs = std::filesystem;

// Transformers' name for a tensor of a GPT-2 file in the old spelling (no "transformer."
// prefix), "" for the buffers it ignores (attn.bias, attn.masked_bias: the causal masks).
std::string gpt2_name(const std::string& name) {
  if (base::ends_with(name, ".attn.bias") || base::ends_with(name, ".attn.masked_bias")) {
    return "";
  }
  if (base::starts_with(name, "transformer.") || base::starts_with(name, "lm_head.")) return name;
  return "transformer." + name;
}

std::string llama_name(const std::string& name) {
  if (base::ends_with(name, "rotary_emb.inv_freq")) return "";
  return name;
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
  const bool bin = fs::exists(base::join_path(dir, "pytorch_model.bin"));
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
  HfConfig config = read_hf_config(dir);
  const std::string chosen =
      dtype == "auto" ? (config.dtype.empty() ? "float32" : config.dtype) : dtype;
  const torch::Dtype type = hf_dtype(chosen, dtype == "auto" ? "config.json dtype" : "torch_dtype");
  io::NamedTensors weights = read_hf_weights(dir, config);
  // The config must describe the weights before a model of its size is allocated: a config of
  // another model (or 10^9 layers) beside small weights says so here, not by running out of
  // memory.
  int64_t in_file = 0;
  for (const auto& [name, tensor] : weights) in_file += tensor.numel();
  const int64_t expected = hf_num_parameters(config);
  if (in_file != expected) {
    throw InputError(
        fmt::format("{}/config.json describes a {} model of {} parameters; its weights hold {}: "
                    "the config does "
                    "not belong to these weights",
                    dir, config.model_type, base::thousands(expected), base::thousands(in_file)));
  }
  for (const auto& [name, tensor] : weights) {
    if (!torch::isfinite(tensor).all().item<bool>()) {
      throw InputError(fmt::format("{}: tensor '{}' holds NaN or infinite values", dir, name));
    }
  }
  torch::NoGradGuard no_grad;
  auto model = make_hf_causal_lm(config);
  model->to(type);
  io::load_state_dict(*model, weights, dir);
  return model;
}

std::map<std::string, std::string> hf_pretrained_files(const HfCausalLM& model,
                                                       const std::string& source_dir) {
  nlohmann::ordered_json config = model.config().json;
  config["architectures"] = {model.config().model_type == "gpt2" ? "GPT2LMHeadModel"
                                                                 : "LlamaForCausalLM"};
  const auto type = model.dtype();
  config["dtype"] = type == torch::kBFloat16 ? "bfloat16"
                    : type == torch::kHalf   ? "float16"
                                             : "float32";
  config.erase("torch_dtype");
  std::map<std::string, std::string> files;
  files["config.json"] = config.dump(2) + "\n";
  const std::string generation =
      source_dir.empty() ? "" : base::join_path(source_dir, "generation_config.json");
  if (!generation.empty() && fs::exists(generation)) {
    files["generation_config.json"] = base::read_file(generation);
  } else {
    files["generation_config.json"] = hf_generation_config(model.config()).dump(2) + "\n";
  }
  return files;
}

}  // namespace trainer::models
