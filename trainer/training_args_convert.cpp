// The arguments' conversions: JSON to each field type with a type check naming the key,
// command-line text to JSON as HfArgumentParser reads it (Python's numbers, True/False/None), and
// the Spec of each row of training_args_table.h.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "trainer/training_args_specs.h"

namespace trainer::args {
namespace {

using json = nlohmann::ordered_json;
using base::a_type;
using base::shown;

[[noreturn]] void wrong_type(const std::string& key, const json& value, const char* expected) {
  if (value.is_null())
    throw InputError(fmt::format("argument {}: null, expected {}", key, expected));
  throw InputError(fmt::format("argument {}: {} is {}, expected {}", key, shown(value),
                               a_type(value), expected));
}

// JSON -> field value, with a type check that names the key.
template <typename T>
struct Convert;

template <>
struct Convert<bool> {
  static bool from(const std::string& key, const json& v) {
    if (!v.is_boolean()) wrong_type(key, v, "true or false");
    return v.get<bool>();
  }
};
template <>
struct Convert<int64_t> {
  static int64_t from(const std::string& key, const json& v) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) {
      throw InputError(
          fmt::format("argument {}: {} is out of range (an integer up to 2^63-1)", key, shown(v)));
    }
    if (std::optional<int64_t> whole = base::whole_number(v)) return *whole;
    wrong_type(key, v, "an integer");
  }
};
template <>
struct Convert<double> {
  static double from(const std::string& key, const json& v) {
    if (!v.is_number()) wrong_type(key, v, "a number");
    return v.get<double>();
  }
};
template <>
struct Convert<std::string> {
  static std::string from(const std::string& key, const json& v) {
    if (!v.is_string()) wrong_type(key, v, "a string");
    // A command-line value can hold any bytes; training_args.json (JSON) only text.
    try {
      (void)v.dump();
    } catch (const json::type_error&) {
      throw InputError(fmt::format("argument {}: {} is not valid UTF-8 text", key, shown(v)));
    }
    return v.get<std::string>();
  }
};
template <>
struct Convert<json> {
  static json from(const std::string& key, const json& v) {
    // GRPO's reward_funcs: a list, or one entry (a name, a call, an object; checked by the run).
    if (key == "reward_funcs") return v.is_null() ? json::array() : v;
    if (v.is_null()) return json::object();
    if (!v.is_object()) wrong_type(key, v, "a JSON object of options, e.g. {\"dropout\": 0.1}");
    return v;
  }
};
template <typename T>
struct Convert<std::optional<T>> {
  static std::optional<T> from(const std::string& key, const json& v) {
    if (v.is_null()) return std::nullopt;
    return Convert<T>::from(key, v);
  }
};
template <>
struct Convert<std::vector<std::string>> {
  static std::vector<std::string> from(const std::string& key, const json& v) {
    if (v.is_null()) return {};
    if (v.is_string()) return {v.get<std::string>()};
    if (!v.is_array()) wrong_type(key, v, "a string or a list of strings");
    std::vector<std::string> out;
    for (const auto& item : v) out.push_back(Convert<std::string>::from(key, item));
    return out;
  }
};

template <>
struct Convert<std::vector<double>> {
  static std::vector<double> from(const std::string& key, const json& v) {
    if (v.is_null()) return {};
    if (v.is_number()) return {v.get<double>()};
    if (!v.is_array()) wrong_type(key, v, "a number or a list of numbers");
    std::vector<double> out;
    for (const auto& item : v) out.push_back(Convert<double>::from(key, item));
    return out;
  }
};

