// Chat templates as Transformers 5 applies them: where a folder keeps its template, the
// variables a template sees, and the conversation's normalisation before rendering
// (transformers/utils/chat_template_utils.py, tokenization_utils_base.py).
#include "lib/tokenizers/chat_template.h"

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/tokenizers/jinja_interpreter.h"

namespace trainer::tokenizers {
namespace {

using json = nlohmann::ordered_json;
using jinja::Value;

// A special token of tokenizer_config.json: a string, or an AddedToken's {"content": ...}.
std::optional<std::string> token_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

// The named special tokens Transformers 5 passes to a template (special_tokens_map).
std::vector<std::pair<std::string, std::string>> read_special_tokens(const std::string& dir) {
  static const char* const kNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
  std::vector<std::pair<std::string, std::string>> out;
  if (dir.empty()) return out;
  json sources[2];
  const std::string config = base::join_path(dir, base::hf::kTokenizerConfig);
  const std::string map = base::join_path(dir, base::hf::kSpecialTokensMap);
  if (base::is_regular_file(config)) sources[0] = base::read_json(config);
  if (base::is_regular_file(map)) sources[1] = base::read_json(map);
  for (const char* name : kNames) {
    for (const json& source : sources) {
      if (!source.is_object() || !source.contains(name)) continue;
      if (auto text = token_text(source[name])) {
        out.emplace_back(name, *text);
        break;
      }
    }
  }
  return out;
}

jinja::Template compile(const std::string& source, const std::string& name) {
  try {
    return jinja::Template::parse(source, name);
  } catch (const jinja::TemplateError& e) {
    throw InputError(e.what());
  }
}

// Transformers' _normalize_chat_messages and _alias_reasoning_fields: keys whose value is null
// dropped; a message with reasoning under reasoning_content, thinking or reasoning gets it under
// "thinking" (first) and "reasoning_content" (last) as well.
json normalize(const json& messages) {
  if (!messages.is_array()) throw InputError("messages must be a list of message objects");
  if (messages.empty()) {
    throw InputError(
        "Cannot apply chat template to an empty conversation. Provide at least one message.");
  }
  json out = json::array();
  for (const json& message : messages) {
    if (!message.is_object()) {
      throw InputError(fmt::format("Chat messages should be dicts, but got {}", message.dump()));
    }
    json kept = json::object();
    for (const auto& [key, value] : message.items())
      if (!value.is_null()) kept[key] = value;
    const json* reasoning = nullptr;
    for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
      if (kept.contains(field)) {
        reasoning = &kept[field];
        break;
      }
    }
    if (reasoning) {
      json aliased = json::object();
      aliased["thinking"] = *reasoning;
      for (const auto& [key, value] : kept.items()) aliased[key] = value;
      aliased["reasoning_content"] = *reasoning;
      kept = std::move(aliased);
    }
    out.push_back(std::move(kept));
  }
  return out;
}

// strftime_now(format): the clock's local time through strftime, as datetime.strftime calls it.
Value strftime_now(jinja::Interpreter& in, jinja::CallArgs& a,
                   const std::function<std::time_t()>& clock) {
  const Value format = jinja::argument(a, 0, "format");
  if (!format.is_string()) in.fail("strftime_now needs a format string");
  const std::time_t now = clock ? clock() : std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const std::string& f = format.str();
  if (f.empty()) return Value::string("");
  in.check_size(f.size() * 64, "strftime_now's text");
  std::string out(f.size() * 64 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), f.c_str(), &local);
  out.resize(n);
  return Value::string(std::move(out));
}

}  // namespace

std::vector<int8_t> assistant_tokens_mask(const std::vector<std::pair<size_t, size_t>>& offsets,
                                          const std::vector<std::pair<size_t, size_t>>& spans) {
  std::vector<int8_t> mask(offsets.size(), 0);
  size_t span = 0;
  for (size_t token = 0; token < offsets.size(); ++token) {
    const auto [start, end] = offsets[token];
    while (span < spans.size() && start >= spans[span].second) ++span;
    if (span == spans.size()) break;
    if (end > spans[span].first) mask[token] = 1;
  }
  return mask;
}

