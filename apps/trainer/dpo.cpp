// `trainer dpo` (as `trl dpo`): TrainingArguments with TRL's DPOConfig (its arguments and
// defaults), the preference pairs prepared as DPOTrainer prepares them, and trl::DPOTrainer on
// `trainer train`'s run, against the reference TRL would use.
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "apps/trainer/trl_command.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/lora.h"
#include "trl/dpo_trainer.h"

namespace trainer::cli {

// TRL's reference model for DPO: none to keep with precomputed log-probabilities; the model
// with its adapters off under a new LoRA adapter; otherwise a frozen copy of the starting weights
// (an adapter folder's too: TRL copies the adapter it starts from).
static std::shared_ptr<models::Model> dpo_reference(models::Model& model,
                                                    const TrainingArguments& a,
                                                    const ModelSource& source) {
  if (a.precompute_ref_log_probs()) return nullptr;
  const auto* peft = models::find_wrapped<models::PeftModel>(model);
  if (peft && !(source.pretrained && source.pretrained->is_adapter())) {
    if (!peft->config().modules_to_save.empty()) {
      throw InputError(
          "argument modules_to_save: DPO's reference is the model with its LoRA adapters off, "
          "which a module trained in full would move; give precompute_ref_log_probs true, or no "
          "modules_to_save");
    }
    return nullptr;
  }
  data::DataInfo info;
  info.task = data::TaskKind::kCausalLM;
  info.num_labels = models::as_hf_causal_lm(model)->config().vocab_size;
  return reference_copy(model, a, source, info);
}

int dpo_command(const std::string& config,
                const std::vector<std::pair<std::string, std::string>>& overrides) {
  const TrainingArguments args = parse_trl_arguments(
      "dpo", config, overrides, TrainingArguments::dpo_defaults(machine_has_bf16()));
  if (args.padding_free()) {
    // TRL 1.16 turns it off with a warning too.
    base::warn(
        "padding_free true is not available for DPO in TRL 1.16 either: padding as usual "
        "(padding_free false)");
  }
  auto source = std::make_shared<ModelSource>();  // the model's, for the reference copy
  auto data = [source](Accelerator& accelerator, const TrainingArguments& a,
                       const ModelSource& model,
                       std::string& train_file) -> std::unique_ptr<data::DataSource> {
    *source = model;
    trl::DpoSourceOptions options = trl::source_options<trl::DpoSourceOptions>(
        a, trl_tokenizer("dpo", model), tokenizer_dir(model.tokenizer_path), "dpo");
    finish_trl_source_options(options, accelerator, a, train_file);
    return trl::make_dpo_source(std::move(options));
  };
  auto trainer = [source](std::shared_ptr<models::Model> model, const TrainingArguments& a,
                          std::shared_ptr<const data::Dataset> train,
                          std::shared_ptr<const data::Dataset> eval, data::DataCollator collator) {
    auto ref = dpo_reference(*model, a, *source);
    return std::unique_ptr<Trainer>(
        std::make_unique<trl::DPOTrainer>(std::move(model), a, std::move(train), std::move(eval),
                                          std::move(collator), std::move(ref)));
  };
  return run_training(args, trl_recipe("dpo", args, data, trainer));
}

}  // namespace trainer::cli
