// Accelerate's GradientState: what the Accelerator, its prepared loaders and its prepared
// optimizers share about the batch in flight.
#pragma once

#include <cstdint>
#include <vector>

namespace trainer {

// What the Accelerator knows of the batch in flight, as Accelerate's GradientState: whether this
// micro-batch synchronises gradients, whether it is a prepared loader's last, and how many rows of
// each process's batch are real examples rather than repeats that even out the processes.
struct GradientState {
  bool sync_gradients = true;
  bool end_of_dataloader = false;
  std::vector<int64_t> batch_rows;  // per process: rows of its current batch (empty: none)
  std::vector<int64_t> real_rows;   // per process: how many of them gather_for_metrics keeps
};

}  // namespace trainer