std::optional<ChatTemplate> ChatTemplate::from_dir(const std::string& dir) {
  ChatTemplate t;
  const std::string file = base::join_path(dir, base::hf::kChatTemplate);
  const std::string config = base::join_path(dir, base::hf::kTokenizerConfig);
  if (base::is_regular_file(file)) {
    t.name_ = file;
    t.default_source_ = base::read_file(file, SIZE_MAX, "chat template ");
    t.default_ = compile(t.default_source_, t.name_);
  } else if (base::is_regular_file(config)) {
    const json c = base::read_json(config);
    if (!c.is_object() || !c.contains("chat_template") || c["chat_template"].is_null())
      return std::nullopt;
    const json& value = c["chat_template"];
    t.name_ = config;
    if (value.is_string()) {
      t.default_source_ = value.get<std::string>();
      t.default_ = compile(t.default_source_, t.name_);
    } else if (value.is_array()) {
      for (const json& named : value) {
        if (!named.is_object() || !named.contains("name") || !named.contains("template") ||
            !named["name"].is_string() || !named["template"].is_string()) {
          throw InputError(fmt::format(
              "{}: chat_template must be a string or a list of {{\"name\", \"template\"}} objects",
              config));
        }
        const std::string name = named["name"].get<std::string>();
        const std::string source = named["template"].get<std::string>();
        const std::string where = fmt::format("{} ({})", config, name);
        if (name == "default") {
          t.default_source_ = source;
          t.default_ = compile(source, where);
        } else if (name == "tool_use") {
          t.tool_use_ = compile(source, where);
        }
      }
      if (!t.default_ && !t.tool_use_) {
        throw InputError(
            fmt::format("{}: chat_template names no \"default\" or \"tool_use\" template", config));
      }
    } else {
      throw InputError(
          fmt::format("{}: chat_template must be a string, not {}", config, value.type_name()));
    }
  } else {
    return std::nullopt;
  }
  t.special_tokens_ = read_special_tokens(dir);
  return t;
}

ChatTemplate ChatTemplate::from_source(const std::string& source, const std::string& name,
                                       const std::string& tokenizer_dir) {
  ChatTemplate t;
  t.name_ = name;
  t.default_source_ = source;
  t.default_ = compile(source, name);
  t.special_tokens_ = read_special_tokens(tokenizer_dir);
  return t;
}

jinja::Rendered ChatTemplate::apply(const ChatRequest& request) const {
  const bool tools = !request.tools.is_null();
  const jinja::Template* chosen = tools && tool_use_ ? &*tool_use_
                                  : default_         ? &*default_
                                                     : nullptr;
  if (!chosen) {
    throw InputError(fmt::format(
        "{}: the chat_template list has no \"default\" template for a conversation without tools",
        name_));
  }
  if (!request.tools.is_null() && !request.tools.is_array())
    throw InputError("tools must be a list of JSON schemas");
  std::vector<std::pair<std::string, Value>> vars;
  for (const auto& [name, text] : special_tokens_) vars.emplace_back(name, Value::string(text));
  if (request.kwargs.is_object()) {
    for (const auto& [key, value] : request.kwargs.items()) {
      vars.emplace_back(key, Value::from_json(value));
    }
  }
  vars.emplace_back("messages", Value::from_json(normalize(request.messages)));
  vars.emplace_back("tools", Value::from_json(request.tools));
  vars.emplace_back("documents", Value::none());
  vars.emplace_back("add_generation_prompt", Value::boolean(request.add_generation_prompt));
  vars.emplace_back("raise_exception", Value::callable("raise_exception", [](jinja::Interpreter& in,
                                                                             jinja::CallArgs& a) {
                      in.fail(jinja::soft_str(jinja::argument(a, 0, "message")),
                              jinja::TemplateError::Kind::kRaised);
                      return Value::none();
                    }));
  vars.emplace_back(
      "strftime_now",
      Value::callable("strftime_now", [clock = clock_](jinja::Interpreter& in, jinja::CallArgs& a) {
        return strftime_now(in, a, clock);
      }));
  return chosen->render(vars);
}

}  // namespace trainer::tokenizers
