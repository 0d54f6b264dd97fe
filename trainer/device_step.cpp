// The Trainer's loop on a CUDA device: the same steps as the host loop in trainer.cpp, but what
// it decides from each step's numbers (skip a non-finite update, filter the loss sum) is decided
// on the device, so that the host never waits for the GPU in the steady state; the host reads
// those numbers every kCheckSteps steps. With cuda_graphs the whole step (forward, backward,
// clipping, the optimizer) is captured once after kWarmupSteps eager steps and replayed.
#include <cstdio>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/warn.h"
#include "lib/optim/adamw.h"
#include "lib/runtime/cuda.h"
#include "lib/runtime/signals.h"
#include "trainer/trainer.h"

namespace trainer {
namespace {

// Steps between two host reads of the device's step checks: a sync costs the GPU the time the
// host needs to queue the next step, a few microseconds per step when spread over this many.
constexpr int64_t kCheckSteps = 16;
// Eager steps before the capture, as PyTorch's whole-network capture recipe warms up (cuBLAS and
// cuDNN pick their algorithms and workspaces, the optimizer makes its state).
constexpr int64_t kWarmupSteps = 3;

bool same_layout(const data::Batch& a, const data::Batch& b) {
  if (a.items().size() != b.items().size()) return false;
  for (const auto& [key, tensor] : a.items()) {
    if (!b.contains(key)) return false;
    const torch::Tensor& other = b.at(key);
    if (tensor.sizes() != other.sizes() || tensor.dtype() != other.dtype() ||
        tensor.device() != other.device())
      return false;
  }
  return true;
}

void warn(bool main_process, const std::string& line) {
  if (main_process) base::warn(line);
}

}  // namespace

struct Trainer::DeviceLoop {
  optim::AdamW* adamw = nullptr;  // steps with `bad` as its skip flag
  torch::Tensor bad;              // float32 scalar: this step's loss or norm was not finite
  torch::Tensor bad_run;          // float32: non-finite steps in a row
  torch::Tensor bad_count;        // float32: non-finite steps since the last check
  int64_t first_unchecked = 1;    // the first step (1-based) since the last check
  // cuda_graphs: the graph, the eager steps left before it is captured, and its static input and
  // outputs (each replay reads and writes the same memory).
  std::unique_ptr<cuda::StepGraph> graph;
  int64_t warmup_left = kWarmupSteps;
  data::Batch static_batch;
  torch::Tensor static_loss, static_norm;
};

std::shared_ptr<Trainer::DeviceLoop> Trainer::make_device_loop() {
  const bool main = accelerator_->is_main_process();
  const torch::Device device = accelerator_->device();
  auto* adamw = dynamic_cast<optim::AdamW*>(optimizer_.get());
  std::string not_on_device;
  if (!device.is_cuda())
    not_on_device = "the device is the CPU";
  else if (accelerator_->sharded_model())
    // Every rank must take the same loop (the same collectives), whatever slices it holds.
    not_on_device = "fsdp's steps run on the host loop";
  else if (args_.fp16())
    not_on_device = "fp16's GradScaler reads every step's overflow on the host";
  else if (!adamw || !adamw->capturable())
    not_on_device =
        "the optimizer is not this trainer's AdamW over float32 parameters on one CUDA device";
  if (!not_on_device.empty()) {
    if (args_.cuda_graphs()) warn(main, "cuda_graphs: " + not_on_device + "; steps run eagerly");
    return nullptr;
  }
  auto loop = std::make_shared<DeviceLoop>();
  loop->adamw = adamw;
  auto options = torch::TensorOptions(torch::kFloat).device(device);
  loop->bad = torch::zeros({}, options);
  loop->bad_run = torch::zeros({}, options);
  loop->bad_count = torch::zeros({}, options);
  loop->first_unchecked = state_.global_step + 1;
  adamw->set_skip_flag(loop->bad);
  if (args_.cuda_graphs()) {
    std::string eager;
    if (accelerator_->num_processes() > 1)
      eager = fmt::format("{} processes (DDP's all-reduce is not captured)",
                          accelerator_->num_processes());
    else if (args_.gradient_accumulation_steps() > 1)
      eager = "gradient_accumulation_steps > 1";
    if (eager.empty())
      loop->graph = std::make_unique<cuda::StepGraph>(device);
    else
      warn(main, "cuda_graphs: " + eager + "; steps run eagerly");
  }
  return loop;
}

torch::Tensor Trainer::device_step(DeviceLoop& loop, DataLoaderShard& loader,
                                   AcceleratedOptimizer& optimizer, int64_t first, int64_t window,
                                   torch::Tensor& grad_norm) {
  // Forward, backward, the norm, the non-finite flag (the same on every process), the update
  // (skipped on the device where the flag is set): nothing read back, so it can be captured.
  auto step = [&](const std::function<data::Batch(int64_t)>& batch_at) {
    torch::Tensor loss = forward_backward(window, batch_at);
    torch::Tensor norm = clip_gradients();
    loop.bad.copy_(loss.isfinite().logical_and(norm.isfinite()).logical_not());
    if (accelerator_->num_processes() > 1)
      loop.bad.copy_(accelerator_->reduce(loop.bad, Reduction::kMax));
    optimizer.step();
    optimizer.zero_grad();
    return std::make_pair(loss, norm);
  };
  auto from_loader = [&](int64_t k) { return loader.batch(first + k); };
  torch::Tensor step_loss;
  bool done = false;
  if (loop.graph && window == 1) {
    data::Batch batch = loader.batch(first);
    if (!loop.graph->captured() && loop.warmup_left > 0) {
      --loop.warmup_left;
      loop.graph->warm_up(
          [&] { std::tie(step_loss, grad_norm) = step([&](int64_t) { return batch; }); });
      done = true;
    } else if (!loop.graph->captured() && batch.size() == loader.batch_size()) {
      // Captured on a full batch: its shapes are the ones every later full batch has.
      for (const auto& [key, tensor] : batch.items()) loop.static_batch[key] = tensor.clone();
      std::string why = loop.graph->capture([&] {
        std::tie(loop.static_loss, loop.static_norm) =
            step([&](int64_t) { return loop.static_batch; });
      });
      if (!why.empty()) {
        warn(accelerator_->is_main_process(),
             fmt::format("cuda_graphs: the training step could not be captured ({}); steps run "
                         "eagerly",
                         why));
        loop.graph.reset();
      }
    }
    if (!done && loop.graph && same_layout(batch, loop.static_batch)) {
      for (const auto& [key, tensor] : batch.items()) loop.static_batch[key].copy_(tensor);
      loop.adamw->update_device_lrs();
      loop.graph->replay();
      ++cuda_graph_replays_;
      step_loss = loop.static_loss;
      grad_norm = loop.static_norm;
      done = true;
    }
  }
  // The last, smaller batch of an epoch (and every step without a graph) runs eagerly.
  if (!done) std::tie(step_loss, grad_norm) = step(from_loader);

  // As the host loop: a skipped step adds the mean of the logged steps so far (Transformers'
  // logging_nan_inf_filter), else its loss; the counts the next check reads.
  const double steps_in_log = static_cast<double>(1 + state_.global_step - last_logged_step_);
  tr_loss_.add_(torch::where(loop.bad > 0, tr_loss_ / steps_in_log, step_loss.to(torch::kDouble)));
  loop.bad_run.mul_(loop.bad).add_(loop.bad);
  loop.bad_count.add_(loop.bad);
  return step_loss;
}

Trainer::StepChecks Trainer::device_checks(DeviceLoop& loop, bool now) {
  StepChecks checks;
  const int64_t step = state_.global_step + 1;  // the step just taken
  const bool single = accelerator_->num_processes() == 1;
  if (!now && step % kCheckSteps != 0) {
    // One process decides on a signal by itself, at once; several agree at the next check.
    if (single) checks.signal = runtime::interrupt_signal();
    return checks;
  }
  torch::Tensor counts = torch::stack({loop.bad_run, loop.bad_count}).to(torch::kCPU);
  loop.bad_count.zero_();
  const float* c = counts.data_ptr<float>();
  std::vector<double> most = max_over_processes({static_cast<double>(runtime::interrupt_signal())});
  checks.signal = static_cast<int>(most[0]);
  const auto run = static_cast<int64_t>(c[0]);
  const auto skipped = static_cast<int64_t>(c[1]);
  nonfinite_in_a_row_ = run;
  checks.nonfinite = skipped > 0;
  checks.what = "the loss or the gradient norm";
  if (skipped > 0) {
    warn(state_.is_world_process_zero,
         fmt::format("steps {} to {}: the loss or the gradient norm was not finite in {} of them; "
                     "their updates were skipped ({} in a row)",
                     loop.first_unchecked, step, skipped, run));
  }
  loop.first_unchecked = step + 1;
  return checks;
}

}  // namespace trainer
