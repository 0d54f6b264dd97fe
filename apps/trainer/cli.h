// Command-line parsing of the `trainer` program (CLI11): the subcommand, the optional JSON
// config and the `--name value` overrides, with every TrainingArguments key in --help; the
// launcher's and `trainer plot`'s options.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/distributed/launcher.h"

namespace trainer::cli {

// `trainer generate OUTPUT_DIR ...`: sampling from a trained gpt run.
struct GenerateOptions {
  std::string output_dir;
  std::string prompt;  // "": the samples start after a newline, which is not printed
  int64_t max_new_tokens = 200;
  double temperature = 0.8;  // > 0; nanoGPT's sample.py's default (sharper than the model's)
  int64_t top_k = 50;        // 0: every byte; else 1..256 (a Hugging Face model: its vocabulary)
  uint64_t seed = 42;
  // A Hugging Face folder: sample (true) or greedy (false); unset: generation_config.json's
  // do_sample (Transformers' default: greedy).
  std::optional<bool> do_sample;
  double top_p = 1.0;  // nucleus sampling: the smallest set of tokens of this probability
  // Which of temperature, top_k and top_p the command line gave ("--temperature", ...): for a
  // Hugging Face folder the others come from generation_config.json, else Transformers' defaults.
  std::set<std::string> given;
  bool use_cache = true;    // the KV cache (false: every step runs the whole sequence)
  bool output_ids = false;  // print the ids (prompt and generated), not the text
  // Through the folder's chat template: the prompt as a user message (generate --chat), or a
  // conversation read from standard input (trainer chat).
  bool chat = false;
  std::string system;         // a system message first in the conversation
  std::string chat_template;  // a .jinja file instead of the folder's template
};

// `trainer tokenize --tokenizer_name DIR [FILE]`: each line's ids (or, --decode, each line of
// ids as text).
struct TokenizeOptions {
  std::string tokenizer_name;  // a folder with tokenizer.json, or the file
  std::string file;            // "": standard input
  bool decode = false;
  bool special_tokens = true;  // false: --no_special_tokens (no template tokens; decode skips them)
};

// `trainer merge ADAPTER_DIR --output_dir DIR`: the base model with the adapter merged in.
// `trainer chat-template --tokenizer_name DIR [--chat_template FILE] [--add_generation_prompt]
// [--tools FILE] [CONVERSATIONS.jsonl]`: each conversation rendered by the chat template.
struct ChatTemplateOptions {
  std::string tokenizer_name;  // the folder with the template (and the special tokens)
  std::string chat_template;   // a .jinja file instead of the folder's template
  std::string tools;           // a JSON file with a list of tool schemas, for every line
  std::string file;            // "": standard input
  bool add_generation_prompt = false;
  bool generation_indices = false;  // print {"text", "generation_indices"} objects
};

struct MergeOptions {
  std::string adapter_dir;
  std::string output_dir;
  std::string torch_dtype = "auto";  // the merged weights' type: auto (the base's), float32, ...
};

struct Command {
  std::string name;    // "train", "evaluate", "predict", "plot", "env", "generate", "chat",
                       // "tokenize", "chat-template", "merge" or "launch"
  std::string config;  // JSON file, or "" for defaults
  std::vector<std::pair<std::string, std::string>> overrides;
  dist::LaunchOptions launch;          // for "launch"
  std::vector<std::string> plot_dirs;  // for "plot": the runs' output_dirs
  std::string plot_output;             // for "plot": -o FILE, or ""
  double plot_smoothing = 0.6;         // for "plot": --smoothing of the per-step loss
  GenerateOptions generate;            // for "generate" and "chat"
  TokenizeOptions tokenize;            // for "tokenize"
  ChatTemplateOptions chat_template;   // for "chat-template"
  MergeOptions merge;                  // for "merge"
};

// Parses argv. Returns std::nullopt after printing help (exit 0). Throws InputError for unknown
// subcommands or options (naming the nearest known argument) and malformed values.
std::optional<Command> parse_command_line(int argc, char** argv);

}  // namespace trainer::cli
