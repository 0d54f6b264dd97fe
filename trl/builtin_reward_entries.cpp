// The config entries that name TRL's built-in rewards: a name, a Python call of one, or an object.
#include "trl/builtin_rewards.h"

#include <algorithm>
#include <exception>
#include <map>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "trl/builtin_rewards_internal.h"

namespace trainer::trl {

namespace {

using Json = nlohmann::ordered_json;

enum class ParamType { kInt, kFloat, kStrings };

struct Param {
  std::string name;
  ParamType type;
  std::optional<Json> default_value;  // none: required
};

struct Builtin {
  std::string name;
  std::vector<Param> params;
  // The values a name alone takes (TRL's grpo script's registry), when not the defaults.
  std::vector<std::pair<std::string, Json>> alone;
};

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> table = {
      {"accuracy_reward", {}, {}},
      {"get_cosine_scaled_reward",
       {{"max_len", ParamType::kInt, std::nullopt},
        {"min_value_wrong", ParamType::kFloat, Json(-1.0)},
        {"max_value_wrong", ParamType::kFloat, Json(-0.5)},
        {"min_value_correct", ParamType::kFloat, Json(0.5)},
        {"max_value_correct", ParamType::kFloat, Json(1.0)}},
       {}},
      {"get_repetition_penalty_reward",
       {{"ngram_size", ParamType::kInt, Json(3)}, {"max_penalty", ParamType::kFloat, Json(-1.0)}},
       {}},
      {"get_soft_overlong_punishment",
       {{"max_completion_len", ParamType::kInt, std::nullopt},
        {"soft_punish_cache", ParamType::kInt, std::nullopt}},
       {{"max_completion_len", Json(1280)}, {"soft_punish_cache", Json(256)}}},
      {"reasoning_accuracy_reward", {{"reasoning_delimiters", ParamType::kStrings, Json()}}, {}},
      {"think_format_reward", {}, {}},
  };
  return table;
}

std::string python_value(const Json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_number_float()) return base::python_float(value.get<double>());
  return base::shown(value);
}

// "max_len, min_value_wrong=-1.0, ..." as the function's signature names them.
std::string signature(const Builtin& b) {
  if (b.params.empty()) return "no parameters";
  std::string out;
  for (const Param& p : b.params) {
    if (!out.empty()) out += ", ";
    out += p.name;
    if (p.default_value) out += "=" + python_value(*p.default_value);
  }
  return "its parameters: " + out;
}

// A Python call's text read: a name, then optionally (arguments).
struct Call {
  std::string name;
  bool called = false;
  std::vector<Json> positional;
  std::vector<std::pair<std::string, Json>> keywords;
};

class CallReader {
 public:
  CallReader(std::string_view text, std::string entry) : s_(text), entry_(std::move(entry)) {}

  Call read() {
    Call call;
    skip();
    call.name = dotted_name();
    skip();
    if (at_ < s_.size() && s_[at_] == '(') {
      call.called = true;
      ++at_;
      skip();
      while (at_ < s_.size() && s_[at_] != ')') {
        const size_t save = at_;
        std::string keyword = identifier();
        skip();
        if (!keyword.empty() && at_ < s_.size() && s_[at_] == '=' &&
            (at_ + 1 >= s_.size() || s_[at_ + 1] != '=')) {
          ++at_;
          call.keywords.emplace_back(std::move(keyword), value());
        } else {
          at_ = save;
          if (!call.keywords.empty()) fail("a positional argument follows a keyword argument");
          call.positional.push_back(value());
        }
        skip();
        if (at_ >= s_.size()) fail("the call is not closed with ')'");
        if (s_[at_] == ',') {
          ++at_;
          skip();
        } else if (s_[at_] != ')') {
          fail("expected ',' or ')'");
        }
      }
      if (at_ >= s_.size()) fail("the call is not closed with ')'");
      ++at_;
      skip();
    }
    if (at_ < s_.size()) fail(fmt::format("unexpected {}", base::shown_text(s_.substr(at_), 20)));
    return call;
  }

