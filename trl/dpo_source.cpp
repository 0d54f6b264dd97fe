// `trainer dpo`'s data: the preference pairs read and prepared once per node (cached), as a
// Dataset, and TRL's DataCollatorForPreference.
#include <algorithm>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/warn.h"
#include "trl/dpo_trainer.h"

namespace trainer::trl {
namespace {

using torch::Tensor;

std::vector<int64_t> widen(const std::vector<int32_t>& values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

class DpoSource : public TrlSource<DpoData, DpoSourceOptions, DpoDataset> {
 public:
  explicit DpoSource(DpoSourceOptions options) : TrlSource(std::move(options)) {}

  data::DataCollator collator() const override {
    return dpo_collator(options_.pad_token_id, options_.data.max_length,
                        options_.data.truncation_mode, options_.pad_to_multiple_of);
  }

 protected:
  std::optional<int64_t> max_length() const override { return options_.data.max_length; }

  std::string cache_settings(const std::string&,
                             std::optional<int64_t> max_samples) const override {
    const DpoDataOptions& d = options_.data;
    return fmt::format("dpo|{}|{}|{}|{}|{}", d.max_length.value_or(-1), d.truncation_mode,
                       d.eos_token.value_or("\x01none"), max_samples.value_or(-1),
                       options_.chat_template ? options_.chat_template->name() : "");
  }

  DpoData prepare(const std::string&, const std::string& path,
                  std::optional<int64_t> max_samples) const override {
    return prepare_dpo_dataset(split_records(path, max_samples), *options_.tokenizer,
                               options_.chat(), options_.data, path);
  }

  // One line on what the data became; a warning with the counts where TRL drops or keeps pairs
  // without a word.
  void report(const std::string& split, const std::string& path, const DpoData& data,
              bool from_cache) const override {
    fmt::print("DPO {} data: {} {}{} preference pairs from {} -> {} pairs, {} tokens{}\n", split,
               data.examples, data.shape == DpoShape::kConversational ? "conversational" : "plain",
               data.implicit_prompt ? " (implicit prompt)" : "", path, data.rows.size(),
               data.tokens, from_cache ? " (from the node's cache)" : "");
    if (data.dropped > 0) {
      base::warn(
          "{} of the {} pairs have a prompt of max_length {} tokens or more and are dropped "
          "(as TRL does: keep_start would leave them no completion token)",
          data.dropped, data.examples, options_.data.max_length.value_or(0));
    }
    if (data.identical > 0) {
      base::warn(
          "{} of the {} pairs have the same chosen and rejected completion: kept, as TRL keeps "
          "them (they add a constant log 2 to the sigmoid loss and no gradient)",
          data.identical, data.examples);
    }
  }
};

}  // namespace

data::Example DpoDataset::get(int64_t index) const {
  const DpoRow& row = rows_.at(static_cast<size_t>(index));
  std::vector<int64_t> ids = widen(row.prompt_ids);
  ids.insert(ids.end(), row.chosen_ids.begin(), row.chosen_ids.end());
  ids.insert(ids.end(), row.rejected_ids.begin(), row.rejected_ids.end());
  data::Example example{torch::tensor(ids, torch::kLong),
                        torch::tensor({static_cast<int64_t>(row.prompt_ids.size()),
                                       static_cast<int64_t>(row.chosen_ids.size()),
                                       static_cast<int64_t>(row.rejected_ids.size())},
                                      torch::kLong)};
  if (reference_.defined()) example.extra = reference_[index];
  return example;
}

data::DataCollator dpo_collator(int64_t pad_token_id, std::optional<int64_t> max_length,
                                const std::string& truncation_mode,
                                std::optional<int64_t> pad_to_multiple_of) {
  const bool keep_end = truncation_mode == "keep_end";
  return [=](const std::vector<data::Example>& examples) {
    const int64_t B = static_cast<int64_t>(examples.size());
    // Rows 0..B-1: prompt + chosen; B..2B-1: prompt + rejected; each with its completion mask.
    std::vector<Tensor> ids(2 * B), completion(2 * B);
    for (int64_t i = 0; i < B; ++i) {
      const Tensor& input = examples[i].input;
      const int64_t p = examples[i].target[0].item<int64_t>();
      const int64_t c = examples[i].target[1].item<int64_t>();
      const int64_t r = examples[i].target[2].item<int64_t>();
      const Tensor prompt = input.slice(0, 0, p);
      for (int side = 0; side < 2; ++side) {
        const Tensor answer =
            side == 0 ? input.slice(0, p, p + c) : input.slice(0, p + c, p + c + r);
        Tensor row = torch::cat({prompt, answer});
        Tensor mask = torch::cat(
            {torch::zeros({p}, torch::kLong), torch::ones({answer.size(0)}, torch::kLong)});
        if (max_length && row.size(0) > *max_length) {
          const int64_t n = row.size(0);
          row = keep_end ? row.slice(0, n - *max_length) : row.slice(0, 0, *max_length);
          mask = keep_end ? mask.slice(0, n - *max_length) : mask.slice(0, 0, *max_length);
        }
        ids[side * B + i] = row;
        completion[side * B + i] = mask;
      }
    }
    int64_t length = 0;
    for (const auto& row : ids) length = std::max(length, row.size(0));
    if (pad_to_multiple_of && *pad_to_multiple_of > 0) {
      length = (length + *pad_to_multiple_of - 1) / *pad_to_multiple_of * *pad_to_multiple_of;
    }
    Tensor input_ids = torch::full({2 * B, length}, pad_token_id, torch::kLong);
    Tensor attention = torch::zeros({2 * B, length}, torch::kLong);
    Tensor completion_mask = torch::zeros({2 * B, length}, torch::kLong);
    for (int64_t k = 0; k < 2 * B; ++k) {
      const int64_t n = ids[k].size(0);
      input_ids[k].slice(0, 0, n).copy_(ids[k]);
      attention[k].slice(0, 0, n).fill_(1);
      completion_mask[k].slice(0, 0, n).copy_(completion[k]);
    }
    data::Batch batch;
    batch["input_ids"] = input_ids;
    batch["attention_mask"] = attention;
    batch["completion_mask"] = completion_mask;
    if (B > 0 && examples[0].extra.defined()) {
      std::vector<Tensor> refs;
      for (const auto& e : examples) refs.push_back(e.extra);
      const Tensor all = torch::stack(refs);  // [B, 2] float64
      batch["ref_chosen_logps"] = all.select(1, 0).to(torch::kFloat);
      batch["ref_rejected_logps"] = all.select(1, 1).to(torch::kFloat);
    }
    return batch;
  };
}

std::unique_ptr<data::DataSource> make_dpo_source(DpoSourceOptions options) {
  return std::make_unique<DpoSource>(std::move(options));
}

}  // namespace trainer::trl
