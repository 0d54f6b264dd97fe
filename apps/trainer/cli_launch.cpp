// `trainer launch`'s options under CLI11 (torchrun's names, both spellings) and their values read
// and checked into dist::LaunchOptions, each bad value one line naming the option.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "apps/trainer/cli_arguments.h"
#include "lib/base/errors.h"
#include "lib/base/text.h"

namespace trainer::cli {

CLI::App* add_launch(CLI::App& app, const std::string& help, Command& command, OptionText& text) {
  CLI::App* launch = app.add_subcommand("launch", help);
  dist::LaunchOptions& lo = command.launch;
  text = {{"--nproc-per-node", std::to_string(lo.nproc_per_node)},
          {"--nnodes", std::to_string(lo.nnodes)},
          {"--node-rank", std::to_string(lo.node_rank)},
          {"--master-port", std::to_string(lo.master_port)},
          {"--grace-period", base::python_float(lo.grace_seconds)},
          {"--max-restarts", std::to_string(lo.max_restarts)},
          {"--rdzv-timeout", base::python_float(lo.rdzv_timeout_seconds)},
          {"--rdzv-last-call", base::python_float(lo.rdzv_last_call_seconds)}};
  auto option = [&](const std::string& names, const std::string& key, const std::string& help) {
    launch->add_option(names, text[key], help)
        ->capture_default_str()
        ->type_name(key == "--grace-period" || key == "--rdzv-timeout" || key == "--rdzv-last-call"
                        ? "SECONDS"
                    : key == "--nnodes" ? "N|MIN:MAX"
                                        : "INT");
  };
  option("--nproc-per-node,--nproc_per_node", "--nproc-per-node", "Ranks on this node");
  option("--nnodes", "--nnodes",
         "Number of nodes; MIN:MAX for an elastic run (nodes may leave and join; node ranks come "
         "from the rendezvous)");
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
  option("--rdzv-timeout", "--rdzv-timeout",
         "Seconds a node waits to reach node 0, and a round for its nodes");
  option("--rdzv-last-call", "--rdzv-last-call",
         "Elastic runs: seconds a round stays open for more nodes once MIN have joined");
  option("--max-restarts,--max_restarts", "--max-restarts",
         "Times to stop and restart every rank after one fails (not after exit code 2 or "
         "SIGINT/SIGTERM); ranks see TORCHELASTIC_RESTART_COUNT");
  launch->footer(
      "\nAfter the options: PROGRAM [ARGS...], what every rank runs (e.g. trainer train "
      "config.json).");
  launch->prefix_command();
  return launch;
}

void finish_launch(Command& command, OptionText& text, const std::vector<std::string>& program,
                   int argc, char** argv) {
  command.name = "launch";
  dist::LaunchOptions& lo = command.launch;
  constexpr double kMaxInt = 2147483647.0;
  lo.nproc_per_node = static_cast<int>(number_option("--nproc-per-node", text["--nproc-per-node"],
                                                     1, 4096, true, "an integer in 1..4096"));
  // torchrun's --nnodes MIN:MAX: an elastic run.
  const std::string nnodes = text["--nnodes"];
  if (const size_t colon = nnodes.find(':'); colon != std::string::npos) {
    const std::string allowed = "an integer in 1..65536, or MIN:MAX with 1 <= MIN <= MAX";
    auto part = [&](const std::string& value) {
      if (value.empty()) {
        throw InputError(fmt::format("--nnodes {} is not allowed ({})", nnodes, allowed));
      }
      try {
        return static_cast<int>(number_option("--nnodes", value, 1, 65536, true, allowed));
      } catch (const InputError&) {
        throw InputError(fmt::format("--nnodes {} is not allowed ({})", nnodes, allowed));
      }
    };
    lo.min_nnodes = part(nnodes.substr(0, colon));
    lo.nnodes = part(nnodes.substr(colon + 1));
    if (lo.min_nnodes > lo.nnodes) {
      throw InputError(fmt::format("--nnodes {} is not allowed ({})", nnodes, allowed));
    }
  } else {
    lo.nnodes = static_cast<int>(
        number_option("--nnodes", nnodes, 1, 65536, true, "an integer in 1..65536"));
  }
  lo.node_rank = static_cast<int>(number_option("--node-rank", text["--node-rank"], 0, kMaxInt,
                                                true, "an integer >= 0, below --nnodes"));
  lo.master_port = static_cast<int>(number_option("--master-port", text["--master-port"], 0, 65535,
                                                  true, "an integer in 0..65535"));
  lo.grace_seconds = number_option("--grace-period", text["--grace-period"], 0, 86400, false,
                                   "seconds, a finite number in 0..86400");
  lo.max_restarts = static_cast<int>(
      number_option("--max-restarts", text["--max-restarts"], 0, dist::kMaxRestarts, true,
                    fmt::format("an integer in 0..{}", dist::kMaxRestarts)));
  lo.rdzv_timeout_seconds = number_option("--rdzv-timeout", text["--rdzv-timeout"], 0, 86400 * 7,
                                          false, "seconds, a finite number in 0..604800");
  lo.rdzv_last_call_seconds = number_option("--rdzv-last-call", text["--rdzv-last-call"], 0, 86400,
                                            false, "seconds, a finite number in 0..86400");
  lo.command = program;
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
        "trainer launch needs PROGRAM [ARGS...] after its options (see trainer launch --help)");
  }
}

}  // namespace trainer::cli
