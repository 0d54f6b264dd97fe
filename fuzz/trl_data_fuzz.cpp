// libFuzzer target for the TRL trainers' data preparation (trl::prepare_sft_dataset,
// trl::prepare_dpo_dataset, trl::prepare_grpo_dataset and trl::prepare_reward_dataset over the
// records
// data::parse_json_records and type_like_datasets read, as read_trl_records reads a file), and
// DPO's, GRPO's and the reward model's node caches. The first byte picks the trainer (bit 2:
// reward; else bit 1: GRPO; else bit 0: SFT or DPO; reward's options: whether there is a
// max_length, eos_token), the second its options (GRPO: chat_template_kwargs or none) (SFT: packing
// and its strategy, the losses, truncation; DPO: truncation_mode, whether there is a max_length,
// eos_token), the third a max_length of 1 to 64; the rest is a JSON Lines file, prepared with a
// tokenizer of single characters and a ChatML template with {% generation %} blocks. Only
// trainer::InputError may come out. SFT: every row has as many labels as ids, each label -100 or
// its id, no row longer than max_length, a packed row (bfd) made of its seq_lengths. DPO: every row
// kept has a prompt shorter than max_length under keep_start, the counts add up, the cache reads
// back what was written. GRPO: every row a non-empty prompt whose record reads back as JSON, the
// tokens counted, the cache read back. Reward: no pair kept with a side longer than max_length or
// an empty side, margins finite, the counts add up, the cache read back.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/data/json_columns.h"
#include "lib/data/lm_files.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/char_tokenizer.h"
#include "trl/data_cache.h"
#include "trl/dpo_data.h"
#include "trl/grpo_data.h"
#include "trl/reward_data.h"
#include "trl/sft_data.h"

