// What `trainer train`, `evaluate` and `predict` share: the data source and the model the
// arguments name, the checks made before anything is written (an empty split, data the model
// cannot take), the output_dir lock, and a trained run's model and eval split.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "lib/accelerate/accelerator.h"
#include "lib/data/registry.h"
#include "lib/models/hf_config.h"
#include "lib/models/model.h"
#include "lib/models/pretrained_source.h"
#include "lib/tokenizers/tokenizer.h"
#include "trainer/output_dir.h"
#include "trainer/trainer.h"
#include "trainer/training_args.h"

namespace trainer::cli {

// Whether the data are run_clm's text files (train_file / validation_file).
bool uses_text_files(const TrainingArguments& args);

// What the arguments name as the model and its tokenizer, resolved once at start and handed to the
// data, the model and the outputs: model_name_or_path's folder (a model folder, or an adapter
// folder over its base: models::PretrainedSource), the Hugging Face config (the folder's,
// config_name's, or model_type's defaults with model_config), and the tokenizer (tokenizer_name,
// else the model's folder: an adapter folder's own tokenizer, else its base model's; else
// config_name's folder), loaded once when text files or tokenizer_name ask for it. A
// model_name_or_path that is neither folder is a TorchScript file (create_model loads it).
struct ModelSource {
  std::optional<models::PretrainedSource> pretrained;
  std::optional<models::HfConfig> config;
  std::string tokenizer_path;  // "" when the arguments name none
  std::shared_ptr<const tokenizers::Tokenizer> tokenizer;
};
ModelSource resolve_model_source(const TrainingArguments& args);

// The files of the tokenizer folder (or file's folder) that save_pretrained writes back
// (tokenizer.json and those beside it that exist), name -> contents; the `loaded` tokenizer's own
// files as it read them, when given (not read again).
std::map<std::string, std::string> tokenizer_files(const std::string& path,
                                                   const tokenizers::Tokenizer* loaded = nullptr);

// How a node loads data: its first process first (writing the cache under base::cache_dir()),
// the others after it, reading that cache.
data::LoadContext node_load_context(Accelerator& accelerator);
// The data set the arguments name (train_file / validation_file, or dataset_name); a split's caches
// are written by the node's first process and read by the others.
std::unique_ptr<data::DataSource> data_source(Accelerator& accelerator,
                                              const TrainingArguments& args,
                                              const ModelSource& model);

// run_glue.py's text classification (apps/trainer/classification_setup.cpp): train_file and
// validation_file (CSV or JSON with a `label` column) when the model is a sequence classifier,
// tokenized with its tokenizer, cut at block_size (default min(128, its positions): run_glue's
// max_seq_length), padded with its pad_token_id.
bool uses_text_classification(const TrainingArguments& args, const ModelSource& model);
std::unique_ptr<data::DataSource> text_classification_source(const TrainingArguments& args,
                                                             const ModelSource& model);
// What run_glue writes into the classifier's config once the data's labels are known: label2id
// and id2label where the ids come from the train file's sorted labels, and the problem_type the
// first loss would set (so that the saved config.json is Transformers'). Nothing for other data.
void adopt_data_labels(ModelSource& model, data::DataSource& source);

// Whether the run evaluates: an eval_strategy, or do_eval.
bool wants_eval(const TrainingArguments& args);
// Whether the run needs the eval split: wants_eval, eval_on_start, or do_predict.
bool needs_eval_split(const TrainingArguments& args);

// Trainer::predict's outputs as `trainer predict` and do_predict write them into output_dir
// (main process): predictions.npy and label_ids.npy (float32 outputs, int64 labels; with
// eval_do_concat_batches false predictions_<k>.npy and label_ids_<k>.npy per batch, none with
// prediction_loss_only), and predict_results.json with predict_samples, printed too.
void save_predictions(Trainer& trainer, const PredictionResult& result, int64_t num_samples,
                      const TrainingArguments& args, base::WriteBatch& batch);

// The main process (RANK 0) locks output_dir, once the data is loaded and checked; the others
// never write there (null).
std::unique_ptr<OutputDir> lock_output_dir(const TrainingArguments& args);

// The model the arguments name, shaped for the data: the TorchScript module of
// model_name_or_path, else model_name.
std::shared_ptr<models::Model> create_model(const TrainingArguments& args,
                                            const ModelSource& source, const data::DataInfo& info);

// The name a message gives the model: its folder or TorchScript file, or its registered name.
std::string model_label(const TrainingArguments& args);

// Runs the first two examples of `split` through the model (apps/trainer/first_batch.cpp) and
// checks that its outputs fit the task (dtype, rank, one row per example, the number of classes or
// the vocabulary), so that data or a model of the wrong shape fails before training, with one line
// saying what was expected and what came, rather than inside a layer after hours or never. Eval
// mode: no dropout, so no random number is drawn.
void check_model_takes(models::Model& model, const data::Dataset& dataset,
                       const data::DataCollator& collator, const std::string& split,
                       data::DataSource& source, const TrainingArguments& args);

// An empty split would train or score nothing, and say nothing: InputError.
void check_not_empty(const data::Dataset& dataset, const std::string& split,
                     const data::DataSource& source);

// The model of a trained run (output_dir/model.safetensors) and the eval split, for evaluate
// and predict.
struct TrainedRun {
  std::shared_ptr<models::Model> model;
  std::shared_ptr<const data::Dataset> eval_dataset;
  data::DataCollator collator;
  ComputeMetrics compute_metrics;
};
TrainedRun load_trained_run(Accelerator& accelerator, const TrainingArguments& args);

// run_clm's last line of evaluation: metrics["perplexity"] = exp(eval_loss) (inf past float's
// range), for a language model.
void add_perplexity(Metrics& metrics, data::TaskKind task);

// The output directory's lock, after checking that all_results.json (which the metrics are
// merged into) can be read: a damaged one is said now, not replaced later.
std::unique_ptr<OutputDir> lock_for_results(const TrainingArguments& args);

// What a command trains with, where it differs from `trainer train`: its data source (default:
// data_source) and its Trainer (default: a Trainer with the task's metrics).
struct TrainingRecipe {
  std::function<std::unique_ptr<data::DataSource>(Accelerator&, const TrainingArguments&,
                                                  const ModelSource&)>
      data;
  std::function<std::unique_ptr<Trainer>(std::shared_ptr<models::Model>, const TrainingArguments&,
                                         std::shared_ptr<const data::Dataset>,
                                         std::shared_ptr<const data::Dataset>, data::DataCollator)>
      trainer;
  // The sample that ends the run, on the main process (default: print_sample's).
  std::function<void()> chat_sample;
  // What the command makes of the model the arguments name, once its data source is made (a
  // reward model: a classifier of one label whose pad id is its data's).
  std::function<void(ModelSource&)> model_source;
};
// `trainer train`'s run (train.cpp) with the recipe's data and Trainer: the data and the model
// checked before output_dir is touched, training, the results saved together, the sample.
int run_training(const TrainingArguments& args, const TrainingRecipe& recipe);

}  // namespace trainer::cli
