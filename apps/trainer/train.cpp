// `trainer train`: the data and the model checked before output_dir is touched, the Trainer's
// loop, and every result of the run landing together.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "apps/trainer/commands.h"
#include "apps/trainer/generate.h"
#include "apps/trainer/run_setup.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/distributed/env.h"
#include "lib/io/safetensors_header.h"
#include "lib/models/gpt.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/lora.h"
#include "lib/report/curve.h"
#include "lib/report/plot.h"
#include "lib/runtime/signals.h"
#include "trainer/integrations.h"

namespace trainer::cli {
namespace {

// metric_for_best_model names a metric this task's evaluation reports: known before training, so
// that a typo does not end a run at its first evaluation.
void check_best_metric(const TrainingArguments& args, data::TaskKind task) {
  const std::string name = args.best_metric_name();
  if (name.empty()) return;
  const std::vector<std::string> names = metric_names_for_task(task);
  const std::string bare = base::starts_with(name, "eval_") ? name.substr(5) : name;
  if (std::find(names.begin(), names.end(), bare) != names.end()) return;
  throw InputError(fmt::format(
      "argument metric_for_best_model: {} is not a metric of a {} evaluation (one of {}, with or "
      "without eval_)",
      base::shown_text(name), data::task_name(task), fmt::join(names, ", ")));
}

// output_dir/loss.svg, the run's curves, once its other files are in place (an earlier run's went
// with them). A picture is no reason to fail a finished run: a failure to write it is a warning.
// Drawn from the per-step curve (the evaluations from log_history). Returns its path, or "" when
// it could not be written.
std::string write_loss_svg(const Trainer& trainer, const TrainingArguments& args) {
  const std::string path = base::join_path(args.output_dir(), "loss.svg");
  try {
    const std::string label = args.run_name().value_or(report::folder_name(args.output_dir()));
    report::PlotRun run =
        report::plot_run_from_log_history(label, trainer.state().log_history, path);
    report::add_step_curve(run, trainer.step_curve(), report::kDefaultSmoothing);
    base::write_file_atomic(path, report::plot_svg({run}, "Training curves: " + label));
    return path;
  } catch (const std::exception& e) {
    base::warn("{} not written: {} (the run's other results are saved)", path,
               base::first_line(e.what()));
    return "";
  }
}

// A language model's run ends with a sample of what it learned: what `trainer generate
// OUTPUT_DIR --seed <seed>` prints for the saved weights.
void print_sample(models::Model& model, const TrainingArguments& args, const data::DataInfo& info) {
  // A sequence classifier scores; it does not write.
  if (const auto* hf = models::as_hf_causal_lm(model); hf && hf->is_classifier()) return;
  // A Hugging Face model: output_dir is its folder now, model and tokenizer.
  const bool folder =
      models::is_hf_model_dir(args.output_dir()) || models::is_adapter_dir(args.output_dir());
  if (models::as_hf_causal_lm(model) && folder &&
      base::exists(base::join_path(args.output_dir(), base::hf::kTokenizer))) {
    cli::GenerateOptions options;
    options.output_dir = args.output_dir();
    options.seed = static_cast<uint64_t>(args.seed());
    options.do_sample = true;
    options.max_new_tokens = 64;
    fmt::print("\nSample (trainer generate {} --do_sample true --max_new_tokens 64 --seed {}):\n",
               args.output_dir(), options.seed);
    std::fflush(stdout);
    try {
      generate_text(options);
    } catch (const std::exception& e) {
      // The run's results are saved: a sample that cannot be drawn is no reason to fail it.
      base::warn("no sample: {}", base::first_line(e.what()));
    }
    return;
  }
  auto* gpt = models::find_wrapped<models::Gpt>(model);
  if (!gpt) return;
  cli::GenerateOptions options;
  options.seed = static_cast<uint64_t>(args.seed());
  fmt::print(
      "\nSample (trainer generate {} --seed {}):\n{}\n", args.output_dir(), options.seed,
      sample_text(*gpt, options,
                  info.input_shape.empty() ? gpt->config().block_size : info.input_shape.back()));
  std::fflush(stdout);
}

// fsdp_config's transformer_layer_cls_to_wrap must name a class of the model's blocks: said
// before output_dir is touched.
void check_fsdp_wrap(const TrainingArguments& args, models::Model& model) {
  const auto plan = args.fsdp_plan();
  if (!plan) return;
  const std::string unknown = models::unknown_block_class(model.blocks(), plan->layer_classes);
  if (!unknown.empty()) {
    throw InputError("argument fsdp_config: transformer_layer_cls_to_wrap " + unknown);
  }
}

// An earlier run's results in output_dir are replaced only when asked (overwrite_output_dir) or
// when this run continues it (resume_from_checkpoint, a restart by the launcher).
void refuse_earlier_run(const TrainingArguments& args, const OutputDir* output) {
  const bool resuming = args.resume_from_checkpoint() || dist::read_dist_env().restart_count > 0;
  if (!output || output->earlier_entries().empty() || args.overwrite_output_dir() || resuming) {
    return;
  }
  const auto& names = output->earlier_entries();
  throw InputError(fmt::format(
      "output_dir {} already holds {} ({}{}); set overwrite_output_dir true to replace an "
      "earlier run's results, or choose another output_dir",
      args.output_dir(), names.size() == 1 ? "a file" : fmt::format("{} files", names.size()),
      fmt::format(
          "{}", fmt::join(names.begin(), names.begin() + std::min<size_t>(3, names.size()), ", ")),
      names.size() > 3 ? ", ..." : ""));
}

// overwrite_output_dir replaces all of an earlier run's results: what this run did not write
// (eval_results.json of a run that evaluated) goes when `batch` commits.
void remove_earlier_results(base::WriteBatch& batch, const TrainingArguments& args,
                            const OutputDir& output, const models::Model& model) {
  for (const std::string& name : run_result_files()) {
    batch.remove_on_commit(base::join_path(args.output_dir(), name));
  }
  // An earlier run's weights in the other layout (shards or one file), and its model folder's
  // files (config, tokenizer) where this run's model has none: a loader must not find them.
  for (const auto& entry : output.earlier_entries()) {
    const bool folder_file =
        entry == base::hf::kConfig || entry == base::hf::kGenerationConfig ||
        entry == base::hf::kAdapterConfig || entry == base::hf::kAdapterWeights ||
        base::starts_with(entry, "tokenizer") || entry == base::hf::kSpecialTokensMap ||
        entry == base::hf::kChatTemplate;
    if (io::is_model_weights_file(entry) ||
        (folder_file && model.pretrained_files.count(entry) == 0)) {
      batch.remove_on_commit(base::join_path(args.output_dir(), entry));
    }
  }
  const auto reports = args.effective_report_to();
  if (std::find(reports.begin(), reports.end(), "jsonl") == reports.end()) {
    batch.remove_on_commit(base::join_path(args.output_dir(), JsonlCallback::kFileName));
  }
}

void evaluate_trained(base::WriteBatch& batch, Trainer& trainer, const TrainingArguments& args,
                      const data::Dataset& eval_dataset);

// The run's results, each written into `batch`: the model, the arguments, the step curve, the
// state, and the train and eval metrics (the last evaluation's, when it scored this model).
void save_results(base::WriteBatch& batch, Trainer& trainer, const TrainOutput& result,
                  const TrainingArguments& args, int64_t train_samples,
                  const std::shared_ptr<const data::Dataset>& eval_dataset) {
  trainer.save_model("", &batch);
  if (trainer.accelerator().is_main_process()) {
    base::write_file_atomic(base::join_path(args.output_dir(), "training_args.json"),
                            args.to_json(), &batch);
    base::write_file_atomic(base::join_path(args.output_dir(), report::kStepCurveFile),
                            report::step_curve_npy(trainer.step_curve()), &batch);
  }
  trainer.save_state(&batch);
  Metrics train_metrics = result.metrics;
  train_metrics["train_samples"] = static_cast<double>(train_samples);
  trainer.accelerator().print("");
  trainer.log_metrics("train", train_metrics);
  trainer.save_metrics("train", train_metrics, &batch);
  if (!eval_dataset) return;
  if (wants_eval(args)) evaluate_trained(batch, trainer, args, *eval_dataset);
  // do_predict: the trained model's outputs on the eval split, as `trainer predict` writes them
  // (after the evaluation, as Transformers' run scripts).
  if (args.do_predict()) {
    save_predictions(trainer, trainer.predict(eval_dataset), eval_dataset->size(), args, batch);
  }
}

// The final evaluation's metrics into eval_results.json.
void evaluate_trained(base::WriteBatch& batch, Trainer& trainer, const TrainingArguments& args,
                      const data::Dataset& eval_dataset) {
  // The evaluation at the last step already scored this model; do not run it twice, unless
  // the memory metrics ask for an evaluation of its own (one inside train() has none), or a
  // full bf16 / fp16 evaluation (one inside train() is not cast, as in Transformers).
  const bool full_eval = args.bf16_full_eval() || args.fp16_full_eval();
  Metrics eval_metrics = trainer.last_eval_step() == trainer.state().global_step &&
                                 args.skip_memory_metrics() && !full_eval
                             ? trainer.last_eval_metrics()
                             : trainer.evaluate();
  eval_metrics["eval_samples"] = static_cast<double>(eval_dataset.size());
  add_perplexity(eval_metrics, trainer.model().task().kind);
  trainer.log_metrics("eval", eval_metrics);
  trainer.save_metrics("eval", eval_metrics, &batch);
}

// After the results are in place: the picture, a language model's sample, the last line, and a
// signal that came during training said as such.
void finish_run(Trainer& trainer, models::Model& model, const TrainingArguments& args,
                const data::DataInfo& info, const std::function<void()>& chat_sample) {
  Accelerator& accelerator = trainer.accelerator();
  std::string picture;
  if (accelerator.is_main_process()) picture = write_loss_svg(trainer, args);
  // A Hugging Face model's sample is drawn from the saved folder; the gpt's from the weights in
  // memory, which a sharded run gathers on the main process for it (every process decides alike).
  // Everything is saved: the optimizer's state and the gradients go before a sample loads the
  // saved folder beside the model (they would make the run's peak of memory).
  if (auto optimizer = trainer.optimizer()) optimizer->state().clear();
  for (auto& p : model.parameters()) p.mutable_grad().reset();
  auto sample = [&] {
    if (!accelerator.is_main_process()) return;
    if (chat_sample) {
      chat_sample();
    } else {
      print_sample(model, args, info);
    }
  };
  if (models::as_hf_causal_lm(model)) {
    sample();
  } else {
    accelerator.with_full_params(sample, /*rank0_only=*/true);
  }
  // The last line of a finished run: where its picture is.
  if (!picture.empty()) accelerator.print(fmt::format("Training curves: {}", picture));
  if (int sig = runtime::interrupt_signal()) {
    throw Interrupted(sig, fmt::format("interrupted by {} after training; its results were saved",
                                       runtime::signal_name(sig)));
  }
}

}  // namespace

int train_command(const TrainingArguments& args) { return run_training(args, {}); }

int run_training(const TrainingArguments& args, const TrainingRecipe& recipe) {
  check_auto_find_batch_size(args, dist::read_dist_env().world_size);
  Accelerator accelerator(accelerator_options(args));
  ModelSource model_source = resolve_model_source(args);
  auto source = recipe.data ? recipe.data(accelerator, args, model_source)
                            : data_source(accelerator, args, model_source);
  adopt_data_labels(model_source, *source);
  if (recipe.model_source) recipe.model_source(model_source);
  auto train_dataset = source->split("train", args.max_train_samples());
  auto eval_dataset =
      needs_eval_split(args) ? source->split("eval", args.max_eval_samples()) : nullptr;
  if (eval_dataset) check_not_empty(*eval_dataset, "eval", *source);
  const data::DataInfo info = source->info();
  torch::manual_seed(static_cast<uint64_t>(args.seed()));
  auto model = create_model(args, model_source, info);
  const data::DataCollator collator = source->collator();
  check_best_metric(args, model->task().kind);
  // Where the main process will write: checked there (a node's own folders may differ).
  if (dist::read_dist_env().rank == 0) check_report_destinations(args);
  check_fsdp_wrap(args, *model);
  check_model_takes(*model, *train_dataset, collator, "train", *source, args);
  if (eval_dataset) check_model_takes(*model, *eval_dataset, collator, "eval", *source, args);
  // Only now, with the arguments valid and the data loaded and checked, is output_dir touched.
  auto output = lock_output_dir(args);
  refuse_earlier_run(args, output.get());

  std::unique_ptr<Trainer> made =
      recipe.trainer ? recipe.trainer(model, args, train_dataset, eval_dataset, collator)
                     : std::make_unique<Trainer>(model, args, train_dataset, eval_dataset, collator,
                                                 metrics_for_task(model->task().kind));
  Trainer& trainer = *made;
  // From here a signal stops the loop at the next step boundary, where a checkpoint is saved (or
  // lets the saving finish) rather than ending the process.
  runtime::defer_interrupts();
  TrainOutput result = trainer.train();
  // Every file of the run lands together once training and the last evaluation are over, or
  // none does (a full disk): an earlier run's files stay as they were until then.
  base::WriteBatch batch;
  save_results(batch, trainer, result, args, train_dataset->size(), eval_dataset);
  if (output) remove_earlier_results(batch, args, *output, *model);
  batch.commit();
  // The results are in place: the earlier run's checkpoints may go (first, before anything that
  // could still fail or be interrupted).
  trainer.remove_earlier_checkpoints();
  finish_run(trainer, *model, args, info, recipe.chat_sample);
  return 0;
}

}  // namespace trainer::cli
