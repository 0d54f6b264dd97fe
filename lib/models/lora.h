// LoRA as PEFT does it: low-rank adapters added to a model's linear layers by name, the base
// frozen, the adapters (and modules_to_save) trained, saved and read in PEFT's folder layout
// (adapter_config.json, adapter_model.safetensors under "base_model.model." names), and merged
// into the base's weights (merge_and_unload).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/base/hf_files.h"
#include "lib/io/safetensors.h"
#include "lib/models/lora_config.h"
#include "lib/models/model.h"
#include "lib/models/pretrained_source.h"

namespace trainer::models {

class HfCausalLM;

// A model with LoRA adapters: PEFT's PeftModel(LoraModel(base)). The base is registered as
// "base_model.model", so that every parameter's name is the one PEFT saves (with the adapter
// name left out): "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight".
class PeftModel : public ModelWrapper {
 public:
  // Adds an adapter to every linear layer of `base` that config.target_modules names (PEFT's
  // matching), freezes every other parameter but modules_to_save's and the biases config.bias
  // trains, and initialises the adapters as config.init_lora_weights says (drawing from
  // LibTorch's default generator). Throws InputError, one line listing the model's linear layers,
  // when a target matches none of them, or a module_to_save matches no module.
  PeftModel(std::shared_ptr<Model> base, LoraConfig config);

  // The base's blocks, under PEFT's names (base_model.model.<name>); hooks go to the base.
  std::vector<Block> blocks() override {
    std::vector<Block> out = wrapped_->blocks();
    for (auto& block : out) block.name = "base_model.model." + block.name;
    return out;
  }
  void set_block_hooks(BlockHooks* hooks) override { wrapped_->set_block_hooks(hooks); }

  // adapter_model.safetensors, and model.safetensors too when the base comes from no folder
  // (config.base_model_name_or_path empty: the base's weights are then part of the run).
  std::vector<std::string> save_weights(const std::string& dir, uint64_t max_shard_bytes,
                                        base::WriteBatch* batch = nullptr) const override;
  void load_weights(const std::string& dir) override;
  std::string weights_file() const override {
    return config_.base_model_name_or_path.empty() ? wrapped_->weights_file()
                                                   : base::hf::kAdapterWeights;
  }

  // What adapter_model.safetensors holds, under PEFT's names: every lora_A and lora_B, the
  // parameters of modules_to_save, and the biases config.bias trains.
  io::NamedTensors adapter_state_dict() const;
  // Loads adapter_model.safetensors' tensors (read from `path`, named in messages): each must be
  // one of adapter_state_dict()'s names with its shape; every one of those must be there.
  void load_adapter(const io::NamedTensors& tensors, const std::string& path);

  // The base with each adapter merged into its layer's weight (W + scaling B A, transposed for
  // fan_in_fan_out) and the adapters removed, every parameter trainable again: PEFT's
  // merge_and_unload(). This model is not usable afterwards.
  std::shared_ptr<Model> merge_and_unload();

  // PEFT's print_trainable_parameters() line: "trainable params: 3,584 || all params: 160,064 ||
  // trainable%: 2.2391" (all params counts a module_to_save twice, as PEFT's original and copy).
  std::string trainable_parameters_text() const;

  // Every adapter on or off (PEFT's disable_adapter(): off, the model computes what its base
  // does; modules_to_save stay as trained).
  void set_adapters_enabled(bool enabled);

  Model& base() const { return *wrapped_; }
  const std::shared_ptr<Model>& base_ptr() const { return wrapped_; }
  const LoraConfig& config() const { return config_; }
  // The names (in the base) of the layers that carry an adapter.
  const std::vector<std::string>& adapted_layers() const { return adapted_; }

 private:
  LoraConfig config_;
  std::vector<std::string> adapted_;
  std::vector<std::string> modules_to_save_;  // the base's modules config.modules_to_save names
};

// The model an adapter folder gives (AutoPeftModelForCausalLM.from_pretrained): its
// adapter_config.json's base_model_name_or_path loaded as a Hugging Face folder (weights in
// `dtype`, as load_hf_model), its adapters added and loaded from adapter_model.safetensors.
// Throws InputError, one line, for a missing or unsupported config, a base that is not a folder
// here, and adapter tensors that do not fit the base (an adapter of another model).
std::shared_ptr<PeftModel> load_peft_model(const std::string& dir,
                                           const std::string& dtype = "auto");
// The same from an adapter folder already resolved (its files are not read again).
std::shared_ptr<PeftModel> load_peft_model(const PretrainedSource& source,
                                           const std::string& dtype = "auto");

// The model a resolved folder gives: the adapter over its base, or the model folder's model.
std::shared_ptr<Model> load_pretrained(const PretrainedSource& source,
                                       const std::string& dtype = "auto");

// The Hugging Face language model inside `model` (itself, or under its wrappers: PEFT's, DDP's,
// FSDP's, the Accelerator's), or nullptr.
HfCausalLM* as_hf_causal_lm(Model& model);

}  // namespace trainer::models
