// What train, evaluate and predict share before they run.
#include "apps/trainer/run_setup.h"

#include <cstdlib>
#include <filesystem>
#include <new>

#include <unistd.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
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

namespace {

// The machine's memory as the kernel counts it (MemTotal), in bytes; 0 when unknown.
uint64_t memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// "12.3 GB" for a byte count.
std::string gigabytes(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

// A model too large for the machine: one line with what it asked for and what there is, not the
// allocator's "[enforce fail at alloc_cpu.cpp:...] ... can't allocate memory".
[[noreturn]] void model_too_large(const TrainingArguments& args, const std::string& detail) {
  std::string needed = "more memory than the machine has";
  const std::string marker = "you tried to allocate ";
  const size_t at = detail.find(marker);
  if (at != std::string::npos) {
    const double bytes = std::strtod(detail.c_str() + at + marker.size(), nullptr);
    needed = fmt::format("{:.0f} bytes ({}) for one of its tensors", bytes, gigabytes(bytes));
  }
  const uint64_t total = memory_bytes();
  throw InputError(fmt::format(
      "model {} with model_config {} is too large for this machine: it needs {}, and the machine "
      "has {} bytes ({}) of memory in all; choose a smaller model or model_config",
      args.model_name_or_path().value_or(args.model_name()), base::shown(args.model_config()),
      needed, total, gigabytes(static_cast<double>(total))));
}

}  // namespace

std::shared_ptr<models::Model> create_model(const TrainingArguments& args,
                                            const data::DataInfo& info) {
  // Both named (a config's model_name, a --model_name_or_path on the command line): the file
  // gives the model, and says so rather than ignoring model_name in silence.
  if (args.model_name_or_path() && args.model_name() != "basic_net" &&
      dist::read_dist_env().rank == 0) {
    base::warn("model_name {} is not used: model_name_or_path {} gives the model",
               args.model_name(), *args.model_name_or_path());
  }
  try {
    if (args.model_name_or_path()) {
      return models::load_torchscript(*args.model_name_or_path(), args.model_config(), info);
    }
    return models::make_model(args.model_name(), args.model_config(), info);
  } catch (const std::bad_alloc&) {
    model_too_large(args, "");
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("can't allocate memory") == std::string::npos) throw;
    model_too_large(args, what);
  }
}

namespace {

// The name a message gives the model: its TorchScript file, or its registered name.
std::string model_label(const TrainingArguments& args) {
  return args.model_name_or_path() ? *args.model_name_or_path() : args.model_name();
}

// The first batch's outputs fit the task: floating point, one row per example, and the shape the
// task's loss and metrics read (a model with 5 logits for 3 classes would train and predict
// classes that do not exist).
void check_model_output(const models::ModelOutput& out, const data::Batch& batch,
                        data::TaskKind task, const data::DataInfo& info, bool evaluated,
                        const TrainingArguments& args) {
  const torch::Tensor& labels = batch.at("labels");
  const int64_t examples = labels.size(0);
  std::string expected;
  bool fits = out.logits.defined() && at::isFloatingType(out.logits.scalar_type()) &&
              out.logits.dim() >= 1 && out.logits.size(0) == examples;
  // A model that scores itself (its own loss) decides the shape of its outputs, unless the task's
  // metrics read them: accuracy always (a class past the data's would be counted), rmse and mae
  // on the evaluation split; a language model's evaluation reads only the loss.
  const bool shape_free =
      out.loss.defined() &&
      (task == data::TaskKind::kCausalLM || (task == data::TaskKind::kRegression && !evaluated));
  if (shape_free && fits) return;
  switch (task) {
    case data::TaskKind::kClassification:
      expected = fmt::format("[{}, {}] (a score for each of the data set's {} classes)", examples,
                             info.num_labels, info.num_labels);
      fits = fits && out.logits.dim() == 2 && out.logits.size(1) == info.num_labels;
      break;
    case data::TaskKind::kRegression:
      expected = fmt::format("[{}] or [{}, 1] (one value per example)", examples, examples);
      fits = fits && out.logits.numel() == labels.numel();
      break;
    case data::TaskKind::kCausalLM:
      expected = fmt::format("[{}, {}, V] with V >= {} (a score for each token of the vocabulary)",
                             examples, labels.dim() > 1 ? labels.size(1) : 0, info.num_labels);
      fits = fits && out.logits.dim() == 3 && labels.dim() == 2 &&
             out.logits.size(1) == labels.size(1) && out.logits.size(2) >= info.num_labels;
      break;
  }
  if (fits) return;
  const std::string came = out.logits.defined() ? "outputs " + models::tensor_text(out.logits)
                                                : std::string("no outputs");
  throw InputError(fmt::format(
      "model {} gives {} for a batch of {} examples; a {} model must give floating-point outputs "
      "of shape {}",
      model_label(args), came, examples, data::task_name(task), expected));
}

}  // namespace

void check_model_takes(models::Model& model, const data::Dataset& dataset,
                       const data::DataCollator& collator, const std::string& split,
                       data::DataSource& source, const TrainingArguments& args) {
  if (dataset.size() == 0) return;
  torch::NoGradGuard no_grad;
  const bool training = model.is_training();
  model.eval();
  // Two examples where there are two: a model that loses the batch dimension shows it.
  const int64_t count = std::min<int64_t>(2, dataset.size());
  std::optional<data::Batch> batch;
  models::ModelOutput out;
  try {
    if (!collator) batch = dataset.get_batch(torch::arange(count, torch::kLong));
    if (!batch) {
      std::vector<data::Example> examples;
      for (int64_t i = 0; i < count; ++i) examples.push_back(dataset.get(i));
      batch = (collator ? collator : data::DataCollator(data::default_collate))(examples);
    }
    out = model.forward(*batch);
  } catch (const c10::Error& e) {
    data::Example first = dataset.get(0);
    throw InputError(fmt::format(
        "the {} examples in {} have inputs of shape {}; model {} cannot take them ({})",
        source.split_name(split), source.location(), base::shape_text(first.input.sizes().vec()),
        model_label(args), base::first_line(e.what_without_backtrace())));
  }
  check_model_output(out, *batch, model.task().kind, source.info(), split != "train", args);
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
