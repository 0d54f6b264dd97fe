// What the Trainer loop shares with callbacks, as in Transformers: TrainerState (saved as
// trainer_state.json in Transformers' schema), TrainerControl (the flags callbacks set) and the
// TrainerCallback interface with Transformers' events.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "trainer/training_args.h"

namespace trainer {

// Metric name -> value, sorted by name (the order Transformers prints them in).
using Metrics = std::map<std::string, double>;

struct TrainerState {
  double epoch = 0;  // fractional: 0.5 is halfway through the first epoch
  int64_t global_step = 0;
  int64_t max_steps = 0;
  int64_t num_train_epochs = 0;
  int64_t logging_steps = 500;
  int64_t eval_steps = 500;
  int64_t save_steps = 500;
  int64_t train_batch_size = 0;
  double total_flos = 0;
  // Input tokens trained on over every process (include_num_input_tokens_seen; else 0).
  int64_t num_input_tokens_seen = 0;
  // The best metric_for_best_model so far, the step it was reached at, and the checkpoint saved
  // then (when one was).
  std::optional<double> best_metric;
  std::optional<int64_t> best_global_step;
  std::optional<std::string> best_model_checkpoint;
  // The saved state of callbacks that have one, by name (Transformers' stateful_callbacks).
  nlohmann::ordered_json stateful_callbacks = nlohmann::ordered_json::object();
  // Each entry: {loss, grad_norm, learning_rate, epoch, step}, {eval_*, epoch, step}, or the
  // final {train_runtime, train_samples_per_second, ..., train_loss, epoch, step}.
  std::vector<nlohmann::ordered_json> log_history;
  // Reads the loss of the latest optimization step back from the device, for progress displays
  // that draw now and then (not saved; null before training).
  std::function<double()> read_last_step_loss;
  bool is_local_process_zero = true;
  bool is_world_process_zero = true;

  // Transformers' trainer_state.json object.
  nlohmann::ordered_json to_json() const;
  // Writes to_json() to `path` atomically.
  void save_to_json(const std::string& path, base::WriteBatch* batch = nullptr) const;
  // The state a checkpoint's trainer_state.json holds. Throws InputError "<source>: ..." for a
  // missing or mistyped field.
  static TrainerState from_json(const nlohmann::ordered_json& value, const std::string& source);
};

struct TrainerControl {
  bool should_training_stop = false;
  bool should_epoch_stop = false;
  bool should_save = false;
  bool should_evaluate = false;
  bool should_log = false;
};

// Hooks into the training loop. Each event may read the state and set control flags.
class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  virtual void on_train_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_train_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_epoch_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_epoch_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_step_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_step_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  // `logs` is the entry just appended to state.log_history.
  virtual void on_log(const TrainingArguments&, TrainerState&, TrainerControl&,
                      const nlohmann::ordered_json& logs) {}
  // `metrics` carries the evaluation's prefixed keys (eval_loss, eval_accuracy, ...).
  virtual void on_evaluate(const TrainingArguments&, TrainerState&, TrainerControl&,
                           const Metrics& metrics) {}
  // After a checkpoint was saved (its folder in state.best_model_checkpoint's form).
  virtual void on_save(const TrainingArguments&, TrainerState&, TrainerControl&) {}

  // A callback with state that a resumed run must continue (a patience counter) names it here
  // and saves it into checkpoints; empty: nothing to save.
  virtual std::string state_name() const { return ""; }
  virtual nlohmann::ordered_json save_state() const { return nullptr; }
  // Restores what save_state() returned. Throws InputError for a value it cannot take.
  virtual void load_state(const nlohmann::ordered_json& state) {}
};

}  // namespace trainer