 private:
  std::string_view s_;
  std::string entry_;
  size_t at_ = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(fmt::format(
        "argument reward_funcs: {}: not a Python call of a built-in ({} at character {}); write a "
        "name, name(param=value, ...) with numbers, strings, True/False/None or lists of strings, "
        "or an object {{\"name\": ..., param: value}}",
        entry_, why, at_ + 1));
  }
  void skip() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n')) ++at_;
  }
  static bool word_char(char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
  }
  std::string identifier() {
    const size_t begin = at_;
    while (at_ < s_.size() && word_char(s_[at_], at_ == begin)) ++at_;
    return std::string(s_.substr(begin, at_ - begin));
  }
  std::string dotted_name() {
    std::string name = identifier();
    while (!name.empty() && at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      const std::string part = identifier();
      if (part.empty()) fail("a name ends with '.'");
      name += "." + part;
    }
    if (name.empty()) fail("no function name");
    return name;
  }
  Json value() {
    skip();
    if (at_ >= s_.size()) fail("a value is missing");
    const char c = s_[at_];
    if (c == '\'' || c == '"') return string();
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++at_;
      Json list = Json::array();
      skip();
      while (at_ < s_.size() && s_[at_] != close) {
        list.push_back(value());
        skip();
        if (at_ < s_.size() && s_[at_] == ',') {
          ++at_;
          skip();
        } else if (at_ >= s_.size() || s_[at_] != close) {
          fail(fmt::format("expected ',' or '{}'", close));
        }
      }
      if (at_ >= s_.size()) fail(fmt::format("a list is not closed with '{}'", close));
      ++at_;
      return list;
    }
    const std::string word = identifier();
    if (word == "True") return true;
    if (word == "False") return false;
    if (word == "None") return nullptr;
    if (!word.empty()) fail(fmt::format("'{}' is not a value", word));
    return number();
  }
  Json string() {
    const char quote = s_[at_++];
    std::string out;
    while (at_ < s_.size() && s_[at_] != quote) {
      char c = s_[at_++];
      if (c == '\\' && at_ < s_.size()) {
        const char e = s_[at_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
        if (e != 'n' && e != 't' && e != '\\' && e != '\'' && e != '"') out += '\\';
      }
      out += c;
    }
    if (at_ >= s_.size()) fail("a string is not closed");
    ++at_;
    return out;
  }
  Json number() {
    const size_t begin = at_;
    if (at_ < s_.size() && (s_[at_] == '-' || s_[at_] == '+')) ++at_;
    bool is_float = false;
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (c >= '0' && c <= '9') {
        ++at_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
        ++at_;
        if ((c == 'e' || c == 'E') && at_ < s_.size() && (s_[at_] == '-' || s_[at_] == '+')) ++at_;
      } else {
        break;
      }
    }
    const std::string text(s_.substr(begin, at_ - begin));
    if (text.empty() || text == "-" || text == "+") fail("a value is missing");
    try {
      size_t used = 0;
      if (!is_float) {
        const long long v = std::stoll(text, &used);
        if (used == text.size()) return static_cast<int64_t>(v);
      } else {
        const double v = std::stod(text, &used);
        if (used == text.size()) return v;
      }
    } catch (const std::exception&) {
    }
    fail(fmt::format("'{}' is not a number", text));
  }
};

const Builtin* find_builtin(const std::string& name) {
  std::string_view n = name;
  if (n.substr(0, 12) == "trl.rewards.") n.remove_prefix(12);  // the import path names the same
  for (const Builtin& b : builtins()) {
    if (b.name == n) return &b;
  }
  return nullptr;
}

