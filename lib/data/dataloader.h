// Samplers (sequential, seeded random reshuffled each epoch, Transformers' length-grouped) and the
// DataLoader that turns a Dataset into batches, with PyTorch's batch_size / drop_last semantics
// and its num_workers / prefetch_factor / persistent_workers / pin_memory as threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/data/dataset.h"

namespace trainer::data {
class BatchWorkers;
}

namespace trainer::data {

// Chooses the order of a dataset's indices for one epoch.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices for `epoch`; the same epoch always gives the same indices.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size) : size_(size) {}
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t size_;
};

// torch.randperm(n) from a generator seeded with seed + epoch, as PyTorch's DistributedSampler
// seeds it: reproducible, and a new order every epoch.
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {}
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t size_;
  uint64_t seed_;
};

// PyTorch's DistributedSampler: one permutation per epoch from seed + epoch (or 0..n-1 without
// shuffle), the same on every rank, padded by repeating its start so that every rank has
// ceil(n / replicas) indices (or trimmed to floor with drop_last); rank r takes r, r + replicas,
// ... Together, the batches of N ranks at batch b are exactly one process's batches at batch N*b.
class DistributedSampler : public Sampler {
 public:
  // Throws InputError when rank is not in [0, num_replicas).
  DistributedSampler(int64_t size, int num_replicas, int rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  // Indices per rank per epoch.
  int64_t num_samples() const { return num_samples_; }

 private:
  int64_t size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

// Transformers' LengthGroupedSampler (get_length_grouped_indices): torch.randperm(n) from a
// generator seeded with seed (+ epoch when per_epoch), cut into megabatches of mega_batch_mult x
// batch_size (mega_batch_mult: min(n / (4 x batch_size), 50), at least 1), each sorted by length,
// longest first (a stable sort), and the longest example of all swapped to the very front.
class LengthGroupedSampler : public Sampler {
 public:
  LengthGroupedSampler(std::vector<int64_t> lengths, int64_t batch_size, uint64_t seed,
                       bool per_epoch = true);
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  std::vector<int64_t> lengths_;
  int64_t batch_size_;
  uint64_t seed_;
  bool per_epoch_;
};

// The length of each example of `dataset`, as Transformers reads it from the model's first input:
// the number of elements of Example::input (a tokenized row's number of tokens).
std::vector<int64_t> example_lengths(const Dataset& dataset);

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool drop_last = false;
  // > 0: that many threads prepare the batches (fetch, collate) ahead of the caller, at most
  // prefetch_factor x num_workers of them, handed over in order: the same batches as 0.
  int64_t num_workers = 0;
  int64_t prefetch_factor = 2;
  // The threads stay from one pass over the data to the next (else they end with each pass).
  bool persistent_workers = false;
  // The batches in page-locked memory (for a CUDA device's non-blocking copies).
  bool pin_memory = false;
};

// Batches of a dataset in the order its sampler gives for the current epoch. With no collator
// and a dataset that has a tensor fast path, each batch is one gather; otherwise the examples
// are fetched one by one and collated. For a dataset held on a device (Dataset::device()), the
// epoch's order is copied there once at set_epoch and each batch is gathered there: the same
// batches as from the host copy, with no host work per batch.
class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler,
             DataLoaderOptions options, DataCollator collator = nullptr);

  // Selects the epoch whose order the following batches follow (PyTorch's set_epoch).
  void set_epoch(int64_t epoch);
  // Number of batches per epoch: ceil(n / batch_size), or floor with drop_last.
  int64_t size() const;
  // Number of examples one epoch yields.
  int64_t num_examples() const;
  // The `i`-th batch of the current epoch.
  Batch batch(int64_t i) const;
  const Dataset& dataset() const { return *dataset_; }
  const std::shared_ptr<const Dataset>& dataset_ptr() const { return dataset_; }
  // The collator given to the constructor (null: the dataset's own batches).
  const DataCollator& collator() const { return collator_; }
  // The same loader (sampler, options, collator, epoch) over `dataset`, which must hold the same
  // examples (a device copy, say). Throws std::invalid_argument when its size differs.
  DataLoader with_dataset(std::shared_ptr<const Dataset> dataset) const;
  const DataLoaderOptions& options() const { return options_; }
  // How many worker threads this loader has started so far (0 with num_workers 0).
  int64_t worker_starts() const;

 private:
  Batch make_batch(int64_t begin, int64_t end) const;

  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const Sampler> sampler_;
  DataLoaderOptions options_;
  DataCollator collator_;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
  torch::Tensor device_order_;  // order_ on the dataset's device, when that is not the CPU
  // The worker threads (num_workers > 0): made at the first batch, never shared by copies.
  mutable std::shared_ptr<BatchWorkers> workers_;
  mutable int64_t worker_starts_ = 0;
};

}  // namespace trainer::data
