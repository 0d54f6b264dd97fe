// A program the GRPO and RLOO parity tests start as each rank (under `trainer launch`): `trainer
// grpo` (or with --rloo `trainer rloo`) on the arguments given, its samples replayed from a TRL
// run instead of drawn:
//   grpo_worker [--rloo] REFERENCE.json --name value ...
// REFERENCE.json is grpo_trl_reference.py's record: each generation of this rank, in order, gives
// the completions (completion_ids_padded) and the row order (permutation); the prompts the
// trainer hands over must be TRL's (prompt_ids_padded), else the worker stops with one line.
#include <csignal>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "apps/trainer/commands.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/runtime/torch_logs.h"
#include "tests/torch_test_util.h"
#include "trl/grpo_trainer.h"

using namespace trainer;
using json = nlohmann::json;

int main(int argc, char** argv) {
  runtime::route_torch_logs();
  std::signal(SIGPIPE, SIG_IGN);
  try {
    const bool rloo = argc > 1 && std::string(argv[1]) == "--rloo";
    if (rloo) {
      --argc;
      ++argv;
    }
    if (argc < 2) throw InputError("usage: grpo_worker [--rloo] REFERENCE.json --name value ...");
    std::ifstream in(argv[1]);
    const json reference = json::parse(in);
    std::vector<std::pair<std::string, std::string>> overrides;
    for (int i = 2; i + 1 < argc; i += 2) {
      std::string name = argv[i];
      if (name.rfind("--", 0) == 0) name = name.substr(2);
      overrides.emplace_back(name, argv[i + 1]);
    }
    const char* rank_text = std::getenv("RANK");
    const int64_t rank = rank_text ? std::stoll(rank_text) : 0;
    auto generations = std::make_shared<std::vector<json>>();
    for (const auto& g : reference["generations"]) {
      if (g["rank"].get<int64_t>() == rank) generations->push_back(g);
    }
    // The generations in the order the trainer asks for them (training's and evaluation's); the
    // shuffle that follows a training generation is that generation's.
    auto next = std::make_shared<size_t>(0);
    auto hook = [generations, next](trl::GRPOTrainer& trainer) {
      trainer.set_completion_sampler(
          [generations, next](const torch::Tensor& prompt_ids, const torch::Tensor&) {
            if (*next >= generations->size()) {
              throw std::runtime_error("grpo_worker: more generations than TRL's run had");
            }
            const json& g = (*generations)[(*next)++];
            const torch::Tensor theirs = trainer::testing::long_rows(g["prompt_ids_padded"]);
            if (!torch::equal(theirs, prompt_ids.cpu())) {
              throw std::runtime_error(fmt::format(
                  "grpo_worker: generation {}'s prompts differ from TRL's (the sampler or the "
                  "collator is not TRL's)",
                  *next - 1));
            }
            return trainer::testing::long_rows(g["completion_ids_padded"]);
          });
      trainer.set_row_shuffle([generations, next](int64_t n) {
        const json& g = (*generations)[*next - 1];
        std::vector<int64_t> order = g["permutation"].get<std::vector<int64_t>>();
        if (static_cast<int64_t>(order.size()) != n) {
          throw std::runtime_error("grpo_worker: TRL's permutation has another length");
        }
        return torch::tensor(order, torch::kLong);
      });
    };
    return rloo ? cli::rloo_command("", overrides, hook) : cli::grpo_command("", overrides, hook);
  } catch (...) {
    return report_error("grpo_worker: ");
  }
}
