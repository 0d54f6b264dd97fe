// The data of DPO prepared as TRL 1.16's DPOTrainer prepares it (_prepare_dataset), torch-free:
// the implicit prompt extracted, the EOS appended to plain completions, the prompt and each
// completion tokenized (plain text, or conversations through the chat template), and the rows
// whose prompt alone fills max_length dropped. The records come from read_trl_records (sft_data.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trl/records.h"

namespace trainer::trl {

// DPOConfig's fields that shape the data (their TRL defaults; truncation_mode is deprecated in
// TRL: the caller warns).
struct DpoDataOptions : TrlDataOptions {};

// One preference pair: the prompt's ids, then each completion's ids after them (the collator's
// input: prompt + chosen and prompt + rejected).
struct DpoRow {
  std::vector<int32_t> prompt_ids, chosen_ids, rejected_ids;
};

// A pair's longest row in tokens: the prompt and the longer completion.
inline int64_t row_length(const DpoRow& row) {
  return static_cast<int64_t>(row.prompt_ids.size() +
                              std::max(row.chosen_ids.size(), row.rejected_ids.size()));
}

enum class DpoShape {
  kPlain,           // "prompt", "chosen", "rejected": texts
  kConversational,  // lists of {role, content} messages
};
// "plain" or "conversational".
const char* dpo_shape_name(DpoShape shape);

struct DpoData {
  std::vector<DpoRow> rows;
  DpoShape shape = DpoShape::kPlain;
  bool implicit_prompt = false;  // no "prompt": extracted from chosen and rejected
  int64_t examples = 0;          // records read
  int64_t dropped = 0;    // prompt alone >= max_length under keep_start (TRL drops them silently)
  int64_t identical = 0;  // rows kept whose chosen_ids equal their rejected_ids (zero gradient)
  int64_t tokens = 0;     // over the rows kept: 2 * prompt + chosen + rejected, before truncation
};

// Preference records checked as TRL reads them: 'chosen' and 'rejected' (texts, or non-empty
// lists of {role, content} messages) with a 'prompt' of the same kind unless row 1 has none
// (implicit_prompt), every row of row 1's shape. `trainer` names TRL's class in messages; with
// `extract` (DPOTrainer) an implicit prompt is extracted as extract_prompt does (see below),
// otherwise (RewardTrainer) each row stays whole. Throws InputError naming the row.
struct PreferenceRecords {
  std::vector<nlohmann::ordered_json> rows;
  DpoShape shape = DpoShape::kPlain;
  bool implicit_prompt = false;
};
PreferenceRecords preference_records(const std::vector<nlohmann::ordered_json>& input,
                                     const std::string& source, const char* trainer, bool extract);

// TRL's _prepare_dataset of `records` (as read_trl_records gives them):
//
// - no "prompt" in the first record: extract_prompt on every record, TRL's exact rule. Lists of
//   messages: the prompt is their longest common start; texts: the longest common start in code
//   points, less a space that ends it (which goes to both completions). Python's loop variable
//   leaks: when one is a start of the other (or they are equal) the prompt stops one element
//   short of the shorter; when they differ at once and the chosen text ends with a space, the
//   prompt is the chosen text but its last character, and each completion its own last
//   character (index -1);
// - plain data: the eos token text appended to chosen and rejected unless they end with it (not
//   to the prompt);
// - plain text tokenized as tokenizer(text) (add_special_tokens: BOS where the post-processor
//   adds it, on the prompt and on prompt + completion alike); a conversation rendered by
//   `chat_template` (the prompt with add_generation_prompt, prompt + completion without; with
//   the record's "tools" and "chat_template_kwargs") and tokenized without special tokens;
// - the prompt ends where the prompt's ids stop being a start of prompt + chosen or of prompt +
//   rejected (common_prefix_length; one warning when the prompt is not such a start, as TRL
//   warns), each completion is the rest of its sequence;
// - with a max_length and keep_start: rows whose prompt ids alone reach max_length dropped.
// TRL's DPOTrainer does not convert ShareGPT's {from, value} (it fails on them): refused here.
//
// `source` names the file in messages; `chat_template` may be null (conversational data is then
// an InputError). Throws InputError (one line, naming the file and the row, from 1) for records
// TRL cannot prepare and for options it refuses.
DpoData prepare_dpo_dataset(const std::vector<nlohmann::ordered_json>& records,
                            const tokenizers::Tokenizer& tokenizer,
                            const tokenizers::ChatTemplate* chat_template,
                            const DpoDataOptions& options, const std::string& source);

}  // namespace trainer::trl
