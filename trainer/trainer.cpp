// The Trainer's loop, evaluation and outputs, following Transformers' Trainer step by step.
#include "trainer/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/io/allocator.h"
#include "lib/io/errors.h"
#include "lib/io/files.h"
#include "lib/io/safetensors.h"
#include "lib/io/text.h"
#include "lib/optim/adamw.h"
#include "trainer/callbacks.h"

namespace trainer {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double round_to(double value, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

// logging_steps / eval_steps below 1 are fractions of the total steps, as in Transformers.
int64_t resolve_steps(double steps, int64_t max_steps) {
  if (steps < 1) return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(steps * max_steps)));
  return static_cast<int64_t>(steps);
}

// Transformers' weight-decay grouping: no decay on biases (and norm layers' weights, which
// LibTorch names *.weight under a norm module; BasicNet has none).
std::vector<torch::optim::OptimizerParamGroup> parameter_groups(const torch::nn::Module& model,
                                                                const TrainingArguments& args) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const std::string& name = item.key();
    bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    bool is_norm = name.find("norm") != std::string::npos;
    (is_bias || is_norm ? no_decay : decay).push_back(item.value());
  }
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(args.learning_rate())
            .betas({args.adam_beta1(), args.adam_beta2()})
            .eps(args.adam_epsilon())
            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!decay.empty()) groups.emplace_back(decay, options(args.weight_decay()));
  if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
  return groups;
}

}  // namespace

Metrics compute_accuracy(const EvalPrediction& prediction) {
  torch::Tensor predicted = prediction.predictions.argmax(1);
  double correct = predicted.eq(prediction.label_ids).sum().item<double>();
  return {{"accuracy",
           correct / static_cast<double>(std::max<int64_t>(1, prediction.label_ids.numel()))}};
}

Trainer::Trainer(std::shared_ptr<models::Model> model, TrainingArguments args,
                 std::shared_ptr<const data::Dataset> train_dataset,
                 std::shared_ptr<const data::Dataset> eval_dataset,
                 data::DataCollator data_collator, ComputeMetrics compute_metrics,
                 std::vector<std::shared_ptr<TrainerCallback>> callbacks)
    : model_(std::move(model)),
      args_(std::move(args)),
      train_dataset_(std::move(train_dataset)),
      eval_dataset_(std::move(eval_dataset)),
      data_collator_(std::move(data_collator)),
      compute_metrics_(std::move(compute_metrics)),
      device_(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU) {
  if (!model_) throw std::invalid_argument("Trainer: model is null");
  io::configure_allocator();
  args_.validate();
  torch::manual_seed(static_cast<uint64_t>(args_.seed()));
  callbacks_.push_back(std::make_shared<DefaultFlowCallback>());
  if (state_.is_world_process_zero) callbacks_.push_back(make_console_callback(args_));
  for (auto& callback : callbacks) callbacks_.push_back(std::move(callback));
  model_->to(device_);
}

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) {
  callbacks_.push_back(std::move(callback));
}

template <typename Event>
void Trainer::fire(Event event) {
  for (auto& callback : callbacks_) event(*callback);
}

LossOutput Trainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                 bool return_outputs) {
  torch::Tensor outputs = model.forward(inputs.at("x"));
  torch::Tensor loss = model.loss(outputs, inputs.at("labels"));
  return {loss, return_outputs ? outputs : torch::Tensor()};
}

std::string Trainer::banner(int64_t num_examples, int64_t num_epochs) const {
  int64_t total_batch = args_.per_device_train_batch_size() * args_.gradient_accumulation_steps();
  return fmt::format(
      "***** Running training *****\n"
      "  Num examples = {}\n"
      "  Num Epochs = {}\n"
      "  Instantaneous batch size per device = {}\n"
      "  Total train batch size (w. parallel, distributed & accumulation) = {}\n"
      "  Gradient Accumulation steps = {}\n"
      "  Total optimization steps = {}\n"
      "  Number of trainable parameters = {}\n",
      io::thousands(num_examples), io::thousands(num_epochs),
      io::thousands(args_.per_device_train_batch_size()), io::thousands(total_batch),
      io::thousands(args_.gradient_accumulation_steps()), io::thousands(state_.max_steps),
      io::thousands(models::num_trainable_parameters(*model_)));
}

void Trainer::log(json logs) {
  logs["epoch"] = state_.epoch;
  logs["step"] = state_.global_step;
  state_.log_history.push_back(logs);
  fire([&](TrainerCallback& c) { c.on_log(args_, state_, control_, logs); });
  control_.should_log = false;
}

