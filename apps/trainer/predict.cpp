// `trainer predict`: a trained run's outputs on the eval split, saved for NumPy.
#include "apps/trainer/commands.h"
#include "apps/trainer/run_setup.h"
#include "lib/base/files.h"
#include "lib/runtime/signals.h"

namespace trainer::cli {

// Transformers' run scripts with do_predict: Trainer.predict on the eval split, the metrics
// printed and saved as predict_results.json (and merged into all_results.json), the outputs and
// labels saved for NumPy (save_predictions).
int predict_command(const TrainingArguments& args) {
  Accelerator accelerator(accelerator_options(args));
  TrainedRun run = load_trained_run(accelerator, args);
  auto output = lock_for_results(args);
  Trainer trainer(run.model, args, nullptr, nullptr, run.collator, run.compute_metrics);
  runtime::defer_interrupts();
  PredictionResult result = trainer.predict(run.eval_dataset);
  base::WriteBatch batch;
  save_predictions(trainer, result, run.eval_dataset->size(), args, batch);
  batch.commit();
  return 0;
}

}  // namespace trainer::cli
