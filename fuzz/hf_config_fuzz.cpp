// libFuzzer target for a Hugging Face folder's JSON files (base::parse_json, then config.json's
// parse_hf_config and generation_config.json's parse_generation_config): only trainer::InputError
// may come out, and an accepted config's shapes and parameter count must be computable.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/models/generation_config.h"
#include "lib/models/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json j;
  try {
    j = trainer::base::parse_json(text, "fuzz");
  } catch (const trainer::InputError&) {
    return 0;
  }
  int64_t vocab_size = 512;
  try {
    const trainer::models::HfConfig config = trainer::models::parse_hf_config(j, "fuzz");
    vocab_size = config.vocab_size;
    trainer::models::hf_num_parameters(config);
    trainer::models::hf_parameter_shapes(config, /*max_layers=*/2);
  } catch (const trainer::InputError&) {
  }
  try {
    trainer::models::parse_generation_config(j, "fuzz", vocab_size);
  } catch (const trainer::InputError&) {
  }
  return 0;
}