std::string known_names() {
  std::string out;
  for (const std::string& name : builtin_reward_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The parameter's value checked: an int, a float (an int taken), a list of texts (or None).
Json checked(const Param& p, const Json& value, const std::string& entry, const Builtin& b) {
  auto wrong = [&](const std::string& allowed) {
    return InputError(fmt::format("argument reward_funcs: {}: {} is {} ({}); it must be {} ({})",
                                  entry, p.name, python_value(value), base::a_type(value), allowed,
                                  signature(b)));
  };
  switch (p.type) {
    case ParamType::kInt:
      if (!value.is_number_integer()) throw wrong("a whole number");
      return value;
    case ParamType::kFloat:
      if (!value.is_number() || value.is_boolean()) throw wrong("a number");
      return value.get<double>();
    case ParamType::kStrings:
      if (value.is_null()) return value;
      if (!value.is_array()) throw wrong("a list of texts, or None");
      for (const Json& item : value) {
        if (!item.is_string()) throw wrong("a list of texts, or None");
        if (item.get_ref<const std::string&>().empty()) {
          throw wrong("a list of non-empty texts (Python's str.split refuses \"\")");
        }
      }
      return value;
  }
  return value;
}

// The entry as a Python call: a text read as one; an object's "name", its other keys keywords.
Call call_of(const Json& spec, const std::string& entry) {
  Call call;
  if (spec.is_string()) {
    call = CallReader(spec.get_ref<const std::string&>(), entry).read();
  } else if (spec.is_object()) {
    const auto name = spec.find("name");
    if (name == spec.end() || !name->is_string()) {
      throw InputError(fmt::format(
          "argument reward_funcs: {}: an object names its function in \"name\" (one of {})", entry,
          known_names()));
    }
    call.name = name->get<std::string>();
    for (const auto& [key, value] : spec.items()) {
      if (key != "name") call.keywords.emplace_back(key, value);
    }
    call.called = !call.keywords.empty();
  } else {
    throw InputError(fmt::format(
        "argument reward_funcs: {}: is {}; name a built-in with a text or an object (one of {})",
        entry, base::a_type(spec), known_names()));
  }
  return call;
}

// The built-in the call names; InputError with the nearest name where it names none.
const Builtin& builtin_called(const Call& call, const std::string& entry) {
  const Builtin* builtin = find_builtin(call.name);
  if (!builtin) {
    const std::string near = base::nearest(call.name, builtin_reward_names());
    throw InputError(fmt::format(
        "argument reward_funcs: {}: '{}' is not one of TRL's built-ins ({}){}", entry, call.name,
        known_names(), near.empty() ? "" : fmt::format("; did you mean {}?", near)));
  }
  return *builtin;
}

// The arguments bound to the parameters, as Python binds a call's: the positional ones, the
// keywords, a name alone's values, the defaults.
std::map<std::string, Json> bound_arguments(const Call& call, const Builtin& b,
                                            const std::string& entry) {
  std::map<std::string, Json> bound;
  if (call.positional.size() > b.params.size()) {
    throw InputError(
        fmt::format("argument reward_funcs: {}: {} takes {} positional arguments, not {} ({})",
                    entry, b.name, b.params.size(), call.positional.size(), signature(b)));
  }
  for (size_t k = 0; k < call.positional.size(); ++k) {
    bound[b.params[k].name] = checked(b.params[k], call.positional[k], entry, b);
  }
  for (const auto& keyword : call.keywords) {
    const std::string& key = keyword.first;
    const auto param = std::find_if(b.params.begin(), b.params.end(),
                                    [&](const Param& p) { return p.name == key; });
    if (param == b.params.end()) {
      std::vector<std::string> names;
      for (const Param& p : b.params) names.push_back(p.name);
      const std::string near = base::nearest(key, names);
      throw InputError(fmt::format(
          "argument reward_funcs: {}: {} has no parameter '{}'{} ({})", entry, b.name, key,
          near.empty() ? "" : fmt::format(" (did you mean {}?)", near), signature(b)));
    }
    if (bound.count(key)) {
      throw InputError(fmt::format("argument reward_funcs: {}: {} is given twice ({})", entry, key,
                                   signature(b)));
    }
    bound[key] = checked(*param, keyword.second, entry, b);
  }
  if (!call.called) {
    for (const auto& [key, value] : b.alone) bound[key] = value;
  }
  for (const Param& p : b.params) {
    if (bound.count(p.name)) continue;
    if (!p.default_value) {
      throw InputError(fmt::format("argument reward_funcs: {}: {} needs {} ({})", entry, b.name,
                                   p.name, signature(b)));
    }
    bound[p.name] = *p.default_value;
  }
  return bound;
}

// The reward of a built-in with its arguments bound, their ranges checked.
std::unique_ptr<BuiltinReward> make_reward(const Builtin& b, std::map<std::string, Json> bound,
                                           const std::string& entry) {
  auto at_least = [&](const std::string& key, int64_t least, const std::string& why) {
    const int64_t v = bound[key].get<int64_t>();
    if (v < least) {
      throw InputError(
          fmt::format("argument reward_funcs: {}: {} is {}; it must be at least {} ({})", entry,
                      key, v, least, why));
    }
    return v;
  };
  if (b.name == "think_format_reward") return std::make_unique<builtin::ThinkFormatReward>();
  if (b.name == "accuracy_reward") return std::make_unique<builtin::AccuracyReward>(entry);
  if (b.name == "reasoning_accuracy_reward") {
    std::vector<std::string> delimiters = {"</think>"};
    if (!bound["reasoning_delimiters"].is_null()) {
      delimiters = bound["reasoning_delimiters"].get<std::vector<std::string>>();
    }
    return std::make_unique<builtin::ReasoningAccuracyReward>(std::move(delimiters), entry);
  }
  if (b.name == "get_soft_overlong_punishment") {
    const int64_t max_len = at_least("max_completion_len", 0, "a completion's token count");
    const int64_t cache = at_least("soft_punish_cache", 0, "0 is no soft zone");
    return std::make_unique<builtin::SoftOverlongPunishment>(max_len, cache);
  }
  if (b.name == "get_repetition_penalty_reward") {
    const int64_t n = at_least("ngram_size", 1, "TRL divides by the count of n-grams");
    const double max_penalty = bound["max_penalty"].get<double>();
    if (max_penalty > 0) {
      throw InputError(
          fmt::format("argument reward_funcs: {}: max_penalty {} should not be positive (TRL's "
                      "check: it is the most negative reward)",
                      entry, base::python_float(max_penalty)));
    }
    return std::make_unique<builtin::RepetitionPenalty>(n, max_penalty);
  }
  // get_cosine_scaled_reward
  const int64_t max_len = at_least("max_len", 1, "TRL divides the token count by it");
  return std::make_unique<builtin::CosineScaledReward>(
      entry, max_len, bound["min_value_wrong"].get<double>(),
      bound["max_value_wrong"].get<double>(), bound["min_value_correct"].get<double>(),
      bound["max_value_correct"].get<double>());
}

}  // namespace

const std::vector<std::string>& builtin_reward_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Builtin& b : builtins()) out.push_back(b.name);
    return out;
  }();
  return names;
}

bool is_builtin_reward(const nlohmann::ordered_json& spec) {
  if (spec.is_string()) {
    const std::string& text = spec.get_ref<const std::string&>();
    const std::string name = base::trimmed(text.substr(0, text.find('(')), " \t\n");
    return find_builtin(name) != nullptr;
  }
  if (spec.is_object()) {
    const auto name = spec.find("name");
    return name != spec.end() && name->is_string() &&
           find_builtin(name->get<std::string>()) != nullptr;
  }
  return false;
}

std::unique_ptr<BuiltinReward> make_builtin_reward(const nlohmann::ordered_json& spec) {
  const std::string entry = base::shown(spec);
  const Call call = call_of(spec, entry);
  const Builtin& b = builtin_called(call, entry);
  return make_reward(b, bound_arguments(call, b, entry), entry);
}

}  // namespace trainer::trl
