// The options every TRL trainer's source takes from its config, and a split's records.
#include "trl/trl_source.h"

#include <utility>

#include "lib/base/text.h"

namespace trainer::trl {

TrlSourceOptions trl_source_options(const TrainingArguments& args,
                                    std::shared_ptr<const tokenizers::Tokenizer> tokenizer,
                                    const std::string& tokenizer_dir, const std::string& command) {
  TrlSourceOptions o;
  o.command = command;
  if (args.train_file() || args.validation_file()) {
    o.train_file = args.train_file().value_or("");
    o.eval_file = args.validation_file().value_or("");
    // Read only when evaluating, but a file named that is not there is said now (datasets would).
    for (const auto& [name, file] :
         {std::pair{"train_file", o.train_file}, std::pair{"validation_file", o.eval_file}}) {
      if (file.empty() || base::is_regular_file(file)) continue;
      const std::string problem = base::path_problem(file);
      throw InputError(fmt::format("argument {}: {} {}", name, file,
                                   problem.empty() ? "is not a file" : problem));
    }
  } else if (!args.given("dataset_name")) {
    throw InputError(fmt::format(
        "trainer {}: no data (give train_file, or dataset_name a .json/.jsonl file or a "
        "folder of them)",
        command));
  } else {
    std::optional<std::string> config;
    if (args.dataset_config().is_string()) config = args.dataset_config().get<std::string>();
    DataFiles files = resolve_data_files(dataset_location(args.dataset_name(), config),
                                         args.dataset_train_split(), args.dataset_test_split());
    o.train_file = files.train;
    o.eval_file = files.eval;
  }
  // The pad token: pad_token, else the tokenizer's, else its eos token (TRL).
  if (args.pad_token()) {
    auto id = tokenizer->token_to_id(*args.pad_token());
    if (!id) {
      throw InputError(
          fmt::format("argument pad_token: \"{}\" is not in the vocabulary of the tokenizer in {}",
                      *args.pad_token(), tokenizer_dir));
    }
    o.pad_token_id = *id;
  } else if (auto pad = tokenizer->pad_token_id()) {
    o.pad_token_id = *pad;
  } else if (auto eos = tokenizer->eos_token_id()) {
    o.pad_token_id = *eos;
  } else {
    throw InputError(fmt::format(
        "trainer {}: the tokenizer in {} has neither a pad_token nor an eos_token; give "
        "pad_token",
        command, tokenizer_dir));
  }
  if (args.eos_token() && !tokenizer->token_to_id(*args.eos_token())) {
    throw InputError(
        fmt::format("argument eos_token: \"{}\" is not in the vocabulary of the tokenizer in {}",
                    *args.eos_token(), tokenizer_dir));
  }
  if (const auto& path = args.chat_template_path()) {
    if (base::is_directory(*path)) {
      o.chat_template = tokenizers::ChatTemplate::from_dir(*path);
      if (!o.chat_template) {
        throw InputError(fmt::format(
            "argument chat_template_path: {} holds no chat template (chat_template.jinja, or "
            "tokenizer_config.json's chat_template)",
            *path));
      }
    } else {
      o.chat_template = tokenizers::ChatTemplate::from_source(
          base::read_file(*path, size_t{1} << 26), *path, tokenizer_dir);
    }
  } else {
    o.chat_template = tokenizers::ChatTemplate::from_dir(tokenizer_dir);
  }
  o.pad_to_multiple_of = args.pad_to_multiple_of();
  o.tokenizer = std::move(tokenizer);
  return o;
}

std::vector<nlohmann::ordered_json> split_records(const std::string& path,
                                                  std::optional<int64_t> max_samples) {
  std::vector<nlohmann::ordered_json> records = read_trl_records(path);
  if (max_samples && *max_samples < static_cast<int64_t>(records.size())) {
    records.resize(static_cast<size_t>(std::max<int64_t>(0, *max_samples)));
  }
  return records;
}

}  // namespace trainer::trl