TrainOutput Trainer::train() {
  if (!train_dataset_ || train_dataset_->size() == 0) {
    throw InputError("Trainer: the training dataset is empty");
  }
  auto sampler =
      std::make_shared<data::RandomSampler>(train_dataset_->size(), args_.sampler_seed());
  data::DataLoader loader(train_dataset_, sampler,
                          {args_.per_device_train_batch_size(), args_.dataloader_drop_last()},
                          data_collator_);
  const int64_t num_batches = loader.size();
  if (num_batches == 0) {
    throw InputError(
        fmt::format("Trainer: {} training examples make no batch of {} with dataloader_drop_last",
                    train_dataset_->size(), args_.per_device_train_batch_size()));
  }
  const int64_t accumulation = args_.gradient_accumulation_steps();
  const int64_t steps_per_epoch =
      std::max<int64_t>(1, (num_batches + accumulation - 1) / accumulation);
  int64_t max_steps, num_epochs;
  double num_train_samples;
  if (args_.max_steps() > 0) {
    max_steps = args_.max_steps();
    num_epochs = (max_steps + steps_per_epoch - 1) / steps_per_epoch;
    num_train_samples =
        static_cast<double>(max_steps * args_.per_device_train_batch_size() * accumulation);
  } else {
    max_steps = static_cast<int64_t>(
        std::ceil(args_.num_train_epochs() * static_cast<double>(steps_per_epoch)));
    num_epochs = static_cast<int64_t>(std::ceil(args_.num_train_epochs()));
    num_train_samples = static_cast<double>(loader.num_examples()) * args_.num_train_epochs();
  }

  state_ = TrainerState{};
  control_ = TrainerControl{};
  state_.max_steps = max_steps;
  state_.num_train_epochs = num_epochs;
  state_.logging_steps = resolve_steps(args_.logging_steps(), max_steps);
  state_.eval_steps = resolve_steps(args_.effective_eval_steps(), max_steps);
  state_.train_batch_size = args_.per_device_train_batch_size();

  optim::AdamW optimizer(parameter_groups(*model_, args_));
  const int64_t warmup = args_.get_warmup_steps(max_steps);
  auto set_learning_rate = [&](int64_t step) {
    double lr =
        args_.learning_rate() * lr_lambda(args_.lr_scheduler_type(), step, warmup, max_steps);
    for (auto& group : optimizer.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    }
    return lr;
  };
  double current_lr = set_learning_rate(0);

  if (state_.is_world_process_zero) {
    std::fputs(banner(train_dataset_->size(), num_epochs).c_str(), stdout);
    std::fflush(stdout);
  }

  const auto start = Clock::now();
  fire([&](TrainerCallback& c) { c.on_train_begin(args_, state_, control_); });
  double total_loss = 0;      // sum of step losses over the run
  double loss_since_log = 0;  // sum of step losses since the last log
  int64_t last_logged_step = 0;
  double grad_norm = std::nan("");
  model_->train();
  optimizer.zero_grad();

  auto maybe_log_and_evaluate = [&]() {
    if (control_.should_log && state_.global_step > last_logged_step) {
      json logs;
      logs["loss"] =
          round_to(loss_since_log / static_cast<double>(state_.global_step - last_logged_step), 4);
      if (!std::isnan(grad_norm)) logs["grad_norm"] = grad_norm;
      logs["learning_rate"] = current_lr;
      loss_since_log = 0;
      last_logged_step = state_.global_step;
      log(std::move(logs));
    }
    control_.should_log = false;
    if (control_.should_evaluate) {
      evaluate();
      model_->train();
    }
  };

  for (int64_t epoch = 0; epoch < num_epochs && !control_.should_training_stop; ++epoch) {
    loader.set_epoch(epoch);
    fire([&](TrainerCallback& c) { c.on_epoch_begin(args_, state_, control_); });
    double step_loss = 0;
    for (int64_t i = 0; i < num_batches; ++i) {
      if (i % accumulation == 0)
        fire([&](TrainerCallback& c) { c.on_step_begin(args_, state_, control_); });
      data::Batch batch = loader.batch(i).to(device_);
      torch::Tensor loss = compute_loss(*model_, batch, false).loss;
      if (!loss.defined() || loss.numel() != 1) {
        throw std::runtime_error("compute_loss must return a scalar loss");
      }
      // Scaled so that k accumulated batches of b make the same update as one batch of k*b.
      torch::Tensor scaled = loss / static_cast<double>(accumulation);
      scaled.backward();
      step_loss += scaled.item<double>();
      bool update = (i + 1) % accumulation == 0 || i + 1 == num_batches;
      if (!update) continue;

      if (args_.max_grad_norm() > 0) {
        grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), args_.max_grad_norm());
      }
      optimizer.step();
      optimizer.zero_grad();
      ++state_.global_step;
      current_lr = set_learning_rate(state_.global_step);
      state_.epoch = static_cast<double>(epoch) +
                     static_cast<double>(i + 1) / static_cast<double>(num_batches);
      state_.last_step_loss = step_loss;
      total_loss += step_loss;
      loss_since_log += step_loss;
      step_loss = 0;
      fire([&](TrainerCallback& c) { c.on_step_end(args_, state_, control_); });
      maybe_log_and_evaluate();
      if (control_.should_training_stop || control_.should_epoch_stop) break;
    }
    fire([&](TrainerCallback& c) { c.on_epoch_end(args_, state_, control_); });
    maybe_log_and_evaluate();
    control_.should_epoch_stop = false;
  }

  double runtime = seconds_since(start);
  TrainOutput output;
  output.global_step = state_.global_step;
  output.training_loss = total_loss / static_cast<double>(std::max<int64_t>(1, state_.global_step));
  json logs;
  logs["train_runtime"] = round_to(runtime, 4);
  logs["train_samples_per_second"] = round_to(num_train_samples / runtime, 3);
  logs["train_steps_per_second"] = round_to(static_cast<double>(max_steps) / runtime, 3);
  logs["total_flos"] = state_.total_flos;
  logs["train_loss"] = output.training_loss;
  log(logs);
  for (const auto& [key, value] : state_.log_history.back().items()) {
    if (key != "step") output.metrics[key] = value.get<double>();
  }
  fire([&](TrainerCallback& c) { c.on_train_end(args_, state_, control_); });
  return output;
}

