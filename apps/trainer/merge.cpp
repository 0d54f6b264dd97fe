// `trainer merge ADAPTER_DIR --output_dir DIR`: PEFT's merge_and_unload() and save_pretrained: the
// adapter's base model with W + scaling B A in each adapted layer, written as a Hugging Face model
// folder (config.json, generation_config.json, model.safetensors, the tokenizer) that
// Transformers loads as it loads the base.
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "apps/trainer/commands.h"
#include "apps/trainer/run_setup.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/text.h"
#include "lib/io/safetensors_header.h"
#include "lib/models/hf_pretrained.h"
#include "lib/models/lora.h"

namespace trainer::cli {

int merge_command(const MergeOptions& options) {
  const std::string& dir = options.adapter_dir;
  if (!models::is_adapter_dir(dir)) {
    throw InputError(fmt::format("trainer merge: {} is not an adapter folder (it holds no {})",
                                 base::shown_text(dir), base::hf::kAdapterConfig));
  }
  if (options.torch_dtype != "auto") models::hf_dtype(options.torch_dtype, "--torch_dtype");
  // A destination that cannot be written fails now, before the model is loaded and merged.
  base::check_writable_dir(options.output_dir, "trainer merge: --output_dir");
  // Nothing already saved is replaced: a model or adapter folder is refused as the output.
  for (const char* name : {base::hf::kConfig, base::hf::kWeights, base::hf::kWeightsIndex,
                           base::hf::kAdapterConfig, base::hf::kAdapterWeights}) {
    const std::string path = base::join_path(options.output_dir, name);
    if (base::exists(path)) {
      throw InputError(fmt::format(
          "trainer merge: --output_dir {} already holds {} (choose a new folder; nothing there is "
          "replaced)",
          options.output_dir, name));
    }
  }
  // Loaded in the wanted type: W + delta computed there, not rounded in the base's type first.
  const models::PretrainedSource source =
      models::adapter_source(dir, models::read_adapter_config(dir));
  auto peft = models::load_peft_model(source, options.torch_dtype);
  const std::string base_dir = peft->config().base_model_name_or_path;
  const size_t layers = peft->adapted_layers().size();
  std::shared_ptr<models::Model> merged = peft->merge_and_unload();
  auto* hf = models::as_hf_causal_lm(*merged);
  std::map<std::string, std::string> files = models::hf_pretrained_files(*hf, base_dir);
  for (auto& [name, contents] : tokenizer_files(source.tokenizer_dir)) {
    files[name] = contents;
  }
  base::make_output_directory(options.output_dir, "--output_dir");
  base::WriteBatch batch;
  merged->save_weights(options.output_dir, io::parse_file_size("50GB", "merge:"), &batch);
  for (const auto& [name, contents] : files) {
    base::write_file_atomic(base::join_path(options.output_dir, name), contents, &batch);
  }
  batch.commit();
  fmt::print("Merged {} ({} layers with adapters) into {}: {}\n", dir, layers, base_dir,
             options.output_dir);
  return 0;
}

}  // namespace trainer::cli
