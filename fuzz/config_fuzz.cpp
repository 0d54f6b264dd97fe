// libFuzzer target for JSON configs (TrainingArguments::from_json_text): only trainer::InputError
// may come out, and arguments that were accepted must survive their own training_args.json.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/base/errors.h"
#include "trainer/training_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  trainer::TrainingArguments args;
  try {
    args = trainer::TrainingArguments::from_json_text(text, "fuzz");
  } catch (const trainer::InputError&) {
    return 0;
  }
  args.get_warmup_steps(1000);
  // What the trainer writes to output_dir must read back: an InputError here is a finding.
  std::string json = args.to_json();
  std::string again = trainer::TrainingArguments::from_json_text(json, "fuzz round trip").to_json();
  if (again != json) {
    std::fprintf(stderr, "training_args.json changed on a round trip:\n%s\n%s\n", json.c_str(),
                 again.c_str());
    abort();
  }
  return 0;
}
