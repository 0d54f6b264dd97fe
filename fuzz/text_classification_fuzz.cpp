// libFuzzer target for run_glue's text classification data (data::prepare_text_classification
// over a CSV, JSON Lines or JSON file): the first byte picks the file's kind and whether the
// classifier names its labels, the second a max_length of 1 to 64; the rest is the file, used as
// train and validation file, tokenized by a tokenizer of single characters. Only
// trainer::InputError may come out; every row no longer than max_length, every class within the
// labels, the labels' ids and names one to one, as many ids as rows in each split.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/data/text_classification_data.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/char_tokenizer.h"

namespace {

using namespace trainer;

void fail(const char* what) {
  std::fprintf(stderr, "text_classification fuzz: %s\n", what);
  abort();
}

const tokenizers::Tokenizer& tokenizer() {
  static const tokenizers::Tokenizer t = tokenizers::Tokenizer::from_json(
      testing::char_tokenizer_json({"<s>", "</s>"}), "fuzz tokenizer");
  return t;
}

void check_split(const data::TextClassificationSplit& split, const data::LabelPlan& labels,
                 int64_t max_length) {
  const size_t rows = split.input_ids.size();
  if (labels.regression ? split.targets.size() != rows : split.classes.size() != rows) {
    fail("labels and rows of different counts");
  }
  for (const auto& ids : split.input_ids) {
    if (static_cast<int64_t>(ids.size()) > max_length) fail("a row longer than max_length");
  }
  for (int64_t c : split.classes) {
    if (c < 0 || c >= labels.num_labels) fail("a class outside the labels");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const char* const kExtensions[] = {".csv", ".jsonl", ".json"};
  const std::string path =
      "/tmp/fuzz_text_classification." + std::to_string(getpid()) + kExtensions[data[0] % 3];
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data) + 2, static_cast<std::streamsize>(size - 2));
  }
  data::TextClassificationOptions options;
  options.train_file = path;
  options.validation_file = path;
  options.max_length = 1 + data[1] % 64;
  if (data[0] & 4) {
    options.model_label2id = {{"neg", 0}, {"pos", 1}, {"neu", 2}};
    options.model_num_labels = 3;
  }
  try {
    const data::TextClassificationData prepared =
        data::prepare_text_classification(options, tokenizer());
    const data::LabelPlan& labels = prepared.labels;
    if (!labels.regression && !labels.from_model &&
        static_cast<int64_t>(labels.names.size()) != labels.num_labels) {
      fail("label names and num_labels differ");
    }
    for (const auto& [name, id] : labels.ids) {
      if (!labels.regression && (id < 0 || id >= labels.num_labels)) fail("a label id outside");
    }
    check_split(prepared.train, labels, options.max_length);
    check_split(prepared.eval, labels, options.max_length);
  } catch (const InputError&) {
  }
  std::remove(path.c_str());
  return 0;
}