// A number as Python's int() or float() reads it ("01", "+1e-3", ".5", "1_000", " 2 ", "inf",
// "1e999" as inf), or nothing; an integer past int64 is an error that quotes it where an integer
// is wanted, and a float where a number is.
std::optional<json> python_number(const std::string& typed, bool integer_wanted) {
  const std::string text = base::trimmed(typed, " \t\n");
  if (text.empty()) return std::nullopt;
  std::string digits;  // without the underscores Python allows between digits
  for (size_t i = 0; i < text.size(); ++i) {
    bool between_digits = i > 0 && i + 1 < text.size() &&
                          std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                          std::isdigit(static_cast<unsigned char>(text[i + 1]));
    if (text[i] == '_' && between_digits) continue;
    digits += text[i];
  }
  if (digits.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  if (digits.find_first_not_of("+-0123456789") == std::string::npos &&
      (integer_wanted || digits.size() < 19)) {
    long long value = std::strtoll(digits.c_str(), &end, 10);
    if (*end != '\0' || end == digits.c_str()) return std::nullopt;
    if (errno == ERANGE) {
      throw InputError(fmt::format("{} is out of range (an integer up to 2^63-1)", typed));
    }
    return json(static_cast<int64_t>(value));
  }
  double value = std::strtod(digits.c_str(), &end);
  if (*end != '\0' || end == digits.c_str()) return std::nullopt;
  return json(value);
}

// Command-line text -> JSON for a field of type T: strings stay text, the rest is read as JSON
// (with Python's True/False/None accepted, as HfArgumentParser takes them).
template <typename T>
json text_to_json(const std::string& text) {
  constexpr bool is_string =
      std::is_same_v<T, std::string> || std::is_same_v<T, std::optional<std::string>>;
  if constexpr (is_string) {
    if (std::is_same_v<T, std::optional<std::string>> && (text == "None" || text == "null"))
      return nullptr;
    return text;
  }
  if constexpr (std::is_same_v<T, std::vector<double>>) {
    // "0.8,0.2" as well as "[0.8, 0.2]"
    if (text.find(',') != std::string::npos && text.find('[') == std::string::npos) {
      json list = json::array();
      size_t start = 0;
      while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        const std::string item = text.substr(start, comma - start);
        auto number = python_number(item, false);
        list.push_back(number ? *number : json(item));
        start = comma + 1;
      }
      return list;
    }
  }
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!text.empty() && text.front() == '[') {
      base::check_json_depth(text, base::shown_text(text));
      json parsed = json::parse(text, nullptr, false);
      if (!parsed.is_discarded()) return parsed;
    }
    json list = json::array();
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      if (comma > start) list.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
    return list;
  }
  if (text == "True" || text == "true") return true;
  if (text == "False" || text == "false") return false;
  if (text == "None" || text == "null") return nullptr;
  constexpr bool is_number =
      std::is_same_v<T, int64_t> || std::is_same_v<T, std::optional<int64_t>> ||
      std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>> ||
      std::is_same_v<T, std::vector<double>>;
  if constexpr (is_number) {
    constexpr bool integer_wanted =
        std::is_same_v<T, int64_t> || std::is_same_v<T, std::optional<int64_t>>;
    if (auto number = python_number(text, integer_wanted)) return *number;
  }
  base::check_json_depth(text, base::shown_text(text));
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  // Text that means to be a JSON object or list and is not one says why, not "a string".
  const std::string start = base::trimmed(text, " \t\n");
  if (parsed.is_discarded() && !start.empty() && (start[0] == '{' || start[0] == '[')) {
    try {
      [[maybe_unused]] const json again = json::parse(text);  // throws, saying where and why
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{} is not valid JSON: {}", base::shown_text(text),
                                   base::json_error_text(e)));
    }
  }
  if (parsed.is_discarded()) return text;  // reported as a wrong type, with the text quoted
  return parsed;
}

// What a value of type T must be, in the words of the error messages.
template <typename T>
const char* kind_of() {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::optional<bool>>) {
    return "true or false";
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, std::optional<int64_t>>) {
    return "an integer";
  } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>) {
    return "a number";
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return "a string or a list of strings";
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    return "a number or a list of numbers";
  } else if constexpr (std::is_same_v<T, json>) {
    return kJsonObjectKind;
  } else {
    return "a string";
  }
}

template <typename T>
json to_json_value(const T& v) {
  if constexpr (std::is_same_v<T, std::optional<std::string>> ||
                std::is_same_v<T, std::optional<int64_t>> ||
                std::is_same_v<T, std::optional<double>> ||
                std::is_same_v<T, std::optional<bool>>) {
    return v ? json(*v) : json(nullptr);
  } else {
    return json(v);
  }
}

