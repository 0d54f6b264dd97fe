// GRPOTrainer: TRL 1.16's _prepare_inputs, _generate_and_score_completions and _compute_loss on
// the Trainer, with the sampling in the process.
#include "trl/grpo_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/lora.h"
#include "trainer/integrations.h"

namespace trainer::trl {

using torch::Tensor;

namespace {

// The rows of every tensor of `batch` (its first dimension) in `order`; 0-dim tensors as they are.
data::Batch take_rows(const data::Batch& batch, const Tensor& order) {
  data::Batch out;
  for (const auto& [name, value] : batch.items()) {
    out[name] = value.dim() == 0 ? value : value.index_select(0, order.to(value.device()));
  }
  out.num_items_in_batch = batch.num_items_in_batch;
  return out;
}

}  // namespace

// Prints where the main process's time went when training ends.
class GRPOTrainer::TimingsReport : public TrainerCallback {
 public:
  TimingsReport(std::shared_ptr<const Timings> timings, std::string name)
      : timings_(std::move(timings)), name_(std::move(name)) {}
  void on_train_end(const TrainingArguments&, TrainerState&, TrainerControl&) override {
    const Timings& t = *timings_;
    const double total = t.sampling + t.rewards + t.scoring + t.update;
    if (total <= 0) return;
    auto share = [total](double part) {
      return fmt::format("{:.2f} s ({:.0f}%)", part, 100 * part / total);
    };
    fmt::print(
        "{} time: sampling {}, rewards {}, old and reference log-probabilities {}, update {}\n",
        name_, share(t.sampling), share(t.rewards), share(t.scoring), share(t.update));
  }

