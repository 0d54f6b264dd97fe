// `trainer sft` (as `trl sft`): TrainingArguments with TRL's SFTConfig (its arguments and
// defaults), the data prepared as SFTTrainer prepares it, trained by trl::SFTTrainer on
// `trainer train`'s run, ending with a chat sample for conversational data.
#include "apps/trainer/trl_command.h"
#include "trl/sft_trainer.h"

namespace trainer::cli {

int sft_command(const std::string& config,
                const std::vector<std::pair<std::string, std::string>>& overrides) {
  const TrainingArguments args = parse_trl_arguments(
      "sft", config, overrides, TrainingArguments::sft_defaults(machine_has_bf16()));
  auto data = [](Accelerator& accelerator, const TrainingArguments& a, const ModelSource& model,
                 std::string& train_file) -> std::unique_ptr<data::DataSource> {
    trl::SftSourceOptions options = trl::sft_source_options(a, trl_tokenizer("sft", model),
                                                            tokenizer_dir(model.tokenizer_path));
    finish_trl_source_options(options, accelerator, a, train_file);
    return trl::make_sft_source(std::move(options));
  };
  auto trainer = [](std::shared_ptr<models::Model> model, const TrainingArguments& a,
                    std::shared_ptr<const data::Dataset> train,
                    std::shared_ptr<const data::Dataset> eval, data::DataCollator collator) {
    const trl::RouterAuxLoss aux = trl::resolve_router_aux_loss(a, *model, /*write_config=*/true);
    auto sft = std::make_unique<trl::SFTTrainer>(std::move(model), a, std::move(train),
                                                 std::move(eval), std::move(collator));
    sft->set_router_aux_loss(aux);
    return std::unique_ptr<Trainer>(std::move(sft));
  };
  return run_training(args, trl_recipe("sft", args, data, trainer));
}

}  // namespace trainer::cli
