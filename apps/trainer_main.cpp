// The `trainer` program: `trainer train` and `trainer evaluate` on MNIST-format data, with
// Transformers' arguments, outputs and printed metrics, on one process or on every process a
// launcher started (only the main one prints and writes); `trainer launch` starts them. Bad input
// exits 2 with one line.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "apps/cli.h"
#include "datasets/mnist.h"
#include "lib/accelerate/accelerator.h"
#include "lib/accelerate/launch.h"
#include "lib/distributed/launcher.h"
#include "lib/io/allocator.h"
#include "lib/io/errors.h"
#include "lib/io/files.h"
#include "lib/io/safetensors.h"
#include "lib/io/text.h"
#include "lib/models/models.h"
#include "trainer/trainer.h"

namespace {

using namespace trainer;

// A split of the data set, decoded once per machine: the node's first process writes the cache
// that every process then maps (see MnistDataset::load_shared).
std::shared_ptr<data::MnistDataset> load_split(Accelerator& accelerator,
                                               const TrainingArguments& args,
                                               const std::string& split,
                                               const std::optional<int64_t>& max_samples) {
  return accelerator.local_main_process_first([&] {
    return data::MnistDataset::load_shared(args.effective_dataset_dir(), split,
                                           max_samples.value_or(-1), io::cache_dir(),
                                           /*verify=*/accelerator.is_local_main_process());
  });
}

bool wants_eval(const TrainingArguments& args) {
  return args.eval_strategy() != "no" || args.do_eval();
}

int train(const TrainingArguments& args) {
  Accelerator accelerator(accelerator_options(args));
  auto train_dataset = load_split(accelerator, args, "train", args.max_train_samples());
  auto eval_dataset =
      wants_eval(args) ? load_split(accelerator, args, "test", args.max_eval_samples()) : nullptr;
  torch::manual_seed(static_cast<uint64_t>(args.seed()));
  auto model = models::make_model(args.model_name());

  Trainer trainer(model, args, train_dataset, eval_dataset, nullptr, compute_accuracy);
  TrainOutput result = trainer.train();
  // Written beside the model it trained, only once training is over: a run that fails or is
  // interrupted leaves an earlier run's model and arguments together.
  trainer.save_model();
  if (accelerator.is_main_process()) {
    io::write_file_atomic(io::join_path(args.output_dir(), "training_args.json"), args.to_json());
  }
  trainer.save_state();
  Metrics train_metrics = result.metrics;
  train_metrics["train_samples"] = static_cast<double>(train_dataset->size());
  accelerator.print("");
  trainer.log_metrics("train", train_metrics);
  trainer.save_metrics("train", train_metrics);
  if (eval_dataset) {
    // The evaluation at the last step already scored this model; do not run it twice.
    Metrics eval_metrics = trainer.last_eval_step() == trainer.state().global_step
                               ? trainer.last_eval_metrics()
                               : trainer.evaluate();
    eval_metrics["eval_samples"] = static_cast<double>(eval_dataset->size());
    trainer.log_metrics("eval", eval_metrics);
    trainer.save_metrics("eval", eval_metrics);
  }
  return 0;
}

int evaluate(const TrainingArguments& args) {
  std::string weights = io::join_path(args.output_dir(), "model.safetensors");
  if (!std::filesystem::exists(weights)) {
    throw InputError(fmt::format(
        "{} does not exist (train first, or set output_dir to a trained run)", weights));
  }
  Accelerator accelerator(accelerator_options(args));
  auto eval_dataset = load_split(accelerator, args, "test", args.max_eval_samples());
  auto model = models::make_model(args.model_name());
  io::load_state_dict(*model, io::load_safetensors(weights), weights);
  Trainer trainer(model, args, nullptr, eval_dataset, nullptr, compute_accuracy);
  Metrics metrics = trainer.evaluate();
  metrics["eval_samples"] = static_cast<double>(eval_dataset->size());
  trainer.log_metrics("eval", metrics);
  trainer.save_metrics("eval", metrics);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainer::io::configure_allocator();
  try {
    auto command = cli::parse_command_line(argc, argv);
    if (!command) return 0;
    if (command->name == "launch") return dist::launch(command->launch);
    TrainingArguments args = TrainingArguments::parse(command->config, command->overrides);
    return command->name == "train" ? train(args) : evaluate(args);
  } catch (...) {
    return report_error("trainer: ");
  }
}
