// JSON values as error messages show them.
#include "lib/base/json_text.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"

namespace trainer::base {

using json = nlohmann::ordered_json;

std::string json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string json_error_text(const nlohmann::json::exception& error) {
  std::string what = error.what();
  if (starts_with(what, "[json.exception.")) {
    const size_t end = what.find("] ");
    if (end != std::string::npos) what.erase(0, end + 2);
  }
  return what;
}

size_t json_too_deep_at(std::string_view text) {
  return walk_json_brackets(text, 0, [](size_t, int64_t depth) { return depth > kMaxJsonDepth; });
}

void check_json_depth(std::string_view text, const std::string& what) {
  const size_t at = json_too_deep_at(text);
  if (at == std::string_view::npos) return;
  const size_t line_start = text.rfind('\n', at) + 1;  // 0 past npos: the first line
  throw InputError(fmt::format(
      "{} is not valid JSON: values nested deeper than {} levels (line {}, column {})", what,
      kMaxJsonDepth, std::count(text.begin(), text.begin() + at, '\n') + 1, at - line_start + 1));
}

json parse_json(std::string_view text, const std::string& what) {
  check_json_depth(text, what);
  try {
    return json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw InputError(fmt::format("{} is not valid JSON: {}", what,
                                 shown_text(json_error_text(e), std::string::npos)));
  }
}

std::string shown(const json& value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    return python_float(value.get<double>());  // JSON has no inf or nan
  }
  std::string text = json_text(value);
  return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

std::string a_type(const json& value) {
  std::string type = value.is_number_integer() ? "integer"
                     : value.is_number()       ? "number"
                                               : value.type_name();
  return (std::string("aeiou").find(type.front()) != std::string::npos ? "an " : "a ") + type;
}

std::optional<int64_t> whole_number(const json& value) {
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX})
    return std::nullopt;
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

const json& required_field(const json& object, const char* key, const std::string& source) {
  auto it = object.find(key);
  if (it == object.end()) throw InputError(fmt::format("{}: no \"{}\"", source, key));
  return *it;
}

}  // namespace trainer::base
