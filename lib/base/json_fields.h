// JsonFields: the one reader of a JSON object's fields, typed and checked, each error one line
// naming the file or option set and the field: config.json, adapter_config.json,
// generation_config.json, trainer_state.json, a checkpoint's manifest, model_config and
// dataset_config (which also refuse an option left unread, naming the nearest known one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::base {

class JsonFields {
 public:
  // How an error names the field and its value; every style words what the caller passes
  // alike ("<field> <problem>" from fail), and these differ in the readers' own errors:
  enum class Style {
    // config.json, adapter_config.json: "<source>: <key> <value> is not a number", a value out
    // of range "<source>: <key> <value> is not allowed (an integer >= 1)".
    kFile,
    // generation_config.json: every problem "<source>: <key> <value> is not allowed (a number)".
    kNotAllowed,
    // trainer_state.json, a manifest: "<source>: \"<key>\" is not a number", the value unsaid; a
    // required field that is missing "<source>: no \"<key>\"".
    kQuotedKey,
    // model_config, dataset_config (made by options()): "<source>: option <key> of <whose> is
    // <value>; expected a number", out of range "...; must be in 1..8".
    kOptions,
  };

  // Reads `object` (which must outlive the reader; a non-object has no fields), `source` naming
  // it in errors.
  JsonFields(const nlohmann::ordered_json& object, std::string source, Style style = Style::kFile);

  // The options of model_config or dataset_config: `what` ("model_config") names them, `whose`
  // the model or data set; null is no options. Throws InputError "<what>: <value> is not a JSON
  // object (options for <whose>, e.g. {})" for anything else.
  static JsonFields options(std::string what, std::string whose,
                            const nlohmann::ordered_json& config);

  // The key is there and not null (a null field is an absent one).
  bool has(const std::string& key) const;
  // The field's value as it is (it must be there); not counted as read.
  const nlohmann::ordered_json& at(const std::string& key) const;
  // The field's value, null included; a missing one is an error ("<source>: no \"<key>\"" in
  // kQuotedKey, "<field> is missing" otherwise).
  const nlohmann::ordered_json& required(const std::string& key);

  // The errors, each an InputError of one line. fail: "<field> <problem>" ("<source>: <key>
  // is odd"); fail_if: the same when `condition` holds; fail_object: "<source>: <problem>", about
  // the object as a whole; not_allowed: `value` of the field is outside what is allowed
  // (`allowed`: "an integer >= 0"); check: the field's own value is, unless `ok`; wrong_type:
  // `value` is not of `kind` ("a number").
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  void fail_if(bool condition, const std::string& key, const std::string& problem) const;
  [[noreturn]] void fail_object(const std::string& problem) const;
  [[noreturn]] void not_allowed(const std::string& key, const nlohmann::ordered_json& value,
                                const std::string& allowed) const;
  void check(bool ok, const std::string& key, const std::string& allowed) const;
  [[noreturn]] void wrong_type(const std::string& key, const nlohmann::ordered_json& value,
                               const std::string& kind) const;

  // Typed reads: each returns the field's value, or `fallback` when it is absent or null, and
  // throws for a value of another type or out of range. The overloads without a fallback read a
  // required field (null is then of the wrong type).
  //
  // A JSON integer >= 1; absent with no positive fallback: "<field> is missing (a positive
  // integer)".
  int64_t positive(const std::string& key, int64_t fallback);
  // A whole number (an integer, or a float without a fraction: 1e3) in [min, max].
  int64_t integer(const std::string& key, int64_t fallback, int64_t min = INT64_MIN,
                  int64_t max = INT64_MAX);
  double number(const std::string& key, double fallback);
  double number(const std::string& key);
  // In [min, max], or [min, max) with max_open.
  double number(const std::string& key, double fallback, double min, double max,
                bool max_open = false);
  bool boolean(const std::string& key, bool fallback);
  bool boolean(const std::string& key);
  std::string string(const std::string& key, const std::string& fallback);
  std::string string(const std::string& key);
  // One of `allowed`.
  std::string choice(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& allowed);
  // A list of JSON integers, each >= min (one integer is a list of one).
  std::vector<int64_t> integers(const std::string& key, const std::vector<int64_t>& fallback,
                                int64_t min = INT64_MIN);
  // A list of strings (one string is a list of one).
  std::vector<std::string> strings(const std::string& key,
                                   const std::vector<std::string>& fallback = {});
  // One token id or a list of them, JSON integers ([] when absent).
  std::vector<int64_t> ids(const std::string& key);

  // The fields read so far, typed or required, are known: the first key of the object that is
  // not (in the object's order), if any.
  std::optional<std::string> unread() const;
  // Throws InputError for the first key unread: "model_config: unknown option 'n_layers' for
  // gpt (did you mean 'n_layer'? known: ...)", or "(it takes none)" when nothing was read.
  void finish() const;

 private:
  // The field's value, counting it as read; nullptr when it is absent or null.
  const nlohmann::ordered_json* find(const std::string& key);
  // "<source>: <key>", "<source>: \"<key>\"" or "<source>: option <key> of <whose>".
  std::string field(const std::string& key) const;
  // What a range allows: "an integer >= 1" ("must be >= 1" in kOptions).
  std::string range(const std::string& kind, const std::string& bounds) const;

  const nlohmann::ordered_json* object_;
  std::string source_, whose_;
  Style style_;
  std::vector<std::string> known_;
};

}  // namespace trainer::base
