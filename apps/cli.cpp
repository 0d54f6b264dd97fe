// CLI11 front of the `trainer` program: subcommands train and evaluate, each with the config file
// and one option per TrainingArguments key.
#include "apps/cli.h"

#include <iostream>
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "lib/io/errors.h"
#include "lib/io/text.h"
#include "trainer/training_args.h"

namespace trainer::cli {
namespace {

std::string arguments_table() {
  std::string out = "Training arguments (JSON keys of CONFIG, or --name value):\n";
  for (const auto& d : TrainingArguments::describe()) {
    out += fmt::format("  --{:<30} default {:<18} {}\n", d.name, d.default_json, d.help);
  }
  return out;
}

}  // namespace

std::optional<Command> parse_command_line(int argc, char** argv) {
  CLI::App app{
      "trainer: train and evaluate models on LibTorch, as Transformers' Trainer does.\n"
      "  trainer train [CONFIG.json] [--name value ...]\n"
      "  trainer evaluate [CONFIG.json] [--name value ...]",
      "trainer"};
  app.footer("\n" + arguments_table());
  app.require_subcommand(1);
  Command command;
  std::vector<std::string> names;
  std::vector<CLI::App*> subcommands;
  std::map<CLI::App*, std::vector<std::pair<std::string, CLI::Option*>>> options;
  for (const auto& [name, help] : std::vector<std::pair<std::string, std::string>>{
           {"train", "Train a model and save it, its state and its metrics to output_dir."},
           {"evaluate", "Evaluate output_dir/model.safetensors on the eval dataset."}}) {
    CLI::App* sub = app.add_subcommand(name, help);
    sub->allow_extras();
    sub->add_option("config", command.config, "JSON file with one flat object of arguments");
    auto descriptions = TrainingArguments::describe();
    descriptions.push_back({"evaluation_strategy", "", "Old name of eval_strategy."});
    for (const auto& d : descriptions) {
      CLI::Option* option = sub->add_option("--" + d.name, d.help)->expected(0, 1);
      if (!d.default_json.empty()) option->default_str(d.default_json);
      options[sub].emplace_back(d.name, option);
      if (subcommands.empty()) names.push_back(d.name);
    }
    subcommands.push_back(sub);
  }
  CLI::App* launch = app.add_subcommand("launch",
                                        "Start PROGRAM as N ranks of a distributed run, with "
                                        "torchrun's environment (RANK, WORLD_SIZE, ...).");
  dist::LaunchOptions& lo = command.launch;
  launch->add_option("--nproc-per-node,--nproc_per_node", lo.nproc_per_node, "Ranks on this node")
      ->capture_default_str();
  launch->add_option("--nnodes", lo.nnodes, "Number of nodes")->capture_default_str();
  launch->add_option("--node-rank,--node_rank", lo.node_rank, "This node's index, from 0")
      ->capture_default_str();
  launch
      ->add_option("--master-addr,--master_addr", lo.master_addr,
                   "Address of node 0 (rank 0 hosts the TCPStore)")
      ->capture_default_str();
  launch
      ->add_option("--master-port,--master_port", lo.master_port, "Port of the TCPStore on node 0")
      ->capture_default_str();
  launch->add_flag("--rank0-only", lo.rank0_only,
                   "Forward only rank 0's stdout (stderr of every rank still shows)");
  launch
      ->add_option("--grace-period", lo.grace_seconds,
                   "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  launch
      ->add_option("--rdzv-timeout", lo.rdzv_timeout_seconds,
                   "Seconds a node > 0 waits to reach node 0")
      ->capture_default_str();
  launch->prefix_command();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    app.exit(e);
    return std::nullopt;
  } catch (const CLI::CallForAllHelp& e) {
    app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw InputError(e.what());
  }
  if (launch->parsed()) {
    command.name = "launch";
    lo.command = launch->remaining();
    return command;
  }
  for (CLI::App* sub : subcommands) {
    if (!sub->parsed()) continue;
    command.name = sub->get_name();
    for (const std::string& extra : sub->remaining()) {
      std::string key = extra;
      while (!key.empty() && key.front() == '-') key.erase(key.begin());
      key = key.substr(0, key.find('='));
      if (extra.rfind("-", 0) != 0) {
        throw InputError(
            fmt::format("unexpected argument '{}' (only one CONFIG.json is taken)", extra));
      }
      TrainingArguments::reject_unsupported_key(key);
      std::string near = io::nearest(key, names);
      throw InputError(fmt::format("unknown argument --{}{}", key,
                                   near.empty() ? " (see trainer " + command.name + " --help)"
                                                : fmt::format(" (did you mean --{}?)", near)));
    }
  }
  for (CLI::App* sub : subcommands) {
    if (!sub->parsed()) continue;
    for (const auto& [name, option] : options[sub]) {
      if (option->count() == 0) continue;
      const auto& given = option->results();
      // A bare flag (--do_eval) means true, as HfArgumentParser takes it.
      command.overrides.emplace_back(name,
                                     given.empty() || given.back().empty() ? "true" : given.back());
    }
  }
  return command;
}

}  // namespace trainer::cli
