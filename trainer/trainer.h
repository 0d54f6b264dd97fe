// The Trainer: Transformers' Trainer in C++. train() runs the loop (AdamW with weight-decay
// grouping, learning-rate schedule, gradient accumulation and clipping, logging, evaluation,
// callbacks); evaluate() scores the eval dataset; compute_loss() is the virtual a subclass
// overrides, as the tutorial's MyTrainer does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "datasets/dataloader.h"
#include "datasets/dataset.h"
#include "lib/models/models.h"
#include "trainer/trainer_state.h"
#include "trainer/training_args.h"

namespace trainer {

// compute_loss's result: the loss, and the model's outputs when asked for them.
struct LossOutput {
  torch::Tensor loss;
  torch::Tensor outputs;
};

// What compute_metrics receives: every eval prediction (model outputs) and label, concatenated.
struct EvalPrediction {
  torch::Tensor predictions;
  torch::Tensor label_ids;
};

using ComputeMetrics = std::function<Metrics(const EvalPrediction&)>;

// {"accuracy": fraction of argmax(predictions, 1) == label_ids}.
Metrics compute_accuracy(const EvalPrediction& prediction);

struct TrainOutput {
  int64_t global_step = 0;
  double training_loss = 0;  // mean loss over all optimization steps
  Metrics metrics;           // train_runtime, train_samples_per_second, ..., train_loss, epoch
};

class Trainer {
 public:
  // `model` is trained in place. Validates `args` (InputError on a bad value) and seeds LibTorch
  // with args.seed(). `data_collator` defaults to data::default_collate; `compute_metrics` to
  // none (evaluation then reports the loss only).
  Trainer(std::shared_ptr<models::Model> model, TrainingArguments args,
          std::shared_ptr<const data::Dataset> train_dataset,
          std::shared_ptr<const data::Dataset> eval_dataset = nullptr,
          data::DataCollator data_collator = nullptr, ComputeMetrics compute_metrics = nullptr,
          std::vector<std::shared_ptr<TrainerCallback>> callbacks = {});
  virtual ~Trainer() = default;

  // Trains for args.max_steps() or args.num_train_epochs(), printing the banner, the progress,
  // the logs and the table (rank 0 only). Returns the step count, mean loss and speed metrics.
  TrainOutput train();

  // Evaluates on the eval dataset: "<prefix>_loss", the compute_metrics results with the prefix,
  // runtime and speed, and "epoch" while training. Logged and passed to on_evaluate.
  Metrics evaluate(const std::string& metric_key_prefix = "eval");

  // The loss of one batch (and the outputs when return_outputs). Default: the model's own loss
  // of forward(inputs["x"]) against inputs["labels"]. Override it for a custom loss.
  virtual LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                                  bool return_outputs = false);

  // Writes model.safetensors (PyTorch's parameter names) to `dir` (default: output_dir).
  void save_model(const std::string& dir = "") const;
  // Writes trainer_state.json to output_dir.
  void save_state() const;
  // Prints "***** <split> metrics *****" and the metrics, as Transformers' log_metrics.
  void log_metrics(const std::string& split, const Metrics& metrics) const;
  // Writes <split>_results.json and merges the metrics into all_results.json in output_dir.
  void save_metrics(const std::string& split, const Metrics& metrics) const;

  void add_callback(std::shared_ptr<TrainerCallback> callback);
  const TrainingArguments& args() const { return args_; }
  const TrainerState& state() const { return state_; }
  models::Model& model() { return *model_; }
  const torch::Device& device() const { return device_; }
  // The result of the last evaluation and the step it ran at (-1: none yet).
  const Metrics& last_eval_metrics() const { return last_eval_metrics_; }
  int64_t last_eval_step() const { return last_eval_step_; }

 private:
  std::string banner(int64_t num_examples, int64_t num_epochs) const;
  void log(nlohmann::ordered_json logs);
  template <typename Event>
  void fire(Event event);

  std::shared_ptr<models::Model> model_;
  TrainingArguments args_;
  std::shared_ptr<const data::Dataset> train_dataset_;
  std::shared_ptr<const data::Dataset> eval_dataset_;
  data::DataCollator data_collator_;
  ComputeMetrics compute_metrics_;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  TrainerState state_;
  TrainerControl control_;
  torch::Device device_;
  Metrics last_eval_metrics_;
  int64_t last_eval_step_ = -1;
};

}  // namespace trainer
