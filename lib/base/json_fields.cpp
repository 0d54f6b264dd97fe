// JsonFields: typed, checked reads of a JSON object's fields, and the wording of their errors in
// each style (a file's fields, generation_config.json's, trainer_state.json's, the options).
#include "lib/base/json_fields.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::base {

using json = nlohmann::ordered_json;

JsonFields::JsonFields(const json& object, std::string source, Style style)
    : object_(&object), source_(std::move(source)), style_(style) {}

JsonFields JsonFields::options(std::string what, std::string whose, const json& config) {
  static const json kNone = json::object();
  if (!config.is_null() && !config.is_object()) {
    throw InputError(fmt::format("{}: {} is not a JSON object (options for {}, e.g. {{}})", what,
                                 shown(config), whose));
  }
  JsonFields fields(config.is_null() ? kNone : config, std::move(what), Style::kOptions);
  fields.whose_ = std::move(whose);
  return fields;
}

bool JsonFields::has(const std::string& key) const {
  auto it = object_->find(key);
  return it != object_->end() && !it->is_null();
}

const json& JsonFields::at(const std::string& key) const { return object_->at(key); }

const json* JsonFields::find(const std::string& key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.push_back(key);
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

const json& JsonFields::required(const std::string& key) {
  find(key);
  auto it = object_->find(key);
  if (it != object_->end()) return *it;
  if (style_ == Style::kQuotedKey) fail_object(fmt::format("no \"{}\"", key));
  fail(key, "is missing");
}

std::string JsonFields::field(const std::string& key) const {
  switch (style_) {
    case Style::kQuotedKey:
      return fmt::format("{}: \"{}\"", source_, key);
    case Style::kOptions:
      return fmt::format("{}: option {} of {}", source_, key, whose_);
    default:
      return fmt::format("{}: {}", source_, key);
  }
}

std::string JsonFields::range(const std::string& kind, const std::string& bounds) const {
  return style_ == Style::kOptions ? "must be " + bounds : kind + " " + bounds;
}

void JsonFields::fail(const std::string& key, const std::string& problem) const {
  throw InputError(fmt::format("{} {}", field(key), problem));
}

void JsonFields::fail_if(bool condition, const std::string& key, const std::string& problem) const {
  if (condition) fail(key, problem);
}

void JsonFields::fail_object(const std::string& problem) const {
  throw InputError(fmt::format("{}: {}", source_, problem));
}

void JsonFields::not_allowed(const std::string& key, const json& value,
                             const std::string& allowed) const {
  switch (style_) {
    case Style::kQuotedKey:
      fail(key, "is not " + allowed);
    case Style::kOptions:
      fail(key, fmt::format("is {}; {}", shown(value), allowed));
    default:
      fail(key, fmt::format("{} is not allowed ({})", shown(value), allowed));
  }
}

void JsonFields::check(bool ok, const std::string& key, const std::string& allowed) const {
  if (!ok) not_allowed(key, at(key), allowed);
}

void JsonFields::wrong_type(const std::string& key, const json& value,
                            const std::string& kind) const {
  switch (style_) {
    case Style::kFile:
      fail(key, fmt::format("{} is not {}", shown(value), kind));
    case Style::kOptions:
      not_allowed(key, value, "expected " + kind);
    default:  // kNotAllowed, kQuotedKey: as a value out of range
      not_allowed(key, value, kind);
  }
}

int64_t JsonFields::positive(const std::string& key, int64_t fallback) {
  const json* v = find(key);
  if (!v) {
    if (fallback > 0) return fallback;
    fail(key, "is missing (a positive integer)");
  }
  if (!v->is_number_integer() || v->get<int64_t>() < 1) {
    not_allowed(key, *v, "a positive integer");
  }
  return v->get<int64_t>();
}

int64_t JsonFields::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  const json* v = find(key);
  if (!v) return fallback;
  const std::optional<int64_t> whole = whole_number(*v);
  if (!whole) wrong_type(key, *v, "an integer");
  if (*whole < min || *whole > max) {
    not_allowed(key, *v,
                range("an integer", max == INT64_MAX ? fmt::format(">= {}", min)
                                                     : fmt::format("in {}..{}", min, max)));
  }
  return *whole;
}

