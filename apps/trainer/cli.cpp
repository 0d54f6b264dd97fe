// Command line of the `trainer` program: CLI11 for the subcommands' help and for the options of
// plot, generate, tokenize and env (one function per command below) and launch (cli_launch.cpp);
// train, evaluate and predict read their `--name value` pairs themselves (cli_arguments.cpp).
#include "apps/trainer/cli.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "apps/trainer/cli_arguments.h"
#include "apps/trainer/cli_help.h"
#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/report/plot.h"
#include "trainer/training_args.h"

namespace trainer::cli {
namespace {

bool takes_training_arguments(const std::string& name) {
  return name == "train" || name == "sft" || name == "dpo" || name == "grpo" || name == "rloo" ||
         name == "reward" || name == "evaluate" || name == "predict";
}

// A first word that is no command names the nearest one.
void check_command_name(const std::vector<std::string>& args) {
  if (args.empty() || looks_like_option(args[0])) return;
  std::vector<std::string> names;
  for (const CommandHelp& c : command_helps()) names.push_back(c.name);
  if (std::find(names.begin(), names.end(), args[0]) != names.end()) return;
  std::string near = base::nearest(args[0], names);
  throw InputError(fmt::format("unknown command '{}'{} (commands: {})", args[0],
                               near.empty() ? "" : fmt::format(": did you mean '{}'?", near),
                               fmt::join(names, ", ")));
}

std::string arguments_table(const std::string& command) {
  std::string out = "Training arguments (JSON keys of CONFIG, or --name value, or --name=value):\n";
  const TrainingArguments kind = command == "sft"      ? TrainingArguments::sft_defaults(false)
                                 : command == "dpo"    ? TrainingArguments::dpo_defaults(false)
                                 : command == "grpo"   ? TrainingArguments::grpo_defaults(false)
                                 : command == "reward" ? TrainingArguments::reward_defaults(false)
                                 : command == "rloo"   ? TrainingArguments::rloo_defaults(false)
                                                       : TrainingArguments();
  for (const auto& d : TrainingArguments::describe(kind)) {
    // The SFT arguments are `trainer sft`'s, the DPO arguments `trainer dpo`'s.
    if (!kind.takes(d.name)) continue;
    out += fmt::format("  --{:<30} default {:<18} {}\n", d.name, d.default_json, d.help);
  }
  return out;
}

// train, evaluate and predict under CLI11: for --help only (their arguments table).
void add_training_commands(CLI::App& app, Command& command) {
  for (const CommandHelp& c : command_helps()) {
    if (!takes_training_arguments(c.name)) continue;
    CLI::App* sub = app.add_subcommand(c.name, help_of(c.name));
    sub->allow_extras();
    sub->add_option("config", command.config,
                    "JSON file with one flat object of arguments, or a YAML file (.yaml, .yml) "
                    "with one mapping of them (TRL's recipe; also --config PATH)");
    sub->footer("\n" + arguments_table(c.name));
  }
}

CLI::App* add_plot(CLI::App& app, Command& command, OptionText& text) {
  CLI::App* plot = app.add_subcommand("plot", help_of("plot"));
  plot->allow_extras();
  plot->add_option("output_dirs", command.plot_dirs, "Output folders of training runs")
      ->type_name("OUTPUT_DIR");
  plot->add_option("-o,--output", command.plot_output,
                   "Where to write: FILE.svg and FILE.html beside it (or into a folder); "
                   "default plot.svg and plot.html here")
      ->type_name("FILE");
  text = {{"--smoothing", base::python_float(report::kDefaultSmoothing)}};
  plot->add_option("--smoothing", text["--smoothing"],
                   "Weight of the per-step loss's smoothing, as TensorBoard's slider (0: none)")
      ->capture_default_str()
      ->type_name("W");
  return plot;
}

// CLI11's "At Most 1 required but received 2" or "1 required TEXT missing" in our words: the
// option given twice, or the one without its value. For launch, the scan stops at PROGRAM.
std::string mismatch_text(const std::vector<std::string>& args, const std::string& what) {
  const std::string command =
      !args.empty() && (args[0] == "plot" || args[0] == "generate" || args[0] == "chat" ||
                        args[0] == "tokenize" || args[0] == "chat-template" || args[0] == "merge")
          ? args[0]
          : "launch";
  std::set<std::string> seen;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") break;
    if (!base::starts_with(word, "-")) {
      if (command == "launch") break;  // PROGRAM: what follows is its own
      continue;
    }
    const std::string name = word.substr(0, word.find('='));
    if (name == "--help" || name == "-h" || name == "--rank0-only") continue;
    if (command == "tokenize" && (name == "--decode" || name == "--no_special_tokens")) continue;
    if ((command == "chat-template" &&
         (name == "--add_generation_prompt" || name == "--generation_indices")) ||
        (command == "generate" && name == "--chat"))
      continue;
    if (!seen.insert(name).second) {
      return fmt::format("trainer {}: option {} is given twice (each option is given once)",
                         command, base::shown_text(name));
    }
    const bool inline_value = word.find('=') != std::string::npos;
    if (!inline_value && (i + 1 == args.size() || base::starts_with(args[i + 1], "--"))) {
      return fmt::format("trainer {}: option {} needs a value", command, base::shown_text(name));
    }
    if (!inline_value) ++i;  // its value
  }
  return fmt::format("trainer {}: {} (each option is given once, with one value)", command, what);
}

// A subcommand's arguments CLI11 could not place (allow_extras keeps them for this): our one
// line, not CLI11's "The following arguments were not expected: 0.9 --top_p".
void refuse_extras(const CLI::App& sub) {
  const std::vector<std::string> extra = sub.remaining();
  if (extra.empty()) return;
  const std::string& first = extra.front();
  if (!base::starts_with(first, "-")) {
    throw InputError(fmt::format("trainer {}: unexpected argument {} (see trainer {} --help)",
                                 sub.get_name(), base::shown_text(first), sub.get_name()));
  }
  std::vector<std::string> known;
  for (const CLI::Option* option : sub.get_options()) {
    if (!option->get_lnames().empty()) known.push_back("--" + option->get_lnames().front());
  }
  throw InputError(fmt::format("trainer {}: unknown option {} (known: {})", sub.get_name(),
                               base::shown_text(first.substr(0, first.find('='))),
                               fmt::join(known, ", ")));
}

void finish_plot(Command& command, OptionText& text) {
  if (command.plot_dirs.empty()) {
    throw InputError("trainer plot needs OUTPUT_DIR [OUTPUT_DIR ...] (see trainer plot --help)");
  }
  command.plot_smoothing = number_option("--smoothing", text["--smoothing"], 0, 0.999, false,
                                         "a number from 0 (no smoothing) to 0.999");
  command.name = "plot";
}

// generate's options, for `trainer generate` and (name "chat") `trainer chat`.
CLI::App* add_generate(CLI::App& app, Command& command, OptionText& text, const std::string& name) {
  CLI::App* generate = app.add_subcommand(name, help_of(name));
  generate->allow_extras();
  GenerateOptions& go = command.generate;
  text = {{"--max_new_tokens", std::to_string(go.max_new_tokens)},
          {"--temperature", base::python_float(go.temperature)},
          {"--top_k", std::to_string(go.top_k)},
          {"--seed", std::to_string(go.seed)},
          {"--top_p", "1.0"},
          {"--use_cache", "true"},
          {"--output_ids", "false"}};
  generate
      ->add_option("output_dir", go.output_dir,
                   "A Hugging Face model or adapter folder, or a trained gpt run's output_dir")
      ->type_name("OUTPUT_DIR");
  generate
      ->add_option("--prompt", go.prompt,
                   "Text to continue (a gpt run: its last context_length - 1 bytes); default: "
                   "none, the sample starts from BOS (a gpt run: after a newline)")
      ->type_name("TEXT");
  auto option = [&](const std::string& names, const std::string& key, const std::string& help,
                    const std::string& type) {
    generate->add_option(names, text[key], help)->capture_default_str()->type_name(type);
  };
  option("--max_new_tokens,--max-new-tokens", "--max_new_tokens",
         "Tokens to generate (a gpt run: bytes)", "N");
  option("--temperature", "--temperature", "Divides the logits: below 1 sharper, above 1 flatter",
         "T");
  option("--top_k,--top-k", "--top_k", "Sample among the K likeliest tokens only (0: all)", "K");
  option("--seed", "--seed", "Seed of the sampling: the same seed, the same text", "S");
  option("--do_sample,--do-sample", "--do_sample",
         "A Hugging Face folder: true samples, false is greedy (default: its "
         "generation_config.json's, else greedy)",
         "BOOL");
  option("--top_p,--top-p", "--top_p",
         "Sample among the likeliest tokens of this total probability", "P");
  option("--use_cache,--use-cache", "--use_cache",
         "Keep each layer's keys and values (the KV cache)", "BOOL");
  option("--output_ids,--output-ids", "--output_ids",
         "Print the token ids (prompt and generated), not the text", "BOOL");
  generate
      ->add_option("--chat_template,--chat-template", go.chat_template,
                   "A Jinja chat template file instead of the folder's")
      ->type_name("FILE");
  generate->add_option("--system", go.system, "A system message first in the conversation")
      ->type_name("TEXT");
  if (name == "generate") {
    generate->add_flag("--chat", go.chat,
                       "Put the prompt through the folder's chat template as a user message, "
                       "with the generation prompt");
  }
  return generate;
}

void finish_generate(Command& command, OptionText& text, const CLI::App& app) {
  GenerateOptions& go = command.generate;
  const std::string name = app.get_name();
  for (const char* key : {"--temperature", "--top_k", "--top_p"}) {
    if (app.get_option(key)->count() > 0) go.given.insert(key);
  }
  if (go.output_dir.empty()) {
    throw InputError(
        name == "chat"
            ? "trainer chat needs DIR, a Hugging Face model folder (see trainer chat --help)"
            : "trainer generate needs OUTPUT_DIR (see trainer generate --help)");
  }
  go.max_new_tokens = static_cast<int64_t>(number_option(
      "--max_new_tokens", text["--max_new_tokens"], 0, 1e6, true, "an integer in 0..1000000"));
  go.temperature = number_option("--temperature", text["--temperature"], 1e-6, 1e6, false,
                                 "a number from 1e-6 to 1e6");
  go.top_k =
      static_cast<int64_t>(number_option("--top_k", text["--top_k"], 0, 1e9, true,
                                         "an integer >= 0 (at most the vocabulary); 0: all"));
  go.top_p = number_option("--top_p", text["--top_p"], 1e-9, 1.0, false, "a number in (0, 1]");
  auto flag = [&](const std::string& key) -> std::optional<bool> {
    const std::string& v = text[key];
    if (v.empty()) return std::nullopt;
    if (v == "true" || v == "True" || v == "1") return true;
    if (v == "false" || v == "False" || v == "0") return false;
    throw InputError(fmt::format("trainer {}: {} {} is not allowed (true or false)", name, key,
                                 base::shown_text(v)));
  };
  go.do_sample = flag("--do_sample");
  go.use_cache = flag("--use_cache").value_or(true);
  go.output_ids = flag("--output_ids").value_or(false);
  go.seed = static_cast<uint64_t>(number_option("--seed", text["--seed"], 0, 9007199254740992.0,
                                                true, "an integer in 0..9007199254740992 (2^53)"));
  if (name == "chat") go.chat = true;
  if (!go.chat && (!go.system.empty() || !go.chat_template.empty())) {
    throw InputError(
        "trainer generate: --system and --chat_template go with --chat (the prompt through the "
        "chat template)");
  }
  command.name = name;
}

CLI::App* add_tokenize(CLI::App& app, Command& command) {
  CLI::App* tokenize = app.add_subcommand("tokenize", help_of("tokenize"));
  tokenize->allow_extras();
  TokenizeOptions& to = command.tokenize;
  tokenize
      ->add_option("--tokenizer_name,--tokenizer-name", to.tokenizer_name,
                   "Folder with tokenizer.json (and tokenizer_config.json), or the file")
      ->type_name("DIR");
  tokenize->add_option("file", to.file, "Text to read a line at a time; default standard input")
      ->type_name("FILE");
  tokenize->add_flag("--decode", to.decode,
                     "Read lines of space-separated ids and print each as text");
  tokenize->add_flag("--no_special_tokens,--no-special-tokens",
                     "Encode without the post-processor's special tokens (BOS); decode leaves "
                     "special tokens out");
  return tokenize;
}

void finish_tokenize(CLI::App& tokenize, Command& command) {
  TokenizeOptions& to = command.tokenize;
  if (to.tokenizer_name.empty()) {
    throw InputError(
        "trainer tokenize needs --tokenizer_name DIR (a folder with tokenizer.json, or the file)");
  }
  if (tokenize.get_option("file")->count() > 0 && to.file.empty()) {
    throw InputError("trainer tokenize: FILE is empty (give a file, or none for standard input)");
  }
  to.special_tokens = tokenize.get_option("--no_special_tokens")->count() == 0;
  command.name = "tokenize";
}

CLI::App* add_chat_template(CLI::App& app, Command& command) {
  CLI::App* sub = app.add_subcommand("chat-template", help_of("chat-template"));
  sub->allow_extras();
  ChatTemplateOptions& co = command.chat_template;
  sub->add_option("--tokenizer_name,--tokenizer-name", co.tokenizer_name,
                  "Folder with the chat template (chat_template.jinja or tokenizer_config.json)")
      ->type_name("DIR");
  sub->add_option("--chat_template,--chat-template", co.chat_template,
                  "A Jinja chat template file instead of the folder's")
      ->type_name("FILE");
  sub->add_option("--tools", co.tools, "A JSON file with the list of tool schemas for every line")
      ->type_name("FILE");
  sub->add_option("file", co.file,
                  "JSON Lines, one {\"messages\": [...], \"tools\": [...]} a line; default "
                  "standard input")
      ->type_name("CONVERSATIONS.jsonl");
  sub->add_flag("--add_generation_prompt,--add-generation-prompt", co.add_generation_prompt,
                "End with the header of the assistant's turn");
  sub->add_flag("--generation_indices,--generation-indices", co.generation_indices,
                "Print {\"text\", \"generation_indices\"}: the {% generation %} spans too");
  return sub;
}

void finish_chat_template(CLI::App& sub, Command& command) {
  ChatTemplateOptions& co = command.chat_template;
  if (co.tokenizer_name.empty() && co.chat_template.empty()) {
    throw InputError(
        "trainer chat-template needs --tokenizer_name DIR (a folder with a chat template) or "
        "--chat_template FILE");
  }
  if (sub.get_option("file")->count() > 0 && co.file.empty()) {
    throw InputError(
        "trainer chat-template: CONVERSATIONS.jsonl is empty (give a file, or none for standard "
        "input)");
  }
  command.name = "chat-template";
}

CLI::App* add_merge(CLI::App& app, Command& command) {
  CLI::App* merge = app.add_subcommand("merge", help_of("merge"));
  merge->allow_extras();
  MergeOptions& mo = command.merge;
  merge->add_option("adapter_dir", mo.adapter_dir, "The adapter folder (adapter_config.json)")
      ->type_name("ADAPTER_DIR");
  merge->add_option("--output_dir,--output-dir", mo.output_dir, "Where the merged model goes")
      ->type_name("DIR");
  merge
      ->add_option("--torch_dtype,--torch-dtype", mo.torch_dtype,
                   "The merged weights' type: auto (the base's), float32, bfloat16, float16")
      ->capture_default_str()
      ->type_name("DTYPE");
  return merge;
}

void finish_merge(Command& command) {
  const MergeOptions& mo = command.merge;
  if (mo.adapter_dir.empty()) {
    throw InputError("trainer merge needs ADAPTER_DIR (a folder with adapter_config.json)");
  }
  if (mo.output_dir.empty()) {
    throw InputError("trainer merge needs --output_dir DIR (where the merged model goes)");
  }
  command.name = "merge";
}

}  // namespace

