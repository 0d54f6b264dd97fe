// The skeleton of the TRL commands (`trainer sft`, `trainer dpo` and the next ones), as `trl
// <command>` runs a TRL trainer: the arguments read over the config's defaults (model_init_kwargs'
// dtype taken, the script's arguments warned about, a model required), the data source made with
// the model's tokenizer on the node's cache, the trainer made once the model is known to be a
// Hugging Face causal language model, and the chat sample that ends the run on conversations. A
// command gives what is its own: its defaults, its source's options and its trainer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/trainer/commands.h"
#include "apps/trainer/run_setup.h"
#include "trl/trl_source.h"

namespace trainer::cli {

// `trainer <command>`'s arguments: the config file and overrides over `defaults` (the TRL
// config's), model_init_kwargs' dtype as torch_dtype, the script's arguments warned about.
// InputError when no model is named.
TrainingArguments parse_trl_arguments(
    const std::string& command, const std::string& config,
    const std::vector<std::pair<std::string, std::string>>& overrides, TrainingArguments defaults);

// The tokenizer a TRL command's data take: the model source's (loaded when it is not yet).
// InputError naming `command` when the model has none.
std::shared_ptr<const tokenizers::Tokenizer> trl_tokenizer(const std::string& command,
                                                           const ModelSource& model);

// The source's common options finished on this process: the node's cache, overwrite_cache, who
// prints; `train_file` (for the chat sample) takes the file it trains on.
void finish_trl_source_options(trl::TrlSourceOptions& options, Accelerator& accelerator,
                               const TrainingArguments& args, std::string& train_file);

// A command's trainer, made with the model (a Hugging Face causal language model), its arguments
// and data.
using TrlTrainerMaker = std::function<std::unique_ptr<Trainer>(
    std::shared_ptr<models::Model>, const TrainingArguments&, std::shared_ptr<const data::Dataset>,
    std::shared_ptr<const data::Dataset>, data::DataCollator)>;

// The recipe of `trainer <command>`: `data` makes its source (trl_tokenizer and
// finish_trl_source_options help), `trainer` its Trainer once the model has been checked; the
// run ends with the chat sample of the train file `data` names.
TrainingRecipe trl_recipe(
    const std::string& command, const TrainingArguments& args,
    std::function<std::unique_ptr<data::DataSource>(Accelerator&, const TrainingArguments&,
                                                    const ModelSource&, std::string& train_file)>
        data,
    TrlTrainerMaker trainer);

// A frozen copy of `model` (a TRL trainer's reference): the model the arguments name made again
// with `model`'s weights, those equal to the model folder's file mapped from it (the node's
// processes share its pages), the others copied.
std::shared_ptr<models::Model> reference_copy(const models::Model& model,
                                              const TrainingArguments& args,
                                              const ModelSource& source,
                                              const data::DataInfo& info);

}  // namespace trainer::cli
