// The `trainer` program: `trainer train`, `evaluate` and `predict` on any registered data set, with
// Transformers' arguments, outputs and printed metrics, on one process or on every process a
// launcher started (only the main one prints and writes); `trainer launch` starts them; `trainer
// plot` draws runs' curves; `trainer generate` samples from a trained gpt; `trainer env` prints the
// versions a bug report needs. Bad input exits 2 with one line.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/utsname.h>

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "apps/trainer/cli.h"
#include "apps/trainer/generate.h"
#include "lib/accelerate/accelerator.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/data/registry.h"
#include "lib/distributed/env.h"
#include "lib/distributed/launcher.h"
#include "lib/io/npy.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "lib/models/torchscript.h"
#include "lib/report/plot.h"
#include "lib/runtime/allocator.h"
#include "lib/runtime/signals.h"
#include "trainer/integrations.h"
#include "trainer/output_dir.h"
#include "trainer/trainer.h"

// NCCL's version as LibTorch's CUDA library reports it: major << 32 | minor << 16 | patch
// (declared in torch/csrc/cuda/nccl.h, which would pull the CUDA headers into this file).
namespace torch::cuda::nccl {
std::uint64_t version();
}

namespace {

using namespace trainer;

// The value after `key` in LibTorch's build description (at::show_config()), up to a comma or
// the end of the line; "" when absent.
std::string config_value(const std::string& config, const std::string& key) {
  size_t at = config.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  size_t end = config.find_first_of(",\n", at);
  return config.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// `trainer env`: what `accelerate env` and `transformers env` print, for a C++ program.
int print_env() {
  const std::string config = at::show_config();
  utsname host{};
  uname(&host);
  std::string distro;
  std::ifstream release("/etc/os-release");
  for (std::string line; std::getline(release, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) distro = line.substr(12);
  }
  distro.erase(std::remove(distro.begin(), distro.end(), '"'), distro.end());
  std::string cpu;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; cpu.empty() && std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) cpu = line.substr(line.find(':') + 2);
  }
  const auto& cuda = at::detail::getCUDAHooks();
  const bool has_cuda = torch::cuda::is_available();
  const long cudnn = cuda.versionCuDNN();
  const uint64_t nccl = torch::cuda::nccl::version();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  fmt::print("Copy-and-paste the text below in your GitHub issue\n\n");
  fmt::print("- `trainer` version: {}\n", TRAINER_VERSION);
  fmt::print("- Platform: {} {} {}{}\n", host.sysname, host.release, host.machine,
             distro.empty() ? "" : " (" + distro + ")");
  fmt::print("- Compiler: {}\n",
#if defined(__clang__)
             "Clang " __clang_version__
#elif defined(__GNUC__)
             "GCC " __VERSION__
#else
             "unknown"
#endif
  );
  fmt::print("- LibTorch version: {}\n", TORCH_VERSION);
  const std::string built_cuda = config_value(config, "CUDA_VERSION=");
  const std::string built_cudnn = config_value(config, "CUDNN_VERSION=");
  fmt::print(
      "- LibTorch built with CUDA: {}; cuDNN: {}; NCCL: {}; Gloo: {}\n",
      built_cuda.empty() ? "no" : built_cuda,
      cudnn > 0             ? fmt::format("{}.{}.{}", cudnn / 10000, cudnn / 100 % 100, cudnn % 100)
      : built_cudnn.empty() ? "no"
                            : built_cudnn,
      nccl > 0 ? fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff) : "no",
      config_value(config, "USE_GLOO=") == "ON" ? "yes" : "no");
  if (has_cuda) {
    const long runtime = cuda.versionCUDART();
    fmt::print("- CUDA available: yes; GPUs: {} (cuda:0 to cuda:{}); CUDA runtime {}.{}\n",
               torch::cuda::device_count(), torch::cuda::device_count() - 1, runtime / 1000,
               runtime / 10 % 100);
  } else {
    fmt::print("- CUDA available: no (training runs on the CPU)\n");
  }
  fmt::print("- CPU: {} ({} logical CPUs)\n", cpu.empty() ? "unknown" : cpu,
             std::thread::hardware_concurrency());
  fmt::print("- Threads: {} intra-op (OMP_NUM_THREADS={}), {} inter-op\n", at::get_num_threads(),
             omp ? omp : "unset", at::get_num_interop_threads());
  fmt::print("- BLAS: {}\n",
             at::hasMKL() ? "Intel MKL " + config_value(config, "Math Kernel Library Version ")
                          : "not MKL");
  fmt::print("- oneDNN: {}\n", at::hasMKLDNN() ? config_value(config, "MKL-DNN ") : "no");
  fmt::print("- CPU capability: {}\n", config_value(config, "CPU capability usage: "));
  return 0;
}

// The data set the arguments name; a split's caches are written by the node's first process and
// read by the others.
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

// The main process (RANK 0) locks output_dir, once the data is loaded and checked; the others
// never write there.
std::unique_ptr<OutputDir> lock_output_dir(const TrainingArguments& args) {
  if (dist::read_dist_env().rank != 0) return nullptr;
  return std::make_unique<OutputDir>(args.output_dir());
}