// The Spec of a row of the table.
template <typename T>
Spec make_spec(std::string name, std::string help,
               std::function<json(const TrainingArguments&)> get,
               std::function<void(TrainingArguments&, const T&)> set) {
  Spec spec;
  spec.name = name;
  spec.help = std::move(help);
  spec.kind = kind_of<T>();
  spec.get = std::move(get);
  spec.set = [name, set](TrainingArguments& a, const json& v) {
    set(a, Convert<T>::from(name, v));
  };
  spec.parse_text = [](const std::string& s) { return text_to_json<T>(s); };
  return spec;
}

// resume_from_checkpoint reads true (or a word for it) as "the newest checkpoint", false and null
// as none, and writes "true" back as true.
void read_resume_from_checkpoint(Spec& spec) {
  spec.kind = "a path, or true";
  spec.get = [](const TrainingArguments& a) -> json {
    const auto& v = a.resume_from_checkpoint();
    if (!v) return nullptr;
    return *v == "true" ? json(true) : json(*v);
  };
  spec.set = [](TrainingArguments& a, const json& v) {
    std::optional<std::string> value;
    if (v.is_boolean()) {
      if (v.get<bool>()) value = "true";
    } else {
      value = Convert<std::optional<std::string>>::from("resume_from_checkpoint", v);
      std::string word = value.value_or("");
      std::transform(word.begin(), word.end(), word.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (word == "true") value = "true";
      if (word == "false") value.reset();
      if (value && value->empty()) {
        throw InputError(
            "argument resume_from_checkpoint: \"\" is not allowed (a checkpoint folder, or true "
            "for "
            "the newest in output_dir)");
      }
    }
    a.resume_from_checkpoint(value);
  };
  spec.parse_text = [](const std::string& s) -> json {
    if (s == "None" || s == "null") return nullptr;
    return s;
  };
}

// pad_to_multiple_of reads TRL's "auto" (and "None") as null: what "auto" means off Neuron.
void read_pad_to_multiple_of(Spec& spec) {
  spec.kind = "a positive integer, \"auto\" or null";
  auto set = spec.set;
  spec.set = [set](TrainingArguments& a, const json& v) {
    if (v.is_string() && (v == "auto" || v == "None" || v == "none" || v == "null")) {
      a.pad_to_multiple_of(std::nullopt);
      return;
    }
    set(a, v);
  };
  auto parse_text = spec.parse_text;
  spec.parse_text = [parse_text](const std::string& s) -> json {
    if (s == "auto" || s == "None" || s == "none" || s == "null") return nullptr;
    return parse_text(s);
  };
}

// include_num_input_tokens_seen reads Transformers' older true and false as all and no.
void read_tokens_seen(Spec& spec) {
  spec.kind = "no, all, non_padding, true or false";
  auto set = spec.set;
  spec.set = [set](TrainingArguments& a, const json& v) {
    if (v.is_boolean()) {
      a.include_num_input_tokens_seen(v.get<bool>() ? "all" : "no");
      return;
    }
    set(a, v);
  };
  spec.parse_text = [](const std::string& s) -> json {
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
    return s;
  };
}

// deepspeed reads a DeepSpeed config's path (a string) or the object itself; null (and "") is
// none. On the command line, text that opens with "{" is the object.
void read_deepspeed(Spec& spec) {
  spec.kind = kPathOrJsonObjectKind;
  spec.set = [](TrainingArguments& a, const json& v) {
    if (v.is_null() || (v.is_string() && v.get<std::string>().empty())) {
      a.deepspeed(json());
    } else if (v.is_object()) {
      a.deepspeed(v);
    } else if (v.is_string()) {
      a.deepspeed(json(Convert<std::string>::from("deepspeed", v)));
    } else {
      wrong_type("deepspeed", v, "a DeepSpeed JSON file's path or its object");
    }
  };
  spec.parse_text = [](const std::string& s) -> json {
    if (s == "None" || s == "null") return nullptr;
    const std::string start = base::trimmed(s, " \t\n");
    if (!start.empty() && start[0] == '{') return text_to_json<json>(s);
    return s;
  };
}

// debug is a string of options separated by spaces, as Transformers reads it, or a list.
void read_debug(Spec& spec) {
  auto set = spec.set;
  spec.set = [set](TrainingArguments& a, const json& v) {
    if (!v.is_string()) return set(a, v);
    std::vector<std::string> words;
    std::string word;
    for (char c : v.get<std::string>() + " ") {
      if (c == ' ' || c == '\t' || c == ',') {
        if (!word.empty()) words.push_back(word);
        word.clear();
      } else {
        word += c;
      }
    }
    a.debug(words);
  };
  spec.parse_text = [](const std::string& s) -> json { return s; };
}

// dataset_config also reads text: TRL's name of a data set's configuration (`trainer sft` and
// `trainer dpo`; validate() refuses it elsewhere).
void read_dataset_config(Spec& spec) {
  auto set = spec.set;
  spec.set = [set](TrainingArguments& a, const json& v) {
    if (!v.is_string()) return set(a, v);
    Convert<std::string>::from("dataset_config", v);  // UTF-8
    a.dataset_config(v);
  };
}

// TRL's ModelConfig and PEFT take null for these (None): torch_dtype's null is auto (as
// Transformers 5's from_pretrained), a list's null is empty.
void read_null_as(Spec& spec, json instead) {
  auto set = spec.set;
  spec.set = [set, instead](TrainingArguments& a, const json& v) {
    set(a, v.is_null() ? instead : v);
  };
}

const Spec* find_spec(const std::string& name) {
  for (const auto& s : specs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

const std::vector<Spec>& specs() {
  static const std::vector<Spec> table = [] {
    std::vector<Spec> rows = {
#define TRAINER_ARGUMENT_SPEC(T, name, default_value, help)                               \
  make_spec<T>(                                                                           \
      #name, help, [](const TrainingArguments& a) { return to_json_value<T>(a.name()); }, \
      [](TrainingArguments& a, const T& v) { a.name(v); }),
        TRAINER_ARGUMENTS(TRAINER_ARGUMENT_SPEC) TRAINER_SFT_ARGUMENTS(TRAINER_ARGUMENT_SPEC)
            TRAINER_DPO_ARGUMENTS(TRAINER_ARGUMENT_SPEC)
                TRAINER_GRPO_ARGUMENTS(TRAINER_ARGUMENT_SPEC)
                    TRAINER_REWARD_ARGUMENTS(TRAINER_ARGUMENT_SPEC)
                        TRAINER_RLOO_ARGUMENTS(TRAINER_ARGUMENT_SPEC)
#undef TRAINER_ARGUMENT_SPEC
    };
    for (Spec& spec : rows) {
      if (spec.name == "resume_from_checkpoint") read_resume_from_checkpoint(spec);
      if (spec.name == "pad_to_multiple_of") read_pad_to_multiple_of(spec);
      if (spec.name == "include_num_input_tokens_seen") read_tokens_seen(spec);
      if (spec.name == "debug") read_debug(spec);
      if (spec.name == "output_dir" || spec.name == "disable_tqdm" || spec.name == "fsdp") {
        // Transformers' type is optional, the default here a value (output_dir's
        // "trainer_output", disable_tqdm's false, fsdp's ""): null is that default.
        read_null_as(spec, spec.get(TrainingArguments()));
      }
      if (spec.name == "deepspeed") read_deepspeed(spec);
      if (spec.name == "dataset_config") read_dataset_config(spec);
      if (spec.name == "torch_dtype") read_null_as(spec, "auto");
      if (spec.name == "target_modules" || spec.name == "modules_to_save" ||
          spec.name == "lora_target_parameters") {
        read_null_as(spec, json::array());
      }
    }
    return rows;
  }();
  return table;
}

const Spec& lookup(const std::string& key) {
  for (const auto& [old_name, name] : TrainingArguments::other_names()) {
    if (key == old_name) return *find_spec(name);
  }
  if (key.empty()) throw InputError("an empty name \"\" is not an argument");
  if (const Spec* s = find_spec(key)) return *s;
  TrainingArguments::reject_unsupported_key(key);
  std::vector<std::string> names;
  for (const auto& s : specs()) names.push_back(s.name);
  std::string near = base::nearest(key, names);
  throw InputError(fmt::format(
      "unknown argument {}{}", key,
      near.empty() ? " (see trainer train --help)" : fmt::format(" (did you mean {}?)", near)));
}

}  // namespace trainer::args
