// Reading a component of tokenizer.json: its fields, flags, lists and patterns, refused in one
// line naming the file.
#include "lib/tokenizers/json_reader.h"

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"

namespace trainer::tokenizers {

void JsonReader::refuse(const std::string& what) const {
  throw InputError(fmt::format("{}: {}", where_, what));
}

const JsonReader::json& JsonReader::field(const json& j, const char* key,
                                          std::string_view within) const {
  if (!j.is_object() || !j.contains(key)) refuse(fmt::format("{} has no \"{}\"", within, key));
  return j[key];
}

std::string JsonReader::string_field(const json& j, const char* key,
                                     std::string_view within) const {
  const json& v = field(j, key, within);
  if (!v.is_string()) refuse(fmt::format("{}'s \"{}\" is not a string", within, key));
  return v.get<std::string>();
}

std::string JsonReader::character_field(const json& j, const char* key,
                                        std::string_view within) const {
  std::string text = string_field(j, key, within);
  size_t length = 0;
  if (!text.empty()) base::decode_utf8(text, 0, length);
  if (text.empty() || length != text.size()) {
    refuse(fmt::format("{}'s {} {} is not one character", within, key, base::shown_text(text)));
  }
  return text;
}

bool JsonReader::flag(const json& j, const char* key, bool fallback) const {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) refuse(fmt::format("\"{}\" is not true or false", key));
  return j[key].get<bool>();
}

const JsonReader::json& JsonReader::sequence(const json& j, std::string_view component,
                                             const char* key) const {
  const std::string within = fmt::format("{} Sequence", component);
  const json& list = field(j, key, within);
  if (!list.is_array()) refuse(fmt::format("{}'s {} is not a JSON array", within, key));
  return list;
}

std::string JsonReader::pattern(const json& j, std::string_view within, bool& is_regex) const {
  const json& p = field(j, "pattern", within);
  is_regex = p.is_object() && p.contains("Regex");
  if (!(is_regex || (p.is_object() && p.contains("String"))) ||
      !p[is_regex ? "Regex" : "String"].is_string()) {
    refuse(fmt::format("{}'s pattern is not {{\"Regex\": ...}} or {{\"String\": ...}}", within));
  }
  return p[is_regex ? "Regex" : "String"].get<std::string>();
}

std::string JsonReader::type_name(const json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) {
    return base::shown_text(j["type"].get<std::string>(), 60);
  }
  return base::shown(j);
}

}  // namespace trainer::tokenizers
