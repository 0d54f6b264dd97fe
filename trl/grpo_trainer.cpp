// GRPOTrainer: TRL 1.16's _prepare_inputs, _generate_and_score_completions and _compute_loss on
// the Trainer, with the sampling in the process.
#include "trl/grpo_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/lora.h"
#include "lib/models/sampling.h"
#include "trainer/integrations.h"
#include "trl/reward_program.h"

namespace trainer::trl {

using torch::Tensor;

namespace {

// TRL's nanstd: the unbiased standard deviation of the values that are not NaN (NaN with fewer
// than two), along `dim` (all values when dim < 0).
Tensor nanstd(const Tensor& x, int64_t dim = -1, bool keepdim = false) {
  if (dim < 0) {
    const Tensor flat = x.reshape({-1});
    return nanstd(flat, 0, keepdim);
  }
  const Tensor mean = torch::nanmean(x, dim, /*keepdim=*/true);
  const Tensor variance = torch::nanmean((x - mean).pow(2), dim, /*keepdim=*/true);
  const Tensor count = x.isnan().logical_not().sum(dim, /*keepdim=*/true).to(x.scalar_type());
  const Tensor correction =
      torch::where(count > 1, count / (count - 1), torch::full_like(count, NAN));
  Tensor std = (variance * correction).sqrt();
  return keepdim ? std : std.squeeze(dim);
}

// The rows of every tensor of `batch` (its first dimension) in `order`; 0-dim tensors as they are.
data::Batch take_rows(const data::Batch& batch, const Tensor& order) {
  data::Batch out;
  for (const auto& [name, value] : batch.items()) {
    out[name] = value.dim() == 0 ? value : value.index_select(0, order.to(value.device()));
  }
  out.num_items_in_batch = batch.num_items_in_batch;
  return out;
}

double nan_of(const Tensor& t) { return t.numel() == 0 ? NAN : t.item<double>(); }

}  // namespace

// Prints where the main process's time went when training ends.
class GRPOTrainer::TimingsReport : public TrainerCallback {
 public:
  explicit TimingsReport(std::shared_ptr<const Timings> timings) : timings_(std::move(timings)) {}
  void on_train_end(const TrainingArguments&, TrainerState&, TrainerControl&) override {
    const Timings& t = *timings_;
    const double total = t.sampling + t.rewards + t.scoring + t.update;
    if (total <= 0) return;
    auto share = [total](double part) {
      return fmt::format("{:.2f} s ({:.0f}%)", part, 100 * part / total);
    };
    fmt::print(
        "GRPO time: sampling {}, rewards {}, old and reference log-probabilities {}, update {}\n",
        share(t.sampling), share(t.rewards), share(t.scoring), share(t.update));
  }

