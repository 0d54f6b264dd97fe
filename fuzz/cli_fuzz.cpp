// libFuzzer target for the trainer's command line (apps/trainer/cli.cpp): the input split at NUL bytes is
// argv after "trainer"; a train/evaluate command's overrides then go through
// TrainingArguments::parse without a config file, and the arguments accepted through to_json.
// Only trainer::InputError may come out.
#include <cstdint>
#include <string>
#include <vector>

#include "apps/trainer/cli.h"
#include "lib/base/errors.h"
#include "trainer/training_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words = {"trainer"};
  std::string word;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(data[i]);
    }
  }
  if (size > 0) words.push_back(word);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  try {
    auto command = trainer::cli::parse_command_line(static_cast<int>(words.size()), argv.data());
    if (command && (command->name == "train" || command->name == "evaluate")) {
      // Never reads command->config. to_json: what the trainer writes as training_args.json.
      trainer::TrainingArguments::parse("", command->overrides).to_json();
    }
  } catch (const trainer::InputError&) {
  }
  return 0;
}
