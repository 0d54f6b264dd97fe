// The `trainer` program's dispatch (run_program: the command line parsed, the command run, an
// error turned into its one line and exit code), what main_torch.cpp runs and the tests run
// in-process. Each command is a file of its own.
#include <cstdlib>

#include <fmt/format.h>

#include "apps/trainer/cli.h"
#include "apps/trainer/commands.h"
#include "apps/trainer/generate.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/distributed/launcher.h"
#include "lib/distributed/rendezvous.h"
#include "lib/runtime/signals.h"

namespace trainer::cli {

int run_program(int argc, char** argv) {
  try {
    auto command = parse_command_line(argc, argv);
    if (!command) return 0;
    if (command->name == "launch") {
      if (const char* rank = std::getenv("RANK")) {
        throw InputError(fmt::format(
            "trainer launch runs inside a distributed run already (RANK={}); start it once per "
            "node, outside any launcher",
            rank));
      }
      command->launch.rendezvous = dist::make_tcp_rendezvous;
      return dist::launch(command->launch);
    }
    if (command->name == "env") return env_command();
    if (command->name == "generate") return generate_text(command->generate);
    if (command->name == "tokenize") return tokenize_command(command->tokenize);
    if (command->name == "chat-template") return chat_template_command(command->chat_template);
    if (command->name == "chat") return chat_command(command->generate);
    if (command->name == "merge") return merge_command(command->merge);
    if (command->name == "plot") {
      return plot_command(command->plot_dirs, command->plot_output, command->plot_smoothing);
    }
    if (command->name == "sft") return sft_command(command->config, command->overrides);
    if (command->name == "dpo") return dpo_command(command->config, command->overrides);
    if (command->name == "grpo") return grpo_command(command->config, command->overrides);
    if (command->name == "reward") return reward_command(command->config, command->overrides);
    if (command->name == "rloo") return rloo_command(command->config, command->overrides);
    TrainingArguments args = TrainingArguments::parse(command->config, command->overrides);
    if (command->name == "predict") return predict_command(args);
    return command->name == "train" ? train_command(args) : evaluate_command(args);
  } catch (...) {
    // The launcher's SIGTERM to the other ranks may reach this one as it ends: one line only.
    runtime::defer_interrupts();
    return report_error("trainer: ");
  }
}

}  // namespace trainer::cli
