// GRPOTrainer's generation: TRL's _generate_and_score_completions as named steps (sampling,
// the completions cut at their EOS, the lengths' metrics, the old policy's and the reference's
// log-probabilities, the rewards of every process, the group advantages and their metrics).
#include <algorithm>
#include <chrono>
#include <cmath>

#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/accelerate/mixed_precision.h"
#include "lib/base/errors.h"
#include "lib/base/json_text.h"
#include "lib/base/warn.h"
#include "lib/models/generation_config.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/lora.h"
#include "lib/models/sampling.h"
#include "trl/grpo_math.h"
#include "trl/grpo_trainer.h"
#include "trl/reward_program.h"

namespace trainer::trl {

using torch::Tensor;

namespace {

double nan_of(const Tensor& t) { return t.numel() == 0 ? NAN : t.item<double>(); }

}  // namespace

models::SamplingSettings GRPOTrainer::sampling_settings(int64_t vocab_size) const {
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
  // generation_kwargs over those, as TRL updates its GenerationConfig's keyword arguments: only
  // the keys whose decoding is built here, each value checked as generation_config.json's are.
  const nlohmann::ordered_json& kw = a.generation_kwargs();
  if (!kw.is_object() || kw.empty()) return s;
  static const std::vector<std::string> kBuilt = {
      "do_sample",     "max_new_tokens", "temperature",        "top_k",
      "top_p",         "min_p",          "repetition_penalty", "no_repeat_ngram_size",
      "bad_words_ids", "eos_token_id",   "use_cache"};
  for (const auto& [key, value] : kw.items()) {
    if (std::find(kBuilt.begin(), kBuilt.end(), key) == kBuilt.end() ||
        (key == "use_cache" && !value.is_boolean())) {
      throw InputError(
          fmt::format("argument generation_kwargs: {} {} is not built here (allowed: do_sample, "
                      "max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, "
                      "no_repeat_ngram_size, bad_words_ids, eos_token_id, use_cache)",
                      key, base::shown(value)));
    }
  }
  const models::GenerationConfig g =
      models::parse_generation_config(kw, "argument generation_kwargs", vocab_size);
  if (g.do_sample) s.do_sample = *g.do_sample;
  if (kw.contains("max_new_tokens")) s.max_new_tokens = kw["max_new_tokens"].get<int64_t>();
  if (g.temperature) s.temperature = *g.temperature;
  if (g.top_k) s.top_k = *g.top_k;
  if (g.top_p) s.top_p = *g.top_p;
  if (kw.contains("min_p")) s.min_p = g.min_p;
  if (kw.contains("repetition_penalty")) s.repetition_penalty = g.repetition_penalty;
  if (kw.contains("no_repeat_ngram_size")) s.no_repeat_ngram_size = g.no_repeat_ngram_size;
  if (kw.contains("bad_words_ids")) s.bad_words_ids = g.bad_words_ids;
  if (g.has_eos) s.eos_token_ids = g.eos_token_ids;
  if (kw.contains("use_cache")) s.use_cache = kw["use_cache"].get<bool>();
  return s;
}

Tensor GRPOTrainer::sample(const Tensor& prompt_ids, const Tensor& prompt_mask) {
  const TrainingArguments& a = args();
  models::HfCausalLM* hf = models::as_hf_causal_lm(model());
  at::Generator generator = at::globalContext().defaultGenerator(device().type());
  Tensor tokens;
  accelerator().with_full_params([&] {
    // Under the run's autocast, as TRL's generate runs in the prepared model's forward.
    std::optional<AutocastGuard> autocast;
    if (a.bf16()) autocast.emplace(device().type(), torch::kBFloat16);
    if (a.fp16()) autocast.emplace(device().type(), torch::kHalf);
    tokens = models::generate_tokens(*hf, prompt_ids, prompt_mask, sampling_, generator);
  });
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

GRPOTrainer::Generated GRPOTrainer::cut_completions(Tensor tokens) const {
  const torch::Device dev = device();
  tokens = tokens.to(dev).to(torch::kLong);
  const int64_t n = tokens.size(0), width = tokens.size(1);
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
  const auto& stops = setup_.eos_token_ids;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = lengths[i].item<int64_t>();
    std::vector<int64_t> ids(cpu_ids[i].data_ptr<int64_t>(), cpu_ids[i].data_ptr<int64_t>() + len);
    // TRL's is_truncated: the last token kept is neither an EOS nor the padding.
    const bool ended =
        !ids.empty() && (std::find(stops.begin(), stops.end(), ids.back()) != stops.end() ||
                         ids.back() == setup_.pad_token_id);
    g.lengths.push_back(len);
    g.truncated.push_back(ended ? 0 : 1);
    g.texts.push_back(setup_.tokenizer->decode(std::vector<int32_t>(ids.begin(), ids.end()),
                                               /*skip_special_tokens=*/true));
    g.ids.push_back(std::move(ids));
  }
  return g;
}

void GRPOTrainer::record_length_metrics(const Tensor& prompt_mask, const Generated& g,
                                        bool training) {
  Accelerator& acc = accelerator();
  const torch::Device dev = device();
  Tensor prompt_lengths = prompt_mask.sum(1).to(torch::kLong);
  Tensor completion_lengths = torch::tensor(g.lengths, torch::kLong).to(dev);
  Tensor is_truncated = torch::tensor(g.truncated, torch::kLong).to(dev);
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
}

std::pair<Tensor, Tensor> GRPOTrainer::old_and_reference_logps(const data::Batch& out,
                                                               bool training, bool old) {
  const TrainingArguments& a = args();
  const int64_t chunk = training ? a.per_device_train_batch_size() : a.per_device_eval_batch_size();
  torch::NoGradGuard no_grad;
  // The policy's forwards run on its full weights (gathered under ZeRO-3, as for sampling); a
  // frozen reference copy is never sharded.
  const bool policy_reference = a.beta() != 0.0 && !reference_model();
  auto reference = [&] {
    return with_reference(this->model(), [&](models::Model& ref) {
      return token_logps(ref, out, chunk).first.detach();
    });
  };
  Tensor old_logps, ref_logps;
  if (old || policy_reference) {
    accelerator().with_full_params([&] {
      if (old) old_logps = token_logps(this->model(), out, chunk).first.detach();
      if (policy_reference) ref_logps = reference();
    });
  }
  if (a.beta() != 0.0 && reference_model()) ref_logps = reference();
  return {old_logps, ref_logps};
}

void GRPOTrainer::add_old_and_reference(data::Batch& out, bool training) {
  const TrainingArguments& a = args();
  // The old policy's only when its updates move it away (TRL: GA not a multiple of the
  // generation's micro-steps); otherwise the loss's own detached log-probabilities stand in.
  const int64_t every = plan_.steps_per_generation * a.num_iterations();
  auto [old, ref] =
      old_and_reference_logps(out, training, a.gradient_accumulation_steps() % every != 0);
  if (old.defined()) out["old_per_token_logps"] = old;
  if (ref.defined()) out["ref_per_token_logps"] = ref;
}

void GRPOTrainer::record_reward_metrics(const Tensor& rewards_per_func,
                                        const grpo::Advantages& advantages, bool training) {
  for (int64_t f = 0; f < rewards_per_func.size(1); ++f) {
    const Tensor column = rewards_per_func.select(1, f);
    const std::string& name = setup_.rewards->names()[static_cast<size_t>(f)];
    metrics_.add(training, "rewards/" + name + "/mean", nan_of(torch::nanmean(column)));
    metrics_.add(training, "rewards/" + name + "/std", nan_of(grpo::nanstd(column)));
  }
  metrics_.add(training, "reward", nan_of(torch::nanmean(advantages.rewards)));
  metrics_.add(training, "reward_std", nan_of(grpo::nanstd(advantages.rewards)));
  metrics_.add(training, "frac_reward_zero_std",
               advantages.std_is_zero.to(torch::kDouble).mean().item<double>());
}

void GRPOTrainer::keep_completion_rows(const data::Batch& prompts, const Generated& g,
                                       const GrpoDataset& data, const Tensor& rewards_per_func,
                                       const Tensor& advantages) {
  const Tensor rows = prompts.at("row").to(torch::kCPU);
  const int64_t n = rows.size(0), first = accelerator().process_index() * n;
  for (int64_t i = 0; i < n; ++i) {
    nlohmann::ordered_json entry;
    entry["step"] = state().global_step + 1;
    const nlohmann::ordered_json record = data.record(rows[i].item<int64_t>());
    entry["prompt"] = record.contains("prompt") ? record["prompt"] : nlohmann::ordered_json();
    entry["completion"] = g.texts[static_cast<size_t>(i)];
    for (int64_t f = 0; f < rewards_per_func.size(1); ++f) {
      const float v = rewards_per_func[first + i][f].item<float>();
      entry[setup_.rewards->names()[static_cast<size_t>(f)]] =
          std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
    }
    entry["advantage"] = advantages[first + i].item<float>();
    completion_rows_.push_back(std::move(entry));
  }
}

grpo::Advantages GRPOTrainer::compute_advantages(const Tensor& rewards_per_func, bool training) {
  const TrainingArguments& a = args();
  grpo::AdvantageSettings settings;
  settings.num_generations = training ? a.num_generations() : eval_generations();
  settings.scale_rewards = a.scale_rewards();
  settings.aggregation = a.multi_objective_aggregation();
  settings.weights = a.reward_weights();
  return grpo::group_advantages(rewards_per_func, settings);
}

data::Batch GRPOTrainer::generate_and_score(const data::Batch& prompts, bool training) {
  const TrainingArguments& a = args();
  const GrpoDataset& data = training ? *train_rows_ : *eval_rows_;
  Accelerator& acc = accelerator();
  const torch::Device dev = device();
  const Tensor prompt_ids = prompts.at("prompt_ids").to(dev);
  const Tensor prompt_mask = prompts.at("prompt_mask").to(dev);
  auto since = std::chrono::steady_clock::now();
  auto lap = [&since](double& total) {
    const auto now = std::chrono::steady_clock::now();
    total += std::chrono::duration<double>(now - since).count();
    since = now;
  };
  Tensor tokens;
  {
    torch::NoGradGuard no_grad;
    tokens = sampler_ ? sampler_(prompt_ids, prompt_mask) : sample(prompt_ids, prompt_mask);
  }
  lap(timings_->sampling);
  const Generated g = cut_completions(tokens);
  record_length_metrics(prompt_mask, g, training);
  Tensor completion_mask = g.completion_mask;
  if (a.mask_truncated_completions()) {
    completion_mask =
        completion_mask * (1 - torch::tensor(g.truncated, torch::kLong).to(dev)).unsqueeze(1);
  }
  Tensor num_items = completion_mask.sum().to(torch::kFloat);
  if (acc.num_processes() > 1) num_items = acc.reduce(num_items, Reduction::kSum);
  data::Batch out{{"prompt_ids", prompt_ids},
                  {"prompt_mask", prompt_mask},
                  {"completion_ids", g.completion_ids},
                  {"completion_mask", completion_mask}};
  out.num_items_in_batch = num_items.detach();
  add_old_and_reference(out, training);
  lap(timings_->scoring);
  // The rewards of every process's completions, then the group advantages; this process keeps
  // its rows'.
  Tensor rewards_per_func = score_rewards(prompts, g, data).to(dev);
  lap(timings_->rewards);
  if (acc.num_processes() > 1) rewards_per_func = acc.gather(rewards_per_func);
  rewards_per_func = rewards_per_func.cpu();
  const grpo::Advantages advantages = compute_advantages(rewards_per_func, training);
  if (advantages.unscorable.any().item<bool>() && acc.is_main_process()) {
    base::warn(
        "All reward functions returned None for a completion. Please ensure that at least one "
        "reward function returns a valid reward.");
  }
  const int64_t n = prompt_ids.size(0), rank = acc.process_index();
  out["advantages"] = advantages.advantages.slice(0, rank * n, (rank + 1) * n).to(dev);
  record_reward_metrics(rewards_per_func, advantages, training);
  if (training && a.log_completions() && acc.is_main_process())
    keep_completion_rows(prompts, g, data, rewards_per_func, advantages.advantages);
  return out;
}

}  // namespace trainer::trl
