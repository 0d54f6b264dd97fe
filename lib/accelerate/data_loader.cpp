// DataLoaderShard: process p of N runs batches p, p + N, ... of the single-process loader, and
// records in the GradientState which rows are real examples.
#include "lib/accelerate/data_loader.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace trainer {

DataLoaderShard::DataLoaderShard(data::DataLoader loader, int num_processes, int process_index,
                                 torch::Device device, std::shared_ptr<GradientState> state)
    : loader_(std::move(loader)),
      num_processes_(num_processes),
      process_index_(process_index),
      device_(device),
      state_(std::move(state)) {}

void DataLoaderShard::set_epoch(int64_t epoch) { loader_.set_epoch(epoch); }

int64_t DataLoaderShard::size() const {
  int64_t batches = loader_.size();
  return loader_.options().drop_last ? batches / num_processes_
                                     : (batches + num_processes_ - 1) / num_processes_;
}

DataLoaderShard::Slot DataLoaderShard::slot(int64_t i, int rank) const {
  int64_t batches = loader_.size();
  int64_t j = i * num_processes_ + rank;
  if (j < batches) return {j, false};
  return {batches == 0 ? 0 : (j - batches) % batches, true};
}

void DataLoaderShard::end_iteration() {
  state_->batch_rows.clear();
  state_->real_rows.clear();
}

data::Batch DataLoaderShard::batch(int64_t i) {
  if (i < 0 || i >= size()) {
    throw std::out_of_range(fmt::format("batch {} out of range [0, {})", i, size()));
  }
  data::Batch batch = loader_.batch(slot(i, process_index_).batch).to(device_);
  const int64_t examples = loader_.num_examples();
  state_->batch_rows.assign(num_processes_, 0);
  state_->real_rows.assign(num_processes_, 0);
  for (int q = 0; q < num_processes_; ++q) {
    Slot s = slot(i, q);
    int64_t rows = std::min(batch_size(), examples - s.batch * batch_size());
    state_->batch_rows[q] = rows;
    state_->real_rows[q] = s.repeat ? 0 : rows;
  }
  state_->end_of_dataloader = i + 1 == size();
  return batch;
}

}  // namespace trainer
