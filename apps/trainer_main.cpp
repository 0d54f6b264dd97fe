// The `trainer` program: `trainer train` and `trainer evaluate` on MNIST-format data, with
// Transformers' arguments, outputs and printed metrics. Bad input exits 2 with one line.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "apps/cli.h"
#include "datasets/mnist.h"
#include "lib/dist/launcher.h"
#include "lib/io/allocator.h"
#include "lib/io/errors.h"
#include "lib/io/files.h"
#include "lib/io/safetensors.h"
#include "lib/io/text.h"
#include "lib/models/models.h"
#include "trainer/trainer.h"

namespace {

using namespace trainer;

std::shared_ptr<data::MnistDataset> load_split(const TrainingArguments& args,
                                               const std::string& split,
                                               const std::optional<int64_t>& max_samples) {
  return std::make_shared<data::MnistDataset>(args.effective_dataset_dir(), split,
                                              max_samples.value_or(-1));
}

bool wants_eval(const TrainingArguments& args) {
  return args.eval_strategy() != "no" || args.do_eval();
}

int train(const TrainingArguments& args) {
  auto train_dataset = load_split(args, "train", args.max_train_samples());
  auto eval_dataset =
      wants_eval(args) ? load_split(args, "test", args.max_eval_samples()) : nullptr;
  torch::manual_seed(static_cast<uint64_t>(args.seed()));
  auto model = models::make_model(args.model_name());
  io::write_file_atomic(io::join_path(args.output_dir(), "training_args.json"), args.to_json());

  Trainer trainer(model, args, train_dataset, eval_dataset, nullptr, compute_accuracy);
  TrainOutput result = trainer.train();
  trainer.save_model();
  trainer.save_state();
  Metrics train_metrics = result.metrics;
  train_metrics["train_samples"] = static_cast<double>(train_dataset->size());
  std::printf("\n");
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
  auto eval_dataset = load_split(args, "test", args.max_eval_samples());
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
  } catch (const InputError& e) {
    std::fprintf(stderr, "trainer: error: %s\n", e.what());
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "trainer: error: %s\n",
                 io::first_line(e.what_without_backtrace()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trainer: error: %s\n", io::first_line(e.what()).c_str());
    return 1;
  }
}
