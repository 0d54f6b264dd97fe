// JSON values as error messages show them.
#include "lib/base/json_text.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>
#include <vector>

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

namespace {

// nlohmann's DOM builder (json_sax_dom_parser) with two changes. A member joins an object in
// constant time: ordered_json's object is a vector whose operator[] searches every key before it
// appends one, so an object of n members took n^2/2 comparisons (a 128,256-token vocabulary: 8e9,
// tens of seconds); here an object past kIndexedFrom members keeps a hash index of its keys while
// it is built (a key given twice keeps its first place and its last value, as operator[] does).
// And the containers a JsonStream names are kept empty, their members handed over as read.
class JsonBuilder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit JsonBuilder(const std::vector<JsonStream>& streams) : streams_(streams) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(number_integer_t value) { return add(value); }
  bool number_unsigned(number_unsigned_t value) { return add(value); }
  bool number_float(number_float_t value, const string_t&) { return add(value); }
  bool string(string_t& value) { return add(std::move(value)); }
  bool binary(binary_t& value) { return add(std::move(value)); }
  bool start_object(size_t) { return open(json::value_t::object); }
  bool start_array(size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& key) {
    Level& level = stack_.back();
    level.key = key;
    if (level.stream) return true;  // its members go to the stream, not into it
    // (ordered_map's operator[] takes a key: members are reached by iterator.)
    auto& members = level.value->get_ref<json::object_t&>();
    if (level.index.empty() && members.size() < kIndexedFrom) {
      for (auto& member : members) {
        if (member.first == key) return slot(&member.second);
      }
    } else {
      if (level.index.empty()) {
        for (size_t i = 0; i < members.size(); ++i) {
          level.index.emplace(members.begin()[i].first, i);
        }
      }
      auto [it, added] = level.index.emplace(key, members.size());
      if (!added) return slot(&members.begin()[it->second].second);
    }
    members.emplace_back(std::move(key), nullptr);
    return slot(&members.back().second);
  }

  bool parse_error(size_t, const std::string&, const nlohmann::json::exception& error) {
    error_ = json_error_text(error);
    return false;
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  static constexpr size_t kIndexedFrom = 16;
  struct Level {
    json* value;  // the container being built (a streamed one stays empty)
    std::unordered_map<std::string, size_t> index;  // key -> member, past kIndexedFrom members
    std::string key;                                // an object's member being read
    const JsonStream* stream = nullptr;             // where this container's members go
    std::unique_ptr<json> owned;                    // a streamed container's member, built here
  };

  bool slot(json* member) {
    member_ = member;
    return true;
  }

  // The stream whose container is the one at path_, if any.
  const JsonStream* stream_here() const {
    for (const JsonStream& stream : streams_) {
      if (stream.path == path_) return &stream;
    }
    return nullptr;
  }

  // Hands `value` to the stream of the container on top: its key ("" in an array).
  void hand_over(json&& value) {
    const Level& top = stack_.back();
    top.stream->take(top.value->is_object() ? top.key : std::string(), std::move(value));
  }

  // Places `value` where the parser stands (the root, an array's end, the member a key named)
  // and returns where it went.
  template <typename Value>
  json* place(Value&& value) {
    if (stack_.empty()) {
      root_ = json(std::forward<Value>(value));
      return &root_;
    }
    json& top = *stack_.back().value;
    if (top.is_array()) {
      auto& items = top.get_ref<json::array_t&>();
      items.emplace_back(std::forward<Value>(value));
      return &items.back();
    }
    *member_ = json(std::forward<Value>(value));
    return member_;
  }

  template <typename Value>
  bool add(Value&& value) {
    if (!stack_.empty() && stack_.back().stream) {
      hand_over(json(std::forward<Value>(value)));
    } else {
      place(std::forward<Value>(value));
    }
    return true;
  }

  bool open(json::value_t type) {
    Level level;
    if (!stack_.empty()) {
      const Level& parent = stack_.back();
      path_.push_back(parent.value->is_object() ? parent.key : std::string("[]"));
    }
    if (!stack_.empty() && stack_.back().stream) {
      level.owned = std::make_unique<json>(type);
      level.value = level.owned.get();
    } else {
      level.value = place(type);
      level.stream = stream_here();
      if (level.stream && level.stream->start) level.stream->start();
    }
    stack_.push_back(std::move(level));
    return true;
  }

  bool close() {
    std::unique_ptr<json> owned = std::move(stack_.back().owned);
    stack_.pop_back();
    if (!stack_.empty()) path_.pop_back();
    if (owned) hand_over(std::move(*owned));
    return true;
  }

  const std::vector<JsonStream>& streams_;
  json root_;
  std::vector<Level> stack_;
  std::vector<std::string> path_;  // the keys from the root to the container on top
  json* member_ = nullptr;
  std::string error_;
};

}  // namespace

json parse_json(std::string_view text, const std::string& what) {
  return parse_json(text, what, {});
}

json parse_json(std::string_view text, const std::string& what,
                const std::vector<JsonStream>& streams) {
  check_json_depth(text, what);
  JsonBuilder builder(streams);
  bool parsed = false;
  try {
    parsed = json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const nlohmann::json::exception& e) {  // what the builder's own calls throw
    throw InputError(fmt::format("{} is not valid JSON: {}", what,
                                 shown_text(json_error_text(e), std::string::npos)));
  }
  if (!parsed) {  // parse_error: a syntax error, or out_of_range for 1e400
    throw InputError(fmt::format("{} is not valid JSON: {}", what,
                                 shown_text(builder.error(), std::string::npos)));
  }
  return std::move(builder.root());
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
