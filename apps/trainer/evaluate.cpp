// `trainer evaluate`: a trained run's model scored on the eval split.
#include "apps/trainer/commands.h"
#include "apps/trainer/run_setup.h"
#include "lib/base/files.h"
#include "lib/runtime/signals.h"

namespace trainer::cli {

int evaluate_command(const TrainingArguments& args) {
  Accelerator accelerator(accelerator_options(args));
  TrainedRun run = load_trained_run(accelerator, args);
  auto output = lock_for_results(args);
  Trainer trainer(run.model, args, nullptr, run.eval_dataset, run.collator, run.compute_metrics);
  runtime::defer_interrupts();
  Metrics metrics = trainer.evaluate();
  metrics["eval_samples"] = static_cast<double>(run.eval_dataset->size());
  add_perplexity(metrics, run.model->task().kind);
  base::WriteBatch batch;
  trainer.log_metrics("eval", metrics);
  trainer.save_metrics("eval", metrics, &batch);
  batch.commit();
  return 0;
}

}  // namespace trainer::cli
