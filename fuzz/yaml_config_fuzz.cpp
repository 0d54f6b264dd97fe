// libFuzzer target for YAML configs (TrainingArguments::from_yaml_text over base::parse_yaml, as
// `trainer sft recipe.yaml` reads them): only trainer::InputError may come out, and arguments that
// were accepted must survive their own training_args.json.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/base/errors.h"
#include "lib/base/yaml_text.h"
#include "trainer/training_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)trainer::base::parse_yaml(text, "fuzz.yaml", 8);
  } catch (const trainer::InputError&) {
  }
  trainer::TrainingArguments args;
  try {
    // env is checked but not set: the fuzzer's own environment stays as it is.
    args = trainer::TrainingArguments::from_yaml_text(
        text, "fuzz.yaml", trainer::TrainingArguments::sft_defaults(false), /*set_env=*/false);
  } catch (const trainer::InputError&) {
    return 0;
  }
  // What the trainer writes to output_dir must read back: an InputError here is a finding.
  std::string json = args.to_json();
  std::string again = trainer::TrainingArguments::from_json_text(
                          json, "fuzz round trip", trainer::TrainingArguments::sft_defaults(false))
                          .to_json();
  if (again != json) {
    std::fprintf(stderr, "training_args.json changed on a round trip:\n%s\n%s\n", json.c_str(),
                 again.c_str());
    abort();
  }
  return 0;
}
