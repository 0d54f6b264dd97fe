// Byte-level language-modeling data: blocks of a corpus, the seeded train/validation split over
// units of context_length bytes, and the padding collator.
#include "lib/data/text.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/json_fields.h"

namespace trainer::data {

void check_text_options(const TextOptions& options) {
  if (options.path.empty()) {
    throw InputError("dataset_config: path '' is not allowed (a UTF-8 text file or a folder)");
  }
  if (options.context_length < 2) {
    throw InputError(fmt::format(
        "dataset_config: context_length {} is not allowed (an integer >= 2: a block predicts "
        "each byte from the ones before it)",
        options.context_length));
  }
  if (options.stride < 0 || options.stride > options.context_length) {
    throw InputError(fmt::format(
        "dataset_config: stride {} is not allowed (an integer in 1..context_length = 1..{}; "
        "0 or absent: context_length)",
        options.stride, options.context_length));
  }
  if (!(options.validation_fraction >= 0 && options.validation_fraction < 1)) {
    throw InputError(
        fmt::format("dataset_config: validation_fraction {} is not allowed (a number in [0, 1))",
                    options.validation_fraction));
  }
}

TextDataset::TextDataset(torch::Tensor tokens, torch::Tensor starts, int64_t context_length)
    : tokens_(std::move(tokens)), starts_(std::move(starts)), context_length_(context_length) {
  TORCH_CHECK(tokens_.dim() == 1 && tokens_.scalar_type() == torch::kByte,
              "TextDataset: tokens must be uint8 [N]");
  TORCH_CHECK(starts_.dim() == 1 && starts_.scalar_type() == torch::kLong,
              "TextDataset: starts must be int64 [M]");
  offsets_ = torch::arange(context_length_, torch::TensorOptions(torch::kLong).device(device()));
  starts_ = starts_.to(device());
}

Example TextDataset::get(int64_t index) const {
  TORCH_CHECK(index >= 0 && index < size(), "TextDataset: index ", index, " out of range [0, ",
              size(), ")");
  const int64_t start = starts_[index].item<int64_t>();
  torch::Tensor ids = tokens_.slice(0, start, start + context_length_).to(torch::kLong);
  return {ids, ids.clone()};
}

std::optional<Batch> TextDataset::get_batch(const torch::Tensor& indices) const {
  torch::Tensor positions = starts_.index_select(0, indices).unsqueeze(1) + offsets_;
  torch::Tensor ids = tokens_.index({positions}).to(torch::kLong);
  return Batch{{"input_ids", ids}, {"labels", ids.clone()}};
}

std::shared_ptr<const Dataset> TextDataset::to_device(const torch::Device& device,
                                                      int64_t max_bytes) const {
  if (tokens_.nbytes() + starts_.nbytes() > static_cast<size_t>(std::max<int64_t>(max_bytes, 0))) {
    return nullptr;
  }
  return std::make_shared<TextDataset>(tokens_.to(device), starts_.to(device), context_length_);
}

TextSplits split_text(const std::string& corpus, const TextOptions& options) {
  check_text_options(options);
  const int64_t length = options.context_length;
  const int64_t stride = options.stride == 0 ? length : options.stride;
  const int64_t n = static_cast<int64_t>(corpus.size());
  TextSplits splits;
  splits.units = n / length;
  const bool wants_validation = options.validation_fraction > 0;
  if (wants_validation) {
    splits.validation_units = static_cast<int64_t>(
        std::llround(options.validation_fraction * static_cast<double>(splits.units)));
    splits.validation_units =
        std::min(std::max<int64_t>(splits.validation_units, 1), splits.units - 1);
  }
  if (splits.units < (wants_validation ? 2 : 1)) {
    throw InputError(fmt::format(
        "dataset_config: the corpus at '{}' holds {} bytes, too few for one block of "
        "context_length {} in {} (use a larger corpus or a smaller context_length)",
        options.path, n, length, wants_validation ? "each of train and validation" : "train"));
  }
  // Which units are validation's: the first validation_units of a seeded permutation.
  std::vector<char> is_validation(static_cast<size_t>(splits.units), 0);
  if (splits.validation_units > 0) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
    torch::Tensor order = torch::randperm(splits.units, generator, torch::kLong);
    auto o = order.accessor<int64_t, 1>();
    for (int64_t i = 0; i < splits.validation_units; ++i) is_validation[o[i]] = 1;
  }
  std::vector<int64_t> train_starts, validation_starts;
  const int64_t usable = splits.units * length;
  for (int64_t start = 0; start + length <= usable; start += stride) {
    const char first = is_validation[start / length];
    const char last = is_validation[(start + length - 1) / length];
    if (first != last) continue;  // crosses the split
    (first ? validation_starts : train_starts).push_back(start);
  }
  torch::Tensor tokens = torch::empty({n}, torch::kByte);
  std::memcpy(tokens.data_ptr(), corpus.data(), corpus.size());
  auto starts = [](std::vector<int64_t>& v) {
    return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, torch::kLong).clone();
  };
  splits.train = std::make_shared<TextDataset>(tokens, starts(train_starts), length);
  splits.validation = std::make_shared<TextDataset>(tokens, starts(validation_starts), length);
  if (splits.train->size() == 0 || (wants_validation && splits.validation->size() == 0)) {
    // Only a stride that never lands inside a run of units of one split can get here.
    throw InputError(fmt::format(
        "dataset_config: stride {} leaves the {} split of '{}' without a block (use stride "
        "{} or a larger corpus)",
        stride, splits.train->size() == 0 ? "train" : "validation", options.path, length));
  }
  return splits;
}

