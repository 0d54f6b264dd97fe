// DefaultFlowCallback, ConsoleCallback (progress line, log lines, loss table), the learning-rate
// schedule, the metrics printer and trainer_state.json.
#include "trainer/callbacks.h"

#include <cmath>

#include <fmt/format.h>
#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_fields.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"

namespace trainer {

using json = nlohmann::ordered_json;

json TrainerState::to_json() const {
  json out;
  out["best_global_step"] = best_global_step ? json(*best_global_step) : json(nullptr);
  out["best_metric"] = best_metric ? json(*best_metric) : json(nullptr);
  out["best_model_checkpoint"] =
      best_model_checkpoint ? json(*best_model_checkpoint) : json(nullptr);
  out["epoch"] = epoch;
  out["eval_steps"] = eval_steps;
  out["global_step"] = global_step;
  out["is_hyper_param_search"] = false;
  out["is_local_process_zero"] = is_local_process_zero;
  out["is_world_process_zero"] = is_world_process_zero;
  out["log_history"] = log_history;
  out["logging_steps"] = logging_steps;
  out["max_steps"] = max_steps;
  out["num_input_tokens_seen"] = num_input_tokens_seen;
  out["num_train_epochs"] = num_train_epochs;
  out["save_steps"] = save_steps;
  out["stateful_callbacks"] = stateful_callbacks;
  out["total_flos"] = total_flos;
  out["train_batch_size"] = train_batch_size;
  out["trial_name"] = nullptr;
  out["trial_params"] = nullptr;
  return out;
}

void TrainerState::save_to_json(const std::string& path, base::WriteBatch* batch) const {
  base::write_json(path, to_json(), batch);
}

TrainerState TrainerState::from_json(const json& value, const std::string& source) {
  base::JsonFields f(value, source, base::JsonFields::Style::kQuotedKey);
  if (!value.is_object()) f.fail_object("not a JSON object");
  auto integer = [&](const char* key) {
    const json& v = f.required(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0) f.not_allowed(key, v, "an integer >= 0");
    return v.get<int64_t>();
  };
  TrainerState state;
  state.epoch = f.number("epoch");
  state.global_step = integer("global_step");
  state.max_steps = integer("max_steps");
  state.num_train_epochs = integer("num_train_epochs");
  state.logging_steps = integer("logging_steps");
  state.eval_steps = integer("eval_steps");
  state.save_steps = integer("save_steps");
  state.train_batch_size = integer("train_batch_size");
  state.total_flos = f.number("total_flos");
  if (value.contains("num_input_tokens_seen")) {
    state.num_input_tokens_seen = integer("num_input_tokens_seen");
  }
  const json& history = f.required("log_history");
  if (!history.is_array()) f.wrong_type("log_history", history, "a list");
  for (const json& entry : history) {
    if (!entry.is_object()) f.fail_object("an entry of \"log_history\" is not an object");
    state.log_history.push_back(entry);
  }
  if (!f.required("best_metric").is_null()) state.best_metric = f.number("best_metric");
  if (!f.required("best_global_step").is_null()) {
    state.best_global_step = integer("best_global_step");
  }
  if (!f.required("best_model_checkpoint").is_null()) {
    state.best_model_checkpoint = f.string("best_model_checkpoint");
  }
  const json& callbacks = f.required("stateful_callbacks");
  if (!callbacks.is_object()) f.wrong_type("stateful_callbacks", callbacks, "an object");
  state.stateful_callbacks = callbacks;
  return state;
}

void DefaultFlowCallback::on_step_end(const TrainingArguments& args, TrainerState& state,
                                      TrainerControl& control) {
  if (state.global_step == 1 && args.logging_first_step()) control.should_log = true;
  if (args.logging_strategy() == "steps" && state.global_step % state.logging_steps == 0) {
    control.should_log = true;
  }
  // Every eval_steps, and at the last step (Transformers 5.x); eval_delay: none before that many
  // steps.
  if (args.eval_strategy() == "steps" &&
      args.eval_delay() <= static_cast<double>(state.global_step) &&
      (state.global_step % state.eval_steps == 0 || state.global_step >= state.max_steps)) {
    control.should_evaluate = true;
  }
  if (args.save_strategy() == "steps" && state.global_step % state.save_steps == 0) {
    control.should_save = true;
  }
  if (state.global_step >= state.max_steps) {
    control.should_training_stop = true;
    // Transformers saves at the end under save_strategy steps.
    if (args.save_strategy() == "steps") control.should_save = true;
  }
}

void DefaultFlowCallback::on_epoch_end(const TrainingArguments& args, TrainerState& state,
                                       TrainerControl& control) {
  if (args.logging_strategy() == "epoch") control.should_log = true;
  // eval_delay: no evaluation before that many epochs.
  if (args.eval_strategy() == "epoch" && args.eval_delay() <= state.epoch) {
    control.should_evaluate = true;
  }
  if (args.save_strategy() == "epoch") control.should_save = true;
}

EarlyStoppingCallback::EarlyStoppingCallback(int64_t patience, double threshold)
    : patience_(patience), threshold_(threshold) {
  if (patience < 1) {
    throw InputError(
        fmt::format("EarlyStoppingCallback: patience {} is not allowed (must be >= 1)", patience));
  }
}

void EarlyStoppingCallback::on_train_begin(const TrainingArguments& args, TrainerState& state,
                                           TrainerControl& control) {
  if (args.best_metric_name().empty()) {
    throw InputError(
        "EarlyStoppingCallback needs metric_for_best_model (or load_best_model_at_end)");
  }
  if (args.eval_strategy() == "no") {
    throw InputError(
        "EarlyStoppingCallback needs evaluations: set eval_strategy to steps or epoch");
  }
}

void EarlyStoppingCallback::on_evaluate(const TrainingArguments& args, TrainerState& state,
                                        TrainerControl& control, const Metrics& metrics) {
  auto it = metrics.find(args.best_metric_key());
  if (it == metrics.end()) return;  // the Trainer names the missing metric
  const double value = it->second;
  const bool better = args.best_metric_greater_is_better() ? value > state.best_metric.value_or(0)
                                                           : value < state.best_metric.value_or(0);
  if (!state.best_metric || (better && std::fabs(value - *state.best_metric) > threshold_)) {
    counter_ = 0;
  } else {
    ++counter_;
  }
  if (counter_ >= patience_) control.should_training_stop = true;
}

json EarlyStoppingCallback::save_state() const {
  json out;
  out["args"] = {{"early_stopping_patience", patience_}, {"early_stopping_threshold", threshold_}};
  out["attributes"] = {{"early_stopping_patience_counter", counter_}};
  return out;
}

void EarlyStoppingCallback::load_state(const json& state) {
  const json* counter = nullptr;
  if (state.is_object() && state.contains("attributes") && state["attributes"].is_object() &&
      state["attributes"].contains("early_stopping_patience_counter")) {
    counter = &state["attributes"]["early_stopping_patience_counter"];
  }
  if (!counter || !counter->is_number_integer() || counter->get<int64_t>() < 0) {
    throw InputError("EarlyStoppingCallback: the saved state has no patience counter");
  }
  counter_ = counter->get<int64_t>();
}

ConsoleCallback::ConsoleCallback(std::FILE* out, std::FILE* bar) : out_(out), bar_(bar) {}

std::shared_ptr<ConsoleCallback> make_console_callback(const TrainingArguments& args) {
  bool bar = !args.disable_tqdm() && ::isatty(STDERR_FILENO);
  return std::make_shared<ConsoleCallback>(stdout, bar ? stderr : nullptr);
}

void ConsoleCallback::on_train_begin(const TrainingArguments& args, TrainerState& state,
                                     TrainerControl& control) {
  start_ = std::chrono::steady_clock::now();
  last_draw_ = start_;
  draw_bar(state, true);
}

void ConsoleCallback::on_step_end(const TrainingArguments& args, TrainerState& state,
                                  TrainerControl& control) {
  draw_bar(state, state.global_step == state.max_steps);
}

void ConsoleCallback::clear_bar() {
  if (bar_ && bar_visible_) {
    std::fputs("\r\x1b[K", bar_);
    std::fflush(bar_);
    bar_visible_ = false;
  }
}

void ConsoleCallback::draw_bar(const TrainerState& state, bool force) {
  if (!bar_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  int64_t total = std::max<int64_t>(state.max_steps, 1);
  double fraction =
      std::min(1.0, static_cast<double>(state.global_step) / static_cast<double>(total));
  double rate = elapsed > 0 ? static_cast<double>(state.global_step) / elapsed : 0.0;
  double remaining = rate > 0 ? static_cast<double>(total - state.global_step) / rate : 0.0;
  static const char* kParts[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int width = 25;
  double cells = fraction * width;
  int full = static_cast<int>(cells);
  std::string bar;
  for (int i = 0; i < full; ++i) bar += "█";
  if (full < width) {
    bar += kParts[static_cast<int>((cells - full) * 8)];
    bar += std::string(static_cast<size_t>(width - full - 1), ' ');
  }
  std::string postfix = fmt::format("epoch={:.2f}", state.epoch);
  if (state.global_step > 0 && state.read_last_step_loss)
    postfix = fmt::format("loss={:.4f}, {}", state.read_last_step_loss(), postfix);
  std::string rate_text = rate >= 1 || rate == 0 ? fmt::format("{:.2f}it/s", rate)
                                                 : fmt::format("{:.2f}s/it", 1.0 / rate);
  std::fprintf(bar_, "\r\x1b[K%3d%%|%s| %lld/%lld [%s<%s, %s, %s]",
               static_cast<int>(fraction * 100), bar.c_str(),
               static_cast<long long>(state.global_step), static_cast<long long>(total),
               base::clock_time(elapsed).c_str(), base::clock_time(remaining).c_str(),
               rate_text.c_str(), postfix.c_str());
  std::fflush(bar_);
  bar_visible_ = true;
}

void ConsoleCallback::on_log(const TrainingArguments& args, TrainerState& state,
                             TrainerControl& control, const json& logs) {
  // Evaluation results appear as a table row; everything else as Transformers prints a log.
  bool is_eval = logs.contains("eval_loss");
  if (is_eval) return;
  clear_bar();
  json shown = logs;
  shown.erase("step");
  shown.erase("total_flos");
  std::fprintf(out_, "%s\n", format_logs(shown).c_str());
  std::fflush(out_);
  draw_bar(state, true);
}

namespace {

// "eval_accuracy" -> "Accuracy", "eval_f1_macro" -> "F1 Macro", as Transformers' notebook table.
std::string column_name(std::string key) {
  if (key.rfind("eval_", 0) == 0) key = key.substr(5);
  std::string out;
  bool start = true;
  for (char c : key) {
    if (c == '_') {
      out += ' ';
      start = true;
    } else {
      out += start ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      start = false;
    }
  }
  return out;
}

bool is_table_metric(const std::string& key) {
  static const std::vector<std::string> skipped = {
      "eval_loss", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second",
      "epoch",     "step"};
  return std::find(skipped.begin(), skipped.end(), key) == skipped.end();
}

std::string render_row(const std::vector<std::string>& cells,
                       const std::vector<std::string>& columns) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    // A value wider than its column (a token count) pushes the next one on, never into it.
    size_t width = std::max<size_t>({columns[i].size(), 8, cells[i].size()});
    line += fmt::format("{:<{}}", cells[i], i + 1 < cells.size() ? width + 2 : 0);
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace

void ConsoleCallback::on_evaluate(const TrainingArguments& args, TrainerState& state,
                                  TrainerControl& control, const Metrics& metrics) {
  bool by_epoch = args.eval_strategy() == "epoch";
  if (columns_.empty()) {
    columns_ = {by_epoch ? "Epoch" : "Step", "Training Loss", "Validation Loss"};
    for (const auto& [key, value] : metrics) {
      if (is_table_metric(key)) columns_.push_back(column_name(key));
    }
  }
  std::string training_loss = "No log";
  for (auto it = state.log_history.rbegin(); it != state.log_history.rend(); ++it) {
    if (it->contains("loss")) {
      training_loss = fmt::format("{:.6f}", (*it)["loss"].get<double>());
      break;
    }
  }
  std::vector<std::string> row = {by_epoch ? std::to_string(static_cast<int64_t>(state.epoch))
                                           : std::to_string(state.global_step),
                                  training_loss};
  auto loss = metrics.find("eval_loss");
  row.push_back(loss == metrics.end() ? "No log" : fmt::format("{:.6f}", loss->second));
  for (const auto& [key, value] : metrics) {
    if (is_table_metric(key)) row.push_back(fmt::format("{:.6f}", value));
  }
  row.resize(columns_.size());
  clear_bar();
  // The header once, before the first row; each later evaluation adds its row as it comes, as
  // the tutorial's table grows (log lines may stand between rows: they are not reprinted).
  if (!header_printed_) std::fprintf(out_, "%s\n", render_row(columns_, columns_).c_str());
  header_printed_ = true;
  std::fprintf(out_, "%s\n", render_row(row, columns_).c_str());
  std::fflush(out_);
  draw_bar(state, true);
}

void ConsoleCallback::on_train_end(const TrainingArguments& args, TrainerState& state,
                                   TrainerControl& control) {
  draw_bar(state, true);
  if (bar_ && bar_visible_) {
    std::fputs("\n", bar_);
    bar_visible_ = false;
  }
  std::fflush(out_);
}

std::string format_logs(const json& logs) {
  std::string out = "{";
  for (const auto& [key, value] : logs.items()) {
    if (out.size() > 1) out += ", ";
    std::string text =
        value.is_number_float() ? base::python_float(value.get<double>()) : value.dump();
    out += fmt::format("'{}': {}", key, text);
  }
  return out + "}";
}

std::string format_metrics(const std::string& split, const Metrics& metrics) {
  std::vector<std::pair<std::string, std::string>> shown;
  for (const auto& [key, value] : metrics) {
    std::string text;
    if (key.find("_mem_") != std::string::npos) {
      // Bytes, floored to MiB as Python's >> floors (a negative delta too).
      text = fmt::format("{}MB", static_cast<int64_t>(value) >> 20);
    } else if (key.find("_runtime") != std::string::npos) {
      text = base::timedelta(value);
    } else if (key == "total_flos") {
      text = fmt::format("{}GF", static_cast<int64_t>(value) >> 30);
    } else if (key.size() > 8 && base::ends_with(key, "_samples")) {
      text = std::to_string(static_cast<int64_t>(value));
    } else {
      text = base::python_float(base::round_to(value, 4));
    }
    shown.emplace_back(key, text);
  }
  size_t key_width = 0, value_width = 0;
  for (const auto& [k, v] : shown) {
    key_width = std::max(key_width, k.size());
    value_width = std::max(value_width, v.size());
  }
  std::string out = fmt::format("***** {} metrics *****\n", split);
  for (const auto& [k, v] : shown)
    out += fmt::format("  {:<{}} = {:>{}}\n", k, key_width, v, value_width);
  return out;
}

}  // namespace trainer