namespace {

using Json = nlohmann::ordered_json;
using namespace trainer;

void fail(const char* what) {
  std::fprintf(stderr, "trl_data fuzz: %s\n", what);
  abort();
}

// Printable ASCII and "\n" as single-character tokens, <|im_start|>, <|im_end|> and </s> added.
const tokenizers::Tokenizer& tokenizer() {
  static const tokenizers::Tokenizer t = tokenizers::Tokenizer::from_json(
      testing::char_tokenizer_json({"<|im_start|>", "<|im_end|>", "</s>"}), "fuzz tokenizer");
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

// The records of the JSON Lines bytes as `datasets` types them.
std::vector<Json> records_of(std::string_view bytes) {
  std::vector<Json> records;
  for (auto& record : data::parse_json_records(bytes, "fuzz.jsonl")) {
    records.push_back(std::move(record.value));
  }
  data::type_like_datasets(records);
  return records;
}

void check_sft(uint8_t flags, int64_t max_length, std::string_view bytes) {
  static const char* const kStrategies[] = {"bfd", "bfd_split", "wrapped"};
  trl::SftDataOptions options;
  options.packing = flags & 1;
  options.packing_strategy = kStrategies[(flags >> 1) % 3];
  options.assistant_only_loss = flags & 8;
  options.completion_only_loss = (flags & 16) ? std::optional<bool>(flags & 32) : std::nullopt;
  options.truncation_mode = (flags & 64) ? "keep_end" : "keep_start";
  options.max_length = max_length;
  options.eos_token = "</s>";
  trl::SftData prepared;
  try {
    prepared = trl::prepare_sft_dataset(records_of(bytes), tokenizer(), &chat_template(), options,
                                        "fuzz.jsonl");
  } catch (const InputError&) {
    return;
  }
  for (const trl::SftRow& row : prepared.rows) {
    if (row.labels.size() != row.input_ids.size()) fail("labels and ids of different lengths");
    for (size_t i = 0; i < row.labels.size(); ++i) {
      if (row.labels[i] != -100 && row.labels[i] != row.input_ids[i]) fail("a label not its id");
    }
    if (row.input_ids.size() > static_cast<size_t>(max_length))
      fail("a row longer than max_length");
    if (options.packing && options.packing_strategy != "wrapped") {
      size_t total = 0;
      for (int32_t length : row.seq_lengths) {
        if (length <= 0) fail("an empty packed sequence");
        total += static_cast<size_t>(length);
      }
      if (total != row.input_ids.size()) fail("seq_lengths do not add up to the row");
    }
  }
}

void check_dpo(uint8_t flags, int64_t max_length, std::string_view bytes) {
  trl::DpoDataOptions options;
  options.truncation_mode = (flags & 1) ? "keep_end" : "keep_start";
  options.max_length = (flags & 2) ? std::nullopt : std::optional<int64_t>(max_length);
  options.eos_token = (flags & 4) ? std::optional<std::string>("</s>") : std::nullopt;
  trl::DpoData prepared;
  try {
    prepared = trl::prepare_dpo_dataset(records_of(bytes), tokenizer(), &chat_template(), options,
                                        "fuzz.jsonl");
  } catch (const InputError&) {
    return;
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
  if (prepared.rows.size() > 4) return;  // the cache's round trip, on small data sets
  const std::string path = "/tmp/fuzz_trl_data_cache." + std::to_string(getpid());
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
}

void check_grpo(uint8_t flags, std::string_view bytes) {
  trl::GrpoDataOptions options;
  if (flags & 1) options.chat_template_kwargs = Json{{"enable_thinking", false}};
  trl::GrpoData prepared;
  try {
    prepared = trl::prepare_grpo_dataset(records_of(bytes), tokenizer(), &chat_template(), options,
                                         "fuzz.jsonl");
  } catch (const InputError&) {
    return;
  }
  int64_t tokens = 0;
  for (const trl::GrpoRow& row : prepared.rows) {
    if (row.prompt_ids.empty()) fail("an empty prompt kept");
    tokens += static_cast<int64_t>(row.prompt_ids.size());
    const Json record = Json::parse(row.record, nullptr, false);
    if (record.is_discarded() || !record.contains("prompt"))
      fail("a record that does not read back");
  }
  if (tokens != prepared.tokens) fail("tokens miscounted");
  if (prepared.rows.size() > 4) return;
  const std::string path = "/tmp/fuzz_trl_data_grpo_cache." + std::to_string(getpid());
  trl::write_grpo_cache(path, prepared);
  const auto back = trl::read_grpo_cache(path);
  std::remove(path.c_str());
  if (!back || back->rows.size() != prepared.rows.size() || back->tokens != prepared.tokens)
    fail("the GRPO cache does not read back what was written");
  for (size_t i = 0; i < prepared.rows.size(); ++i) {
    if (back->rows[i].prompt_ids != prepared.rows[i].prompt_ids ||
        back->rows[i].record != prepared.rows[i].record) {
      fail("a cached GRPO row differs");
    }
  }
}

void check_reward(uint8_t flags, int64_t max_length, std::string_view bytes) {
  trl::RewardDataOptions options;
  options.max_length = (flags & 1) ? std::nullopt : std::optional<int64_t>(max_length);
  options.eos_token = (flags & 2) ? std::optional<std::string>("</s>") : std::nullopt;
  trl::RewardData prepared;
  try {
    prepared = trl::prepare_reward_dataset(records_of(bytes), tokenizer(), &chat_template(),
                                           options, "fuzz.jsonl");
  } catch (const InputError&) {
    return;
  }
  if (prepared.examples != static_cast<int64_t>(prepared.rows.size()) + prepared.dropped) {
    fail("reward pairs and dropped pairs do not add up to the records");
  }
  int64_t tokens = 0;
  for (const trl::RewardRow& row : prepared.rows) {
    if (row.chosen_ids.empty() || row.rejected_ids.empty()) fail("an empty side kept");
    if (options.max_length && trl::row_length(row) > *options.max_length)
      fail("a pair longer than max_length kept");
    if (!std::isfinite(row.margin)) fail("a margin that is not finite");
    tokens += static_cast<int64_t>(row.chosen_ids.size() + row.rejected_ids.size());
  }
  if (tokens != prepared.tokens) fail("reward tokens miscounted");
  if (prepared.rows.size() > 4) return;
  const std::string path = "/tmp/fuzz_trl_data_reward_cache." + std::to_string(getpid());
  trl::write_reward_cache(path, prepared);
  const auto back = trl::read_reward_cache(path);
  std::remove(path.c_str());
  if (!back || back->rows.size() != prepared.rows.size() || back->tokens != prepared.tokens ||
      back->margins != prepared.margins)
    fail("the reward cache does not read back what was written");
  for (size_t i = 0; i < prepared.rows.size(); ++i) {
    if (back->rows[i].chosen_ids != prepared.rows[i].chosen_ids ||
        back->rows[i].rejected_ids != prepared.rows[i].rejected_ids ||
        back->rows[i].margin != prepared.rows[i].margin) {
      fail("a cached reward pair differs");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 3, size - 3);
  const int64_t max_length = 1 + data[2] % 64;
  if (data[0] & 4) {
    check_reward(data[1], max_length, bytes);
  } else if (data[0] & 2) {
    check_grpo(data[1], bytes);
  } else if (data[0] & 1) {
    check_dpo(data[1], max_length, bytes);
  } else {
    check_sft(data[1], max_length, bytes);
  }
  return 0;
}
