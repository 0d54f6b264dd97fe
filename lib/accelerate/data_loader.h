// Accelerate's DataLoaderShard: a data loader prepared for one of N processes.
#pragma once

#include <memory>

#include <torch/types.h>

#include "lib/accelerate/state.h"
#include "lib/data/dataloader.h"

namespace trainer {

// A prepared data loader (Accelerate's DataLoaderShard). Process p of N runs the single-process
// loader's batches p, p + N, p + 2N, ... (the same batch size, the same order every process
// agrees on), so at each step the N processes together see N consecutive single-process batches.
// When the batch count is not a multiple of N, the last round is evened out with repeats of the
// first batches, which gather_for_metrics drops (with drop_last, incomplete rounds are dropped).
class DataLoaderShard {
 public:
  DataLoaderShard(data::DataLoader loader, int num_processes, int process_index,
                  torch::Device device, std::shared_ptr<GradientState> state);

  // Selects the epoch whose order the following batches follow (every process the same).
  void set_epoch(int64_t epoch);
  // Batches this process runs per epoch: ceil(single-process batches / N) (floor with drop_last).
  int64_t size() const;
  // This process's `i`-th batch, on the device. Records its place in the GradientState.
  data::Batch batch(int64_t i);
  // Examples in the data set (len(dataloader.dataset)).
  int64_t num_examples() const { return loader_.dataset().size(); }
  int64_t batch_size() const { return loader_.options().batch_size; }
  // batch_size() * N.
  int64_t total_batch_size() const { return batch_size() * num_processes_; }
  const data::Dataset& dataset() const { return loader_.dataset(); }
  // Whether the data set is held on the device (Accelerator::prepare with data_on_device).
  bool data_on_device() const { return !loader_.dataset().device().is_cpu(); }

  // The single-process batch that process `rank` runs as its `i`-th, and whether it is a repeat.
  struct Slot {
    int64_t batch;
    bool repeat;
  };
  Slot slot(int64_t i, int rank) const;
  // Ends an iteration: the GradientState forgets the last batch, so gather_for_metrics gathers
  // whole tensors again (a range-for over the loader does this after its last batch).
  void end_iteration();

  class Iterator {
   public:
    Iterator(DataLoaderShard* loader, int64_t i) : loader_(loader), i_(i) {}
    data::Batch operator*() const { return loader_->batch(i_); }
    Iterator& operator++() {
      if (++i_ == loader_->size()) loader_->end_iteration();
      return *this;
    }
    bool operator!=(const Iterator& other) const { return i_ != other.i_; }

   private:
    DataLoaderShard* loader_;
    int64_t i_;
  };
  Iterator begin() { return {this, 0}; }
  Iterator end() { return {this, size()}; }

 private:
  data::DataLoader loader_;
  int num_processes_;
  int process_index_;
  torch::Device device_;
  std::shared_ptr<GradientState> state_;
};

}  // namespace trainer
