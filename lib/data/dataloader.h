// Samplers (sequential, seeded random reshuffled each epoch) and the DataLoader that turns a
// Dataset into batches, with PyTorch's batch_size / drop_last semantics.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/data/dataset.h"

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

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool drop_last = false;
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

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const Sampler> sampler_;
  DataLoaderOptions options_;
  DataCollator collator_;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
  torch::Tensor device_order_;  // order_ on the dataset's device, when that is not the CPU
};

}  // namespace trainer::data