std::optional<Command> parse_command_line(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  check_command_name(args);
  Command command;
  const bool training = !args.empty() && takes_training_arguments(args[0]);
  const bool wants_help = training && std::any_of(args.begin() + 1, args.end(), [](const auto& a) {
                            return a == "--help" || a == "-h";
                          });
  if (training && !wants_help) {
    command.name = args[0];
    read_training_arguments({args.begin() + 1, args.end()}, command);
    return command;
  }

  // Help, and every other command, go through CLI11.
  CLI::App app{"", "trainer"};
  app.require_subcommand(1);
  add_training_commands(app, command);
  OptionText plot_text, generate_text, launch_text;
  CLI::App* plot = add_plot(app, command, plot_text);
  CLI::App* generate = add_generate(app, command, generate_text, "generate");
  OptionText chat_text;
  CLI::App* chat = add_generate(app, command, chat_text, "chat");
  CLI::App* chat_template = add_chat_template(app, command);
  CLI::App* tokenize = add_tokenize(app, command);
  CLI::App* merge = add_merge(app, command);
  CLI::App* env = app.add_subcommand("env", help_of("env"));
  env->allow_extras();
  CLI::App* launch = add_launch(app, help_of("launch"), command, launch_text);
  // The subcommands keep CLI11's listing of their options; the program's own help is ours alone.
  app.formatter_fn([](const CLI::App*, std::string, CLI::AppFormatMode) { return top_help(); });
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
        "a command is required: trainer "
        "train|evaluate|predict|plot|generate|chat|tokenize|chat-template|merge|env|launch "
        "... (see trainer --help)");
  } catch (const CLI::ArgumentMismatch& e) {
    throw InputError(mismatch_text(args, e.what()));
  } catch (const CLI::ParseError& e) {
    throw InputError(e.what());
  }
  if (training) return std::nullopt;  // its help, printed by CLI11
  if (env->parsed()) {
    refuse_extras(*env);
    command.name = "env";
  } else if (merge->parsed()) {
    refuse_extras(*merge);
    finish_merge(command);
  } else if (tokenize->parsed()) {
    refuse_extras(*tokenize);
    finish_tokenize(*tokenize, command);
  } else if (generate->parsed()) {
    refuse_extras(*generate);
    finish_generate(command, generate_text, *generate);
  } else if (chat->parsed()) {
    refuse_extras(*chat);
    finish_generate(command, chat_text, *chat);
  } else if (chat_template->parsed()) {
    refuse_extras(*chat_template);
    finish_chat_template(*chat_template, command);
  } else if (plot->parsed()) {
    refuse_extras(*plot);
    if (plot->get_option("--output")->count() > 0 && command.plot_output.empty()) {
      throw InputError("trainer plot: option -o: the value is empty (give a FILE or a folder)");
    }
    finish_plot(command, plot_text);
  } else {
    finish_launch(command, launch_text, launch->remaining(), argc, argv);
  }
  return command;
}

}  // namespace trainer::cli
