// The TRL trainers' shared bookkeeping: metrics, tokens, the router loss's weight.
#include "trl/trl_trainer.h"

#include <cmath>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/linear.h"
#include "lib/models/lora.h"

namespace trainer::trl {

std::vector<double>& TrlMetrics::values(bool training, const std::string& name) {
  Values& all = training ? train_ : eval_;
  for (auto& [key, list] : all) {
    if (key == name) return list;
  }
  all.emplace_back(name, std::vector<double>{});
  return all.back().second;
}

void TrlMetrics::add(bool training, const std::string& name, double value) {
  values(training, name).push_back(value);
}

void TrlMetrics::set(bool training, const std::string& name, double value) {
  values(training, name) = {value};
}

void TrlMetrics::log(nlohmann::ordered_json& logs, const std::string& prefix) {
  Values& all = prefix.empty() ? train_ : eval_;
  const std::string p = prefix.empty() ? "" : prefix + "_";
  for (auto& [name, list] : all) {
    if (list.empty()) continue;
    // TRL's log(): the mean of the values that are not NaN; None when none is.
    double sum = 0;
    int64_t count = 0;
    for (double x : list) {
      if (std::isnan(x)) continue;
      sum += x;
      ++count;
    }
    logs[p + name] = count > 0 ? nlohmann::ordered_json(sum / static_cast<double>(count))
                               : nlohmann::ordered_json();
    list.clear();
  }
}

RouterAuxLoss resolve_router_aux_loss(const TrainingArguments& args, models::Model& model,
                                      bool write_config) {
  models::HfCausalLM* hf = models::as_hf_causal_lm(model);
  const bool moe = hf && hf->config().num_experts > 0;
  const std::optional<double> given = args.router_aux_loss_coef();
  if (given && *given != 0 && !moe) {
    throw InputError(fmt::format(
        "argument router_aux_loss_coef: {} is set but the model is not a Mixture-of-Experts model "
        "that returns its router logits, so there is no auxiliary loss to weight (give null or 0)",
        base::python_float(*given)));
  }
  RouterAuxLoss aux;
  aux.coef = given.value_or(moe ? hf->config().router_aux_loss_coef : 0.0);
  aux.enabled = moe && aux.coef != 0;
  if (write_config && moe) hf->set_router_aux_loss(aux.enabled, aux.coef);
  return aux;
}

void disable_dropout(models::Model& model) {
  if (auto* lm = models::find_wrapped<models::HfCausalLM>(model)) lm->disable_dropout();
  for (const auto& module : model.modules(/*include_self=*/false)) {
    auto* host = dynamic_cast<models::LoraHost*>(module.get());
    if (host && host->lora) host->lora->dropout = 0.0;
  }
}

TrlTrainer::AdaptersOff::AdaptersOff(models::Model& model)
    : peft_(models::find_wrapped<models::PeftModel>(model)) {
  if (peft_) peft_->set_adapters_enabled(false);
}

TrlTrainer::AdaptersOff::~AdaptersOff() {
  if (peft_) peft_->set_adapters_enabled(true);
}

void TrlTrainer::set_reference_model(std::shared_ptr<models::Model> ref, bool no_dropout) {
  ref_model_ = std::move(ref);
  if (!ref_model_) return;
  if (no_dropout) disable_dropout(*ref_model_);
  ref_model_->eval();
  for (auto& p : ref_model_->parameters()) p.set_requires_grad(false);
  ref_model_ = accelerator().prepare_model(ref_model_, /*evaluation_mode=*/true);
}

models::ModelOutput TrlTrainer::score_tokens(models::Model& model, data::Batch batch) {
  batch.token_scores = true;
  models::ModelOutput out = model.forward(batch);
  if (!out.token_scores.log_probs.defined()) {
    throw InputError(
        "the model does not score its tokens (TRL's trainers train a Hugging Face causal "
        "language model)");
  }
  return out;
}

torch::Tensor TrlTrainer::process_sum(const torch::Tensor& sums) {
  torch::Tensor all = sums.to(torch::kDouble);
  Accelerator& accelerator = this->accelerator();
  if (accelerator.num_processes() > 1) {
    all = accelerator.reduce(all.to(accelerator.device()), Reduction::kSum);
  }
  return all.cpu();
}

double TrlTrainer::process_mean(const torch::Tensor& value) {
  torch::Tensor mean = value.detach().to(torch::kFloat).reshape({1});
  Accelerator& accelerator = this->accelerator();
  if (accelerator.num_processes() > 1) {
    mean = accelerator.reduce(mean.to(accelerator.device()), Reduction::kSum).cpu() /
           static_cast<double>(accelerator.num_processes());
  }
  return mean.item<double>();
}

double TrlTrainer::count_train_tokens(double batch_tokens, bool count_on_after_resume) {
  if (count_on_after_resume && !tokens_restored_) {
    // A resumed run counts on from its checkpoint's last logged count (TRL starts again at 0).
    tokens_restored_ = true;
    for (const auto& e : state().log_history) {
      if (e.contains("num_tokens") && e.contains("step") &&
          e["step"].get<int64_t>() <= state().global_step)
        total_train_tokens_ = e["num_tokens"].get<double>();
    }
  }
  total_train_tokens_ += batch_tokens;
  return total_train_tokens_;
}

}  // namespace trainer::trl
