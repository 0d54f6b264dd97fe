// Hugging Face model folders: from_pretrained (config.json and model.safetensors or a sharded
// model.safetensors.index.json, F32/BF16/F16, old GPT-2 key spellings) and what save_pretrained
// writes beside the weights (config.json, generation_config.json).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "lib/models/hf_causal_lm.h"

namespace trainer::models {

// The model of folder `dir`, its weights in `dtype`: "auto" (config.json's dtype or torch_dtype,
// float32 when it names none; from_pretrained's dtype="auto"), "float32", "bfloat16" or
// "float16". Throws InputError, one line naming the file and the tensor or field, for: a missing
// config.json or weights file (a pytorch_model.bin alone is named as not read), an unsupported
// config (parse_hf_config), a missing or unexpected tensor, a shape that does not fit the config,
// a dtype other than F32/BF16/F16, an index naming a shard that is missing.
std::shared_ptr<HfCausalLM> load_hf_model(const std::string& dir,
                                          const std::string& dtype = "auto");
// The same with its config.json already read (`config`): the file is not read again.
std::shared_ptr<HfCausalLM> load_hf_model(const std::string& dir, const HfConfig& config,
                                          const std::string& dtype);

// The weights of folder `dir` as (name, tensor) in Transformers' names (old GPT-2 spellings
// renamed, buffers Transformers ignores dropped), mapped from the file(s), not read.
std::vector<std::pair<std::string, torch::Tensor>> read_hf_weights(const std::string& dir,
                                                                   const HfConfig& config);

// What save_pretrained writes beside model.safetensors for `model`: config.json (the config as
// read, with architectures and the parameters' dtype) and generation_config.json (the source
// folder's when `source_dir` has one, else from the config's bos/eos ids); name -> contents.
std::map<std::string, std::string> hf_pretrained_files(const HfCausalLM& model,
                                                       const std::string& source_dir = "");

// torch dtype of "float32", "bfloat16", "float16" (InputError naming `what` otherwise).
torch::Dtype hf_dtype(const std::string& name, const std::string& what);

}  // namespace trainer::models
