// `trainer sft`'s data on LibTorch: the prepared rows as tensors, TRL's
// DataCollatorForLanguageModeling, and the source that prepares each split once per node.
#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/warn.h"
#include "trl/sft_trainer.h"
#include "trl/trl_source.h"

namespace trainer::trl {
namespace {

using torch::Tensor;

Tensor to_tensor(const std::vector<int32_t>& values) {
  return torch::tensor(std::vector<int64_t>(values.begin(), values.end()), torch::kLong);
}

// Right-padding of 1-D int64 tensors to one length (a multiple of `multiple` when given).
Tensor pad_right(const std::vector<Tensor>& rows, int64_t value, std::optional<int64_t> multiple) {
  int64_t length = 0;
  for (const auto& r : rows) length = std::max(length, r.size(0));
  if (multiple && *multiple > 0) length = (length + *multiple - 1) / *multiple * *multiple;
  Tensor out = torch::full({static_cast<int64_t>(rows.size()), length}, value, torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) out[i].slice(0, 0, rows[i].size(0)).copy_(rows[i]);
  return out;
}

class SftSource : public TrlSource<SftData, SftSourceOptions, SftDataset> {
 public:
  explicit SftSource(SftSourceOptions options) : TrlSource(std::move(options)) {}

  data::DataCollator collator() const override {
    return sft_collator(options_.pad_token_id, options_.padding_free, options_.pad_to_multiple_of);
  }

 protected:
  std::optional<int64_t> max_length() const override { return options_.data.max_length; }

  std::string cache_settings(const std::string& split,
                             std::optional<int64_t> max_samples) const override {
    const SftDataOptions d = split_options(split);
    return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", d.dataset_text_field,
                       d.max_length.value_or(-1), d.truncation_mode, d.packing, d.packing_strategy,
                       d.completion_only_loss ? static_cast<int>(*d.completion_only_loss) : -1,
                       d.assistant_only_loss, d.eos_token.value_or("\x01none"), options_.shuffle,
                       options_.seed, max_samples.value_or(-1),
                       options_.chat_template ? options_.chat_template->name() : "");
  }

  // TRL's preparation of one split, shuffled (shuffle_dataset) where TRL shuffles.
  SftData prepare(const std::string& split, const std::string& path,
                  std::optional<int64_t> max_samples) const override {
    const SftDataOptions data = split_options(split);
    const std::vector<nlohmann::ordered_json> records = split_records(path, max_samples);
    const tokenizers::ChatTemplate* chat = options_.chat();
    SftData prepared;
    if (options_.shuffle && data.packing) {
      // TRL shuffles the tokenized rows, packs them, and shuffles the packed rows.
      SftDataOptions unpacked = data;
      unpacked.packing = false;
      unpacked.max_length = std::nullopt;
      prepared = prepare_sft_dataset(records, *options_.tokenizer, chat, unpacked, path);
      shuffle(prepared.rows);
      for (const auto& row : prepared.rows) {
        if (static_cast<int64_t>(row.input_ids.size()) > *data.max_length) ++prepared.truncated;
      }
      prepared.rows = pack_rows(std::move(prepared.rows), *data.max_length, data.packing_strategy);
    } else {
      prepared = prepare_sft_dataset(records, *options_.tokenizer, chat, data, path);
    }
    if (options_.shuffle) shuffle(prepared.rows);
    return prepared;
  }

  // One line on what the data became; a warning with the counts where TRL cuts or drops rows
  // without a word.
  void report(const std::string& split, const std::string& path, const SftData& data,
              bool from_cache) const override {
    const SftDataOptions options = split_options(split);
    const bool packed = options.packing;
    int64_t labels = 0, tokens = 0;
    for (const auto& row : data.rows) {
      tokens += static_cast<int64_t>(row.input_ids.size());
      // A sequence's first token is predicted from nothing: its label never counts.
      std::vector<int32_t> starts = {0};
      for (int32_t length : row.seq_lengths) starts.push_back(starts.back() + length);
      for (size_t i = 0, s = 0; i < row.labels.size(); ++i) {
        while (s < starts.size() && static_cast<size_t>(starts[s]) < i) ++s;
        const bool first = s < starts.size() && static_cast<size_t>(starts[s]) == i;
        labels += row.labels[i] != -100 && !first;
      }
    }
    fmt::print("SFT {} data: {} {} examples from {} -> {} rows{}, {} tokens, {} with a label{}\n",
               split, data.examples, shape_name(data.shape), path, data.rows.size(),
               packed ? fmt::format(" ({} packed)", options.packing_strategy) : "", tokens, labels,
               from_cache ? " (from the node's cache)" : "");
    // A setting that would do nothing is said, not accepted in silence.
    if (options.completion_only_loss.value_or(false) && data.shape != SftShape::kPromptCompletion &&
        data.shape != SftShape::kConversationalPromptCompletion) {
      base::warn(
          "completion_only_loss true does nothing for {} data: only prompt-completion data has a "
          "prompt to leave out of the loss{}",
          shape_name(data.shape),
          data.shape == SftShape::kConversational
              ? " (for conversations, assistant_only_loss keeps the assistant's tokens alone)"
              : "");
    }
    if (data.truncated > 0 && options.max_length) {
      base::warn("{} of the {} examples are longer than max_length {}: {} (as TRL does)",
                 data.truncated, data.examples, *options.max_length,
                 packed && options.packing_strategy == "bfd_split" ? "split into more sequences"
                 : packed && options.packing_strategy == "wrapped" ? "cut across rows"
                                                                   : "their ends cut");
    }
    if (data.dropped > 0) {
      base::warn(
          "{} of the {} examples have no label token (after truncation) and are dropped "
          "(as TRL does)",
          data.dropped, data.examples);
    }
  }