 private:
  std::shared_ptr<const Timings> timings_;
  std::string name_;
};

GRPOTrainer::GRPOTrainer(std::shared_ptr<models::Model> model, TrainingArguments args,
                         std::shared_ptr<const data::Dataset> train_dataset,
                         std::shared_ptr<const data::Dataset> eval_dataset,
                         data::DataCollator collator, std::shared_ptr<models::Model> ref,
                         GrpoSetup setup)
    : TrlTrainer(std::move(model), std::move(args), train_dataset, eval_dataset,
                 std::move(collator)),
      setup_(std::move(setup)),
      train_rows_(std::dynamic_pointer_cast<const GrpoDataset>(train_dataset)),
      eval_rows_(std::dynamic_pointer_cast<const GrpoDataset>(eval_dataset)) {
  const TrainingArguments& a = this->args();
  if (!train_rows_) throw std::invalid_argument("GRPOTrainer: the training data are not prompts");
  plan_ = grpo_generation_plan(a.per_device_train_batch_size(), accelerator().num_processes(),
                               a.gradient_accumulation_steps(), a.generation_batch_size(),
                               a.steps_per_generation(), a.num_generations());
  if (a.do_eval() && a.eval_strategy() != "no") {
    const int64_t G = eval_generations();
    const int64_t global = a.per_device_eval_batch_size() * accelerator().num_processes();
    if (global % G != 0) {
      throw InputError(fmt::format(
          "argument per_device_eval_batch_size: The global eval batch size ({} * {}) must be "
          "divisible by the number of generations used for evaluation ({})",
          a.per_device_eval_batch_size(), accelerator().num_processes(), G));
    }
  }
  const models::HfCausalLM* hf = models::as_hf_causal_lm(this->model());
  const std::string command = a.is_rloo() ? "trainer rloo" : "trainer grpo";
  if (!hf) {
    throw InputError(command + ": the model is not a Hugging Face causal language model");
  }
  sampling_ = sampling_settings(hf->config().vocab_size);
  // A prompt the model cannot read with room for one token more fails before anything trains.
  const int64_t positions = hf->max_positions();
  for (size_t i = 0; i < train_rows_->rows().size(); ++i) {
    const int64_t length = row_length(train_rows_->rows()[i]);
    if (length >= positions) {
      throw InputError(fmt::format(
          "{}: the training data's row {} has a prompt of {} tokens; the model reads at most {} "
          "positions (max_position_embeddings) and needs room for the completion",
          command, i + 1, length, positions));
    }
  }
  if (a.disable_dropout()) disable_dropout(this->model());
  if (a.beta() != 0.0) set_reference_model(std::move(ref), a.disable_dropout());
  const std::string& loss = a.loss_type().front();
  if (accelerator().is_main_process()) {
    if (loss == "luspo" && a.importance_sampling_level() != "sequence") {
      base::warn(
          "When using 'luspo' loss, importance_sampling_level should be set to 'sequence' to "
          "mirror the paper's setup.");
    }
    if (loss == "vespo" && a.importance_sampling_level() != "token") {
      base::warn(
          "VESPO computes sequence-level importance weights internally. "
          "importance_sampling_level should be set to 'token' (the default).");
    }
    if (a.importance_sampling_level() == "sequence" &&
        (loss == "bnpo" || loss == "dr_grpo" || loss == "dapo" || loss == "cispo")) {
      base::warn(
          "When using importance_sampling_level='sequence', the '{}' loss sums per-token "
          "contributions, which effectively weights each sequence by its completion length "
          "instead of optimizing the per-sequence objective. To reproduce the GSPO paper's "
          "setup, set loss_type='grpo'.",
          loss);
    }
  }
  if (accelerator().is_main_process()) {
    // The trainer's own name: a virtual call here would be GRPOTrainer's.
    add_callback(std::make_shared<TimingsReport>(timings_, a.is_rloo() ? "RLOO" : "GRPO"));
  }
  // set_seed(args.seed, device_specific=True): each process samples from its own stream.
  torch::manual_seed(static_cast<uint64_t>(a.seed() + accelerator().process_index()));
}

GRPOTrainer::~GRPOTrainer() = default;

std::shared_ptr<const data::Sampler> GRPOTrainer::make_train_sampler(int64_t) {
  const TrainingArguments& a = args();
  return std::make_shared<RepeatSampler>(train_rows_->size(), a.num_generations(),
                                         plan_.generation_batch_size / a.num_generations(),
                                         a.num_iterations() * plan_.steps_per_generation,
                                         a.shuffle_dataset(), static_cast<uint64_t>(a.seed()));
}

torch::Tensor GRPOTrainer::training_step(models::Model& model, const data::Batch& inputs,
                                         const torch::Tensor&) {
  const auto start = std::chrono::steady_clock::now();
  const TrainingArguments& a = args();
  if (a.sync_ref_model() && state().global_step > last_synced_step_ &&
      state().global_step % a.ref_model_sync_steps() == 0) {
    sync_reference();
    last_synced_step_ = state().global_step;
  }
  const int64_t S = plan_.steps_per_generation;
  if (step_ % (S * a.num_iterations()) == 0 || buffer_.empty()) {
    const data::Batch generated = generate_and_score(inputs, /*training=*/true);
    // TRL's shuffle_sequence_dict (the global generator), then steps_per_generation slices.
    const int64_t n = generated.at("prompt_ids").size(0);
    const data::Batch shuffled =
        take_rows(generated, shuffle_ ? shuffle_(n) : torch::randperm(n, torch::kLong));
    buffer_.clear();
    const int64_t chunk = n / S;
    for (int64_t i = 0; i < S; ++i) {
      data::Batch part;
      for (const auto& [name, value] : shuffled.items())
        part[name] = value.slice(0, i * chunk, (i + 1) * chunk);
      part.num_items_in_batch = shuffled.num_items_in_batch;
      buffer_.push_back(std::move(part));
    }
  }
  const data::Batch& micro = buffer_[static_cast<size_t>(step_ % S)];
  const auto update_start = std::chrono::steady_clock::now();
  Tensor loss = compute_loss(model, micro).loss;
  accelerator().backward(loss);
  timings_->update +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - update_start).count();
  ++step_;
  // TRL's step_time: the optimizer step's micro-steps, generation included.
  step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (step_ % current_gradient_accumulation_steps() == 0) {
    metrics_.add(true, "step_time", step_seconds_);
    step_seconds_ = 0;
  }
  return loss.detach();
}

PredictionOutput GRPOTrainer::prediction_step(models::Model& model, const data::Batch& inputs,
                                              bool) {
  if (!eval_rows_) throw InputError("trainer grpo: the evaluation data are not prompts");
  const data::Batch generated = generate_and_score(inputs, /*training=*/false);
  torch::NoGradGuard no_grad;
  PredictionOutput out;
  out.loss = compute_loss(model, generated).loss.detach();
  return out;
}

std::shared_ptr<const data::Sampler> GRPOTrainer::make_eval_sampler(const data::Dataset& dataset,
                                                                    int64_t) {
  const TrainingArguments& a = args();
  return std::make_shared<RepeatSampler>(dataset.size(), eval_generations(), 1, 1, true,
                                         static_cast<uint64_t>(a.seed()));
}

void GRPOTrainer::sync_reference() {
  const std::shared_ptr<models::Model>& ref = reference_model();
  if (!ref) return;
  torch::NoGradGuard no_grad;
  const double alpha = args().ref_model_mixup_alpha();
  auto policy = model().named_parameters(/*recurse=*/true);
  for (auto& item : ref->named_parameters(/*recurse=*/true)) {
    const Tensor* from = policy.find(item.key());
    if (!from) continue;
    // A parameter mapped from the model file is replaced, not written through.
    item.value().set_data(
        item.value()
            .detach()
            .mul(1.0 - alpha)
            .add(from->detach().to(item.value().device(), item.value().scalar_type()), alpha));
  }
}

