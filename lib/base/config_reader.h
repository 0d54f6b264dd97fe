// ConfigReader: reads one model's model_config or one data set's dataset_config (a JSON object)
// option by option, with defaults, type and range checks, and an error for any option left unread
// that names the nearest known one, as unknown arguments do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::base {

class ConfigReader {
 public:
  // `what`: "model_config" or "dataset_config"; `whose`: the model or data set name. Throws
  // InputError when `config` is neither an object nor null.
  ConfigReader(std::string what, std::string whose, const nlohmann::ordered_json& config);

  // Each returns the option's value, or `fallback` when absent (null counts as absent), and throws
  // InputError naming `what`, the option, its value and what is allowed.
  int64_t integer(const std::string& name, int64_t fallback, int64_t min = INT64_MIN,
                  int64_t max = INT64_MAX);
  // In [min, max], or [min, max) with max_open.
  double number(const std::string& name, double fallback, double min, double max,
                bool max_open = false);
  bool boolean(const std::string& name, bool fallback);
  std::string string(const std::string& name, const std::string& fallback);
  // One of `allowed`.
  std::string choice(const std::string& name, const std::string& fallback,
                     const std::vector<std::string>& allowed);
  // A list of integers, each >= min (a single integer is a list of one).
  std::vector<int64_t> integers(const std::string& name, const std::vector<int64_t>& fallback,
                                int64_t min = INT64_MIN);
  // A list of strings (a single string is a list of one).
  std::vector<std::string> strings(const std::string& name,
                                   const std::vector<std::string>& fallback);
  bool has(const std::string& name) const;

  // Throws InputError for the first option no call above read: "model_config: unknown option
  // 'n_layers' for gpt (did you mean 'n_layer'? known: ...)".
  void finish() const;

 private:
  // The option's value, recording it as read; nullptr when absent.
  const nlohmann::ordered_json* find(const std::string& name);
  [[noreturn]] void fail(const std::string& name, const nlohmann::ordered_json& value,
                         const std::string& allowed) const;

  std::string what_, whose_;
  nlohmann::ordered_json config_;
  std::vector<std::string> known_;
};

}  // namespace trainer::base
