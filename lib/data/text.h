// Byte-level language modeling: a corpus (lib/data/text_files.h) cut into blocks of
// context_length bytes, split into train and validation by a seed, and the collator that pads
// variable-length examples (Transformers' DataCollatorForLanguageModeling with mlm=False).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lib/data/dataset.h"
#include "lib/data/registry.h"
#include "lib/data/text_files.h"

namespace trainer::base {
class JsonFields;
}

namespace trainer::data {

// dataset_config of dataset_name "text".
struct TextOptions {
  // A UTF-8 text file, or a folder whose text files are all read (see read_text_corpus).
  std::string path = "/usr/share/games/fortunes";
  int64_t context_length = 128;  // bytes per block (>= 2)
  int64_t stride = 0;            // bytes between block starts, 1..context_length; 0: context_length
  double validation_fraction = 0.1;  // of the corpus's units, in [0, 1)
  uint64_t seed = 42;                // of the train/validation split
  // The vocabulary: one token per byte value.
  static constexpr int64_t kVocabSize = 256;
};

// Throws InputError for a value out of range, naming it and what is allowed:
// "dataset_config: context_length 1 is not allowed (an integer >= 2)".
void check_text_options(const TextOptions& options);

// Blocks of one split: example i is the context_length bytes from starts[i] of the corpus.
class TextDataset : public Dataset {
 public:
  // tokens: uint8 [N], the whole corpus; starts: int64 [M], each + context_length <= N.
  TextDataset(torch::Tensor tokens, torch::Tensor starts, int64_t context_length);

  int64_t size() const override { return starts_.size(0); }
  // input and target: the same int64 [context_length] bytes (Transformers shifts in the loss).
  Example get(int64_t index) const override;
  // {"input_ids": int64 [B, context_length], "labels": a copy of it}, in one gather. Blocks all
  // have one length, so there is no padding and no attention_mask.
  std::optional<Batch> get_batch(const torch::Tensor& indices) const override;
  torch::Device device() const override { return tokens_.device(); }
  std::shared_ptr<const Dataset> to_device(const torch::Device& device,
                                           int64_t max_bytes) const override;

  int64_t context_length() const { return context_length_; }
  const torch::Tensor& tokens() const { return tokens_; }
  const torch::Tensor& starts() const { return starts_; }

 private:
  torch::Tensor tokens_;   // uint8 [N]
  torch::Tensor starts_;   // int64 [M]
  torch::Tensor offsets_;  // int64 [context_length]: 0, 1, ...
  int64_t context_length_;
};

// A corpus's two splits. The split is over units: the corpus (files concatenated in path order)
// is cut into consecutive units of context_length bytes (the bytes after the last whole unit are
// left out), and round(validation_fraction * units) of them, at least one when the fraction is
// above 0, chosen by a permutation from `seed`, are validation's. A block starts at every
// multiple of `stride` and belongs to a split when all its bytes do: no block crosses the split,
// and with stride == context_length (the default) the blocks are the units themselves.
struct TextSplits {
  std::shared_ptr<TextDataset> train;
  std::shared_ptr<TextDataset> validation;  // empty when validation_fraction is 0
  int64_t units = 0;
  int64_t validation_units = 0;
};

// Splits `corpus` as above. Throws InputError (after check_text_options) when the corpus holds
// too few bytes for one block in each split that is asked for, naming its size.
TextSplits split_text(const std::string& corpus, const TextOptions& options);

// Reads options.path and splits it (read_text_corpus, then split_text).
TextSplits load_text(const TextOptions& options, TextCorpus* corpus_out = nullptr);

// The byte distribution's entropy, in nats: -sum p log p over the bytes of `dataset`'s blocks
// (each byte counted once even where blocks overlap). The loss of a model that knows only how
// often each byte occurs.
double unigram_entropy(const TextDataset& dataset);

// dataset_config of "text" from `options` (path, context_length, stride, validation_fraction,
// seed; then base::JsonFields::finish) and dataset_dir, which may give the path instead (not both).
// Throws InputError for an unknown option, a bad value, or a path given twice.
TextOptions read_text_options(base::JsonFields& options, const std::string& dataset_dir);

// dataset_name "text": causal_lm over 256 byte values, input shape [context_length]; its train
// and eval splits are load_text's train and validation (read once, on the first split asked
// for; every process reads the corpus itself, a few MB at most in practice). No collator: blocks
// all have one length and come in one gather. Eval's split is named "validation" in messages.
std::unique_ptr<DataSource> make_text_source(const TextOptions& options);

// Transformers' DataCollatorForLanguageModeling(mlm=False): examples' inputs (int64 [L_i], any
// lengths) padded on the right to the longest with `pad_token_id`, as
// {"input_ids": [B, L], "attention_mask": 1 on real tokens and 0 on padding, "labels": the
// example's target (its input when undefined) with -100 at padding}. The labels are not shifted
// (the loss shifts them). Throws std::invalid_argument for an empty list or an input that is not
// one-dimensional.
struct LanguageModelingCollator {
  int64_t pad_token_id = 0;
  Batch operator()(const std::vector<Example>& examples) const;
};

}  // namespace trainer::data
