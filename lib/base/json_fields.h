// Typed reads of a JSON object's fields (config.json, adapter_config.json), each error one line
// naming the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"

namespace trainer::base {

// Reads a JSON object's fields one by one, naming the file and the field in every error.
class JsonFields {
 public:
  JsonFields(const nlohmann::ordered_json& j, std::string source)
      : j_(j), source_(std::move(source)) {}

  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw InputError(fmt::format("{}: {} {}", source_, key, problem));
  }

  int64_t positive(const std::string& key, int64_t fallback) const {
    if (!has(key)) {
      if (fallback > 0) return fallback;
      fail(key, "is missing (a positive integer)");
    }
    const nlohmann::ordered_json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 1) {
      fail(key, fmt::format("{} is not allowed (a positive integer)", shown(v)));
    }
    return v.get<int64_t>();
  }
  double number(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::ordered_json& v = j_.at(key);
    if (!v.is_number()) fail(key, fmt::format("{} is not a number", shown(v)));
    return v.get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::ordered_json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, fmt::format("{} is not true or false", shown(v)));
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::ordered_json& v = j_.at(key);
    if (!v.is_string()) fail(key, fmt::format("{} is not a string", shown(v)));
    return v.get<std::string>();
  }
  // One id or a list of ids ([] when absent).
  std::vector<int64_t> ids(const std::string& key) const {
    if (!has(key)) return {};
    const nlohmann::ordered_json& v = j_.at(key);
    std::vector<int64_t> out;
    if (v.is_number_integer()) return {v.get<int64_t>()};
    if (v.is_array()) {
      for (const auto& e : v) {
        if (!e.is_number_integer()) break;
        out.push_back(e.get<int64_t>());
      }
      if (out.size() == v.size()) return out;
    }
    fail(key, fmt::format("{} is not a token id or a list of them", shown(v)));
  }

  // A list of strings, or one string as a one-item list; {} when absent.
  std::vector<std::string> strings(const std::string& key) const {
    if (!has(key)) return {};
    const nlohmann::ordered_json& v = j_.at(key);
    if (v.is_string()) return {v.get<std::string>()};
    std::vector<std::string> out;
    if (v.is_array()) {
      for (const auto& e : v) {
        if (!e.is_string()) break;
        out.push_back(e.get<std::string>());
      }
      if (out.size() == v.size()) return out;
    }
    fail(key, fmt::format("{} is not a string or a list of strings", shown(v)));
  }
  const nlohmann::ordered_json& at(const std::string& key) const { return j_.at(key); }

 private:
  const nlohmann::ordered_json& j_;
  std::string source_;
};

}  // namespace trainer::base
