// libFuzzer target for `trainer sft`'s data preparation (trl::prepare_sft_dataset over the records
// data::parse_json_records and type_like_datasets read, as read_trl_records reads a file): the
// first byte picks the options (packing and its strategy, the losses, truncation, a max_length of
// 1 to 64), the rest is a JSON Lines file, prepared with a tokenizer of single characters and a
// ChatML template with {% generation %} blocks. Only trainer::InputError may come out; every row
// has as many labels as ids, each label -100 or its id, a packed row (bfd) at most max_length
// tokens made of its seq_lengths, and no row longer than max_length.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/data/json_columns.h"
#include "lib/data/lm_files.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trl/sft_data.h"

namespace {

using Json = nlohmann::ordered_json;
using namespace trainer;

void fail(const char* what) {
  std::fprintf(stderr, "sft_data fuzz: %s\n", what);
  abort();
}

// Printable ASCII and "\n" as single-character tokens, <|im_start|>, <|im_end|> and </s> added.
const tokenizers::Tokenizer& tokenizer() {
  static const tokenizers::Tokenizer t = [] {
    Json vocab = Json::object();
    vocab["<unk>"] = 0;
    vocab["\n"] = 1;
    for (char c = 32; c < 127; ++c) vocab[std::string(1, c)] = static_cast<int>(vocab.size());
    Json added = Json::array();
    for (const char* token : {"<|im_start|>", "<|im_end|>", "</s>"}) {
      added.push_back({{"id", static_cast<int>(vocab.size() + added.size())},
                       {"content", token},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    }
    const Json json = {{"version", "1.0"},
                       {"truncation", nullptr},
                       {"padding", nullptr},
                       {"normalizer", nullptr},
                       {"pre_tokenizer", nullptr},
                       {"post_processor", nullptr},
                       {"decoder", nullptr},
                       {"added_tokens", added},
                       {"model",
                        {{"type", "BPE"},
                         {"dropout", nullptr},
                         {"unk_token", "<unk>"},
                         {"continuing_subword_prefix", nullptr},
                         {"end_of_word_suffix", nullptr},
                         {"fuse_unk", false},
                         {"byte_fallback", false},
                         {"ignore_merges", false},
                         {"vocab", vocab},
                         {"merges", Json::array()}}}};
    return tokenizers::Tokenizer::from_json(json.dump(), "fuzz tokenizer");
  }();
  return t;
}

const tokenizers::ChatTemplate& chat_template() {
  static const tokenizers::ChatTemplate t = tokenizers::ChatTemplate::from_source(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n"
      "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}"
      "{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "fuzz template");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const char* const kStrategies[] = {"bfd", "bfd_split", "wrapped"};
  trl::SftDataOptions options;
  options.packing = data[0] & 1;
  options.packing_strategy = kStrategies[(data[0] >> 1) % 3];
  options.assistant_only_loss = data[0] & 8;
  options.completion_only_loss = (data[0] & 16) ? std::optional<bool>(data[0] & 32) : std::nullopt;
  options.truncation_mode = (data[0] & 64) ? "keep_end" : "keep_start";
  options.max_length = 1 + data[1] % 64;
  options.eos_token = "</s>";
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  trl::SftData prepared;
  try {
    std::vector<Json> records;
    for (auto& record : data::parse_json_records(bytes, "fuzz.jsonl")) {
      records.push_back(std::move(record.value));
    }
    data::type_like_datasets(records);
    prepared =
        trl::prepare_sft_dataset(records, tokenizer(), &chat_template(), options, "fuzz.jsonl");
  } catch (const InputError&) {
    return 0;
  }
  const size_t longest = static_cast<size_t>(*options.max_length);
  for (const trl::SftRow& row : prepared.rows) {
    if (row.labels.size() != row.input_ids.size()) fail("labels and ids of different lengths");
    for (size_t i = 0; i < row.labels.size(); ++i) {
      if (row.labels[i] != -100 && row.labels[i] != row.input_ids[i]) fail("a label not its id");
    }
    const bool bfd = options.packing && options.packing_strategy != "wrapped";
    if (row.input_ids.size() > longest) fail("a row longer than max_length");
    if (bfd) {
      size_t total = 0;
      for (int32_t length : row.seq_lengths) {
        if (length <= 0) fail("an empty packed sequence");
        total += static_cast<size_t>(length);
      }
      if (total != row.input_ids.size()) fail("seq_lengths do not add up to the row");
    }
  }
  return 0;
}