void GRPOTrainer::add_logged_metrics(nlohmann::ordered_json& logs, const std::string& prefix) {
  TrlTrainer::add_logged_metrics(logs, prefix);
  if (prefix.empty() && !completion_rows_.empty()) log_completions_table(state().global_step);
}

void GRPOTrainer::log_completions_table(int64_t step) {
  const TrainingArguments& a = args();
  const std::string dir = base::join_path(a.output_dir(), "completions");
  std::string lines;
  for (const auto& row : completion_rows_) lines += row.dump() + "\n";
  base::make_directories(dir);
  base::write_file_atomic(base::join_path(dir, fmt::format("completions_{:05d}.jsonl", step)),
                          lines);
  const int64_t total = static_cast<int64_t>(completion_rows_.size());
  const int64_t shown = a.num_completions_to_print().value_or(total);
  if (shown > 0) {
    fmt::print("Step {}: completions\n", step);
    for (int64_t i = 0; i < std::min(shown, total); ++i) {
      const auto& row = completion_rows_[static_cast<size_t>(i)];
      fmt::print("  prompt {} -> completion {} | advantage {:.2f}\n",
                 base::shown_text(row["prompt"].is_string() ? row["prompt"].get<std::string>()
                                                            : row["prompt"].dump(),
                                  60),
                 base::shown_text(row["completion"].get<std::string>(), 60),
                 row["advantage"].get<double>());
    }
  }
  log_completions_tensorboard(step);
  completion_rows_ = nlohmann::ordered_json::array();
}

void GRPOTrainer::log_completions_tensorboard(int64_t step) {
  std::string dir;
  for (const auto& callback : callbacks()) {
    if (const auto* tensorboard = dynamic_cast<const TensorBoardCallback*>(callback.get()))
      dir = tensorboard->logging_dir();
  }
  if (dir.empty()) return;
  if (!completions_writer_) completions_writer_ = std::make_unique<io::EventFileWriter>(dir);
  // A Markdown table, as TensorBoard's text plugin draws it.
  auto cell = [](const nlohmann::ordered_json& v) {
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    std::string out;
    for (char c : text)
      out += c == '|' ? std::string("\\|") : c == '\n' ? std::string("<br>") : std::string(1, c);
    return out;
  };
  std::string table;
  const auto& first = completion_rows_.front();
  for (const auto& [key, value] : first.items()) table += "| " + key + " ";
  table += "|\n";
  for (size_t i = 0; i < first.size(); ++i) table += "|---";
  table += "|\n";
  for (const auto& row : completion_rows_) {
    for (const auto& [key, value] : row.items()) table += "| " + cell(value) + " ";
    table += "|\n";
  }
  completions_writer_->add_text("completions", table, step);
  completions_writer_->flush();
}

void GRPOTrainer::save_rank_extras(io::NamedTensors& tensors, io::Metadata& metadata) const {
  metadata["grpo_step"] = std::to_string(step_);
  metadata["grpo_buffer"] = std::to_string(buffer_.size());
  for (size_t i = 0; i < buffer_.size(); ++i) {
    for (const auto& [name, value] : buffer_[i].items())
      tensors.emplace_back(fmt::format("grpo_buffer.{}.{}", i, name), value.detach().cpu());
    if (buffer_[i].num_items_in_batch.defined()) {
      tensors.emplace_back(fmt::format("grpo_buffer.{}.num_items_in_batch", i),
                           buffer_[i].num_items_in_batch.detach().cpu().reshape({1}));
    }
  }
}

void GRPOTrainer::load_rank_extras(const io::MappedSafetensors& state, const std::string& path) {
  auto it = state.metadata.find("grpo_step");
  auto count = state.metadata.find("grpo_buffer");
  if (it == state.metadata.end() || count == state.metadata.end()) return;
  try {
    step_ = std::stoll(it->second);
    const auto chunks = static_cast<size_t>(std::stoll(count->second));
    buffer_.assign(chunks, data::Batch());
    for (const auto& [name, value] : state.tensors) {
      if (name.rfind("grpo_buffer.", 0) != 0) continue;
      const std::string rest = name.substr(12);
      const size_t dot = rest.find('.');
      const size_t i = std::stoul(rest.substr(0, dot));
      const std::string key = rest.substr(dot + 1);
      if (i >= chunks) throw std::out_of_range(name);
      if (key == "num_items_in_batch") {
        buffer_[i].num_items_in_batch = value.clone().reshape({}).to(device());
      } else {
        buffer_[i][key] = value.clone().to(device());
      }
    }
  } catch (const std::exception&) {
    throw InputError(
        fmt::format("{}: its GRPO buffer (grpo_step, grpo_buffer.*) does not read", path));
  }
}

}  // namespace trainer::trl
