// The records of SFT data as TRL reads them, one by one (torch-free, behind sft_data.h; DPO's
// too): their shape and its checks, maybe_convert_to_chatml, what a chat template is given beside
// the messages (a record's "tools" and "chat_template_kwargs"), and a conversation tokenized.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trl/sft_data.h"

namespace trainer::trl::records {

// TRL's is_conversational: a "prompt", "chosen", "rejected", "completion" or "messages" that is a
// list whose first element is an object with a "role". (TRL looks at one of those present, which
// one left to Python's set order; a record whose columns disagree is refused by shape_of.)
bool is_conversational(const nlohmann::ordered_json& record);

// TRL's is_conversational_from_value: "conversations" a list whose first element is an object
// with "from" and "value".
bool is_conversational_from_value(const nlohmann::ordered_json& record);

// TRL's maybe_convert_to_chatml: in the lists of "prompt", "completion", "chosen", "rejected",
// "messages" and "conversations", each message's "from" becomes "role" and "value" "content"
// (moved to the end of the message, as dict.pop then a new key); "conversations" becomes
// "messages" (the last column).
void convert_to_chatml(nlohmann::ordered_json& record);

// The shape of the first record (after convert_to_chatml), as TRL's code paths take it: "prompt"
// (with "completion": texts, or lists of messages), else "messages", else the text field.
// InputError naming `where` ("data.jsonl row 1") for a record of no shape TRL knows.
SftShape shape_of(const nlohmann::ordered_json& record, const std::string& text_field,
                  const std::string& where);

// Checks that `record` has `shape`'s columns, of the right types (texts; non-empty lists of
// message objects). InputError naming `where` otherwise; `first` for the first record (the one
// the shape came from).
void check_shape(const nlohmann::ordered_json& record, SftShape shape,
                 const std::string& text_field, const std::string& where, bool first);

// What apply_chat_template gets beside the messages, from TRL's tokenize_fn: the record's
// "tools" (a list, or a JSON text of one: json.loads), then its "chat_template_kwargs" (an
// object; a "tools" there wins, as in TRL's dict) as template variables, over `eos_token` when
// SFTConfig's eos_token replaced the tokenizer's. InputError naming `where` for a value of the
// wrong type, a text that is not JSON, or a key that is apply_chat_template's own parameter.
struct TemplateInputs {
  nlohmann::ordered_json tools;  // null or a list
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
};
TemplateInputs template_inputs(const nlohmann::ordered_json& record,
                               const std::optional<std::string>& eos_token,
                               const std::string& where);

// One conversation rendered as apply_chat_template(tokenize=True) renders and tokenizes it:
// without special tokens; the assistant mask of its {% generation %} blocks when `mask`.
// InputError naming `where` when the template refuses the conversation or fails on it.
std::vector<int32_t> chat_ids(const tokenizers::ChatTemplate& chat,
                              const tokenizers::Tokenizer& tokenizer,
                              const nlohmann::ordered_json& messages, const TemplateInputs& inputs,
                              bool add_generation_prompt, std::vector<int8_t>* mask,
                              const std::string& where);

}  // namespace trainer::trl::records
