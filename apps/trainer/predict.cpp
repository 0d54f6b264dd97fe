// `trainer predict`: a trained run's outputs on the eval split, saved for NumPy.
#include <torch/torch.h>

#include "apps/trainer/commands.h"
#include "apps/trainer/run_setup.h"
#include "lib/base/files.h"
#include "lib/io/npy.h"
#include "lib/runtime/signals.h"

namespace trainer::cli {
namespace {

// One tensor as a .npy file's bytes: float32 for outputs, int64 for labels.
std::string npy_of(torch::Tensor tensor) {
  const bool floating = tensor.is_floating_point();
  tensor = tensor.to(floating ? torch::kFloat : torch::kLong).contiguous().cpu();
  return io::npy_bytes(floating ? "<f4" : "<i8", tensor.sizes().vec(), tensor.data_ptr(),
                       static_cast<size_t>(tensor.nbytes()));
}

}  // namespace

// Transformers' run scripts with do_predict: Trainer.predict on the eval split, the metrics
// printed and saved as predict_results.json (and merged into all_results.json), the outputs and
// labels saved for NumPy.
int predict_command(const TrainingArguments& args) {
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
                            npy_of(result.predictions), &batch);
    if (result.label_ids.defined()) {
      base::write_file_atomic(base::join_path(args.output_dir(), "label_ids.npy"),
                              npy_of(result.label_ids), &batch);
    }
  }
  trainer.log_metrics("predict", metrics);
  trainer.save_metrics("predict", metrics, &batch);
  batch.commit();
  return 0;
}

}  // namespace trainer::cli
