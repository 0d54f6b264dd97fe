// JSON values as error messages show them (their text, cut short; their type in words), and the
// small readings every parser of a JSON file of ours repeats: a whole number, a required field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace trainer::base {

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
