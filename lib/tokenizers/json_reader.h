// Reading a component of tokenizer.json (its "type", fields, flags, lists): each refusal is one
// line that starts with the file, as every reader of the room words it.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainer::tokenizers {

class JsonReader {
 public:
  using json = nlohmann::ordered_json;

  explicit JsonReader(std::string where) : where_(std::move(where)) {}

  // Throws InputError "<where>: <what>".
  [[noreturn]] void refuse(const std::string& what) const;
  // j[key], refused as "<within> has no "<key>"" when missing.
  const json& field(const json& j, const char* key, std::string_view within) const;
  std::string string_field(const json& j, const char* key, std::string_view within) const;
  // A string field that must be one character (a Metaspace replacement, a Strip's content).
  std::string character_field(const json& j, const char* key, std::string_view within) const;
  // j[key] as a bool, `fallback` when missing or null.
  bool flag(const json& j, const char* key, bool fallback) const;
  // A Sequence's list under `key` ("normalizers", "decoders", ...), which must be an array.
  const json& sequence(const json& j, std::string_view component, const char* key) const;
  // A pattern {"String": ...} or {"Regex": ...}: its text, and whether it is a regex.
  std::string pattern(const json& j, std::string_view within, bool& is_regex) const;
  // A component's "type" as messages name it (cut short), or its JSON, cut short.
  static std::string type_name(const json& j);

  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

}  // namespace trainer::tokenizers