TextSplits load_text(const TextOptions& options, TextCorpus* corpus_out) {
  check_text_options(options);
  TextCorpus corpus = read_text_corpus(options.path, "dataset_config: path");
  TextSplits splits = split_text(corpus.text, options);
  if (corpus_out) *corpus_out = std::move(corpus);
  return splits;
}

double unigram_entropy(const TextDataset& dataset) {
  const int64_t n = dataset.tokens().size(0);
  // Positions covered by a block: +1 at each start, -1 after its end, summed.
  torch::Tensor edges = torch::zeros({n + 1}, torch::kLong);
  torch::Tensor starts = dataset.starts().cpu();
  edges.index_add_(0, starts, torch::ones_like(starts));
  edges.index_add_(0, starts + dataset.context_length(), -torch::ones_like(starts));
  torch::Tensor covered = edges.cumsum(0).slice(0, 0, n) > 0;
  torch::Tensor bytes = dataset.tokens().cpu().masked_select(covered).to(torch::kLong);
  if (bytes.numel() == 0) return 0.0;
  torch::Tensor p = torch::bincount(bytes, {}, TextOptions::kVocabSize).to(torch::kDouble);
  p = p / p.sum();
  p = p.masked_select(p > 0);
  return -(p * p.log()).sum().item<double>();
}

TextOptions read_text_options(base::JsonFields& options, const std::string& dataset_dir) {
  TextOptions o;
  const bool has_path = options.has("path");
  o.path = options.string("path", dataset_dir.empty() ? o.path : dataset_dir);
  if (has_path && !dataset_dir.empty() && o.path != dataset_dir) {
    options.fail_object(fmt::format(
        "path '{}' and dataset_dir '{}' both name the corpus (give one)", o.path, dataset_dir));
  }
  o.context_length = options.integer("context_length", o.context_length, 2, 1 << 20);
  o.stride = options.integer("stride", o.context_length, 1, o.context_length);
  o.validation_fraction =
      options.number("validation_fraction", o.validation_fraction, 0.0, 1.0, /*max_open=*/true);
  o.seed = static_cast<uint64_t>(options.integer("seed", static_cast<int64_t>(o.seed), 0));
  options.finish();
  check_text_options(o);
  return o;
}

namespace {

class TextSource : public DataSource {
 public:
  explicit TextSource(TextOptions options) : options_(std::move(options)) {}

  DataInfo info() override {
    return {TaskKind::kCausalLM, {options_.context_length}, TextOptions::kVocabSize};
  }
  std::shared_ptr<const Dataset> split(const std::string& split,
                                       std::optional<int64_t> max_samples) override {
    if (!splits_.train) splits_ = load_text(options_);
    std::shared_ptr<TextDataset> d = split == "train" ? splits_.train : splits_.validation;
    if (max_samples && *max_samples < d->size()) {
      d = std::make_shared<TextDataset>(d->tokens(), d->starts().slice(0, 0, *max_samples),
                                        options_.context_length);
    }
    return d;
  }
  std::string location() const override { return options_.path; }
  std::string split_name(const std::string& split) const override {
    return split == "eval" ? "validation" : split;
  }

 private:
  TextOptions options_;
  TextSplits splits_;
};

}  // namespace

std::unique_ptr<DataSource> make_text_source(const TextOptions& options) {
  check_text_options(options);
  return std::make_unique<TextSource>(options);
}

Batch LanguageModelingCollator::operator()(const std::vector<Example>& examples) const {
  if (examples.empty()) throw std::invalid_argument("LanguageModelingCollator: no examples");
  int64_t longest = 0;
  for (const auto& e : examples) {
    if (e.input.dim() != 1) {
      throw std::invalid_argument(fmt::format(
          "LanguageModelingCollator: an input has {} dimensions (token ids [L] expected)",
          e.input.dim()));
    }
    longest = std::max(longest, e.input.size(0));
  }
  const auto count = static_cast<int64_t>(examples.size());
  torch::Tensor ids = torch::full({count, longest}, pad_token_id, torch::kLong);
  torch::Tensor mask = torch::zeros({count, longest}, torch::kLong);
  torch::Tensor labels = torch::full({count, longest}, -100, torch::kLong);
  for (int64_t i = 0; i < count; ++i) {
    const Example& e = examples[static_cast<size_t>(i)];
    const int64_t len = e.input.size(0);
    ids[i].slice(0, 0, len).copy_(e.input);
    mask[i].slice(0, 0, len).fill_(1);
    const torch::Tensor& target = e.target.defined() ? e.target : e.input;
    if (target.dim() != 1 || target.size(0) != len) {
      throw std::invalid_argument(
          "LanguageModelingCollator: a target's length differs from its input's");
    }
    labels[i].slice(0, 0, len).copy_(target);
  }
  return Batch{{"input_ids", ids}, {"attention_mask", mask}, {"labels", labels}};
}

}  // namespace trainer::data
