// report_to's integrations: TensorBoardCallback and JsonlCallback.
#include "trainer/integrations.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <sys/stat.h>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/warn.h"
#include "lib/io/tensorboard.h"

namespace trainer {

using json = nlohmann::ordered_json;

namespace {

// $TENSORBOARD_LOGGING_DIR with a leading ~ expanded, as os.path.expanduser does; "" when unset.
std::string logging_dir_from_environment() {
  const char* value = std::getenv("TENSORBOARD_LOGGING_DIR");
  if (!value || !*value) return "";
  std::string dir = value;
  const char* home = std::getenv("HOME");
  if (home && (dir == "~" || dir.rfind("~/", 0) == 0)) dir = home + dir.substr(1);
  return dir;
}

// Transformers' rewrite_logs: eval_x -> eval/x, test_x -> test/x, anything else -> train/x.
std::string tensorboard_tag(const std::string& key) {
  for (const char* split : {"eval", "test"}) {
    const std::string prefix = std::string(split) + "_";
    if (key.rfind(prefix, 0) == 0) return std::string(split) + "/" + key.substr(prefix.size());
  }
  return "train/" + key;
}

}  // namespace

std::string default_logging_dir(const std::string& output_dir) {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[64] = {};
  std::strftime(stamp, sizeof stamp, "%b%d_%H-%M-%S", &local);
  return base::join_path(output_dir,
                         base::join_path("runs", std::string(stamp) + "_" + io::host_name()));
}

void check_report_destinations(const TrainingArguments& args) {
  const std::vector<std::string> reports = args.effective_report_to();
  if (std::find(reports.begin(), reports.end(), "jsonl") != reports.end()) {
    // output_dir is checked with its lock; the file in it must be one a run can append to.
    const std::string path = base::join_path(args.output_dir(), JsonlCallback::kFileName);
    struct stat link {
    }, target{};
    if (::lstat(path.c_str(), &link) == 0 &&
        (::stat(path.c_str(), &target) != 0 || !S_ISREG(target.st_mode))) {
      throw InputError(fmt::format(
          "argument report_to: jsonl appends to {}, which is {} (remove it, or choose another "
          "output_dir)",
          path,
          S_ISLNK(link.st_mode) && ::stat(path.c_str(), &target) != 0 ? "a link to nothing"
                                                                      : "not a regular file"));
    }
  }
  if (std::find(reports.begin(), reports.end(), "tensorboard") == reports.end()) return;
  if (args.logging_dir()) {
    base::check_writable_dir(*args.logging_dir(), "argument logging_dir:");
  } else if (const std::string dir = logging_dir_from_environment(); !dir.empty()) {
    base::check_writable_dir(dir, "environment variable TENSORBOARD_LOGGING_DIR:");
  }
}

TensorBoardCallback::TensorBoardCallback() = default;
TensorBoardCallback::~TensorBoardCallback() = default;

void TensorBoardCallback::open(const TrainingArguments& args) {
  if (logging_dir_.empty()) {
    logging_dir_ = args.logging_dir().value_or(logging_dir_from_environment());
    if (logging_dir_.empty()) logging_dir_ = default_logging_dir(args.output_dir());
  }
  writer_ = std::make_unique<io::EventFileWriter>(logging_dir_);
}

void TensorBoardCallback::on_train_begin(const TrainingArguments& args, TrainerState& state,
                                         TrainerControl& control) {
  if (!state.is_world_process_zero) return;
  if (!writer_) open(args);
  std::string text = args.to_json();
  if (!text.empty() && text.back() == '\n') text.pop_back();  // as json.dumps(indent=2)
  writer_->add_text("args", text);
  writer_->flush();
}

void TensorBoardCallback::on_log(const TrainingArguments& args, TrainerState& state,
                                 TrainerControl& control, const json& logs) {
  if (!state.is_world_process_zero) return;
  if (!writer_) open(args);
  for (const auto& [key, value] : logs.items()) {
    if (key == "step") continue;  // Transformers' on_log gets the log without it
    const std::string tag = tensorboard_tag(key);
    if (value.is_number() || value.is_boolean()) {
      writer_->add_scalar(tag, static_cast<float>(value.get<double>()), state.global_step);
    } else if (value.is_string()) {
      writer_->add_text(tag, value.get<std::string>(), state.global_step);
    } else {
      base::warn("TensorBoard takes numbers and text; the log's {} ({}) was dropped", key,
                 value.type_name());
    }
  }
  writer_->flush();
}

void TensorBoardCallback::on_train_end(const TrainingArguments& args, TrainerState& state,
                                       TrainerControl& control) {
  if (!writer_) return;
  std::unique_ptr<io::EventFileWriter> writer = std::move(writer_);
  writer->close();
}

JsonlCallback::JsonlCallback() = default;
JsonlCallback::~JsonlCallback() = default;

namespace {

std::string jsonl_line(const json& entry) {
  return entry.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

void JsonlCallback::on_train_begin(const TrainingArguments& args, TrainerState& state,
                                   TrainerControl& control) {
  if (!state.is_world_process_zero) return;
  std::string history;
  for (const json& entry : state.log_history) history += jsonl_line(entry);
  file_ = std::make_unique<base::AppendFile>(base::join_path(args.output_dir(), kFileName),
                                             /*truncate=*/true);
  file_->append(history);
}

void JsonlCallback::on_log(const TrainingArguments& args, TrainerState& state,
                           TrainerControl& control, const json& logs) {
  if (!state.is_world_process_zero) return;
  if (!file_) {
    file_ = std::make_unique<base::AppendFile>(base::join_path(args.output_dir(), kFileName),
                                               /*truncate=*/false);
  }
  file_->append(jsonl_line(logs));
}

void JsonlCallback::on_train_end(const TrainingArguments& args, TrainerState& state,
                                 TrainerControl& control) {
  if (!file_) return;
  std::unique_ptr<base::AppendFile> file = std::move(file_);
  file->sync();
}

std::vector<std::shared_ptr<TrainerCallback>> make_report_callbacks(const TrainingArguments& args) {
  std::vector<std::shared_ptr<TrainerCallback>> callbacks;
  for (const std::string& name : args.effective_report_to()) {
    if (name == "tensorboard") callbacks.push_back(std::make_shared<TensorBoardCallback>());
    if (name == "jsonl") callbacks.push_back(std::make_shared<JsonlCallback>());
  }
  return callbacks;
}

}  // namespace trainer