double JsonFields::number(const std::string& key, double fallback) {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_number()) wrong_type(key, *v, "a number");
  return v->get<double>();
}

double JsonFields::number(const std::string& key) {
  const json& v = required(key);
  if (!v.is_number()) wrong_type(key, v, "a number");
  return v.get<double>();
}

double JsonFields::number(const std::string& key, double fallback, double min, double max,
                          bool max_open) {
  const double value = number(key, fallback);
  if (!has(key)) return value;
  if (!(value >= min && (max_open ? value < max : value <= max))) {
    not_allowed(key, at(key),
                range("a number", fmt::format("in [{}, {}{}", python_float(min), python_float(max),
                                              max_open ? ")" : "]")));
  }
  return value;
}

bool JsonFields::boolean(const std::string& key, bool fallback) {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(key, *v, "true or false");
  return v->get<bool>();
}

bool JsonFields::boolean(const std::string& key) {
  const json& v = required(key);
  if (!v.is_boolean()) wrong_type(key, v, "true or false");
  return v.get<bool>();
}

std::string JsonFields::string(const std::string& key, const std::string& fallback) {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_string()) wrong_type(key, *v, "a string");
  return v->get<std::string>();
}

std::string JsonFields::string(const std::string& key) {
  const json& v = required(key);
  if (!v.is_string()) wrong_type(key, v, "a string");
  return v.get<std::string>();
}

std::string JsonFields::choice(const std::string& key, const std::string& fallback,
                               const std::vector<std::string>& allowed) {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_string() ||
      std::find(allowed.begin(), allowed.end(), v->get<std::string>()) == allowed.end()) {
    not_allowed(key, *v,
                fmt::format("{}{}", style_ == Style::kOptions ? "allowed: " : "one of ",
                            fmt::join(allowed, ", ")));
  }
  return v->get<std::string>();
}

std::vector<int64_t> JsonFields::integers(const std::string& key,
                                          const std::vector<int64_t>& fallback, int64_t min) {
  const json* v = find(key);
  if (!v) return fallback;
  const json list = v->is_array() ? *v : json::array({*v});
  std::vector<int64_t> out;
  for (const auto& item : list) {
    if (!item.is_number_integer() || item.get<int64_t>() < min) {
      wrong_type(key, *v, fmt::format("a list of integers >= {}", min));
    }
    out.push_back(item.get<int64_t>());
  }
  return out;
}

std::vector<std::string> JsonFields::strings(const std::string& key,
                                             const std::vector<std::string>& fallback) {
  const json* v = find(key);
  if (!v) return fallback;
  const json list = v->is_array() ? *v : json::array({*v});
  std::vector<std::string> out;
  for (const auto& item : list) {
    if (!item.is_string()) wrong_type(key, *v, "a string or a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<int64_t> JsonFields::ids(const std::string& key) {
  const json* v = find(key);
  if (!v) return {};
  const json list = v->is_array() ? *v : json::array({*v});
  std::vector<int64_t> out;
  for (const auto& item : list) {
    if (!item.is_number_integer()) wrong_type(key, *v, "a token id or a list of them");
    out.push_back(item.get<int64_t>());
  }
  return out;
}

std::optional<std::string> JsonFields::unread() const {
  if (!object_->is_object()) return std::nullopt;
  for (const auto& item : object_->items()) {
    if (std::find(known_.begin(), known_.end(), item.key()) == known_.end()) return item.key();
  }
  return std::nullopt;
}

void JsonFields::finish() const {
  const std::optional<std::string> key = unread();
  if (!key) return;
  const std::string near = nearest(*key, known_);
  const std::string what = style_ == Style::kOptions
                               ? fmt::format("unknown option '{}' for {}", *key, whose_)
                               : fmt::format("unknown field '{}'", *key);
  const std::string known =
      known_.empty() ? "it takes none" : fmt::format("known: {}", fmt::join(known_, ", "));
  throw InputError(fmt::format("{}: {} ({}{})", source_, what,
                               near.empty() ? "" : fmt::format("did you mean '{}'? ", near),
                               known));
}

}  // namespace trainer::base