// The model the arguments name, shaped for the data: the TorchScript module of
// model_name_or_path, else model_name.
std::shared_ptr<models::Model> create_model(const TrainingArguments& args,
                                            const data::DataInfo& info) {
  if (args.model_name_or_path()) {
    return models::load_torchscript(*args.model_name_or_path(), args.model_config(), info);
  }
  return models::make_model(args.model_name(), args.model_config(), info);
}

// Runs the first example of `split` through the model, so that data of the wrong shape fails
// before training, with one line, rather than inside a layer after hours. Eval mode: no dropout,
// so no random number is drawn.
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

// An empty split would train or score nothing, and say nothing.
void check_not_empty(const data::Dataset& dataset, const std::string& split,
                     const data::DataSource& source) {
  if (dataset.size() > 0) return;
  throw InputError(
      fmt::format("the {} split in {} holds no examples (evaluation needs at least one)",
                  source.split_name(split), source.location()));
}

// output_dir/loss.svg, the run's curves, once its other files are in place (an earlier run's went
// with them). A picture is no reason to fail a finished run: a failure to write it is a warning.
void write_loss_svg(const Trainer& trainer, const TrainingArguments& args) {
  const std::string path = base::join_path(args.output_dir(), "loss.svg");
  try {
    const std::string label = args.run_name().value_or(report::folder_name(args.output_dir()));
    report::PlotRun run =
        report::plot_run_from_log_history(label, trainer.state().log_history, path);
    base::write_file_atomic(path, report::plot_svg({run}, "Training curves: " + label));
  } catch (const std::exception& e) {
    base::warn("{} not written: {} (the run's other results are saved)", path,
               base::first_line(e.what()));
  }
}

// A language model's run ends with a sample of what it learned: what `trainer generate
// OUTPUT_DIR --seed <seed>` prints for the saved weights.
void print_sample(models::Model& model, const TrainingArguments& args, const data::DataInfo& info) {
  auto* gpt = dynamic_cast<models::Gpt*>(&model);
  if (!gpt) return;
  cli::GenerateOptions options;
  options.seed = static_cast<uint64_t>(args.seed());
  fmt::print(
      "\nSample (trainer generate {} --seed {}):\n{}\n", args.output_dir(), options.seed,
      sample_text(*gpt, options,
                  info.input_shape.empty() ? gpt->config().block_size : info.input_shape.back()));
  std::fflush(stdout);
}

