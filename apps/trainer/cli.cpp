// Command line of the `trainer` program: CLI11 for the subcommands' help and the launcher's
// options; train and evaluate read `--name value` / `--name=value` pairs themselves, so that a
// missing, empty or repeated value is an error naming the argument instead of a silent misread.
#include "apps/trainer/cli.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "trainer/training_args.h"

namespace trainer::cli {
namespace {

const std::vector<std::pair<std::string, std::string>> kCommands = {
    {"train", "Train a model and save it, its state and its metrics to output_dir."},
    {"evaluate", "Evaluate output_dir/model.safetensors on the eval dataset."},
    {"predict",
     "Predict with output_dir/model.safetensors on the eval dataset: predictions.npy, "
     "label_ids.npy and predict_results.json in output_dir (Trainer.predict)."},
    {"plot",
     "Draw the loss and each eval metric against step, from each OUTPUT_DIR's "
     "trainer_state.json, as an SVG and an HTML page around it (runs overlaid)."},
    {"env",
     "Print the versions and devices a bug report needs: trainer, LibTorch, CUDA, cuDNN, NCCL, "
     "Gloo, compiler, BLAS, oneDNN, threads (as accelerate env and transformers env)."},
    {"launch",
     "Start PROGRAM as N ranks of a distributed run, with torchrun's environment (RANK, "
     "WORLD_SIZE, ...)."},
    {"generate",
     "Sample text from a trained gpt run (OUTPUT_DIR's training_args.json and "
     "model.safetensors), seeded: prints the prompt and its continuation."}};

std::string arguments_table() {
  std::string out = "Training arguments (JSON keys of CONFIG, or --name value, or --name=value):\n";
  for (const auto& d : TrainingArguments::describe()) {
    out += fmt::format("  --{:<30} default {:<18} {}\n", d.name, d.default_json, d.help);
  }
  return out;
}

// A flag's value as HfArgumentParser's string_to_bool reads it (yes/no, true/false, t/f, y/n,
// 1/0, any case): "true", "false", or "" for anything else.
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

// A token that reads as a negative number is a value, not an option (--learning_rate -1).
bool looks_like_option(const std::string& token) {
  if (token.size() < 2 || token[0] != '-') return false;
  char* end = nullptr;
  std::strtod(token.c_str(), &end);
  return *end != '\0';
}

// train/evaluate: [CONFIG.json] and `--name value` pairs, each name once. A flag (a boolean
// argument) given alone means true; every other name needs a value.
void read_training_arguments(const std::vector<std::string>& tokens, Command& command) {
  std::map<std::string, TrainingArguments::Description> known;
  std::vector<std::string> names;
  for (const auto& d : TrainingArguments::describe()) {
    known[d.name] = d;
    names.push_back(d.name);
  }
  known["evaluation_strategy"] = known["eval_strategy"];
  std::map<std::string, std::string> given;  // name as typed -> value
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    if (!looks_like_option(token)) {
      if (!command.config.empty()) {
        throw InputError(
            fmt::format("unexpected argument '{}' (only one CONFIG.json is taken; it was '{}')",
                        token, command.config));
      }
      if (token.empty()) throw InputError("CONFIG.json is \"\" (give a file, or leave it out)");
      command.config = token;
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
      throw InputError(
          fmt::format("argument --{}: the value is empty (expected {})", name, d.kind));
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
    if (auto previous = given.find(name); previous != given.end()) {
      throw InputError(fmt::format("argument --{} is given twice ({} and {}); give it once", name,
                                   previous->second, value));
    }
    given[name] = value;
    command.overrides.emplace_back(d.name, value);
  }
  auto eval = given.find("eval_strategy");
  auto old = given.find("evaluation_strategy");
  if (eval != given.end() && old != given.end() && eval->second != old->second) {
    throw InputError(fmt::format(
        "argument --eval_strategy {} and its old name --evaluation_strategy {} disagree (give one)",
        eval->second, old->second));
  }
}

// A launcher option's text as a number in [low, high]: "--nproc-per-node abc" names the option.
double launch_number(const std::string& option, const std::string& text, double low, double high,
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

}  // namespace

std::optional<Command> parse_command_line(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Command command;
  std::vector<std::string> command_names;
  for (const auto& entry : kCommands) command_names.push_back(entry.first);
  if (!args.empty() && !looks_like_option(args[0])) {
    bool known = false;
    for (const auto& name : command_names) known = known || args[0] == name;
    if (!known) {
      std::string near = base::nearest(args[0], command_names);
      throw InputError(fmt::format("unknown command '{}'{} (commands: {})", args[0],
                                   near.empty() ? "" : fmt::format(": did you mean '{}'?", near),
                                   fmt::join(command_names, ", ")));
    }
  }
  bool wants_help = false;
  if (!args.empty() && (args[0] == "train" || args[0] == "evaluate" || args[0] == "predict")) {
    for (size_t i = 1; i < args.size(); ++i)
      wants_help = wants_help || args[i] == "--help" || args[i] == "-h";
    if (!wants_help) {
      command.name = args[0];
      read_training_arguments({args.begin() + 1, args.end()}, command);
      return command;
    }
  }

  // Help, and `trainer launch`, go through CLI11.
  CLI::App app{
      "trainer: train and evaluate models on LibTorch, as Transformers' Trainer does.\n"
      "  trainer train [CONFIG.json] [--name value ...]\n"
      "  trainer evaluate [CONFIG.json] [--name value ...]\n"
      "  trainer predict [CONFIG.json] [--name value ...]\n"
      "  trainer plot OUTPUT_DIR [OUTPUT_DIR ...] [-o FILE]\n"
      "  trainer generate OUTPUT_DIR [--prompt TEXT] [--max_new_tokens N] [--temperature T] "
      "[--top_k K] [--seed S]\n"
      "  trainer env\n"
      "  trainer launch [--nproc-per-node N ...] PROGRAM [ARGS...]",
      "trainer"};
  app.require_subcommand(1);
  for (const auto& [name, help] : kCommands) {
    if (name != "train" && name != "evaluate" && name != "predict") continue;
    CLI::App* sub = app.add_subcommand(name, help);
    sub->allow_extras();
    sub->add_option("config", command.config, "JSON file with one flat object of arguments");
    sub->footer("\n" + arguments_table());
  }
  auto help_of = [](const std::string& name) {
    for (const auto& entry : kCommands) {
      if (entry.first == name) return entry.second;
    }
    return std::string();
  };
  CLI::App* plot = app.add_subcommand("plot", help_of("plot"));
  plot->add_option("output_dirs", command.plot_dirs, "Output folders of training runs")
      ->type_name("OUTPUT_DIR");
  plot->add_option("-o,--output", command.plot_output,
                   "Where to write: FILE.svg and FILE.html beside it (or into a folder); "
                   "default plot.svg and plot.html here")
      ->type_name("FILE");
  CLI::App* generate = app.add_subcommand("generate", help_of("generate"));
  GenerateOptions& go = command.generate;
  std::map<std::string, std::string> gen_text = {
      {"--max_new_tokens", std::to_string(go.max_new_tokens)},
      {"--temperature", base::python_float(go.temperature)},
      {"--top_k", std::to_string(go.top_k)},
      {"--seed", std::to_string(go.seed)}};
  generate->add_option("output_dir", go.output_dir, "Output folder of a trained gpt run")
      ->type_name("OUTPUT_DIR");
  generate
      ->add_option("--prompt", go.prompt,
                   "Text to continue (the context is its last context_length - 1 bytes); "
                   "default: none, the sample starts after a newline")
      ->type_name("TEXT");
  generate
      ->add_option("--max_new_tokens,--max-new-tokens", gen_text["--max_new_tokens"],
                   "Bytes to sample")
      ->capture_default_str()
      ->type_name("N");
  generate
      ->add_option("--temperature", gen_text["--temperature"],
                   "Divides the logits: below 1 sharper, above 1 flatter")
      ->capture_default_str()
      ->type_name("T");
  generate
      ->add_option("--top_k,--top-k", gen_text["--top_k"],
                   "Sample among the K likeliest bytes only (0: all 256)")
      ->capture_default_str()
      ->type_name("K");
  generate
      ->add_option("--seed", gen_text["--seed"],
                   "Seed of the sampling: the same seed, the same text")
      ->capture_default_str()
      ->type_name("S");
  CLI::App* env = app.add_subcommand("env", help_of("env"));
  CLI::App* launch = app.add_subcommand("launch", help_of("launch"));
  dist::LaunchOptions& lo = command.launch;
  std::map<std::string, std::string> text = {
      {"--nproc-per-node", std::to_string(lo.nproc_per_node)},
      {"--nnodes", std::to_string(lo.nnodes)},
      {"--node-rank", std::to_string(lo.node_rank)},
      {"--master-port", std::to_string(lo.master_port)},
      {"--grace-period", base::python_float(lo.grace_seconds)},
      {"--max-restarts", std::to_string(lo.max_restarts)},
      {"--rdzv-timeout", base::python_float(lo.rdzv_timeout_seconds)}};
  auto option = [&](const std::string& names, const std::string& key, const std::string& help) {
    launch->add_option(names, text[key], help)
        ->capture_default_str()
        ->type_name(key == "--grace-period" || key == "--rdzv-timeout" ? "SECONDS" : "INT");
  };
  option("--nproc-per-node,--nproc_per_node", "--nproc-per-node", "Ranks on this node");
  option("--nnodes", "--nnodes", "Number of nodes");
  option("--node-rank,--node_rank", "--node-rank", "This node's index, from 0");
  launch
      ->add_option("--master-addr,--master_addr", lo.master_addr,
                   "Address of node 0 (rank 0 hosts the TCPStore)")
      ->capture_default_str()
      ->type_name("HOST");
  option("--master-port,--master_port", "--master-port",
         "Port of the TCPStore on node 0 (0: a free one, one node only)");
  launch->add_flag("--rank0-only", lo.rank0_only,
                   "Forward only rank 0's stdout (stderr of every rank still shows)");
  option("--grace-period", "--grace-period",
         "Seconds between SIGTERM and SIGKILL when stopping ranks");
  option("--rdzv-timeout", "--rdzv-timeout", "Seconds a node > 0 waits to reach node 0");
  option("--max-restarts,--max_restarts", "--max-restarts",
         "Times to stop and restart every rank after one fails (not after exit code 2 or "
         "SIGINT/SIGTERM); ranks see TORCHELASTIC_RESTART_COUNT");
  launch->footer(
      "\nAfter the options: PROGRAM [ARGS...], what every rank runs (e.g. trainer train "
      "config.json).");
  launch->prefix_command();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return std::nullopt;
  } catch (const CLI::CallForAllHelp& e) {
    app.exit(e);
    return std::nullopt;
  } catch (const CLI::RequiredError& e) {
    throw InputError(
        "a command is required: trainer train|evaluate|predict|plot|generate|env|launch ... (see "
        "trainer "
        "--help)");
  } catch (const CLI::ArgumentMismatch& e) {
    throw InputError(fmt::format(
        "{} (each {} option is given once, with one value)", e.what(),
        !args.empty() && (args[0] == "plot" || args[0] == "generate") ? args[0] : "launcher"));
  } catch (const CLI::ParseError& e) {
    throw InputError(e.what());
  }
  if (wants_help) return std::nullopt;  // CLI11 printed it
  if (env->parsed()) {
    command.name = "env";
    return command;
  }
  if (generate->parsed()) {
    if (go.output_dir.empty()) {
      throw InputError("trainer generate needs OUTPUT_DIR (see trainer generate --help)");
    }
    go.max_new_tokens =
        static_cast<int64_t>(launch_number("--max_new_tokens", gen_text["--max_new_tokens"], 0, 1e6,
                                           true, "an integer in 0..1000000"));
    go.temperature = launch_number("--temperature", gen_text["--temperature"], 1e-6, 1e6, false,
                                   "a number > 0, up to 1e6");
    go.top_k = static_cast<int64_t>(launch_number("--top_k", gen_text["--top_k"], 0, 256, true,
                                                  "an integer in 0..256; 0: all"));
    go.seed = static_cast<uint64_t>(launch_number("--seed", gen_text["--seed"], 0,
                                                  9007199254740992.0, true, "an integer >= 0"));
    command.name = "generate";
    return command;
  }
  if (plot->parsed()) {
    if (command.plot_dirs.empty()) {
      throw InputError("trainer plot needs OUTPUT_DIR [OUTPUT_DIR ...] (see trainer plot --help)");
    }
    command.name = "plot";
    return command;
  }
  command.name = "launch";
  constexpr double kMaxInt = 2147483647.0;
  lo.nproc_per_node = static_cast<int>(launch_number("--nproc-per-node", text["--nproc-per-node"],
                                                     1, 4096, true, "an integer in 1..4096"));
  lo.nnodes = static_cast<int>(
      launch_number("--nnodes", text["--nnodes"], 1, 65536, true, "an integer in 1..65536"));
  lo.node_rank = static_cast<int>(launch_number("--node-rank", text["--node-rank"], 0, kMaxInt,
                                                true, "an integer >= 0, below --nnodes"));
  lo.master_port = static_cast<int>(launch_number("--master-port", text["--master-port"], 0, 65535,
                                                  true, "an integer in 0..65535"));
  lo.grace_seconds = launch_number("--grace-period", text["--grace-period"], 0, 86400, false,
                                   "seconds, a finite number in 0..86400");
  lo.max_restarts = static_cast<int>(
      launch_number("--max-restarts", text["--max-restarts"], 0, dist::kMaxRestarts, true,
                    fmt::format("an integer in 0..{}", dist::kMaxRestarts)));
  lo.rdzv_timeout_seconds = launch_number("--rdzv-timeout", text["--rdzv-timeout"], 0, 86400 * 7,
                                          false, "seconds, a finite number in 0..604800");
  lo.command = launch->remaining();
  if (!lo.command.empty() && lo.command[0].rfind("-", 0) == 0) {
    throw InputError(
        fmt::format("unknown launcher option {} (see trainer launch --help)", lo.command[0]));
  }
  // --rank0-only takes no value: a boolean word after it would run as PROGRAM (`true`, `yes`).
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--rank0-only" && !lo.command.empty() &&
        argv[i + 1] == lo.command[0] && !bool_word(lo.command[0]).empty()) {
      throw InputError(
          fmt::format("--rank0-only takes no value, and '{}' after it would run as PROGRAM (write "
                      "--rank0-only={}, or name PROGRAM by its path)",
                      lo.command[0], lo.command[0]));
    }
  }
  if (lo.command.empty()) {
    throw InputError(
        "trainer launch needs PROGRAM [ARGS...] after its options (see trainer "
        "launch --help)");
  }
  return command;
}

}  // namespace trainer::cli
