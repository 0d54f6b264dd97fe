// libFuzzer target for DPO's data preparation (trl::prepare_dpo_dataset over the records
// data::parse_json_records and type_like_datasets read, as read_trl_records reads a file), and
// its node cache: the first byte picks truncation_mode and a max_length of 1 to 64 (or none), the
// rest is a JSON Lines file, prepared with a tokenizer of single characters and a ChatML
// template. Only trainer::InputError may come out; every row kept has a prompt shorter than
// max_length under keep_start, the counts add up, and the cache reads back what was written.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/data/json_columns.h"
#include "lib/data/lm_files.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trl/data_cache.h"
#include "trl/dpo_data.h"

namespace {

using Json = nlohmann::ordered_json;
using namespace trainer;

void fail(const char* what) {
  std::fprintf(stderr, "dpo_data fuzz: %s\n", what);
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
  trl::DpoDataOptions options;
  options.truncation_mode = (data[0] & 1) ? "keep_end" : "keep_start";
  if (!(data[0] & 2)) options.max_length = 1 + data[1] % 64;
  options.eos_token = (data[0] & 4) ? std::optional<std::string>("</s>") : std::nullopt;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  trl::DpoData prepared;
  try {
    std::vector<Json> records;
    for (auto& record : data::parse_json_records(bytes, "fuzz.jsonl")) {
      records.push_back(std::move(record.value));
    }
    data::type_like_datasets(records);
    prepared =
        trl::prepare_dpo_dataset(records, tokenizer(), &chat_template(), options, "fuzz.jsonl");
  } catch (const InputError&) {
    return 0;
  }
  if (prepared.examples != static_cast<int64_t>(prepared.rows.size()) + prepared.dropped) {
    fail("rows and dropped rows do not add up to the records");
  }
  int64_t tokens = 0, identical = 0;
  for (const trl::DpoRow& row : prepared.rows) {
    if (options.max_length && options.truncation_mode == "keep_start" &&
        static_cast<int64_t>(row.prompt_ids.size()) >= *options.max_length) {
      fail("a prompt that fills max_length kept");
    }
    tokens += static_cast<int64_t>(2 * row.prompt_ids.size() + row.chosen_ids.size() +
                                   row.rejected_ids.size());
    identical += row.chosen_ids == row.rejected_ids;
  }
  if (tokens != prepared.tokens) fail("tokens miscounted");
  if (identical != prepared.identical) fail("identical pairs miscounted");
  if (prepared.rows.size() > 4) return 0;  // the cache's round trip, on small data sets
  const std::string path = "/tmp/fuzz_dpo_data_cache." + std::to_string(getpid());
  trl::write_dpo_cache(path, prepared);
  const auto back = trl::read_dpo_cache(path);
  std::remove(path.c_str());
  if (!back || back->rows.size() != prepared.rows.size() || back->tokens != prepared.tokens) {
    fail("the cache does not read back what was written");
  }
  for (size_t i = 0; i < prepared.rows.size(); ++i) {
    if (back->rows[i].prompt_ids != prepared.rows[i].prompt_ids ||
        back->rows[i].chosen_ids != prepared.rows[i].chosen_ids ||
        back->rows[i].rejected_ids != prepared.rows[i].rejected_ids) {
      fail("a cached row differs");
    }
  }
  return 0;
}
