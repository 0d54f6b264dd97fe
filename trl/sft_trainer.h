// TRL's SFTTrainer on the Trainer: the prepared rows as a Dataset, TRL's
// DataCollatorForLanguageModeling (padding, or padding-free rows with position ids), and the
// trainer whose compute_loss asks the model for the loss TRL computes (cross-entropy or DFT) and
// the statistics TRL logs beside it (entropy, mean_token_accuracy, num_tokens).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/data/registry.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "trainer/trainer.h"
#include "trl/sft_data.h"

namespace trainer::trl {

// The rows of prepare_sft_dataset: example i is input_ids and labels (int64 [L]), and for a
// packed row its position ids, restarting at each of its seq_lengths (TRL's
// get_position_ids_from_packed_seq_lengths).
class SftDataset : public data::Dataset {
 public:
  explicit SftDataset(std::vector<SftRow> rows) : rows_(std::move(rows)) {}
  int64_t size() const override { return static_cast<int64_t>(rows_.size()); }
  data::Example get(int64_t index) const override;
  const std::vector<SftRow>& rows() const { return rows_; }

 private:
  std::vector<SftRow> rows_;
};

// TRL's DataCollatorForLanguageModeling: input_ids padded on the right with pad_token_id (to a
// multiple of pad_to_multiple_of), labels with -100, an attention_mask; or, padding_free, the
// batch's sequences end to end in one row with their position_ids (0 on padding), labels -100
// where a sequence starts.
data::DataCollator sft_collator(int64_t pad_token_id, bool padding_free,
                                std::optional<int64_t> pad_to_multiple_of);

// What `trainer sft` trains on: train_file / validation_file, or dataset_name (a .json/.jsonl
// file, or a folder whose train*/test* files `datasets` would pick), prepared as TRL prepares it
// with the model's tokenizer and chat template (chat_template_path's when given).
struct SftSourceOptions {
  SftDataOptions data;
  std::string train_file, eval_file;
  bool eval_packing = false;
  bool shuffle = false;  // shuffle_dataset, with `seed`
  int64_t seed = 42;
  int64_t pad_token_id = 0;
  bool padding_free = false;
  std::optional<int64_t> pad_to_multiple_of;
  std::shared_ptr<const tokenizers::Tokenizer> tokenizer;
  std::optional<tokenizers::ChatTemplate> chat_template;
  // Where the node's first process caches the prepared splits (cache_dir "": nowhere), and
  // whether it prepares them again (overwrite_cache).
  data::LoadContext context;
  bool overwrite_cache = false;
  bool is_main = true;  // prints what the data became
};
std::unique_ptr<data::DataSource> make_sft_source(SftSourceOptions options);

// The options `args` (an SFTConfig) give the source, with the model's tokenizer and its folder.
// Throws InputError for a pad_token or eos_token the vocabulary lacks, a chat_template_path that
// is not a template, and data named twice or not at all.
SftSourceOptions sft_source_options(const TrainingArguments& args,
                                    std::shared_ptr<const tokenizers::Tokenizer> tokenizer,
                                    const std::string& tokenizer_dir);

// TRL's router_aux_loss_coef (SFTConfig, DPOConfig): the weight of a mixture of experts' router
// load-balancing loss, the model config's own when the argument is null (0 for a dense model);
// enabled for a mixture of experts whose weight is not 0. A weight given for a dense model is an
// InputError, as TRL raises one. With `write_config` (SFTTrainer), the model's config takes it as
// TRL writes it back: output_router_logits on when enabled, off otherwise, and the weight.
struct RouterAuxLoss {
  bool enabled = false;
  double coef = 0.0;
};
RouterAuxLoss resolve_router_aux_loss(const TrainingArguments& args, models::Model& model,
                                      bool write_config);

class SFTTrainer : public Trainer {
 public:
  using Trainer::Trainer;
  // TRL's MoE load-balancing loss: added to the loss times its weight (over the accumulation
  // steps when the Trainer counts the tokens of the window), and logged as aux_loss.
  void set_router_aux_loss(RouterAuxLoss aux) { aux_ = aux; }

  // The model's loss (TRL's loss_type: nll or dft) over the batch's label tokens, divided by
  // num_items_in_batch as the Trainer passes it, and the batch's statistics gathered over the
  // processes for the next log.
  LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                          bool return_outputs = false,
                          const torch::Tensor& num_items_in_batch = {}) override;

 protected:
  // TRL's SFTTrainer.log: the means since the last log of entropy and mean_token_accuracy (each
  // a ratio over one micro-batch's label tokens on every process), and num_tokens, the training
  // tokens so far (real tokens; a padding-free row's whole length), "eval_" prefixed in an
  // evaluation.
  void add_logged_metrics(nlohmann::ordered_json& logs, const std::string& prefix) override;

 private:
  struct Means {
    std::vector<double> entropy, accuracy, aux_loss;
  };
  RouterAuxLoss aux_;
  Means train_, eval_;
  double total_train_tokens_ = 0;
};

}  // namespace trainer::trl