 private:
  std::shared_ptr<const Timings> timings_;
};

struct GRPOTrainer::Generated {
  Tensor completion_ids, completion_mask;  // [n, T]
  std::vector<std::vector<int64_t>> ids;   // each completion's kept tokens (EOS included)
  std::vector<std::string> texts;          // decoded without special tokens
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
    const int64_t G = a.num_generations_eval().value_or(a.num_generations());
    const int64_t global = a.per_device_eval_batch_size() * accelerator().num_processes();
    if (global % G != 0) {
      throw InputError(fmt::format(
          "argument per_device_eval_batch_size: The global eval batch size ({} * {}) must be "
          "divisible by the number of generations used for evaluation ({})",
          a.per_device_eval_batch_size(), accelerator().num_processes(), G));
    }
  }
  if (!models::as_hf_causal_lm(this->model())) {
    throw InputError("trainer grpo: the model is not a Hugging Face causal language model");
  }
  // A prompt the model cannot read with room for one token more fails before anything trains.
  const int64_t positions = models::as_hf_causal_lm(this->model())->max_positions();
  for (size_t i = 0; i < train_rows_->rows().size(); ++i) {
    const int64_t length = row_length(train_rows_->rows()[i]);
    if (length >= positions) {
      throw InputError(fmt::format(
          "trainer grpo: the training data's row {} has a prompt of {} tokens; the model reads at "
          "most {} positions (max_position_embeddings) and needs room for the completion",
          i + 1, length, positions));
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
  if (accelerator().is_main_process()) add_callback(std::make_shared<TimingsReport>(timings_));
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

Tensor GRPOTrainer::sample(const Tensor& prompt_ids, const Tensor& prompt_mask) {
  const TrainingArguments& a = args();
  models::SamplingSettings s;
  s.do_sample = true;
  s.max_new_tokens = *a.max_completion_length();
  s.temperature = a.temperature();
  s.top_k = a.top_k();
  s.top_p = a.top_p();
  s.min_p = a.min_p() ? a.min_p() : setup_.generation_min_p;
  s.repetition_penalty = a.repetition_penalty();
  s.eos_token_ids = setup_.eos_token_ids;
  s.pad_token_id = setup_.pad_token_id;
  // generation_kwargs over those, as TRL updates its GenerationConfig's keyword arguments.
  const auto& kw = a.generation_kwargs();
  if (kw.is_object()) {
    for (const auto& [key, value] : kw.items()) {
      if (key == "do_sample" && value.is_boolean())
        s.do_sample = value.get<bool>();
      else if (key == "max_new_tokens" && value.is_number_integer())
        s.max_new_tokens = value.get<int64_t>();
      else if (key == "temperature" && value.is_number())
        s.temperature = value.get<double>();
      else if (key == "top_k" && value.is_number_integer())
        s.top_k = value.get<int64_t>();
      else if (key == "top_p" && value.is_number())
        s.top_p = value.get<double>();
      else if (key == "min_p" && (value.is_number() || value.is_null()))
        s.min_p = value.is_null() ? std::nullopt : std::optional<double>(value.get<double>());
      else if (key == "repetition_penalty" && value.is_number())
        s.repetition_penalty = value.get<double>();
      else if (key == "no_repeat_ngram_size" && value.is_number_integer())
        s.no_repeat_ngram_size = value.get<int64_t>();
      else if (key == "bad_words_ids" && value.is_array())
        s.bad_words_ids = value.get<std::vector<std::vector<int64_t>>>();
      else if (key == "eos_token_id" && (value.is_number_integer() || value.is_array()))
        s.eos_token_ids = value.is_array() ? value.get<std::vector<int64_t>>()
                                           : std::vector<int64_t>{value.get<int64_t>()};
      else if (key == "use_cache" && value.is_boolean())
        s.use_cache = value.get<bool>();
      else {
        throw InputError(
            fmt::format("argument generation_kwargs: {} {} is not built here (allowed: do_sample, "
                        "max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, "
                        "no_repeat_ngram_size, bad_words_ids, eos_token_id, use_cache)",
                        key, base::shown(value)));
      }
    }
  }
  models::HfCausalLM* hf = models::as_hf_causal_lm(model());
  at::Generator generator = at::globalContext().defaultGenerator(device().type());
  Tensor tokens;
  accelerator().with_full_params(
      [&] { tokens = models::generate_tokens(*hf, prompt_ids, prompt_mask, s, generator); });
  return tokens;
}

std::pair<Tensor, Tensor> GRPOTrainer::token_logps(models::Model& model, const data::Batch& b,
                                                   int64_t chunk) {
  const Tensor& prompt_ids = b.at("prompt_ids");
  const Tensor& completion_ids = b.at("completion_ids");
  const Tensor ids = torch::cat({prompt_ids, completion_ids}, 1);
  const Tensor mask = torch::cat({b.at("prompt_mask"), b.at("completion_mask")}, 1);
  const int64_t P = prompt_ids.size(1), T = completion_ids.size(1), n = ids.size(0);
  Tensor labels = ids.masked_fill(mask.eq(0), -100);
  labels.slice(1, 0, P).fill_(-100);
  if (chunk <= 0) chunk = n;
  std::vector<Tensor> logps, entropies;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t end = std::min(n, start + chunk);
    data::Batch batch{{"input_ids", ids.slice(0, start, end)},
                      {"attention_mask", mask.slice(0, start, end)},
                      {"labels", labels.slice(0, start, end)}};
    batch.score_temperature = args().temperature();
    const models::ModelOutput out = score_tokens(model, std::move(batch));
    const int64_t L = out.token_scores.log_probs.size(1);
    logps.push_back(out.token_scores.log_probs.slice(1, L - T));
    entropies.push_back(out.token_scores.entropy.slice(1, L - T));
  }
  return {torch::cat(logps, 0), torch::cat(entropies, 0)};
}

Tensor GRPOTrainer::score_rewards(const data::Batch& prompts, const Generated& generated,
                                  const GrpoDataset& data) {
  const Tensor rows = prompts.at("row").to(torch::kCPU);
  const int64_t n = rows.size(0);
  std::vector<RewardRequest> requests;
  requests.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = rows[i].item<int64_t>();
    RewardRequest r;
    r.row = data.record(row);
    r.prompt = r.row.contains("prompt") ? r.row["prompt"] : nlohmann::ordered_json();
    r.completion_text = generated.texts[static_cast<size_t>(i)];
    r.completion = setup_.conversational
                       ? nlohmann::ordered_json::array(
                             {{{"role", "assistant"}, {"content", r.completion_text}}})
                       : nlohmann::ordered_json(r.completion_text);
    r.completion_ids = generated.ids[static_cast<size_t>(i)];
    r.global_step = state().global_step;
    r.where = fmt::format("the {} data's row {}",
                          &data == train_rows_.get() ? "training" : "evaluation", row + 1);
    requests.push_back(std::move(r));
  }
  // A reward that fails on one process fails the run on every process, each with one line.
  std::string failure;
  std::vector<std::vector<std::optional<double>>> scores;
  try {
    scores = setup_.rewards->score(requests);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (accelerator().num_processes() > 1) {
    Tensor failed = torch::tensor({failure.empty() ? 0.0 : 1.0}, torch::kDouble);
    failed = accelerator().reduce(failed.to(device()), Reduction::kMax).cpu();
    if (failure.empty() && failed.item<double>() > 0) {
      throw PeerFailure("another process's reward function failed");
    }
  }
  if (!failure.empty()) throw RewardProgramError(failure);
  const auto F = static_cast<int64_t>(setup_.rewards->size());
  Tensor out = torch::full({n, F}, NAN, torch::kFloat);
  auto a = out.accessor<float, 2>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t f = 0; f < F; ++f) {
      const auto& v = scores[static_cast<size_t>(i)][static_cast<size_t>(f)];
      if (v) a[i][f] = static_cast<float>(*v);
    }
  }
  return out;
}

