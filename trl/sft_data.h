// The data of `trainer sft` prepared as TRL 1.16's SFTTrainer prepares it (_prepare_dataset, no
// formatting_func), torch-free: the data files read as `datasets` reads them, each record's shape,
// the texts tokenized or the conversations rendered by the chat template and tokenized, the
// labels of the completion-only and assistant-only losses, truncation, and packing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trl/data_files.h"
#include "trl/packing.h"
#include "trl/records.h"

namespace trainer::trl {

// SFTConfig's fields that shape the data (their TRL defaults).
struct SftDataOptions : TrlDataOptions {
  std::string dataset_text_field = "text";
  bool packing = false;
  std::string packing_strategy = "bfd";      // bfd | bfd_split | wrapped
  std::optional<bool> completion_only_loss;  // nullopt: on for prompt-completion data
  bool assistant_only_loss = false;
};

// A row's length in tokens.
inline int64_t row_length(const SftRow& row) { return static_cast<int64_t>(row.input_ids.size()); }

struct SftData {
  std::vector<SftRow> rows;
  SftShape shape = SftShape::kLanguageModeling;
  int64_t examples = 0;   // records read
  int64_t tokens = 0;     // sum of the rows' lengths
  int64_t dropped = 0;    // fully masked after truncation (TRL drops them silently)
  int64_t truncated = 0;  // records longer than max_length (truncated, or cut by packing)
};

// TRL's _prepare_dataset of `records` (as read_trl_records gives them), with SFTTrainer's checks
// before it:
//
// - shape from the first record; every other record must have the same shape;
// - "conversations" of {from, value} (when the first record has them) renamed to "messages" of
//   {role, content} (maybe_convert_to_chatml);
// - non-conversational data: the eos token text appended to the text (or the completion) unless
//   it ends with it;
// - plain text tokenized as tokenizer(text) (add_special_tokens: BOS where the post-processor
//   adds it); a conversation rendered by `chat_template` (with the record's "tools", a list or a
//   JSON text, and "chat_template_kwargs") and tokenized without special tokens, the assistant
//   mask from its {% generation %} blocks when assistant_only_loss; prompt-completion: the prompt
//   (a conversation: with add_generation_prompt) and prompt + completion tokenized, the
//   completion starting where the two first differ (common_prefix_length; one warning when the
//   prompt is not a prefix, as TRL warns);
// - labels: input_ids, -100 outside the completion (when completion_only_loss, on
//   prompt-completion data) and outside the assistant's tokens (when assistant_only_loss);
// - without packing and with a max_length: each row truncated (keep_start: its first max_length
//   tokens; keep_end: its last), then rows without a label left dropped;
// - packing: pack_rows(rows, max_length, packing_strategy), per batch of 1000 rows.
// The data set is not shuffled (shuffle_dataset is the caller's).
//
// `source` names the file in messages; `chat_template` may be null (conversational data is then
// an InputError: the tokenizer has no chat template). Throws InputError (one line, naming the
// file and the row, from 1) for records TRL cannot prepare, and for options TRL refuses.
SftData prepare_sft_dataset(const std::vector<nlohmann::ordered_json>& records,
                            const tokenizers::Tokenizer& tokenizer,
                            const tokenizers::ChatTemplate* chat_template,
                            const SftDataOptions& options, const std::string& source);

}  // namespace trainer::trl
