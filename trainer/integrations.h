// The logging integrations report_to names, as TrainerCallbacks the Trainer adds (as Transformers
// adds its integration callbacks): TensorBoardCallback (event files under logging_dir) and
// JsonlCallback (log_history, one JSON object per line, as it grows). Only the main process
// (world process 0) writes. Torch-free.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/trainer_state.h"

namespace trainer {

namespace base {
class AppendFile;
}  // namespace base
namespace io {
class EventFileWriter;
}  // namespace io

// Transformers' default logging_dir: "runs/<Mon DD_HH-MM-SS>_<host>" (local time, as
// default_logdir() names it), under output_dir.
std::string default_logging_dir(const std::string& output_dir);

// Transformers' TensorBoardCallback: the arguments as a text summary ("args") when training
// begins, then every number of each log as a scalar at state.global_step, its name rewritten as
// rewrite_logs() does (eval_loss -> eval/loss, test_* -> test/*, anything else -> train/<name>;
// the log's "step" is not a value), flushed after each log. The directory is logging_dir, else
// $TENSORBOARD_LOGGING_DIR, else default_logging_dir(output_dir), decided once, when it is first
// needed. Training's end closes the file; a later log opens a new one in the same directory.
class TensorBoardCallback : public TrainerCallback {
 public:
  TensorBoardCallback();
  ~TensorBoardCallback() override;
  void on_train_begin(const TrainingArguments& args, TrainerState& state,
                      TrainerControl& control) override;
  void on_log(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
              const nlohmann::ordered_json& logs) override;
  void on_train_end(const TrainingArguments& args, TrainerState& state,
                    TrainerControl& control) override;
  // The directory written to ("" before the first event).
  const std::string& logging_dir() const { return logging_dir_; }

 private:
  void open(const TrainingArguments& args);

  std::string logging_dir_;
  std::unique_ptr<io::EventFileWriter> writer_;
};

// report_to jsonl: output_dir/log_history.jsonl holds state.log_history, one entry per line as
// nlohmann::json writes it. Training's beginning writes the file anew with the history so far (a
// resumed run's, from its checkpoint); each log then appends its line, which reaches the
// operating system at once, so `tail -f` follows the run and a killed run loses no line logged.
class JsonlCallback : public TrainerCallback {
 public:
  static constexpr const char* kFileName = "log_history.jsonl";
  JsonlCallback();
  ~JsonlCallback() override;
  void on_train_begin(const TrainingArguments& args, TrainerState& state,
                      TrainerControl& control) override;
  void on_log(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
              const nlohmann::ordered_json& logs) override;
  void on_train_end(const TrainingArguments& args, TrainerState& state,
                    TrainerControl& control) override;

 private:
  std::unique_ptr<base::AppendFile> file_;
};

// Where report_to's tensorboard will write, checked before training: logging_dir, else
// $TENSORBOARD_LOGGING_DIR, must be a directory this process can write or create (the default
// under output_dir is output_dir's). Throws InputError naming the argument or the variable.
void check_report_destinations(const TrainingArguments& args);

// The callbacks for args.effective_report_to(), in that order.
std::vector<std::shared_ptr<TrainerCallback>> make_report_callbacks(const TrainingArguments& args);

}  // namespace trainer
