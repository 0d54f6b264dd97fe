// A model folder or an adapter folder over one, read once.
#include "lib/models/pretrained_source.h"

#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

// The rows of the classifier's head an adapter of task SEQ_CLS saves beside its adapters (PEFT's
// copy of `score`: base_model.model.score.weight [num_labels, hidden]), read from the header of
// dir's adapter_model.safetensors; 0 where there is none (loading the adapter says what is wrong
// with a missing or damaged file).
int64_t adapter_score_rows(const std::string& dir) {
  std::ifstream in(base::join_path(dir, base::hf::kAdapterWeights), std::ios::binary);
  char length[8];
  if (!in.read(length, sizeof length)) return 0;
  uint64_t size = 0;
  std::memcpy(&size, length, sizeof size);  // little-endian, as safetensors writes it
  if (size > (uint64_t{1} << 26)) return 0;
  std::string header(size, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(size))) return 0;
  const auto json = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("base_model.model.score.weight")) return 0;
  const auto& entry = json["base_model.model.score.weight"];
  if (!entry.is_object() || !entry.contains("shape") || !entry["shape"].is_array() ||
      entry["shape"].size() != 2 || !entry["shape"][0].is_number_unsigned()) {
    return 0;
  }
  return entry["shape"][0].get<int64_t>();
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
  // PEFT's SEQ_CLS: the base is a sequence classifier (AutoModelForSequenceClassification of the
  // base folder) with as many labels as the adapter's head has rows.
  if (source.adapter->task_type == "SEQ_CLS") {
    const int64_t rows = adapter_score_rows(dir);
    source.config =
        as_sequence_classifier(source.config, rows > 0 ? rows : source.config.num_labels);
  }
  return source;
}

}  // namespace trainer::models
