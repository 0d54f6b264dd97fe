// A tokenizer's chat template, rendered as Transformers' apply_chat_template(tokenize=False)
// renders it: the template from DIR/chat_template.jinja or tokenizer_config.json's chat_template,
// the conversation normalised as Transformers 5 normalises it (keys whose value is null
// dropped, reasoning fields aliased), the special tokens of tokenizer_config.json as variables,
// and the globals raise_exception and strftime_now. Torch-free; the Jinja engine is jinja.h.
#pragma once

#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/tokenizers/jinja.h"

namespace trainer::tokenizers {

struct ChatRequest {
  nlohmann::ordered_json messages;  // a list of message objects
  nlohmann::ordered_json tools;     // null, or a list of JSON schemas
  bool add_generation_prompt = false;
  // Further template variables (enable_thinking, date_string, ...), overriding special tokens.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
};

// Transformers' return_assistant_tokens_mask: 1 for each token whose span (`offsets`, as
// Tokenizer::encode_with_offsets gives them) overlaps a {% generation %} span (`spans`, in the
// same unit, in order), else 0.
std::vector<int8_t> assistant_tokens_mask(const std::vector<std::pair<size_t, size_t>>& offsets,
                                          const std::vector<std::pair<size_t, size_t>>& spans);

class ChatTemplate {
 public:
  // The chat template of the tokenizer folder `dir`: chat_template.jinja when present, else
  // tokenizer_config.json's chat_template (a string, or Transformers' list of {name, template}:
  // "default", or "tool_use" when a request has tools). nullopt when the folder has none.
  // Throws InputError naming the file for an unreadable file or a template that does not
  // parse.
  static std::optional<ChatTemplate> from_dir(const std::string& dir);
  // A template's source with the special tokens of the folder `tokenizer_dir` ("" for none);
  // `name` says which template in messages.
  static ChatTemplate from_source(const std::string& source, const std::string& name,
                                  const std::string& tokenizer_dir = "");

  // Renders one conversation. Throws jinja::TemplateError: kRaised when the template refuses the
  // conversation (its raise_exception), kRuntime and kLimit as jinja.h says; InputError for a
  // request that is not a list of message objects.
  jinja::Rendered apply(const ChatRequest& request) const;

  // The special tokens the template sees (bos_token, eos_token, ...: name, text).
  const std::vector<std::pair<std::string, std::string>>& special_tokens() const {
    return special_tokens_;
  }
  const std::string& source() const { return default_source_; }
  const std::string& name() const { return name_; }

  // The clock strftime_now reads (local time, as datetime.now() reads it); tests set a fixed one.
  void set_clock(std::function<std::time_t()> clock) { clock_ = std::move(clock); }

 private:
  std::string name_;
  std::string default_source_;
  std::vector<std::pair<std::string, std::string>> special_tokens_;
  std::optional<jinja::Template> default_, tool_use_;
  std::function<std::time_t()> clock_;
};

}  // namespace trainer::tokenizers
