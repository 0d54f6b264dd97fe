// GRPO's data as the Trainer reads it: the prepared prompts, TRL's RepeatSampler, the left-padding
// collator, and GrpoSource (the node's cache, the report).
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "trl/grpo_trainer.h"

namespace trainer::trl {

data::Example GrpoDataset::get(int64_t index) const {
  const GrpoRow& row = rows_.at(static_cast<size_t>(index));
  std::vector<int64_t> ids(row.prompt_ids.begin(), row.prompt_ids.end());
  return data::Example{torch::tensor(ids, torch::kLong), torch::tensor(index, torch::kLong)};
}

nlohmann::ordered_json GrpoDataset::record(int64_t index) const {
  return nlohmann::ordered_json::parse(rows_.at(static_cast<size_t>(index)).record);
}

data::DataCollator grpo_collator(int64_t pad_token_id) {
  return [pad_token_id](const std::vector<data::Example>& examples) {
    const auto n = static_cast<int64_t>(examples.size());
    int64_t longest = 0;
    for (const auto& e : examples) longest = std::max(longest, e.input.size(0));
    torch::Tensor ids = torch::full({n, longest}, pad_token_id, torch::kLong);
    torch::Tensor mask = torch::zeros({n, longest}, torch::kLong);
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t length = examples[i].input.size(0);
      ids[i].slice(0, longest - length).copy_(examples[i].input);
      mask[i].slice(0, longest - length).fill_(1);
      rows.push_back(examples[i].target.item<int64_t>());
    }
    // input_ids and attention_mask too: what the first batch's check runs through the model.
    return data::Batch{{"prompt_ids", ids},
                       {"prompt_mask", mask},
                       {"input_ids", ids},
                       {"attention_mask", mask},
                       {"row", torch::tensor(rows, torch::kLong)}};
  };
}

RepeatSampler::RepeatSampler(int64_t size, int64_t mini_repeat_count, int64_t batch_size,
                             int64_t repeat_count, bool shuffle, uint64_t seed)
    : size_(size),
      mini_repeat_count_(mini_repeat_count),
      batch_size_(batch_size),
      repeat_count_(repeat_count),
      shuffle_(shuffle),
      seed_(seed) {}

std::vector<int64_t> RepeatSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  if (shuffle_) {
    // One generator for the whole run: epoch e takes its (e + 1)-th permutation.
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed_);
    torch::Tensor perm;
    for (int64_t e = 0; e <= epoch; ++e) perm = torch::randperm(size_, generator, torch::kLong);
    for (int64_t i = 0; i < size_; ++i) order[static_cast<size_t>(i)] = perm[i].item<int64_t>();
  } else {
    for (int64_t i = 0; i < size_; ++i) order[static_cast<size_t>(i)] = i;
  }
  std::vector<int64_t> out;
  for (int64_t chunk = 0; chunk + batch_size_ <= size_; chunk += batch_size_) {
    for (int64_t r = 0; r < repeat_count_; ++r) {
      for (int64_t i = chunk; i < chunk + batch_size_; ++i) {
        for (int64_t m = 0; m < mini_repeat_count_; ++m)
          out.push_back(order[static_cast<size_t>(i)]);
      }
    }
  }
  return out;
}

namespace {

class GrpoSource : public TrlSource<GrpoData, GrpoSourceOptions, GrpoDataset> {
 public:
  explicit GrpoSource(GrpoSourceOptions options) : TrlSource(std::move(options)) {}

  data::DataCollator collator() const override { return grpo_collator(options_.pad_token_id); }

 protected:
  std::optional<int64_t> max_length() const override { return std::nullopt; }

  std::string cache_settings(const std::string&,
                             std::optional<int64_t> max_samples) const override {
    return fmt::format("grpo|{}|{}|{}", options_.data.chat_template_kwargs.dump(),
                       max_samples.value_or(-1),
                       options_.chat_template ? options_.chat_template->name() : "");
  }

  GrpoData prepare(const std::string&, const std::string& path,
                   std::optional<int64_t> max_samples) const override {
    return prepare_grpo_dataset(split_records(path, max_samples), *options_.tokenizer,
                                options_.chat(), options_.data, path);
  }

  void report(const std::string& split, const std::string& path, const GrpoData& data,
              bool from_cache) const override {
    fmt::print("GRPO {} data: {} {} prompts from {} -> {} prompt tokens{}\n", split, data.examples,
               data.conversational ? "conversational" : "plain", path, data.tokens,
               from_cache ? " (from the node's cache)" : "");
  }
};

}  // namespace

std::unique_ptr<data::DataSource> make_grpo_source(GrpoSourceOptions options) {
  return std::make_unique<GrpoSource>(std::move(options));
}

}  // namespace trainer::trl
