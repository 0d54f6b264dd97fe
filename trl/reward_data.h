// The data of a reward model prepared as TRL 1.16's RewardTrainer prepares it (_prepare_dataset),
// torch-free: the preference pairs read as DPO's are (explicit or implicit prompt, plain or
// conversational), the EOS appended to plain completions, the prompt and each completion
// tokenized whole (no split: the model scores the whole sequence), the optional margins kept, and
// the pairs longer than max_length dropped (never cut).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trl/dpo_data.h"

namespace trainer::trl {

// RewardConfig's fields that shape the data: max_length (1024; null: none) and eos_token.
struct RewardDataOptions : TrlDataOptions {};

// One pair: prompt + chosen and prompt + rejected, tokenized, and its margin (0 without one).
struct RewardRow {
  std::vector<int32_t> chosen_ids, rejected_ids;
  double margin = 0.0;
};

// A pair's longest sequence in tokens.
inline int64_t row_length(const RewardRow& row) {
  return static_cast<int64_t>(std::max(row.chosen_ids.size(), row.rejected_ids.size()));
}

struct RewardData {
  std::vector<RewardRow> rows;
  DpoShape shape = DpoShape::kPlain;
  bool implicit_prompt = false;  // no "prompt": chosen and rejected are whole sequences
  bool margins = false;          // the data has a "margin" column (the loss subtracts it)
  int64_t examples = 0;          // records read
  int64_t dropped = 0;           // pairs with a sequence longer than max_length (TRL's filter)
  int64_t tokens = 0;            // over the pairs kept: chosen + rejected
};

// TRL's _prepare_dataset of `records` (as read_trl_records gives them):
//
// - the pairs' shapes as preference_records checks them (RewardTrainer's words), no prompt
//   extracted;
// - plain data (decided by row 1, as TRL): the eos token's text appended to chosen and rejected
//   unless they end with it;
// - each side tokenized whole: plain text as tokenizer(prompt + completion) (BOS where the
//   post-processor adds it), a conversation (prompt messages + completion messages) rendered by
//   `chat_template` without the generation prompt, with the record's "tools" and
//   "chat_template_kwargs";
// - "margin": when a row has one, every row must (a finite number), kept for the loss;
// - pairs with a side longer than max_length dropped (TRL's filter; nothing is cut).
//
// A side that is empty (plain "" would leave TRL the EOS alone to score) is refused. `source`
// names the file in messages. Throws InputError (one line, naming the file and the row, from 1).
RewardData prepare_reward_dataset(const std::vector<nlohmann::ordered_json>& records,
                                  const tokenizers::Tokenizer& tokenizer,
                                  const tokenizers::ChatTemplate* chat_template,
                                  const RewardDataOptions& options, const std::string& source);

}  // namespace trainer::trl
