// A model folder or an adapter folder over one, read once.
#include "lib/models/pretrained_source.h"

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/text.h"

namespace trainer::models {

namespace {

// The base folder `config` (read from adapter folder `dir`) names, checked.
const std::string& checked_base_model(const LoraConfig& config, const std::string& dir) {
  const std::string config_path = base::join_path(dir, base::hf::kAdapterConfig);
  const std::string& base_dir = config.base_model_name_or_path;
  if (base_dir.empty()) {
    throw InputError(fmt::format(
        "{}: base_model_name_or_path is null (the adapter was trained on a model of no folder; "
        "give the run's own arguments instead)",
        config_path));
  }
  if (is_adapter_dir(base_dir)) {
    throw InputError(fmt::format(
        "{}: base_model_name_or_path {} is an adapter folder itself; adapters on adapters are not "
        "supported (merge it first: trainer merge)",
        config_path, base::shown_text(base_dir)));
  }
  if (!is_hf_model_dir(base_dir)) {
    throw InputError(fmt::format(
        "{}: base_model_name_or_path {} is not a Hugging Face model folder here (a folder with "
        "config.json; nothing is downloaded)",
        config_path, base::shown_text(base_dir)));
  }
  return base_dir;
}

}  // namespace

std::optional<PretrainedSource> read_pretrained_source(const std::string& path) {
  if (is_adapter_dir(path) && !is_hf_model_dir(path)) {
    return adapter_source(path, read_adapter_config(path));
  }
  if (!is_hf_model_dir(path)) return std::nullopt;
  PretrainedSource source;
  source.path = source.model_dir = source.tokenizer_dir = path;
  source.config = read_hf_config(path);
  return source;
}

PretrainedSource adapter_source(const std::string& dir, LoraConfig adapter) {
  PretrainedSource source;
  source.path = dir;
  source.model_dir = checked_base_model(adapter, dir);
  source.adapter = std::move(adapter);
  source.tokenizer_dir =
      base::exists(base::join_path(dir, base::hf::kTokenizer)) ? dir : source.model_dir;
  source.config = read_hf_config(source.model_dir);
  return source;
}

}  // namespace trainer::models
