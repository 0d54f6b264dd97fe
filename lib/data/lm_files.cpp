// Reading run_clm's data files as `datasets` does: the text loader's lines (universal newlines,
// then "\n" only) and the JSON loader's records (pyarrow's stream of objects, or one array).
#include "lib/data/lm_files.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/utf8.h"
#include "lib/data/text_files.h"

namespace trainer::data {

namespace {

using Json = nlohmann::ordered_json;

// The line (from 1) that holds byte `offset`: "\n", "\r\n" and a lone "\r" end lines, as Python's
// universal newlines read them.
int64_t line_at(std::string_view bytes, size_t offset) {
  int64_t line = 1;
  for (size_t i = 0; i < offset && i < bytes.size(); ++i) {
    if (bytes[i] == '\n' || (bytes[i] == '\r' && (i + 1 >= bytes.size() || bytes[i + 1] != '\n'))) {
      ++line;
    }
  }
  return line;
}

// line_at for offsets that only grow (a file's records, one after another): each byte is counted
// once, so reading N records stays linear.
class LineCounter {
 public:
  explicit LineCounter(std::string_view bytes) : bytes_(bytes) {}
  int64_t line_at(size_t offset) {
    for (; at_ < offset && at_ < bytes_.size(); ++at_) {
      if (bytes_[at_] == '\n' ||
          (bytes_[at_] == '\r' && (at_ + 1 >= bytes_.size() || bytes_[at_ + 1] != '\n'))) {
        ++line_;
      }
    }
    return line_;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
  int64_t line_ = 1;
};

// Throws, like Python's UnicodeDecodeError, at the first byte that starts no UTF-8 character.
void check_utf8(std::string_view bytes, const std::string& named) {
  const size_t i = base::first_invalid_utf8(bytes);
  if (i != std::string_view::npos) {
    throw InputError(fmt::format(
        "{} is not UTF-8: byte 0x{:02X} at line {}, byte offset {} starts no UTF-8 character "
        "(save the file as UTF-8)",
        named, static_cast<unsigned char>(bytes[i]), line_at(bytes, i), i));
  }
}

// The text loader: universal newlines, then a line after each "\n", which it keeps or drops.
std::vector<std::string> text_lines(std::string_view text, bool keep_linebreaks) {
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find_first_of("\r\n", at);
    if (end == std::string_view::npos) {
      lines.emplace_back(text.substr(at));  // the last line, without a break
      break;
    }
    lines.emplace_back(text.substr(at, end - at));
    if (keep_linebreaks) lines.back() += '\n';
    at = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
  }
  return lines;
}

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Where the JSON object or array that opens at text[begin] closes (one past its last byte), or
// npos when the text ends first. Counts brackets outside strings; the parser checks the rest.
size_t value_end(std::string_view text, size_t begin) {
  const size_t close =
      base::walk_json_brackets(text, begin, [](size_t, int64_t depth) { return depth == 0; });
  return close == std::string_view::npos ? close : close + 1;
}

// Parses text[begin, end) as JSON. With `unique_keys`, a key given twice in the top-level object
// is an error (pyarrow refuses one in a record; ujson, for the elements of an array, keeps the
// last, as nlohmann does). Throws InputError naming the line of the error.
Json parse_json(std::string_view text, size_t begin, size_t end, const std::string& named,
                bool unique_keys) {
  std::set<std::string> keys;
  std::string repeated;
  auto check_keys = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (unique_keys && depth == 1 && event == Json::parse_event_t::key && repeated.empty() &&
        !keys.insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  if (size_t deep = base::json_too_deep_at(text.substr(begin, end - begin));
      deep != std::string_view::npos) {
    throw InputError(fmt::format("{} line {}: invalid JSON: values nested deeper than {} levels",
                                 named, line_at(text, begin + deep), base::kMaxJsonDepth));
  }
  Json value;
  try {
    value = Json::parse(text.begin() + begin, text.begin() + end, check_keys);
  } catch (const nlohmann::json::parse_error& error) {
    // nlohmann's "parse error at line 1, column 9: syntax error ...": the line counted in the file.
    std::string message = base::json_error_text(error);
    const size_t colon = message.find(": ");
    if (base::starts_with(message, "parse error at line") && colon != std::string::npos) {
      message = message.substr(colon + 2);
    }
    const size_t at = begin + (error.byte > 0 ? error.byte - 1 : 0);
    throw InputError(
        fmt::format("{} line {}: invalid JSON: {}", named, line_at(text, at), message));
  } catch (const nlohmann::json::out_of_range& error) {  // a number past double's range: 1e400
    throw InputError(fmt::format("{} line {}: invalid JSON: {}", named, line_at(text, begin),
                                 base::json_error_text(error)));
  }
  if (!repeated.empty()) {
    throw InputError(fmt::format("{} line {}: key '{}' given twice in one object", named,
                                 line_at(text, begin), repeated));
  }
  return value;
}

// The record's `column`, which must be a string; `where` says which record ("line 3").
std::string column_text(const Json& record, const std::string& column, const std::string& named,
                        const std::string& where) {
  auto found = record.find(column);
  if (found == record.end()) {
    std::vector<std::string> columns;
    for (const auto& item : record.items()) columns.push_back("'" + item.key() + "'");
    throw InputError(fmt::format(
        "{} {} has no column '{}' ({}; text_column_name chooses the column)", named, where, column,
        columns.empty() ? std::string("the record has no columns")
                        : fmt::format("its columns: {}", fmt::join(columns, ", "))));
  }
  if (!found->is_string()) {
    throw InputError(fmt::format(
        "{} {}: column '{}' is {}, not a string", named, where, column,
        found->is_null() ? std::string("null")
                         : fmt::format("{} ({})", base::a_type(*found), base::shown(*found))));
  }
  return found->get<std::string>();
}

// The JSON loader: a stream of objects, or one top-level array (of objects, or of texts, each
// text the record {"text": text}). Each record comes with where it stands ("line 3").
std::vector<JsonRecord> json_records(std::string_view bytes, const std::string& named) {
  size_t at = base::starts_with(bytes, "\xEF\xBB\xBF") ? 3 : 0;
  while (at < bytes.size() && json_space(bytes[at])) ++at;
  if (at == bytes.size()) {
    throw InputError(fmt::format(
        "{} holds no records (it is empty or blank; JSON Lines hold one object a line)", named));
  }
  std::vector<JsonRecord> records;
  if (bytes[at] == '[') {
    Json array = parse_json(bytes, at, bytes.size(), named, /*unique_keys=*/false);
    if (array.empty()) throw InputError(fmt::format("{} holds an empty array (no records)", named));
    // An array of objects, or of texts (each element the record {"text": element}). datasets'
    // test where the file (after a BOM) starts with '[': a '{' before the first '"' of the first
    // 100 bytes; where blanks come first, pandas reads it, by its first element.
    std::string_view head = bytes.substr(at, 100);
    head = head.substr(0, head.find('"'));
    const bool objects = at == (base::starts_with(bytes, "\xEF\xBB\xBF") ? 3 : 0)
                             ? head.find('{') != std::string_view::npos
                             : array[0].is_object();
    for (size_t i = 0; i < array.size(); ++i) {
      std::string where = fmt::format("element {} of the top-level array", i + 1);
      if (objects && !array[i].is_object()) {
        throw InputError(
            fmt::format("{} {} is {} ({}), not an object (an array holds objects, or texts)", named,
                        where, base::a_type(array[i]), base::shown(array[i])));
      }
      records.push_back(
          {objects ? std::move(array[i]) : Json{{"text", std::move(array[i])}}, std::move(where)});
    }
    return records;
  }
  LineCounter lines(bytes);
  while (at < bytes.size()) {
    std::string where = fmt::format("line {}", lines.line_at(at));
    if (bytes[at] != '{') {
      std::string_view rest = bytes.substr(at);
      rest = rest.substr(0, rest.find_first_of("\r\n"));
      throw InputError(fmt::format("{} {}: '{}' is not a JSON object (JSON Lines hold one a line)",
                                   named, where, base::shown_text(rest)));
    }
    const size_t end = value_end(bytes, at);
    if (end == std::string_view::npos) {
      throw InputError(
          fmt::format("{} {}: the JSON object that opens there is never closed", named, where));
    }
    records.push_back({parse_json(bytes, at, end, named, /*unique_keys=*/true), std::move(where)});
    at = end;
    while (at < bytes.size() && json_space(bytes[at])) ++at;
  }
  return records;
}

// The file's extension: after the last '.' of its name, "" without one.
std::string extension_of(const std::string& path) {
  const std::string name = base::base_name(path);
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(dot + 1);
}

// The checks every file gets before its records or lines are read: UTF-16/32 named, then UTF-8.
void check_text(std::string_view bytes, const std::string& named, const std::string& path) {
  refuse_wide_text(bytes, named, path);
  check_utf8(bytes, named);
}

}  // namespace

std::vector<std::string> read_lm_file(const std::string& path, const std::string& text_column,
                                      bool keep_linebreaks) {
  const std::string name = base::base_name(path);
  const size_t dot = name.rfind('.');
  const std::string extension = extension_of(path);
  // A file without an extension (fortunes' files, a README) is read as text: run_clm would
  // refuse it, but nothing else could be meant.
  if (dot != std::string::npos && extension != "txt" && extension != "json" &&
      extension != "jsonl") {
    throw InputError(fmt::format(
        "data file '{}' has the extension '.{}'; use .txt (an example a line, as a file without "
        "an extension), .json or .jsonl (JSON Lines with a text column)",
        path, extension));
  }
  const bool text = extension == "txt" || dot == std::string::npos;
  const std::string kind = text ? "text file" : "JSON file";
  const std::string bytes = base::read_file(path, SIZE_MAX, kind + " ", /*allow_pipes=*/false);
  return parse_lm_bytes(bytes, text ? "txt" : extension, path, text_column, keep_linebreaks);
}

std::vector<std::string> parse_lm_bytes(std::string_view bytes, const std::string& extension,
                                        const std::string& path, const std::string& text_column,
                                        bool keep_linebreaks) {
  const bool text = extension == "txt";
  const std::string named = fmt::format("{} '{}'", text ? "text file" : "JSON file", path);
  check_text(bytes, named, path);
  if (!text) {
    std::vector<std::string> texts;
    for (const JsonRecord& record : json_records(bytes, named)) {
      texts.push_back(column_text(record.value, text_column, named, record.where));
    }
    return texts;
  }
  if (bytes.empty()) throw InputError(fmt::format("{} holds no lines (it is empty)", named));
  return text_lines(bytes, keep_linebreaks);
}

std::vector<JsonRecord> parse_json_records(std::string_view bytes, const std::string& path) {
  const std::string named = fmt::format("JSON file '{}'", path);
  check_text(bytes, named, path);
  return json_records(bytes, named);
}

std::vector<JsonRecord> read_json_records(const std::string& path) {
  const std::string extension = extension_of(path);
  if (extension != "json" && extension != "jsonl") {
    throw InputError(fmt::format(
        "data file '{}' {}; use .json or .jsonl (JSON Lines: a JSON object a line)", path,
        extension.empty() ? std::string("has no extension")
                          : fmt::format("has the extension '.{}'", extension)));
  }
  return parse_json_records(base::read_file(path, SIZE_MAX, "JSON file ", /*allow_pipes=*/false),
                            path);
}

int64_t validation_split_boundary(int64_t count, double percentage) {
  if (!(percentage >= 0 && percentage <= 100)) {
    throw InputError(
        fmt::format("validation_split_percentage {} is not between 0 and 100", percentage));
  }
  if (count < 0) {
    throw std::invalid_argument(fmt::format("validation_split_boundary: count {} < 0", count));
  }
  // Python: boundary * num_examples / 100.0 (an exact integer product for a whole percentage,
  // then one rounding to a double), round() halves to even: nearbyint in the default mode.
  const double scaled = percentage == std::floor(percentage)
                            ? static_cast<double>(static_cast<__int128>(percentage) * count) / 100.0
                            : percentage * static_cast<double>(count) / 100.0;
  return std::clamp(static_cast<int64_t>(std::nearbyint(scaled)), int64_t{0}, count);
}

}  // namespace trainer::data
