// What train, evaluate and predict share before they run.
#include "apps/trainer/run_setup.h"

#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/distributed/env.h"
#include "lib/io/safetensors.h"
#include "lib/models/registry.h"
#include "lib/models/torchscript.h"

namespace trainer::cli {

std::unique_ptr<data::DataSource> data_source(Accelerator& accelerator,
                                              const TrainingArguments& args) {
  data::LoadContext context;
  context.run_first = [&accelerator](const std::function<void()>& load) {
    accelerator.local_main_process_first(load);
  };
  context.local_main = accelerator.is_local_main_process();
  context.cache_dir = base::cache_dir();
  return data::make_data_source(args.dataset_name(), args.dataset_dir(), args.dataset_config(),
                                std::move(context));
}

bool wants_eval(const TrainingArguments& args) {
  return args.eval_strategy() != "no" || args.do_eval();
}

std::unique_ptr<OutputDir> lock_output_dir(const TrainingArguments& args) {
  if (dist::read_dist_env().rank != 0) return nullptr;
  return std::make_unique<OutputDir>(args.output_dir());
}

std::shared_ptr<models::Model> create_model(const TrainingArguments& args,
                                            const data::DataInfo& info) {
  if (args.model_name_or_path()) {
    return models::load_torchscript(*args.model_name_or_path(), args.model_config(), info);
  }
  return models::make_model(args.model_name(), args.model_config(), info);
}

void check_model_takes(models::Model& model, const data::Dataset& dataset,
                       const data::DataCollator& collator, const std::string& split,
                       const data::DataSource& source, const TrainingArguments& args) {
  if (dataset.size() == 0) return;
  torch::NoGradGuard no_grad;
  const bool training = model.is_training();
  model.eval();
  try {
    std::optional<data::Batch> batch;
    if (!collator) batch = dataset.get_batch(torch::zeros({1}, torch::kLong));
    if (!batch)
      batch = (collator ? collator : data::DataCollator(data::default_collate))({dataset.get(0)});
    model.forward(*batch);
  } catch (const c10::Error& e) {
    data::Example first = dataset.get(0);
    throw InputError(fmt::format(
        "the {} examples in {} have inputs of shape {}; model {} cannot take them ({})",
        source.split_name(split), source.location(), base::shape_text(first.input.sizes().vec()),
        args.model_name(), base::first_line(e.what_without_backtrace())));
  }
  model.train(training);
}

void check_not_empty(const data::Dataset& dataset, const std::string& split,
                     const data::DataSource& source) {
  if (dataset.size() > 0) return;
  throw InputError(
      fmt::format("the {} split in {} holds no examples (evaluation needs at least one)",
                  source.split_name(split), source.location()));
}

TrainedRun load_trained_run(Accelerator& accelerator, const TrainingArguments& args) {
  std::string weights = base::join_path(args.output_dir(), "model.safetensors");
  if (!std::filesystem::exists(weights)) {
    throw InputError(fmt::format(
        "{} does not exist (train first, or set output_dir to a trained run)", weights));
  }
  TrainedRun run;
  auto source = data_source(accelerator, args);
  run.eval_dataset = source->split("eval", args.max_eval_samples());
  check_not_empty(*run.eval_dataset, "eval", *source);
  run.collator = source->collator();
  run.model = create_model(args, source->info());
  run.compute_metrics = metrics_for_task(run.model->task().kind);
  // Mapped, not read: a damaged or huge file fails on its header before any of it is read.
  io::load_state_dict(*run.model, io::map_safetensors(weights).tensors, weights);
  check_model_takes(*run.model, *run.eval_dataset, run.collator, "eval", *source, args);
  return run;
}

std::unique_ptr<OutputDir> lock_for_results(const TrainingArguments& args) {
  auto output = lock_output_dir(args);
  std::string all_results = base::join_path(args.output_dir(), "all_results.json");
  if (output && std::filesystem::exists(all_results)) base::read_json_object(all_results);
  return output;
}

}  // namespace trainer::cli
