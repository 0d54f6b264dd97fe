// Samplers, the DataLoader, the Batch helpers and the default collator.
#include "lib/data/dataloader.h"

#include <numeric>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include "lib/base/errors.h"

namespace trainer::data {

const torch::Tensor& Batch::at(const std::string& name) const {
  auto it = items_.find(name);
  if (it == items_.end()) {
    throw std::out_of_range(
        fmt::format("batch has no tensor '{}' (it has: {})", name, fmt::join(keys(), ", ")));
  }
  return it->second;
}

std::vector<std::string> Batch::keys() const {
  std::vector<std::string> names;
  for (const auto& [key, value] : items_) names.push_back(key);
  return names;
}

int64_t Batch::size() const {
  if (items_.empty()) return 0;
  const auto& first = items_.begin()->second;
  return first.dim() == 0 ? 1 : first.size(0);
}

Batch Batch::to(const torch::Device& device) const {
  Batch moved;
  for (const auto& [key, value] : items_) moved[key] = value.to(device, /*non_blocking=*/true);
  if (num_items_in_batch.defined()) moved.num_items_in_batch = num_items_in_batch.to(device);
  moved.loss_only = loss_only;
  moved.dft_loss = dft_loss;
  moved.label_smoothing = label_smoothing;
  moved.token_stats = token_stats;
  moved.token_scores = token_scores;
  moved.token_sum_sq = token_sum_sq;
  return moved;
}

const char* task_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kClassification:
      return "classification";
    case TaskKind::kRegression:
      return "regression";
    case TaskKind::kCausalLM:
      return "causal_lm";
  }
  return "unknown";
}

Batch default_collate(const std::vector<Example>& examples) {
  std::vector<torch::Tensor> inputs, targets;
  inputs.reserve(examples.size());
  targets.reserve(examples.size());
  for (const auto& e : examples) {
    inputs.push_back(e.input);
    targets.push_back(e.target);
  }
  return Batch{{"x", torch::stack(inputs)}, {"labels", torch::stack(targets)}};
}

std::vector<int64_t> SequentialSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch));
  torch::Tensor perm = torch::randperm(size_, generator, torch::kLong);
  const int64_t* p = perm.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + size_);
}

DistributedSampler::DistributedSampler(int64_t size, int num_replicas, int rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : size_(size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas) {
    throw InputError(fmt::format("DistributedSampler: rank {} is not allowed (must be in [0, {}))",
                                 rank, num_replicas));
  }
  if (drop_last_ && size_ % num_replicas_ != 0) {
    num_samples_ = (size_ - num_replicas_ + num_replicas_ - 1) / num_replicas_;
    if (num_samples_ < 0) num_samples_ = 0;
  } else {
    num_samples_ = (size_ + num_replicas_ - 1) / num_replicas_;
  }
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all =
      shuffle_ ? RandomSampler(size_, seed_).indices(epoch) : SequentialSampler(size_).indices(0);
  const int64_t total = num_samples_ * num_replicas_;
  if (!drop_last_) {
    // Pad by repeating the permutation's start (several times over for tiny datasets).
    for (int64_t i = 0; static_cast<int64_t>(all.size()) < total && size_ > 0; ++i)
      all.push_back(all[i % size_]);
  }
  all.resize(static_cast<size_t>(total));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_)
    mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset,
                       std::shared_ptr<const Sampler> sampler, DataLoaderOptions options,
                       DataCollator collator)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      options_(options),
      collator_(std::move(collator)) {
  if (options_.batch_size < 1) {
    throw InputError(
        fmt::format("batch size {} is not allowed (must be >= 1)", options_.batch_size));
  }
  set_epoch(0);
}

void DataLoader::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  order_ = sampler_->indices(epoch);
  device_order_ = torch::Tensor();
  const torch::Device device = dataset_->device();
  if (!device.is_cpu()) {
    device_order_ =
        torch::from_blob(order_.data(), {static_cast<int64_t>(order_.size())}, torch::kLong)
            .to(device);
  }
}

DataLoader DataLoader::with_dataset(std::shared_ptr<const Dataset> dataset) const {
  if (!dataset || dataset->size() != dataset_->size()) {
    throw std::invalid_argument(fmt::format("DataLoader::with_dataset: {} examples instead of {}",
                                            dataset ? dataset->size() : 0, dataset_->size()));
  }
  DataLoader copy = *this;
  copy.dataset_ = std::move(dataset);
  copy.set_epoch(epoch_);
  return copy;
}

int64_t DataLoader::size() const {
  auto n = static_cast<int64_t>(order_.size());
  return options_.drop_last ? n / options_.batch_size
                            : (n + options_.batch_size - 1) / options_.batch_size;
}

int64_t DataLoader::num_examples() const {
  auto n = static_cast<int64_t>(order_.size());
  return options_.drop_last ? size() * options_.batch_size : n;
}

Batch DataLoader::batch(int64_t i) const {
  if (i < 0 || i >= size()) {
    throw std::out_of_range(fmt::format("batch {} out of range [0, {})", i, size()));
  }
  int64_t begin = i * options_.batch_size;
  int64_t end = std::min<int64_t>(begin + options_.batch_size, order_.size());
  if (!collator_) {
    torch::Tensor indices = device_order_.defined()
                                ? device_order_.narrow(0, begin, end - begin)
                                : torch::from_blob(const_cast<int64_t*>(order_.data()) + begin,
                                                   {end - begin}, torch::kLong);
    if (auto batch = dataset_->get_batch(indices)) return std::move(*batch);
  }
  std::vector<Example> examples;
  examples.reserve(static_cast<size_t>(end - begin));
  for (int64_t k = begin; k < end; ++k) examples.push_back(dataset_->get(order_[k]));
  return collator_ ? collator_(examples) : default_collate(examples);
}

}  // namespace trainer::data
