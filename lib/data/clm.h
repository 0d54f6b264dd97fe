// Causal language modeling on a tokenizer's ids, as run_clm.py prepares it: train_file and
// validation_file (or a percent split of the one), each text tokenized (tokenizer.json), the ids
// concatenated and cut into blocks of block_size (group_texts, per map() batch of 1000 texts, the
// remainder of each dropped), the tokenized blocks cached on disk and shared by a node's ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lib/data/dataset.h"
#include "lib/data/registry.h"

namespace trainer::tokenizers {
class Tokenizer;
}  // namespace trainer::tokenizers

namespace trainer::data {

struct ClmOptions {
  std::string train_file;       // "" when only validation_file is given (evaluation)
  std::string validation_file;  // "": validation_split_percentage of train_file
  double validation_split_percentage = 5;
  int64_t block_size = 1024;
  bool keep_linebreaks = true;
  std::string text_column_name = "text";
  std::string tokenizer_path;  // a folder holding tokenizer.json (or the file)
  // The tokenizer, when the caller has loaded it already (else loaded from tokenizer_path).
  std::shared_ptr<const tokenizers::Tokenizer> tokenizer;
};

// Blocks of block_size ids: example i is tokens[i * block_size, (i + 1) * block_size).
class BlockDataset : public Dataset {
 public:
  // tokens: int32 [N], N a multiple of block_size.
  BlockDataset(torch::Tensor tokens, int64_t block_size);
  int64_t size() const override { return size_; }
  // input and target: the block as int64 (labels are the inputs; the loss shifts them).
  Example get(int64_t index) const override;
  // {"input_ids": int64 [B, block_size], "labels": the same}: run_clm's default_data_collator.
  std::optional<Batch> get_batch(const torch::Tensor& indices) const override;
  int64_t block_size() const { return block_size_; }
  const torch::Tensor& tokens() const { return tokens_; }

 private:
  torch::Tensor tokens_;
  int64_t block_size_;
  int64_t size_;
};

// run_clm's group_texts over texts' ids, in map() batches of 1000 texts: each batch's ids
// concatenated and cut to a multiple of block_size. Returns int32 [blocks * block_size].
torch::Tensor group_texts(const std::vector<std::vector<int32_t>>& ids, int64_t block_size);

// The source of train_file / validation_file: task causal_lm, input shape [block_size], the
// tokenizer's vocabulary. Reads and tokenizes on the first split asked for (on the node's first
// process; the others read its cache). Throws InputError for bad options or files (one line).
std::unique_ptr<DataSource> make_clm_source(const ClmOptions& options, LoadContext context = {});

}  // namespace trainer::data
