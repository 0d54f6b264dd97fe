// The records of a TRL trainer's data as TRL's data_utils and prepare_dataset read them, one by
// one (torch-free, behind sft_data.h and dpo_data.h, and the next trainers'): their shape and its
// checks, maybe_convert_to_chatml, what a chat template is given beside the messages (a record's
// "tools" and "chat_template_kwargs"), a conversation tokenized, and the steps every trainer's
// preparation takes: the options and inputs checked, the EOS text, a prompt and its completion
// tokenized and cut where they part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::tokenizers {
class Tokenizer;
class ChatTemplate;
}  // namespace trainer::tokenizers

namespace trainer::trl {

// The fields of every TRL config that shape the data (their TRL defaults); a trainer's data
// options add their own.
struct TrlDataOptions {
  std::optional<int64_t> max_length = 1024;    // nullopt: no truncation
  std::string truncation_mode = "keep_start";  // or keep_end
  std::optional<std::string> eos_token;        // nullopt: the tokenizer's eos token text
};

// The shapes of SFT data TRL knows (from its first record).
enum class SftShape {
  kLanguageModeling,                // {"text": "..."} (dataset_text_field names the column)
  kConversational,                  // {"messages": [...]}, or {"conversations": [{from, value}]}
  kPromptCompletion,                // {"prompt": "...", "completion": "..."}
  kConversationalPromptCompletion,  // {"prompt": [...], "completion": [...]}
};
// "language modeling", "conversational", "prompt-completion", "conversational prompt-completion".
const char* shape_name(SftShape shape);

}  // namespace trainer::trl

namespace trainer::trl::records {

// The value of `key`, or nullptr when the record lacks it or holds null there (`datasets` fills a
// column a record lacks with null).
const nlohmann::ordered_json* value_of(const nlohmann::ordered_json& record,
                                       const std::string& key);
// The record's columns that hold something, quoted ("'prompt', 'chosen'"), or "none".
std::string columns_of(const nlohmann::ordered_json& record);

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

// --- The steps every trainer's preparation takes (TRL's prepare_dataset).

// "<source> row <i + 1>": how a message names a record.
std::string row_name(const std::string& source, size_t i);

// truncation_mode and max_length as TRL refuses them: a mode other than keep_start or keep_end,
// a max_length below 1.
void check_truncation(const std::string& truncation_mode, std::optional<int64_t> max_length);

// Records to prepare (InputError when `input` is empty) and an eos_token the vocabulary has.
void check_input(const std::vector<nlohmann::ordered_json>& input,
                 const std::optional<std::string>& eos_token,
                 const tokenizers::Tokenizer& tokenizer, const std::string& source);

// The chat template conversational data need: InputError naming `where` (row 1), what the data
// are (`what`: "conversational", ...) and the tokenizer when `chat` is null.
void require_chat_template(const tokenizers::ChatTemplate* chat,
                           const tokenizers::Tokenizer& tokenizer, const std::string& where,
                           const std::string& what);

// add_eos's text: eos_token when given, else the tokenizer's eos token. InputError naming
// `where`, what the data are and which of their texts take it (`texts`) when there is none.
std::string eos_text(const std::optional<std::string>& eos_token,
                     const tokenizers::Tokenizer& tokenizer, const std::string& where,
                     const std::string& what, const std::string& texts);

// A prompt alone, tokenized as TRL's tokenize_fn tokenizes it: a conversation through the
// template with add_generation_prompt, a text with the tokenizer's special tokens.
std::vector<int32_t> prompt_ids(const tokenizers::Tokenizer& tokenizer,
                                const tokenizers::ChatTemplate* chat,
                                const nlohmann::ordered_json& prompt, const TemplateInputs& inputs,
                                const std::string& where);
// The prompt followed by `completion` (messages after messages, or text after text), tokenized
// alike (a conversation without add_generation_prompt; `mask`: its assistant mask).
std::vector<int32_t> prompt_completion_ids(const tokenizers::Tokenizer& tokenizer,
                                           const tokenizers::ChatTemplate* chat,
                                           const nlohmann::ordered_json& prompt,
                                           const nlohmann::ordered_json& completion,
                                           const TemplateInputs& inputs, std::vector<int8_t>* mask,
                                           const std::string& where);

// How many ids `a` and `b` share from their start (TRL's common_prefix_length).
size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// The prompts whose ids are not a start of their prompt + completion: counted, the first one's
// left-out end kept, one warning for all, as TRL warns.
class PrefixMisses {
 public:
  // Row `row` (from 0): its prompt's ids, and how many of them start the sequence.
  void note(size_t row, const std::vector<int32_t>& prompt, size_t common,
            const tokenizers::Tokenizer& tokenizer);
  // The one warning, if any: `sequences` names what the prompt should start ("the tokenized
  // prompt+completion"), `rows` how many rows were prepared.
  void warn(const std::string& source, size_t rows, const std::string& sequences,
            const std::string& completion) const;

 private:
  int64_t count_ = 0, first_row_ = 0;
  std::string left_out_;
};

}  // namespace trainer::trl::records
