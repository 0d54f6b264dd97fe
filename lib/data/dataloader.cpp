// Samplers, the DataLoader (with its worker threads), the Batch helpers and the default collator.
#include "lib/data/dataloader.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>

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
  moved.score_temperature = score_temperature;
  moved.router_aux_loss = router_aux_loss;
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

LengthGroupedSampler::LengthGroupedSampler(std::vector<int64_t> lengths, int64_t batch_size,
                                           uint64_t seed, bool per_epoch)
    : lengths_(std::move(lengths)), batch_size_(batch_size), seed_(seed), per_epoch_(per_epoch) {
  if (batch_size_ < 1) {
    throw InputError(fmt::format(
        "LengthGroupedSampler: batch size {} is not allowed (must be >= 1)", batch_size_));
  }
}

std::vector<int64_t> LengthGroupedSampler::indices(int64_t epoch) const {
  const auto n = static_cast<int64_t>(lengths_.size());
  if (n == 0) return {};
  int64_t mult = std::min<int64_t>(n / (batch_size_ * 4), 50);
  if (mult == 0) mult = 1;
  std::vector<int64_t> order = RandomSampler(n, seed_).indices(per_epoch_ ? epoch : 0);
  const int64_t megabatch = mult * batch_size_;
  auto longer = [&](int64_t a, int64_t b) { return lengths_[a] > lengths_[b]; };
  // Python's sorted(reverse=True) keeps equal lengths in their order: a stable sort.
  for (int64_t begin = 0; begin < n; begin += megabatch)
    std::stable_sort(order.begin() + begin, order.begin() + std::min(n, begin + megabatch), longer);
  // torch.argmax over the megabatches' first (longest) lengths: the first of the maxima.
  int64_t best = 0;
  for (int64_t begin = megabatch; begin < n; begin += megabatch)
    if (lengths_[order[begin]] > lengths_[order[best]]) best = begin;
  std::swap(order[0], order[best]);
  return order;
}

std::vector<int64_t> example_lengths(const Dataset& dataset) {
  std::vector<int64_t> lengths(static_cast<size_t>(dataset.size()));
  for (int64_t i = 0; i < dataset.size(); ++i) lengths[i] = dataset.get(i).input.numel();
  return lengths;
}

// The worker threads of a DataLoader and the batches they are preparing, in the order asked.
class BatchWorkers {
 public:
  explicit BatchWorkers(int64_t threads) {
    for (int64_t t = 0; t < threads; ++t) threads_.emplace_back([this] { run(); });
  }
  ~BatchWorkers() {
    drain();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    for (auto& thread : threads_) thread.join();
  }
  BatchWorkers(const BatchWorkers&) = delete;
  BatchWorkers& operator=(const BatchWorkers&) = delete;

