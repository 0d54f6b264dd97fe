// What a model folder path names, resolved once: a Hugging Face model folder, or an adapter folder
// over one (AutoPeftModelForCausalLM's case), with its config.json, its adapter_config.json and
// where its tokenizer lies, each file read once for every command that uses them (torch-free).
#pragma once

#include <optional>
#include <string>

#include "lib/models/hf_config.h"
#include "lib/models/lora_config.h"

namespace trainer::models {

struct PretrainedSource {
  std::string path;       // as given
  std::string model_dir;  // the model folder: `path`, or the adapter's base_model_name_or_path
  // Where tokenizer.json is looked for: an adapter folder's own (a Trainer saves one there), else
  // the model folder.
  std::string tokenizer_dir;
  HfConfig config;                    // model_dir/config.json
  std::optional<LoraConfig> adapter;  // path/adapter_config.json, for an adapter folder
  bool is_adapter() const { return adapter.has_value(); }
};

// `path` resolved: nullopt when it is neither a model folder (config.json) nor an adapter folder
// (adapter_config.json). Throws InputError, one line naming the file, for a config that cannot be
// read or is not supported, and for an adapter whose base_model_name_or_path is null, an adapter
// folder itself, or not a Hugging Face model folder here.
std::optional<PretrainedSource> read_pretrained_source(const std::string& path);
// Adapter folder `dir` whose adapter_config.json is read already (`adapter`): its base checked and
// its config.json read, as read_pretrained_source does.
PretrainedSource adapter_source(const std::string& dir, LoraConfig adapter);

}  // namespace trainer::models
