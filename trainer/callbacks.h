// The callbacks every Trainer installs: DefaultFlowCallback (when to log, evaluate and stop, as
// Transformers decides) and ConsoleCallback (the progress line, the log lines and the
// Epoch | Training Loss | Validation Loss | metrics table). Also the `***** split metrics *****`
// printer. Torch-free.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "trainer/trainer_state.h"

namespace trainer {

// Transformers' DefaultFlowCallback: sets should_log / should_evaluate / should_save every
// logging_steps / eval_steps / save_steps (or at epoch end), and should_training_stop (with a
// save under save_strategy steps, and an evaluation under eval_strategy steps when the last step
// is not a multiple of eval_steps) at max_steps.
class DefaultFlowCallback : public TrainerCallback {
 public:
  void on_step_end(const TrainingArguments& args, TrainerState& state,
                   TrainerControl& control) override;
  void on_epoch_end(const TrainingArguments& args, TrainerState& state,
                    TrainerControl& control) override;
};

// Transformers' EarlyStoppingCallback: stops training once metric_for_best_model has not improved
// on the best so far by more than `threshold` for `patience` evaluations in a row. Its counter is
// saved in checkpoints, so a resumed run stops where the uninterrupted one would.
class EarlyStoppingCallback : public TrainerCallback {
 public:
  explicit EarlyStoppingCallback(int64_t patience = 1, double threshold = 0.0);
  void on_train_begin(const TrainingArguments& args, TrainerState& state,
                      TrainerControl& control) override;
  void on_evaluate(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
                   const Metrics& metrics) override;
  std::string state_name() const override { return "EarlyStoppingCallback"; }
  nlohmann::ordered_json save_state() const override;
  void load_state(const nlohmann::ordered_json& state) override;
  int64_t patience_counter() const { return counter_; }

 private:
  int64_t patience_;
  double threshold_;
  int64_t counter_ = 0;
};

// What a person reads while training runs. On a terminal (and unless disable_tqdm), a progress
// line redrawn in place on stderr as tqdm draws it; always, each log as a line and each
// evaluation as a row of the table on stdout: its header once, before the first row, and each
// row as its evaluation ends (never the whole table again).
class ConsoleCallback : public TrainerCallback {
 public:
  // `out` receives log lines and the table; `bar` the progress line (nullptr: no bar).
  ConsoleCallback(std::FILE* out, std::FILE* bar);
  void on_train_begin(const TrainingArguments& args, TrainerState& state,
                      TrainerControl& control) override;
  void on_step_end(const TrainingArguments& args, TrainerState& state,
                   TrainerControl& control) override;
  void on_log(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
              const nlohmann::ordered_json& logs) override;
  void on_evaluate(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
                   const Metrics& metrics) override;
  void on_train_end(const TrainingArguments& args, TrainerState& state,
                    TrainerControl& control) override;

 private:
  void clear_bar();
  void draw_bar(const TrainerState& state, bool force);

  std::FILE* out_;
  std::FILE* bar_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool bar_visible_ = false;
  std::vector<std::string> columns_;
  bool header_printed_ = false;
};

// A ConsoleCallback on stdout, with the progress line on stderr when stderr is a terminal and
// args.disable_tqdm() is false.
std::shared_ptr<ConsoleCallback> make_console_callback(const TrainingArguments& args);

// A log entry as Transformers prints it: {'loss': 0.5123, 'learning_rate': 4.5e-05, ...}.
std::string format_logs(const nlohmann::ordered_json& logs);

// Transformers' log_metrics: "***** train metrics *****" then "  key = value" lines, keys sorted
// and aligned, memory (keys with _mem_) as whole MB, runtimes as h:mm:ss.hh, floats rounded to 4
// decimals.
std::string format_metrics(const std::string& split, const Metrics& metrics);

}  // namespace trainer
