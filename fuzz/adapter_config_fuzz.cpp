// libFuzzer target for PEFT's adapter_config.json (models::parse_adapter_config): only
// trainer::InputError may come out, an accepted config must survive the adapter_config.json we
// write for it, and its target_modules must match module names without failing.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/models/lora_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  trainer::models::LoraConfig config;
  try {
    // As read_adapter_config reads the file: the one JSON reader, with its depth limit.
    config = trainer::models::parse_adapter_config(trainer::base::parse_json(text, "fuzz"), "fuzz");
  } catch (const trainer::InputError&) {
    return 0;
  }
  for (const char* key :
       {"model.layers.0.self_attn.q_proj", "transformer.h.1.attn.c_attn", "fc1"}) {
    trainer::models::lora_target_matches(config, key);
    trainer::models::module_to_save_matches(config, key);
  }
  const std::string written = trainer::models::adapter_config_json(config);
  const auto again = trainer::models::parse_adapter_config(nlohmann::ordered_json::parse(written),
                                                           "fuzz round trip");
  if (trainer::models::adapter_config_json(again) != written) {
    std::fprintf(stderr, "adapter_config.json changed on a round trip:\n%s\n", written.c_str());
    abort();
  }
  return 0;
}