int train(const TrainingArguments& args) {
  Accelerator accelerator(accelerator_options(args));
  auto source = data_source(accelerator, args);
  auto train_dataset = source->split("train", args.max_train_samples());
  auto eval_dataset = wants_eval(args) ? source->split("eval", args.max_eval_samples()) : nullptr;
  if (eval_dataset) check_not_empty(*eval_dataset, "eval", *source);
  const data::DataInfo info = source->info();
  torch::manual_seed(static_cast<uint64_t>(args.seed()));
  auto model = create_model(args, info);
  const data::DataCollator collator = source->collator();
  check_model_takes(*model, *train_dataset, collator, "train", *source, args);
  if (eval_dataset) check_model_takes(*model, *eval_dataset, collator, "eval", *source, args);
  // Only now, with the arguments valid and the data loaded and checked, is output_dir touched.
  auto output = lock_output_dir(args);
  // A resumed run (asked for, or restarted by the launcher) continues the run already there.
  const bool resuming = args.resume_from_checkpoint() || dist::read_dist_env().restart_count > 0;
  if (output && !output->earlier_entries().empty() && !args.overwrite_output_dir() && !resuming) {
    const auto& names = output->earlier_entries();
    throw InputError(fmt::format(
        "output_dir {} already holds {} ({}{}); set overwrite_output_dir true to replace an "
        "earlier run's results, or choose another output_dir",
        args.output_dir(), names.size() == 1 ? "a file" : fmt::format("{} files", names.size()),
        fmt::format("{}", fmt::join(names.begin(),
                                    names.begin() + std::min<size_t>(3, names.size()), ", ")),
        names.size() > 3 ? ", ..." : ""));
  }

  Trainer trainer(model, args, train_dataset, eval_dataset, collator,
                  metrics_for_task(model->task().kind));
  // From here a signal stops the loop at the next step boundary, where a checkpoint is saved (or
  // lets the saving finish) rather than ending the process.
  runtime::defer_interrupts();
  TrainOutput result = trainer.train();
  // Every file of the run lands together once training and the last evaluation are over, or
  // none does (a full disk): an earlier run's files stay as they were until then.
  base::WriteBatch batch;
  trainer.save_model();
  if (accelerator.is_main_process()) {
    base::write_file_atomic(base::join_path(args.output_dir(), "training_args.json"),
                            args.to_json());
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
  // overwrite_output_dir replaces all of an earlier run's results: what this run did not write
  // (eval_results.json of a run that evaluated) goes.
  if (output) {
    for (const std::string& name : run_result_files()) {
      batch.remove_on_commit(base::join_path(args.output_dir(), name));
    }
    const auto reports = args.effective_report_to();
    if (std::find(reports.begin(), reports.end(), "jsonl") == reports.end()) {
      batch.remove_on_commit(base::join_path(args.output_dir(), JsonlCallback::kFileName));
    }
  }
  batch.commit();
  if (accelerator.is_main_process()) write_loss_svg(trainer, args);
  if (accelerator.is_main_process()) print_sample(*model, args, info);
  trainer.remove_earlier_checkpoints();
  if (int sig = runtime::interrupt_signal()) {
    throw Interrupted(sig, fmt::format("interrupted by {} after training; its results were saved",
                                       runtime::signal_name(sig)));
  }
  return 0;
}

// The model of a trained run (output_dir/model.safetensors) and the eval split, for evaluate
// and predict.
struct TrainedRun {
  std::shared_ptr<models::Model> model;
  std::shared_ptr<const data::Dataset> eval_dataset;
  data::DataCollator collator;
  ComputeMetrics compute_metrics;
};

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

// The output directory's lock, after checking that all_results.json (which the metrics are
// merged into) can be read: a damaged one is said now, not replaced later.
auto lock_for_results(const TrainingArguments& args) {
  auto output = lock_output_dir(args);
  std::string all_results = base::join_path(args.output_dir(), "all_results.json");
  if (output && std::filesystem::exists(all_results)) base::read_json_object(all_results);
  return output;
}

int evaluate(const TrainingArguments& args) {
  Accelerator accelerator(accelerator_options(args));
  TrainedRun run = load_trained_run(accelerator, args);
  auto output = lock_for_results(args);
  Trainer trainer(run.model, args, nullptr, run.eval_dataset, run.collator, run.compute_metrics);
  runtime::defer_interrupts();
  Metrics metrics = trainer.evaluate();
  metrics["eval_samples"] = static_cast<double>(run.eval_dataset->size());
  base::WriteBatch batch;
  trainer.log_metrics("eval", metrics);
  trainer.save_metrics("eval", metrics);
  batch.commit();
  return 0;
}

// One tensor as a .npy file's bytes: float32 for outputs, int64 for labels.
std::string npy_of(torch::Tensor tensor) {
  const bool floating = tensor.is_floating_point();
  tensor = tensor.to(floating ? torch::kFloat : torch::kLong).contiguous().cpu();
  return io::npy_bytes(floating ? "<f4" : "<i8", tensor.sizes().vec(), tensor.data_ptr(),
                       static_cast<size_t>(tensor.nbytes()));
}

// Transformers' run scripts with do_predict: Trainer.predict on the eval split, the metrics
// printed and saved as predict_results.json (and merged into all_results.json), the outputs and
// labels saved for NumPy.
int predict(const TrainingArguments& args) {
  Accelerator accelerator(accelerator_options(args));
  TrainedRun run = load_trained_run(accelerator, args);
  auto output = lock_for_results(args);
  Trainer trainer(run.model, args, nullptr, nullptr, run.collator, run.compute_metrics);
  runtime::defer_interrupts();
  PredictionResult result = trainer.predict(run.eval_dataset);
  Metrics metrics = result.metrics;
  metrics["predict_samples"] = static_cast<double>(run.eval_dataset->size());
  base::WriteBatch batch;
  if (accelerator.is_main_process()) {
    base::write_file_atomic(base::join_path(args.output_dir(), "predictions.npy"),
                            npy_of(result.predictions));
    if (result.label_ids.defined()) {
      base::write_file_atomic(base::join_path(args.output_dir(), "label_ids.npy"),
                              npy_of(result.label_ids));
    }
  }
  trainer.log_metrics("predict", metrics);
  trainer.save_metrics("predict", metrics);
  batch.commit();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainer::base::open_standard_streams();
  trainer::runtime::configure_allocator();
  trainer::runtime::catch_interrupts("trainer: ");
  // A closed stdout (trainer train ... | head -1) makes writes fail instead of killing the run.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    auto command = cli::parse_command_line(argc, argv);
    if (!command) return 0;
    if (command->name == "launch") {
      if (const char* rank = std::getenv("RANK")) {
        throw InputError(fmt::format(
            "trainer launch runs inside a distributed run already (RANK={}); start it once per "
            "node, outside any launcher",
            rank));
      }
      return dist::launch(command->launch);
    }
    if (command->name == "env") return print_env();
    if (command->name == "generate") return generate_text(command->generate);
    if (command->name == "plot") {
      auto [svg, html] = report::write_plot(command->plot_dirs, command->plot_output);
      fmt::print("Wrote {} and {}\n", svg, html);
      return 0;
    }
    TrainingArguments args = TrainingArguments::parse(command->config, command->overrides);
    if (command->name == "predict") return predict(args);
    return command->name == "train" ? train(args) : evaluate(args);
  } catch (...) {
    // The launcher's SIGTERM to the other ranks may reach this one as it ends: one line only.
    runtime::defer_interrupts();
    return report_error("trainer: ");
  }
}
