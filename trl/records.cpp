// SFT records read as TRL's data_utils reads them (is_conversational, maybe_convert_to_chatml),
// their shapes checked row by row, the template inputs of tokenize_fn, and a conversation
// rendered and tokenized (also DPO's, trl/dpo_data.cpp).
#include "trl/records.h"

#include <array>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::trl {

const char* shape_name(SftShape shape) {
  switch (shape) {
    case SftShape::kLanguageModeling:
      return "language modeling";
    case SftShape::kConversational:
      return "conversational";
    case SftShape::kPromptCompletion:
      return "prompt-completion";
    case SftShape::kConversationalPromptCompletion:
      return "conversational prompt-completion";
  }
  return "unknown";
}

}  // namespace trainer::trl

namespace trainer::trl::records {

using Json = nlohmann::ordered_json;

const Json* value_of(const Json& record, const std::string& key) {
  auto found = record.find(key);
  return found == record.end() || found->is_null() ? nullptr : &*found;
}

std::string columns_of(const Json& record) {
  std::string out;
  for (const auto& item : record.items()) {
    if (item.value().is_null()) continue;
    out += (out.empty() ? "'" : ", '") + item.key() + "'";
  }
  return out.empty() ? "none" : out;
}

namespace {

bool is_message_list(const Json* value) {
  return value && value->is_array() && !value->empty() && (*value)[0].is_object() &&
         (*value)[0].contains("role");
}

// What a shape holds, as a message says it.
std::string shape_columns(SftShape shape, const std::string& text_field) {
  switch (shape) {
    case SftShape::kLanguageModeling:
      return fmt::format("a '{}' text", text_field);
    case SftShape::kConversational:
      return "'messages', a list of messages";
    case SftShape::kPromptCompletion:
      return "'prompt' and 'completion' texts";
    case SftShape::kConversationalPromptCompletion:
      return "'prompt' and 'completion' lists of messages";
  }
  return "";
}

// Checks that `column` of `record` is a text (`messages` false) or a non-empty list of message
// objects (`messages` true) for a record of `shape`.
void check_column(const Json& record, const std::string& column, bool messages, SftShape shape,
                  const std::string& text_field, const std::string& where, bool first) {
  const std::string expected =
      first ? fmt::format("{} data holds {}", shape_name(shape), shape_columns(shape, text_field))
            : fmt::format("row 1 is {} data, and every row holds what it holds: {}",
                          shape_name(shape), shape_columns(shape, text_field));
  const Json* value = value_of(record, column);
  if (!value) {
    throw InputError(fmt::format("{} has no '{}' (its columns: {}); {}", where, column,
                                 columns_of(record), expected));
  }
  if (!messages) {
    if (!value->is_string()) {
      throw InputError(fmt::format("{}: '{}' is {} ({}), not a text; {}", where, column,
                                   base::a_type(*value), base::shown(*value), expected));
    }
    return;
  }
  if (!value->is_array()) {
    throw InputError(fmt::format("{}: '{}' is {} ({}), not a list of messages; {}", where, column,
                                 base::a_type(*value), base::shown(*value), expected));
  }
  if (value->empty()) {
    throw InputError(fmt::format(
        "{}: '{}' is an empty list; a conversation holds at least one message{}", where, column,
        column == "completion" ? " (TRL fails on an empty completion, or trains on none of the row)"
                               : ""));
  }
  for (size_t i = 0; i < value->size(); ++i) {
    const Json& message = (*value)[i];
    if (!message.is_object() || (i == 0 && !message.contains("role"))) {
      throw InputError(
          fmt::format("{}: message {} of '{}' is {} ({}), not a message (an object with 'role' and "
                      "'content')",
                      where, i + 1, column, base::a_type(message), base::shown(message)));
    }
  }
}

}  // namespace

bool is_conversational(const Json& record) {
  for (const char* key : {"prompt", "chosen", "rejected", "completion", "messages"}) {
    if (is_message_list(value_of(record, key))) return true;
  }
  return false;
}

bool is_conversational_from_value(const Json& record) {
  const Json* value = value_of(record, "conversations");
  return value && value->is_array() && !value->empty() && (*value)[0].is_object() &&
         (*value)[0].contains("from") && (*value)[0].contains("value");
}

void convert_to_chatml(Json& record) {
  for (const char* key :
       {"prompt", "completion", "chosen", "rejected", "messages", "conversations"}) {
    auto found = record.find(key);
    if (found == record.end() || !found->is_array()) continue;
    for (Json& message : *found) {
      if (!message.is_object()) continue;
      for (const auto& [from, to] : {std::pair{"from", "role"}, std::pair{"value", "content"}}) {
        auto it = message.find(from);
        if (it == message.end()) continue;
        Json moved = std::move(*it);
        message.erase(from);
        message.erase(to);  // message[to] = message.pop(from): a new key goes last
        message[to] = std::move(moved);
      }
    }
  }
  auto found = record.find("conversations");
  if (found != record.end()) {
    Json moved = std::move(*found);
    record.erase("conversations");
    record.erase("messages");
    record["messages"] = std::move(moved);
  }
}

SftShape shape_of(const Json& record, const std::string& text_field, const std::string& where) {
  // tokenize_fn's order: "prompt" in example, then is_conversational (messages), then the text.
  if (const Json* prompt = value_of(record, "prompt")) {
    return prompt->is_array() ? SftShape::kConversationalPromptCompletion
                              : SftShape::kPromptCompletion;
  }
  if (value_of(record, "messages")) return SftShape::kConversational;
  if (value_of(record, text_field)) return SftShape::kLanguageModeling;
  const Json* conversations = value_of(record, "conversations");
  throw InputError(fmt::format(
      "{} is no shape of SFT data TRL knows{} (its columns: {}); TRL reads '{}' (a text; "
      "dataset_text_field names the column), 'messages' (a list of {{role, content}}), "
      "'conversations' (a list of {{from, value}}), or 'prompt' and 'completion' (two texts, or "
      "two lists of messages)",
      where,
      conversations && conversations->is_array() && conversations->empty()
          ? ": 'conversations' is an empty list"
      : conversations ? ": 'conversations' does not start with a {from, value} message"
                      : "",
      columns_of(record), text_field));
}

void check_shape(const Json& record, SftShape shape, const std::string& text_field,
                 const std::string& where, bool first) {
  switch (shape) {
    case SftShape::kLanguageModeling:
      check_column(record, text_field, false, shape, text_field, where, first);
      return;
    case SftShape::kConversational:
      check_column(record, "messages", true, shape, text_field, where, first);
      return;
    case SftShape::kPromptCompletion:
    case SftShape::kConversationalPromptCompletion: {
      const bool messages = shape == SftShape::kConversationalPromptCompletion;
      check_column(record, "prompt", messages, shape, text_field, where, first);
      // TRL's empty completion list: is_conversational picks "prompt" or "completion" by Python's
      // set order (PYTHONHASHSEED) and fails on completion[0] (IndexError) or, past it, trains on
      // no token of the row (its completion mask all 0): refused here either way.
      check_column(record, "completion", messages, shape, text_field, where, first);
      return;
    }
  }
}

TemplateInputs template_inputs(const Json& record, const std::optional<std::string>& eos_token,
                               const std::string& where) {
  TemplateInputs inputs;
  if (eos_token) inputs.kwargs["eos_token"] = *eos_token;  // tokenizer.eos_token replaced
  if (const Json* tools = value_of(record, "tools")) {
    inputs.tools = *tools;
    if (tools->is_string()) {  // json.loads(tools)
      const std::string& text = tools->get_ref<const std::string&>();
      if (base::json_too_deep_at(text) == std::string_view::npos) {
        inputs.tools = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      }
      if (inputs.tools.is_discarded() || base::json_too_deep_at(text) != std::string_view::npos) {
        throw InputError(fmt::format(
            "{}: 'tools' is a text that is not JSON ({}); tools is a list of tool schemas, or "
            "that list as a JSON text",
            where, base::shown(*tools)));
      }
    }
    if (!inputs.tools.is_null() && !inputs.tools.is_array()) {
      throw InputError(fmt::format("{}: 'tools' is {} ({}), not a list of tool schemas", where,
                                   base::a_type(inputs.tools), base::shown(inputs.tools)));
    }
  }
  // {"chat_template": ..., "tools": tools, **example.get("chat_template_kwargs", {})}. A null
  // (a record without them where others have them) is no variables; TRL fails on **None.
  const Json* kwargs = value_of(record, "chat_template_kwargs");
  if (!kwargs) return inputs;
  if (!kwargs->is_object()) {
    throw InputError(
        fmt::format("{}: 'chat_template_kwargs' is {} ({}), not an object of template variables",
                    where, base::a_type(*kwargs), base::shown(*kwargs)));
  }
  static const std::array<const char*, 12> kParameters = {"chat_template",
                                                          "add_generation_prompt",
                                                          "continue_final_message",
                                                          "tokenize",
                                                          "return_dict",
                                                          "return_assistant_tokens_mask",
                                                          "padding",
                                                          "truncation",
                                                          "max_length",
                                                          "return_tensors",
                                                          "tokenizer_kwargs",
                                                          "sanitize_control_tokens"};
  for (const auto& item : kwargs->items()) {
    for (const char* parameter : kParameters) {
      if (item.key() == parameter) {
        throw InputError(fmt::format(
            "{}: chat_template_kwargs holds '{}', a parameter of apply_chat_template that TRL "
            "sets itself, not a template variable (chat_template_kwargs holds variables such as "
            "enable_thinking)",
            where, item.key()));
      }
    }
    if (item.key() == "tools") {
      inputs.tools = item.value();
    } else {
      inputs.kwargs[item.key()] = item.value();
    }
  }
  return inputs;
}

std::vector<int32_t> chat_ids(const tokenizers::ChatTemplate& chat,
                              const tokenizers::Tokenizer& tokenizer, const Json& messages,
                              const TemplateInputs& inputs, bool add_generation_prompt,
                              std::vector<int8_t>* mask, const std::string& where) {
  tokenizers::ChatRequest request;
  request.messages = messages;
  request.tools = inputs.tools;
  request.add_generation_prompt = add_generation_prompt;
  request.kwargs = inputs.kwargs;
  tokenizers::jinja::Rendered rendered;
  try {
    rendered = chat.apply(request);
  } catch (const tokenizers::jinja::TemplateError& e) {
    const bool refused = e.kind == tokenizers::jinja::TemplateError::Kind::kRaised;
    throw InputError(fmt::format("{}: {}{}", where,
                                 refused ? "the chat template refuses the conversation: " : "",
                                 e.what()));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
  if (!mask) return tokenizer.encode(rendered.text, /*add_special_tokens=*/false);
  std::vector<std::pair<size_t, size_t>> offsets;
  std::vector<int32_t> ids = tokenizer.encode_with_offsets(rendered.text, offsets);
  *mask = tokenizers::assistant_tokens_mask(offsets, rendered.generation_bytes);
  return ids;
}

std::string row_name(const std::string& source, size_t i) {
  return fmt::format("{} row {}", source, i + 1);
}

void check_truncation(const std::string& truncation_mode, std::optional<int64_t> max_length) {
  if (truncation_mode != "keep_start" && truncation_mode != "keep_end") {
    throw InputError(fmt::format(
        "truncation_mode '{}' is not keep_start or keep_end (TRL: Unsupported truncation mode)",
        truncation_mode));
  }
  if (max_length && *max_length < 1) {
    throw InputError(fmt::format(
        "max_length {} is not a number of tokens; give one of at least 1, or null for no "
        "truncation",
        *max_length));
  }
}

void check_input(const std::vector<Json>& input, const std::optional<std::string>& eos_token,
                 const tokenizers::Tokenizer& tokenizer, const std::string& source) {
  if (input.empty()) throw InputError(fmt::format("{} holds no records", source));
  if (eos_token && !tokenizer.token_to_id(*eos_token)) {
    throw InputError(fmt::format(
        "eos_token '{}' is not in the vocabulary of the tokenizer {} (TRL requires the eos_token "
        "to be a token of it)",
        *eos_token, tokenizer.path()));
  }
}

void require_chat_template(const tokenizers::ChatTemplate* chat,
                           const tokenizers::Tokenizer& tokenizer, const std::string& where,
                           const std::string& what) {
  if (chat) return;
  throw InputError(
      fmt::format("{} is {}, but the tokenizer {} has no chat template (no chat_template.jinja, no "
                  "chat_template in tokenizer_config.json); give one with chat_template_path",
                  where, what, tokenizer.path()));
}

std::string eos_text(const std::optional<std::string>& eos_token,
                     const tokenizers::Tokenizer& tokenizer, const std::string& where,
                     const std::string& what, const std::string& texts) {
  std::string eos;
  if (eos_token) {
    eos = *eos_token;
  } else if (auto id = tokenizer.eos_token_id()) {
    eos = tokenizer.id_to_token(*id).value_or("");
  }
  if (eos.empty()) {
    throw InputError(fmt::format(
        "{} is {}, whose {} TRL ends with the tokenizer's eos_token, and the tokenizer {} has "
        "none; set eos_token",
        where, what, texts, tokenizer.path()));
  }
  return eos;
}

std::vector<int32_t> prompt_ids(const tokenizers::Tokenizer& tokenizer,
                                const tokenizers::ChatTemplate* chat, const Json& prompt,
                                const TemplateInputs& inputs, const std::string& where) {
  if (prompt.is_string()) {
    return tokenizer.encode(prompt.get_ref<const std::string&>(), /*add_special_tokens=*/true);
  }
  return chat_ids(*chat, tokenizer, prompt, inputs, true, nullptr, where);
}

std::vector<int32_t> prompt_completion_ids(const tokenizers::Tokenizer& tokenizer,
                                           const tokenizers::ChatTemplate* chat, const Json& prompt,
                                           const Json& completion, const TemplateInputs& inputs,
                                           std::vector<int8_t>* mask, const std::string& where) {
  if (prompt.is_string()) {
    return tokenizer.encode(prompt.get_ref<const std::string&>() + completion.get<std::string>(),
                            /*add_special_tokens=*/true);
  }
  Json messages = prompt;
  for (const Json& message : completion) messages.push_back(message);
  return chat_ids(*chat, tokenizer, messages, inputs, false, mask, where);
}

size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

void PrefixMisses::note(size_t row, const std::vector<int32_t>& prompt, size_t common,
                        const tokenizers::Tokenizer& tokenizer) {
  if (common >= prompt.size() || count_++ > 0) return;
  first_row_ = static_cast<int64_t>(row) + 1;
  left_out_ = tokenizer.decode(
      std::vector<int32_t>(prompt.begin() + static_cast<std::ptrdiff_t>(common), prompt.end()));
}

void PrefixMisses::warn(const std::string& source, size_t rows, const std::string& sequences,
                        const std::string& completion) const {
  if (count_ == 0) return;
  base::warn(
      "{}: the tokenized prompt is not a prefix of {} in {} of {} rows (first: row {}), usually "
      "because the chat template renders the prompt alone differently or because tokens merge "
      "across the boundary; as TRL does, {} where they diverge, and the end of the prompt ({}) "
      "is left out of the training sequence",
      source, sequences, count_, rows, first_row_, completion, base::shown_text(left_out_));
}

}  // namespace trainer::trl::records
