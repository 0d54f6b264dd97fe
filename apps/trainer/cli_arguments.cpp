// The `--name value` / `--name=value` reader of train, evaluate and predict (no CLI11 here).
#include "apps/trainer/cli_arguments.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "trainer/training_args.h"

namespace trainer::cli {

std::string bool_word(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"yes", "true", "t", "y", "1"}) {
    if (text == word) return "true";
  }
  for (const char* word : {"no", "false", "f", "n", "0"}) {
    if (text == word) return "false";
  }
  return "";
}

bool looks_like_option(const std::string& token) {
  if (token.size() < 2 || token[0] != '-') return false;
  char* end = nullptr;
  std::strtod(token.c_str(), &end);
  return *end != '\0';
}

namespace {

// The value of `--name` at tokens[i] (`equals`: where its '=' is, or npos): after '=', the next
// token, or "true" for a flag given alone; a flag's value as "true" or "false". Moves `i` past
// the value it takes.
std::string value_of(const std::string& name, const TrainingArguments::Description& d,
                     const std::vector<std::string>& tokens, size_t& i, size_t equals) {
  const std::string& token = tokens[i];
  std::string value;
  if (equals != std::string::npos) {
    value = token.substr(equals + 1);
  } else if (d.is_flag()) {
    // --do_eval alone means true; a word that follows is its value, as argparse takes it
    // (nargs="?"), and must be a boolean: never quietly the CONFIG.json.
    value = i + 1 < tokens.size() && !looks_like_option(tokens[i + 1]) ? tokens[++i] : "true";
  } else if (i + 1 >= tokens.size()) {
    throw InputError(
        fmt::format("argument --{}: no value given (expected {} after it)", name, d.kind));
  } else if (looks_like_option(tokens[i + 1])) {
    throw InputError(fmt::format(
        "argument --{}: no value given (expected {}; it is followed by {}, an option; write "
        "--{}=VALUE for a value that begins with -)",
        name, d.kind, tokens[i + 1], name));
  } else {
    value = tokens[++i];
  }
  if (value.empty()) {
    throw InputError(fmt::format("argument --{}: the value is empty (expected {})", name, d.kind));
  }
  if (d.is_flag()) {
    std::string word = bool_word(value);
    if (word.empty()) {
      throw InputError(fmt::format(
          "argument --{}: '{}' is not true or false (yes/no, true/false, t/f, y/n, 1/0; a flag "
          "alone means true)",
          name, value));
    }
    value = word;
  }
  return value;
}

}  // namespace

void read_training_arguments(const std::vector<std::string>& tokens, Command& command) {
  std::map<std::string, TrainingArguments::Description> known;
  std::vector<std::string> names;
  for (const auto& d : TrainingArguments::describe()) {
    known[d.name] = d;
    names.push_back(d.name);
  }
  for (const auto& [old_name, name] : TrainingArguments::other_names()) {
    known[old_name] = known[name];
  }
  std::map<std::string, std::string> given;  // name as typed -> value
  auto take_config = [&command](const std::string& path) {
    if (!command.config.empty()) {
      throw InputError(
          fmt::format("unexpected argument '{}' (only one CONFIG (.json, .yaml) is taken; it was "
                      "'{}')",
                      path, command.config));
    }
    if (path.empty()) throw InputError("CONFIG is \"\" (give a file, or leave it out)");
    command.config = path;
  };
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    if (!looks_like_option(token)) {
      take_config(token);
      continue;
    }
    // TRL's parser takes the config file as `--config PATH`.
    if (token == "--config") {
      if (i + 1 >= tokens.size() || looks_like_option(tokens[i + 1])) {
        throw InputError("argument --config: no file given (expected a .yaml or .json file)");
      }
      take_config(tokens[++i]);
      continue;
    }
    if (token.rfind("--config=", 0) == 0) {
      take_config(token.substr(9));
      continue;
    }
    if (token.rfind("--", 0) != 0) {
      throw InputError(
          fmt::format("unknown argument {} (arguments are --name value; see trainer "
                      "{} --help)",
                      token, command.name));
    }
    size_t equals = token.find('=');
    std::string name =
        token.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    auto it = known.find(name);
    if (it == known.end()) {
      TrainingArguments::reject_unsupported_key(name);
      std::string near = base::nearest(name, names);
      throw InputError(fmt::format("unknown argument --{}{}", name,
                                   near.empty() ? " (see trainer " + command.name + " --help)"
                                                : fmt::format(" (did you mean --{}?)", near)));
    }
    const TrainingArguments::Description& d = it->second;
    const std::string value = value_of(name, d, tokens, i, equals);
    if (auto previous = given.find(name); previous != given.end()) {
      throw InputError(fmt::format("argument --{} is given twice ({} and {}); give it once", name,
                                   previous->second, value));
    }
    given[name] = value;
    command.overrides.emplace_back(d.name, value);
  }
  for (const auto& [old_name, name] : TrainingArguments::other_names()) {
    auto now = given.find(name);
    auto old = given.find(old_name);
    if (now != given.end() && old != given.end() && now->second != old->second) {
      const bool old_one = old_name == "evaluation_strategy" || old_name == "max_seq_length";
      throw InputError(fmt::format("argument --{} {} and {} --{} {} disagree (give one)", name,
                                   now->second, old_one ? "its old name" : "TRL's name", old_name,
                                   old->second));
    }
  }
}

// An option's text as a number in [low, high]: "--nproc-per-node abc" names the option.
double number_option(const std::string& option, const std::string& text, double low, double high,
                     bool integer, const std::string& allowed) {
  char* end = nullptr;
  errno = 0;
  double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  bool digits_only = text.find_first_not_of("0123456789") == std::string::npos;
  bool ok = !text.empty() && *end == '\0' && std::isfinite(value) && value >= low &&
            value <= high && (!integer || digits_only);
  if (!ok) throw InputError(fmt::format("{} {} is not allowed ({})", option, text, allowed));
  return value;
}

}  // namespace trainer::cli
