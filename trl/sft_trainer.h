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
#include "trainer/trainer.h"
#include "trl/sft_data.h"
#include "trl/trl_source.h"
#include "trl/trl_trainer.h"

namespace trainer::trl {

// The rows of prepare_sft_dataset: example i is input_ids and labels (int64 [L]), and for a
// packed row its position ids, restarting at each of its seq_lengths (TRL's
// get_position_ids_from_packed_seq_lengths).
class SftDataset : public RowDataset<SftRow> {
 public:
  using RowDataset::RowDataset;
  data::Example get(int64_t index) const override;
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
struct SftSourceOptions : TrlSourceOptions {
  SftDataOptions data;
  bool eval_packing = false;
  bool shuffle = false;  // shuffle_dataset, with `seed`
  int64_t seed = 42;
  bool padding_free = false;
};
std::unique_ptr<data::DataSource> make_sft_source(SftSourceOptions options);

// The options `args` (an SFTConfig) give the source, with the model's tokenizer and its folder.
// Throws InputError for a pad_token or eos_token the vocabulary lacks, a chat_template_path that
// is not a template, and data named twice or not at all.
SftSourceOptions sft_source_options(const TrainingArguments& args,
                                    std::shared_ptr<const tokenizers::Tokenizer> tokenizer,
                                    const std::string& tokenizer_dir);

class SFTTrainer : public TrlTrainer {
 public:
  using TrlTrainer::TrlTrainer;

  // The model's loss (TRL's loss_type: nll or dft) over the batch's label tokens, divided by
  // num_items_in_batch as the Trainer passes it; with the router loss, its weighted share (over
  // the accumulation steps when the Trainer counts the tokens of the window). Logged beside, as
  // TRL's SFTTrainer logs them: the means since the last log of entropy and mean_token_accuracy
  // (each a ratio over one micro-batch's label tokens on every process), num_tokens (the
  // training tokens so far: real tokens; a padding-free row's whole length), and aux_loss.
  LossOutput compute_loss(models::Model& model, const data::Batch& inputs,
                          bool return_outputs = false,
                          const torch::Tensor& num_items_in_batch = {}) override;
};

}  // namespace trainer::trl
