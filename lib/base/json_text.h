// JSON values as error messages show them (their text, cut short; their type in words), and the
// small readings every parser of a JSON file of ours repeats: a whole number, a required field.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::base {

// The deepest a JSON value we read may nest arrays and objects: serde_json's recursion limit, with
// which `tokenizers` and `safetensors` read the same files. nlohmann's copies, comparisons and
// dumps recurse once a level, so a value nested 100,000 deep would overflow the stack.
inline constexpr int kMaxJsonDepth = 128;

// Walks `text` from `begin`, outside strings (a backslash's next byte skipped inside them), and
// calls visit(i, depth) at each bracket: after '[' or '{' with the depth it opened, after ']' or
// '}' with the depth left (never below 0). Returns the first i for which visit returns true, or
// npos. Reads the text once, without parsing it.
template <typename Visit>
size_t walk_json_brackets(std::string_view text, size_t begin, Visit visit) {
  int64_t depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (visit(i, ++depth)) return i;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
      if (visit(i, depth)) return i;
    }
  }
  return std::string_view::npos;
}

// The offset of the bracket that opens a level past kMaxJsonDepth in `text`, or npos (brackets
// inside strings are text). Reads the text once, without parsing it.
size_t json_too_deep_at(std::string_view text);

// Throws InputError "<what> is not valid JSON: values nested deeper than 128 levels (line L,
// column C)" when json_too_deep_at finds such a bracket.
void check_json_depth(std::string_view text, const std::string& what);

// Every JSON file and value the program reads goes through here: check_json_depth, then
// nlohmann's parser, objects built in time linear in their size. Throws InputError "<what> is not
// valid JSON: <why>" ("parse error at line 1, column 2: syntax error ..."; bytes that are not
// UTF-8 shown as \xNN).
nlohmann::ordered_json parse_json(std::string_view text, const std::string& what);

// A container the reader hands over member by member rather than keep (a tokenizer.json's
// vocabulary and merges: hundreds of thousands of values, read straight into their tables): the
// object or array reached by `path` from the root (an array's element written "[]") is left empty
// in the parsed value, `start` is called when it opens, and `take` with each member as it is
// read, its key ("" in an array) and its whole value. What `take` throws leaves parse_json.
struct JsonStream {
  std::vector<std::string> path;
  std::function<void()> start;
  std::function<void(const std::string& key, nlohmann::ordered_json&& value)> take;
};

// parse_json, the containers of `streams` handed over as read.
nlohmann::ordered_json parse_json(std::string_view text, const std::string& what,
                                  const std::vector<JsonStream>& streams);

// A value's whole JSON text, invalid UTF-8 replaced (U+FFFD) rather than thrown on.
std::string json_text(const nlohmann::ordered_json& value);

// What nlohmann's exception says, without its "[json.exception.parse_error.101] " tag: "parse
// error at line 1, column 2: syntax error while parsing value - invalid literal; last read: '{b'".
std::string json_error_text(const nlohmann::json::exception& error);

// A value's JSON text as a message quotes it, cut to 57 characters and "..." past 60; inf and
// nan (which JSON cannot hold) as Python prints them; invalid UTF-8 replaced.
std::string shown(const nlohmann::ordered_json& value);

// The value's type with its article: "an integer", "a number", "a string", "an array", "a null".
std::string a_type(const nlohmann::ordered_json& value);

// The value as an int64 when it is a whole number: an integer up to 2^63-1, or a finite float
// with no fraction below 9e15 in magnitude (1e3 is 1000); nothing otherwise.
std::optional<int64_t> whole_number(const nlohmann::ordered_json& value);

// object[key]. Throws InputError "<source>: no \"<key>\"" when `object` (an object) lacks it.
const nlohmann::ordered_json& required_field(const nlohmann::ordered_json& object, const char* key,
                                             const std::string& source);

}  // namespace trainer::base
