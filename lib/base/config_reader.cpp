// ConfigReader: option-by-option reading of model_config and dataset_config with one-line errors.
#include "lib/base/config_reader.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer::base {

using json = nlohmann::ordered_json;

ConfigReader::ConfigReader(std::string what, std::string whose, const json& config)
    : what_(std::move(what)), whose_(std::move(whose)), config_(config) {
  if (config_.is_null()) config_ = json::object();
  if (!config_.is_object()) {
    throw InputError(fmt::format("{}: {} is not a JSON object (options for {}, e.g. {{}})", what_,
                                 shown(config_), whose_));
  }
}

bool ConfigReader::has(const std::string& name) const {
  auto it = config_.find(name);
  return it != config_.end() && !it->is_null();
}

const json* ConfigReader::find(const std::string& name) {
  known_.push_back(name);
  auto it = config_.find(name);
  if (it == config_.end() || it->is_null()) return nullptr;
  return &*it;
}

void ConfigReader::fail(const std::string& name, const json& value,
                        const std::string& allowed) const {
  throw InputError(
      fmt::format("{}: option {} of {} is {}; {}", what_, name, whose_, shown(value), allowed));
}

int64_t ConfigReader::integer(const std::string& name, int64_t fallback, int64_t min, int64_t max) {
  const json* v = find(name);
  if (!v) return fallback;
  const std::optional<int64_t> whole = whole_number(*v);
  if (!whole) fail(name, *v, "expected an integer");
  const int64_t value = *whole;
  if (value < min || value > max) {
    fail(name, *v,
         max == INT64_MAX ? fmt::format("must be >= {}", min)
                          : fmt::format("must be in {}..{}", min, max));
  }
  return value;
}

double ConfigReader::number(const std::string& name, double fallback, double min, double max,
                            bool max_open) {
  const json* v = find(name);
  if (!v) return fallback;
  if (!v->is_number()) fail(name, *v, "expected a number");
  double value = v->get<double>();
  if (!(value >= min && (max_open ? value < max : value <= max))) {
    fail(name, *v,
         fmt::format("must be in [{}, {}{}", base::python_float(min), base::python_float(max),
                     max_open ? ")" : "]"));
  }
  return value;
}

bool ConfigReader::boolean(const std::string& name, bool fallback) {
  const json* v = find(name);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(name, *v, "expected true or false");
  return v->get<bool>();
}

std::string ConfigReader::string(const std::string& name, const std::string& fallback) {
  const json* v = find(name);
  if (!v) return fallback;
  if (!v->is_string()) fail(name, *v, "expected a string");
  return v->get<std::string>();
}

std::string ConfigReader::choice(const std::string& name, const std::string& fallback,
                                 const std::vector<std::string>& allowed) {
  const json* v = find(name);
  if (!v) return fallback;
  if (!v->is_string() ||
      std::find(allowed.begin(), allowed.end(), v->get<std::string>()) == allowed.end()) {
    fail(name, *v, fmt::format("allowed: {}", fmt::join(allowed, ", ")));
  }
  return v->get<std::string>();
}

std::vector<int64_t> ConfigReader::integers(const std::string& name,
                                            const std::vector<int64_t>& fallback, int64_t min) {
  const json* v = find(name);
  if (!v) return fallback;
  json list = v->is_array() ? *v : json::array({*v});
  std::vector<int64_t> out;
  for (const auto& item : list) {
    if (!item.is_number_integer() || item.get<int64_t>() < min) {
      fail(name, *v, fmt::format("expected a list of integers >= {}", min));
    }
    out.push_back(item.get<int64_t>());
  }
  return out;
}

std::vector<std::string> ConfigReader::strings(const std::string& name,
                                               const std::vector<std::string>& fallback) {
  const json* v = find(name);
  if (!v) return fallback;
  json list = v->is_array() ? *v : json::array({*v});
  std::vector<std::string> out;
  for (const auto& item : list) {
    if (!item.is_string()) fail(name, *v, "expected a string or a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

void ConfigReader::finish() const {
  for (const auto& [key, value] : config_.items()) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::string near = base::nearest(key, known_);
    std::string options =
        known_.empty() ? "it takes none" : fmt::format("known: {}", fmt::join(known_, ", "));
    throw InputError(fmt::format("{}: unknown option '{}' for {} ({}{})", what_, key, whose_,
                                 near.empty() ? "" : fmt::format("did you mean '{}'? ", near),
                                 options));
  }
}

}  // namespace trainer::base