  std::future<Batch> submit(std::function<Batch()> job) {
    std::packaged_task<Batch()> task(std::move(job));
    std::future<Batch> result = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(task));
    }
    ready_.notify_one();
    return result;
  }
  // Waits for the batches still being prepared and forgets them.
  void drain() {
    for (auto& [index, batch] : pending)
      if (batch.valid()) batch.wait();
    pending.clear();
  }

  // The batches being prepared, in order: (index, its batch to come); the next index to prepare,
  // every stride-th; the epoch they belong to.
  std::deque<std::pair<int64_t, std::future<Batch>>> pending;
  int64_t next = 0;
  int64_t stride = 1;
  int64_t last = -1;  // the last index asked for
  int64_t epoch = -1;

 private:
  void run() {
    for (;;) {
      std::packaged_task<Batch()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        task = std::move(jobs_.front());
        jobs_.pop_front();
      }
      task();  // an exception goes to the future, and so to the caller
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<Batch()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

namespace {

// Batch `indices` (held on the dataset's device as `device_indices` when that is not the CPU).
Batch collate_indices(const Dataset& dataset, const DataCollator& collator,
                      const std::vector<int64_t>& indices, const torch::Tensor& device_indices,
                      bool pin_memory) {
  Batch batch;
  bool done = false;
  if (!collator) {
    torch::Tensor index =
        device_indices.defined()
            ? device_indices
            : torch::from_blob(const_cast<int64_t*>(indices.data()),
                               {static_cast<int64_t>(indices.size())}, torch::kLong);
    if (auto b = dataset.get_batch(index)) {
      batch = std::move(*b);
      done = true;
    }
  }
  if (!done) {
    std::vector<Example> examples;
    examples.reserve(indices.size());
    for (int64_t k : indices) examples.push_back(dataset.get(k));
    batch = collator ? collator(examples) : default_collate(examples);
  }
  if (pin_memory) {
    for (const auto& [key, value] : batch.items())
      if (value.defined() && value.device().is_cpu()) batch[key] = value.pin_memory();
  }
  return batch;
}

}  // namespace

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
  if (options_.num_workers < 0 || options_.prefetch_factor < 1) {
    throw InputError(fmt::format(
        "DataLoader: num_workers {} and prefetch_factor {} are not allowed (>= 0 and >= 1)",
        options_.num_workers, options_.prefetch_factor));
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
  copy.workers_.reset();
  copy.worker_starts_ = 0;
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

int64_t DataLoader::worker_starts() const { return worker_starts_; }

Batch DataLoader::make_batch(int64_t begin, int64_t end) const {
  std::vector<int64_t> indices(order_.begin() + begin, order_.begin() + end);
  torch::Tensor device_indices =
      device_order_.defined() ? device_order_.narrow(0, begin, end - begin) : torch::Tensor();
  return collate_indices(*dataset_, collator_, indices, device_indices, options_.pin_memory);
}

Batch DataLoader::batch(int64_t i) const {
  const int64_t batches = size();
  if (i < 0 || i >= batches) {
    throw std::out_of_range(fmt::format("batch {} out of range [0, {})", i, batches));
  }
  auto range = [&](int64_t k) {
    const int64_t begin = k * options_.batch_size;
    return std::make_pair(begin, std::min<int64_t>(begin + options_.batch_size, order_.size()));
  };
  if (options_.num_workers == 0) {
    auto [begin, end] = range(i);
    return make_batch(begin, end);
  }
  if (!workers_) {
    workers_ = std::make_shared<BatchWorkers>(options_.num_workers);
    worker_starts_ += options_.num_workers;
  }
  BatchWorkers& w = *workers_;
  // Batches are asked for in order, every stride-th (a prepared loader's process p of N asks
  // for p, p + N, ...); anything else (another epoch, a jump) starts afresh at i, with the step
  // from the last batch asked for as the stride when it is a step forward.
  if (w.epoch != epoch_ || w.pending.empty() || w.pending.front().first != i) {
    w.drain();
    w.stride = w.epoch == epoch_ && w.last >= 0 && i > w.last ? i - w.last : 1;
    w.epoch = epoch_;
    w.next = i;
  }
  w.last = i;
  const auto ahead = static_cast<size_t>(options_.prefetch_factor * options_.num_workers);
  auto fill = [&] {
    while (w.next < batches && w.pending.size() < ahead) {
      auto [begin, end] = range(w.next);
      // The job holds its own copies: it never reaches back into this loader.
      std::vector<int64_t> indices(order_.begin() + begin, order_.begin() + end);
      torch::Tensor device_indices =
          device_order_.defined() ? device_order_.narrow(0, begin, end - begin) : torch::Tensor();
      w.pending.emplace_back(
          w.next, w.submit([dataset = dataset_, collator = collator_, indices = std::move(indices),
                            device_indices, pin = options_.pin_memory] {
            return collate_indices(*dataset, collator, indices, device_indices, pin);
          }));
      w.next += w.stride;
    }
  };
  fill();
  std::future<Batch> next = std::move(w.pending.front().second);
  w.pending.pop_front();
  fill();
  Batch batch = next.get();
  // The pass is over (nothing left to prepare): without persistent_workers its threads end.
  if (w.pending.empty() && w.next >= batches && !options_.persistent_workers) workers_.reset();
  return batch;
}

}  // namespace trainer::data