data::Batch GRPOTrainer::generate_and_score(models::Model& model, const data::Batch& prompts,
                                            bool training) {
  const TrainingArguments& a = args();
  const GrpoDataset& rows_data = training ? *train_rows_ : *eval_rows_;
  Accelerator& acc = accelerator();
  const torch::Device dev = device();
  const Tensor prompt_ids = prompts.at("prompt_ids").to(dev);
  const Tensor prompt_mask = prompts.at("prompt_mask").to(dev);
  const int64_t n = prompt_ids.size(0);
  // Sampling, then each completion cut after its first EOS (kept).
  Tensor tokens;
  auto since = std::chrono::steady_clock::now();
  auto lap = [&since](double& total) {
    const auto now = std::chrono::steady_clock::now();
    total += std::chrono::duration<double>(now - since).count();
    since = now;
  };
  {
    torch::NoGradGuard no_grad;
    tokens = sampler_ ? sampler_(prompt_ids, prompt_mask) : sample(prompt_ids, prompt_mask);
  }
  lap(timings_->sampling);
  tokens = tokens.to(dev).to(torch::kLong);
  const int64_t width = tokens.size(1);
  const Tensor eos = torch::tensor(setup_.eos_token_ids, torch::kLong).to(dev);
  const Tensor is_eos = torch::isin(tokens, eos);
  const Tensor first =
      torch::where(is_eos.any(1), is_eos.to(torch::kInt).argmax(1).to(torch::kLong),
                   torch::full({n}, width, torch::TensorOptions(torch::kLong).device(dev)));
  const Tensor keep = torch::arange(width, tokens.options()).unsqueeze(0) <= first.unsqueeze(1);
  const Tensor lengths = keep.sum(1).cpu();
  const int64_t T = n > 0 ? lengths.max().item<int64_t>() : 0;
  Generated g;
  g.completion_mask = keep.slice(1, 0, T).to(torch::kLong);
  g.completion_ids =
      tokens.slice(1, 0, T).masked_fill(g.completion_mask.eq(0), setup_.pad_token_id);
  const Tensor cpu_ids = g.completion_ids.cpu();
  std::vector<int64_t> truncated(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = lengths[i].item<int64_t>();
    std::vector<int64_t> ids(cpu_ids[i].data_ptr<int64_t>(), cpu_ids[i].data_ptr<int64_t>() + len);
    const bool ended =
        !ids.empty() && (std::find(setup_.eos_token_ids.begin(), setup_.eos_token_ids.end(),
                                   ids.back()) != setup_.eos_token_ids.end() ||
                         ids.back() == setup_.pad_token_id);
    truncated[static_cast<size_t>(i)] = ended ? 0 : 1;
    g.texts.push_back(setup_.tokenizer->decode(std::vector<int32_t>(ids.begin(), ids.end()),
                                               /*skip_special_tokens=*/true));
    g.ids.push_back(std::move(ids));
  }
  // The lengths' metrics over every process, as TRL gathers them.
  Tensor prompt_lengths = prompt_mask.sum(1).to(torch::kLong);
  Tensor completion_lengths = lengths.to(dev);
  Tensor is_truncated = torch::tensor(truncated, torch::kLong).to(dev);
  if (acc.num_processes() > 1) {
    prompt_lengths = acc.gather(prompt_lengths);
    completion_lengths = acc.gather(completion_lengths);
    is_truncated = acc.gather(is_truncated);
  }
  prompt_lengths = prompt_lengths.cpu();
  completion_lengths = completion_lengths.cpu().to(torch::kDouble);
  is_truncated = is_truncated.cpu().to(torch::kBool);
  const double tokens_seen = training
                                 ? count_train_tokens((prompt_lengths.sum().item<double>() +
                                                       completion_lengths.sum().item<double>()),
                                                      true)
                                 : train_tokens();
  metrics_.set(training, "num_tokens", tokens_seen);
  metrics_.add(training, "completions/mean_length", completion_lengths.mean().item<double>());
  metrics_.add(training, "completions/min_length", completion_lengths.min().item<double>());
  metrics_.add(training, "completions/max_length", completion_lengths.max().item<double>());
  metrics_.add(training, "completions/clipped_ratio",
               is_truncated.to(torch::kDouble).mean().item<double>());
  Tensor terminated = completion_lengths.masked_select(is_truncated.logical_not());
  if (terminated.numel() == 0) terminated = torch::zeros({1}, torch::kDouble);
  metrics_.add(training, "completions/mean_terminated_length", terminated.mean().item<double>());
  metrics_.add(training, "completions/min_terminated_length", terminated.min().item<double>());
  metrics_.add(training, "completions/max_terminated_length", terminated.max().item<double>());
  Tensor completion_mask = g.completion_mask;
  if (a.mask_truncated_completions()) {
    const Tensor local_truncated = torch::tensor(truncated, torch::kLong).to(dev);
    completion_mask = completion_mask * (1 - local_truncated).unsqueeze(1);
  }
  Tensor num_items = completion_mask.sum().to(torch::kFloat);
  if (acc.num_processes() > 1) num_items = acc.reduce(num_items, Reduction::kSum);
  data::Batch out{{"prompt_ids", prompt_ids},
                  {"prompt_mask", prompt_mask},
                  {"completion_ids", g.completion_ids},
                  {"completion_mask", completion_mask}};
  out.num_items_in_batch = num_items.detach();
  // The old policy's and the reference's log-probabilities, without gradients.
  const int64_t every = plan_.steps_per_generation * a.num_iterations();
  const int64_t chunk = training ? a.per_device_train_batch_size() : a.per_device_eval_batch_size();
  {
    torch::NoGradGuard no_grad;
    if (a.gradient_accumulation_steps() % every != 0) {
      out["old_per_token_logps"] = token_logps(this->model(), out, chunk).first.detach();
    }
    if (a.beta() != 0.0) {
      out["ref_per_token_logps"] = with_reference(this->model(), [&](models::Model& ref) {
        return token_logps(ref, out, chunk).first.detach();
      });
    }
  }
  (void)model;
  lap(timings_->scoring);
  // The rewards of every process's completions, then the group advantages.
  Tensor rewards_per_func = score_rewards(prompts, g, rows_data).to(dev);
  lap(timings_->rewards);
  if (acc.num_processes() > 1) rewards_per_func = acc.gather(rewards_per_func);
  rewards_per_func = rewards_per_func.cpu();
  const int64_t F = rewards_per_func.size(1);
  const int64_t G =
      training ? a.num_generations() : a.num_generations_eval().value_or(a.num_generations());
  std::vector<float> weight_values(static_cast<size_t>(F), 1.0f);
  const auto& weights_arg = a.reward_weights();
  for (size_t f = 0; f < weights_arg.size() && f < weight_values.size(); ++f)
    weight_values[f] = static_cast<float>(weights_arg[f]);
  const Tensor weights = torch::tensor(weight_values, torch::kFloat).unsqueeze(0);
  const Tensor unscorable = rewards_per_func.isnan().all(1);
  if (unscorable.any().item<bool>() && acc.is_main_process()) {
    base::warn(
        "All reward functions returned None for a completion. Please ensure that at least one "
        "reward function returns a valid reward.");
  }
  auto weighted_sum = [&] {
    Tensor r = (rewards_per_func * weights).nansum(1);
    return r.masked_fill(unscorable, NAN);
  };
  Tensor advantages, std_rewards;
  if (a.multi_objective_aggregation() == "sum_then_normalize") {
    const Tensor rewards = weighted_sum();
    const Tensor mean_grouped = torch::nanmean(rewards.view({-1, G}), 1).repeat_interleave(G, 0);
    if (a.scale_rewards() == "batch") {
      std_rewards =
          rewards.numel() > 1 ? nanstd(rewards).expand_as(rewards) : torch::zeros_like(rewards);
    } else {
      std_rewards = nanstd(rewards.view({-1, G}), 1).repeat_interleave(G, 0);
    }
    advantages = rewards - mean_grouped;
    if (a.scale_rewards() != "none") advantages = advantages / (std_rewards + 1e-4);
  } else {
    const Tensor grouped = rewards_per_func.view({-1, G, F});
    const Tensor mean_k = torch::nanmean(grouped, 1, /*keepdim=*/true);
    const Tensor std_k = nanstd(grouped, 1, /*keepdim=*/true);
    const Tensor reward_k = ((grouped - mean_k) / (std_k + 1e-4)).view({-1, F});
    Tensor rewards = (reward_k * weights).nansum(1).masked_fill(unscorable, NAN);
    std_rewards =
        rewards.numel() > 1 ? nanstd(rewards).expand_as(rewards) : torch::zeros_like(rewards);
    advantages = (rewards - torch::nanmean(rewards)) / (std_rewards + 1e-4);
  }
  const Tensor is_std_zero = torch::isclose(std_rewards, torch::zeros_like(std_rewards));
  advantages = torch::nan_to_num(advantages, 0.0);
  const Tensor all_advantages = advantages.clone();
  const int64_t rank = acc.process_index();
  out["advantages"] = advantages.slice(0, rank * n, (rank + 1) * n).to(dev);
  for (int64_t f = 0; f < F; ++f) {
    const Tensor column = rewards_per_func.select(1, f);
    const std::string& name = setup_.rewards->names()[static_cast<size_t>(f)];
    metrics_.add(training, "rewards/" + name + "/mean", nan_of(torch::nanmean(column)));
    metrics_.add(training, "rewards/" + name + "/std", nan_of(nanstd(column)));
  }
  const Tensor rewards = weighted_sum();
  metrics_.add(training, "reward", nan_of(torch::nanmean(rewards)));
  metrics_.add(training, "reward_std", nan_of(nanstd(rewards)));
  metrics_.add(training, "frac_reward_zero_std",
               is_std_zero.to(torch::kDouble).mean().item<double>());
  // log_completions: this process's rows (the main process's table).
  if (training && a.log_completions() && acc.is_main_process()) {
    const Tensor rows = prompts.at("row").to(torch::kCPU);
    for (int64_t i = 0; i < n; ++i) {
      nlohmann::ordered_json entry;
      entry["step"] = state().global_step + 1;
      const nlohmann::ordered_json record = rows_data.record(rows[i].item<int64_t>());
      entry["prompt"] = record.contains("prompt") ? record["prompt"] : nlohmann::ordered_json();
      entry["completion"] = g.texts[static_cast<size_t>(i)];
      for (int64_t f = 0; f < F; ++f) {
        const float v = rewards_per_func[rank * n + i][f].item<float>();
        entry[setup_.rewards->names()[static_cast<size_t>(f)]] =
            std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
      }
      entry["advantage"] = all_advantages[rank * n + i].item<float>();
      completion_rows_.push_back(std::move(entry));
    }
  }
  return out;
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
    const data::Batch generated = generate_and_score(model, inputs, /*training=*/true);
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

LossOutput GRPOTrainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                     bool return_outputs, const torch::Tensor&) {
  if (return_outputs) throw InputError("The GRPOTrainer does not support returning outputs");
  const TrainingArguments& a = args();
  Accelerator& acc = accelerator();
  const bool training = model.is_training();
  const std::string& loss_type = a.loss_type().front();
  auto [per_token_logps, entropies] = token_logps(model, inputs, 0);
  const Tensor mask = inputs.at("completion_mask").to(torch::kFloat);
  // The tokens of the top entropy quantile over every process (top_entropy_quantile < 1).
  Tensor entropy_mask;
  if (a.top_entropy_quantile() < 1.0) {
    torch::NoGradGuard no_grad;
    Tensor local = entropies.detach().masked_select(mask.to(torch::kBool)).to(torch::kFloat);
    Tensor all = local;
    if (acc.num_processes() > 1) {
      all = acc.gather(acc.pad_across_processes(local, 0, -1e9));
      all = all.masked_select(all.ne(-1e9));
    }
    if (all.numel() == 0) {
      entropy_mask = torch::zeros_like(mask, torch::kBool);
    } else {
      const double threshold = torch::quantile(all, 1.0 - a.top_entropy_quantile()).item<double>();
      entropy_mask = ((entropies.detach() * mask) >= threshold).logical_and(mask.to(torch::kBool));
    }
  }
  const Tensor advantages = inputs.at("advantages").to(torch::kFloat).unsqueeze(1);
  const Tensor old = inputs.contains("old_per_token_logps") ? inputs.at("old_per_token_logps")
                                                            : per_token_logps.detach();
  const Tensor log_ratio = per_token_logps - old;
  Tensor log_weights;
  if (a.importance_sampling_level() == "token") {
    log_weights = log_ratio;
  } else {
    log_weights = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)).unsqueeze(-1);
  }
  Tensor coef_1 = torch::exp(log_weights);
  Tensor per_token_kl;
  if (a.beta() != 0.0) {
    const Tensor ref = inputs.at("ref_per_token_logps");
    per_token_kl = torch::exp(ref - per_token_logps) - (ref - per_token_logps) - 1;
    if (a.use_bias_correction_kl()) per_token_kl = per_token_kl * coef_1;
  }
  const double eps_low = a.epsilon();
  const double eps_high = a.epsilon_high().value_or(a.epsilon());
  Tensor per_token_loss, phi_seq;
  if (loss_type == "cispo") {
    const Tensor clamped = torch::clamp(coef_1, std::nullopt, eps_high).detach();
    per_token_loss = -clamped * advantages * per_token_logps;
  } else if (loss_type == "sapo") {
    const Tensor temperatures =
        torch::where(advantages > 0, torch::full_like(advantages, a.sapo_temperature_pos()),
                     torch::full_like(advantages, a.sapo_temperature_neg()));
    const Tensor soft = torch::sigmoid(temperatures * (coef_1 - 1)) * 4 / temperatures;
    per_token_loss = -soft * advantages;
  } else if (loss_type == "vespo") {
    {
      torch::NoGradGuard no_grad;
      const double lower = std::log(1e-8);
      const Tensor seq_log_ratio =
          (torch::clamp(log_ratio.detach(), -20.0, 20.0) * mask).sum(-1, /*keepdim=*/true);
      const Tensor log_w = torch::clamp(seq_log_ratio, lower, 20.0);
      const Tensor w = torch::exp(log_w);
      const Tensor nonneg = advantages >= 0;
      const Tensor k = torch::where(nonneg, torch::full_like(advantages, a.vespo_k_pos()),
                                    torch::full_like(advantages, a.vespo_k_neg()));
      const Tensor lam = torch::where(nonneg, torch::full_like(advantages, a.vespo_lambda_pos()),
                                      torch::full_like(advantages, a.vespo_lambda_neg()))
                             .clamp_min(1e-4);
      phi_seq = torch::nan_to_num(torch::exp(lam + k * log_w - lam * w), 0.0, 0.0, 0.0);
    }
    per_token_loss = -phi_seq * advantages * per_token_logps;
  } else {
    const Tensor coef_2 = torch::clamp(coef_1, 1 - eps_low, 1 + eps_high);
    if (a.delta()) coef_1 = torch::clamp(coef_1, std::nullopt, *a.delta());
    per_token_loss = -torch::min(coef_1 * advantages, coef_2 * advantages);
  }
  if (entropy_mask.defined()) per_token_loss = per_token_loss * entropy_mask;
  if (a.beta() != 0.0) per_token_loss = per_token_loss + a.beta() * per_token_kl;
  // The aggregation of each loss type.
  const double ga = training ? static_cast<double>(current_gradient_accumulation_steps()) : 1.0;
  Tensor loss;
  if (loss_type == "grpo" || loss_type == "sapo") {
    loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)).mean() / ga;
  } else if (loss_type == "bnpo") {
    loss = (per_token_loss * mask).sum() / mask.sum().clamp_min(1.0) / ga;
  } else if (loss_type == "dr_grpo") {
    loss = (per_token_loss * mask).sum() /
           static_cast<double>(per_token_loss.size(0) * *a.max_completion_length()) / ga;
  } else if (loss_type == "luspo") {
    loss = (per_token_loss * mask).sum(-1).mean() / ga;
  } else {  // cispo, dapo, vespo
    Tensor normalizer = inputs.num_items_in_batch.to(torch::kFloat).clamp_min(1.0) /
                        static_cast<double>(acc.num_processes());
    if (training) normalizer = normalizer * ga / static_cast<double>(plan_.steps_per_generation);
    loss = (per_token_loss * mask).sum() / normalizer.to(per_token_loss.device());
  }
  // TRL's metrics of the micro-step, over every process.
  {
    torch::NoGradGuard no_grad;
    auto global_masked_mean = [&](const Tensor& x) {
      Tensor s, c;
      if (x.size(1) == 1) {
        s = x.sum().to(torch::kDouble);
        c = torch::tensor(static_cast<double>(x.size(0)), torch::kDouble).to(x.device());
      } else {
        s = (x * mask).sum().to(torch::kDouble);
        c = mask.sum().to(torch::kDouble);
      }
      const Tensor totals = process_sum(torch::stack({s, c}));
      return (totals[0] / totals[1].clamp_min(1.0)).item<double>();
    };
    auto masked_seq_mean = [&](const Tensor& x) {
      return x.size(1) == 1 ? x.squeeze(1) : (x * mask).sum(-1) / mask.sum(-1);
    };
    auto gathered = [&](Tensor x) {
      x = x.to(torch::kFloat);
      if (acc.num_processes() > 1) x = acc.gather(x.to(device()));
      return x.cpu();
    };
    auto nan_extreme = [](const Tensor& x, bool minimum) {
      const Tensor valid = x.masked_select(x.isnan().logical_not());
      if (valid.numel() == 0) return static_cast<double>(NAN);
      return (minimum ? valid.min() : valid.max()).item<double>();
    };
    if (a.beta() != 0.0) metrics_.add(training, "kl", global_masked_mean(per_token_kl.detach()));
    metrics_.add(training, "entropy", global_masked_mean(entropies.detach()));
    if (loss_type == "grpo" || loss_type == "bnpo" || loss_type == "dr_grpo" ||
        loss_type == "dapo" || loss_type == "luspo") {
      const Tensor c1 = coef_1.detach();
      const Tensor low = ((c1 < 1 - eps_low).logical_and(advantages < 0)).to(torch::kFloat);
      const Tensor high = ((c1 > 1 + eps_high).logical_and(advantages > 0)).to(torch::kFloat);
      const Tensor region = low.logical_or(high).to(torch::kFloat);
      metrics_.add(training, "clip_ratio/low_mean", global_masked_mean(low));
      metrics_.add(training, "clip_ratio/high_mean", global_masked_mean(high));
      metrics_.add(training, "clip_ratio/region_mean", global_masked_mean(region));
      metrics_.add(training, "clip_ratio/low_min",
                   nan_extreme(gathered(masked_seq_mean(low)), true));
      metrics_.add(training, "clip_ratio/high_max",
                   nan_extreme(gathered(masked_seq_mean(high)), false));
    } else if (loss_type == "cispo") {
      const Tensor clipped =
          ((coef_1.detach() > eps_high).logical_and(advantages > 0)).to(torch::kFloat);
      metrics_.add(training, "cispo_clip_ratio", global_masked_mean(clipped));
    } else if (loss_type == "vespo") {
      metrics_.add(training, "vespo/phi_seq_mean", global_masked_mean(phi_seq));
    }
  }
  LossOutput out;
  out.loss = loss;
  return out;
}

PredictionOutput GRPOTrainer::prediction_step(models::Model& model, const data::Batch& inputs,
                                              bool) {
  if (!eval_rows_) throw InputError("trainer grpo: the evaluation data are not prompts");
  const data::Batch generated = generate_and_score(model, inputs, /*training=*/false);
  torch::NoGradGuard no_grad;
  PredictionOutput out;
  out.loss = compute_loss(model, generated).loss.detach();
  return out;
}

std::shared_ptr<const data::Sampler> GRPOTrainer::make_eval_sampler(const data::Dataset& dataset,
                                                                    int64_t) {
  const TrainingArguments& a = args();
  return std::make_shared<RepeatSampler>(dataset.size(),
                                         a.num_generations_eval().value_or(a.num_generations()), 1,
                                         1, true, static_cast<uint64_t>(a.seed()));
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