Metrics Trainer::evaluate(const std::string& prefix) {
  if (!eval_dataset_) throw InputError("Trainer: evaluation needs an eval dataset");
  auto start = Clock::now();
  data::DataLoader loader(eval_dataset_,
                          std::make_shared<data::SequentialSampler>(eval_dataset_->size()),
                          {args_.per_device_eval_batch_size(), false}, data_collator_);
  model_->eval();
  torch::NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t count = 0;
  std::vector<torch::Tensor> predictions, labels;
  for (int64_t i = 0; i < loader.size(); ++i) {
    data::Batch batch = loader.batch(i).to(device_);
    LossOutput out = compute_loss(*model_, batch, true);
    int64_t n = batch.size();
    loss_sum += out.loss.item<double>() * static_cast<double>(n);
    count += n;
    if (compute_metrics_ && out.outputs.defined() && batch.contains("labels")) {
      predictions.push_back(out.outputs.detach().to(torch::kCPU));
      labels.push_back(batch.at("labels").to(torch::kCPU));
    }
  }
  Metrics metrics;
  metrics[prefix + "_loss"] = loss_sum / static_cast<double>(std::max<int64_t>(1, count));
  if (compute_metrics_ && !predictions.empty()) {
    for (const auto& [key, value] :
         compute_metrics_({torch::cat(predictions), torch::cat(labels)})) {
      metrics[key.rfind(prefix + "_", 0) == 0 ? key : prefix + "_" + key] = value;
    }
  }
  double runtime = seconds_since(start);
  metrics[prefix + "_runtime"] = round_to(runtime, 4);
  metrics[prefix + "_samples_per_second"] = round_to(static_cast<double>(count) / runtime, 3);
  metrics[prefix + "_steps_per_second"] = round_to(static_cast<double>(loader.size()) / runtime, 3);
  json logs;
  for (const auto& [key, value] : metrics) logs[key] = value;
  if (state_.global_step > 0) {
    metrics["epoch"] = state_.epoch;
    log(logs);
  }
  fire([&](TrainerCallback& c) { c.on_evaluate(args_, state_, control_, metrics); });
  control_.should_evaluate = false;
  last_eval_metrics_ = metrics;
  last_eval_step_ = state_.global_step;
  return metrics;
}

void Trainer::save_model(const std::string& dir) const {
  std::string target = dir.empty() ? args_.output_dir() : dir;
  io::save_safetensors(io::join_path(target, "model.safetensors"), io::state_dict(*model_));
}

void Trainer::save_state() const {
  state_.save_to_json(io::join_path(args_.output_dir(), "trainer_state.json"));
}

void Trainer::log_metrics(const std::string& split, const Metrics& metrics) const {
  if (!state_.is_world_process_zero) return;
  std::fputs(format_metrics(split, metrics).c_str(), stdout);
  std::fflush(stdout);
}

void Trainer::save_metrics(const std::string& split, const Metrics& metrics) const {
  if (!state_.is_world_process_zero) return;
  json values;
  for (const auto& [key, value] : metrics) values[key] = value;
  io::write_json(io::join_path(args_.output_dir(), split + "_results.json"), values);
  std::string all_path = io::join_path(args_.output_dir(), "all_results.json");
  json all = json::object();
  if (std::filesystem::exists(all_path)) {
    try {
      all = io::read_json(all_path);
    } catch (const InputError&) {
      all = json::object();  // a broken file from an older run is replaced
    }
  }
  for (const auto& [key, value] : metrics) all[key] = value;
  io::write_json(all_path, all);
}

}  // namespace trainer