 private:
  // The data options of a split: an evaluation packs as eval_packing says.
  SftDataOptions split_options(const std::string& split) const {
    SftDataOptions data = options_.data;
    if (split != "train") data.packing = options_.eval_packing;
    return data;
  }

  void shuffle(std::vector<SftRow>& rows) const {
    std::mt19937_64 generator(static_cast<uint64_t>(options_.seed));
    std::shuffle(rows.begin(), rows.end(), generator);
  }
};

}  // namespace

data::Example SftDataset::get(int64_t index) const {
  const SftRow& row = rows_.at(static_cast<size_t>(index));
  data::Example example{to_tensor(row.input_ids), to_tensor(row.labels)};
  if (!row.seq_lengths.empty()) {
    std::vector<int64_t> positions;
    positions.reserve(row.input_ids.size());
    for (int32_t length : row.seq_lengths) {
      for (int32_t p = 0; p < length; ++p) positions.push_back(p);
    }
    example.positions = torch::tensor(positions, torch::kLong);
  }
  return example;
}

data::DataCollator sft_collator(int64_t pad_token_id, bool padding_free,
                                std::optional<int64_t> pad_to_multiple_of) {
  return [=](const std::vector<data::Example>& examples) {
    std::vector<Tensor> ids, labels, positions;
    for (const auto& e : examples) {
      ids.push_back(e.input);
      labels.push_back(e.target);
      positions.push_back(e.positions.defined() ? e.positions
                                                : torch::arange(e.input.size(0), torch::kLong));
    }
    data::Batch batch;
    if (padding_free) {
      batch["input_ids"] = pad_right({torch::cat(ids)}, pad_token_id, pad_to_multiple_of);
      Tensor label_row = pad_right({torch::cat(labels)}, -100, pad_to_multiple_of);
      Tensor position_row = pad_right({torch::cat(positions)}, 0, pad_to_multiple_of);
      // A sequence's first token is not predicted from the one before it.
      label_row.masked_fill_(position_row.eq(0), -100);
      batch["labels"] = label_row;
      batch["position_ids"] = position_row;
      return batch;
    }
    std::vector<Tensor> ones;
    for (const auto& i : ids) ones.push_back(torch::ones_like(i));
    batch["input_ids"] = pad_right(ids, pad_token_id, pad_to_multiple_of);
    batch["labels"] = pad_right(labels, -100, pad_to_multiple_of);
    batch["attention_mask"] = pad_right(ones, 0, pad_to_multiple_of);
    return batch;
  };
}

std::unique_ptr<data::DataSource> make_sft_source(SftSourceOptions options) {
  return std::make_unique<SftSource>(std::move(options));
}

SftSourceOptions sft_source_options(const TrainingArguments& args,
                                    std::shared_ptr<const tokenizers::Tokenizer> tokenizer,
                                    const std::string& tokenizer_dir) {
  SftSourceOptions o =
      source_options<SftSourceOptions>(args, std::move(tokenizer), tokenizer_dir, "sft");
  o.data.dataset_text_field = args.dataset_text_field();
  o.data.packing = args.packing();
  o.data.packing_strategy = args.packing_strategy();
  o.data.completion_only_loss = args.completion_only_loss();
  o.data.assistant_only_loss = args.assistant_only_loss();
  o.data.eos_token = args.eos_token();
  o.eval_packing = args.eval_packing().value_or(args.packing());
  o.shuffle = args.shuffle_dataset();
  o.seed = args.seed();
  // TRL: padding-free with packing bfd / bfd_split, or when asked.
  o.padding_free = args.padding_free() || (args.packing() && args.packing_strategy() != "wrapped");
  return o;
}

}  // namespace trainer::trl
