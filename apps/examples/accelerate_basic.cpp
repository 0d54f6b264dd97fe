// The tutorial's second level in C++, `train_ddp_accelerate`: its single-process loop plus the
// Accelerator's lines (prepare, backward, gather_for_metrics), so that the same program trains on
// one process, under `trainer launch` or torchrun, or on N processes it starts itself through
// trainer::launch (the tutorial's notebook_launcher):
//   accelerate_basic [--num-processes N] [--dataset-dir DIR] [--max-train-samples N]
//                    [--max-eval-samples N] [--mixed-precision no|bf16]
// Prints the test accuracy and the training throughput (main process only).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "apps/examples/example_args.h"
#include "lib/data/dataloader.h"
#include "lib/data/mnist.h"
#include "lib/accelerate/accelerator.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/models/models.h"
#include "lib/optim/adamw.h"

using namespace trainer;

struct Options {
  int num_processes = 1;
  std::string dataset_dir = data::kFashionMnistDir;
  int64_t max_train_samples = -1;
  int64_t max_eval_samples = -1;
  std::string mixed_precision = "no";
};

const char* kUsage =
    "usage: accelerate_basic [--num-processes N] [--dataset-dir DIR] [--max-train-samples N]\n"
    "                        [--max-eval-samples N] [--mixed-precision no|bf16]\n";

// Returns std::nullopt after printing the usage for --help.
std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    }
    if (flag.rfind("--", 0) != 0) throw InputError("unexpected argument " + flag + " (see --help)");
    if (i + 1 >= argc) throw InputError(flag + " needs a value");
    std::string value = argv[++i];
    if (flag == "--num-processes")
      o.num_processes = static_cast<int>(
          examples::integer_arg(flag, value, 1, 1024, "an integer from 1 to 1024"));
    else if (flag == "--dataset-dir")
      o.dataset_dir = value;
    else if (flag == "--max-train-samples")
      o.max_train_samples = examples::sample_count_arg(flag, value);
    else if (flag == "--max-eval-samples")
      o.max_eval_samples = examples::sample_count_arg(flag, value);
    else if (flag == "--mixed-precision")
      o.mixed_precision = value;
    else
      throw InputError("unknown option " + flag +
                       " (allowed: --num-processes, --dataset-dir, --max-train-samples, "
                       "--max-eval-samples, --mixed-precision)");
  }
  return o;
}

void train_ddp_accelerate(const Options& o) {
  // docs-snippet: accelerator
  Accelerator accelerator(AcceleratorOptions().mixed_precision(o.mixed_precision));

  auto train_dset =
      std::make_shared<data::MnistDataset>(o.dataset_dir, "train", o.max_train_samples);
  auto test_dset = std::make_shared<data::MnistDataset>(o.dataset_dir, "test", o.max_eval_samples);
  data::DataLoader train_loader(
      train_dset, std::make_shared<data::RandomSampler>(train_dset->size(), 42), {64, false});
  data::DataLoader test_loader(
      test_dset, std::make_shared<data::SequentialSampler>(test_dset->size()), {64, false});

  torch::manual_seed(42);
  std::shared_ptr<models::Model> model = std::make_shared<models::BasicNet>();
  std::shared_ptr<torch::optim::Optimizer> optimizer =
      std::make_shared<optim::AdamW>(model->parameters(), torch::optim::AdamWOptions(1e-3));

  auto [train, test, prepared, prepared_optimizer] =
      accelerator.prepare(train_loader, test_loader, model, optimizer);
  // docs-snippet-end

  prepared->train();
  auto start = std::chrono::steady_clock::now();
  // The steady state leaves out the first tenth of the steps (warm-up: allocations, caches).
  const int64_t warmup = train->size() / 10;
  auto steady_start = start;
  int64_t step = 0, steady_examples = 0;
  double data_seconds = 0;  // gathering and collating batches, in the steady state
  for (auto it = train->begin(); it != train->end(); ++it) {
    auto fetch = std::chrono::steady_clock::now();
    data::Batch batch = *it;
    if (step >= warmup)
      data_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - fetch).count();
    torch::Tensor output = prepared->forward(batch.at("x"));
    torch::Tensor loss = torch::nll_loss(output, batch.at("labels"));
    accelerator.backward(loss);
    prepared_optimizer->step();
    prepared_optimizer->zero_grad();
    if (++step == warmup) steady_start = std::chrono::steady_clock::now();
    if (step > warmup) steady_examples += batch.size() * accelerator.num_processes();
  }
  auto end = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(end - start).count();
  double steady_seconds = std::chrono::duration<double>(end - steady_start).count();

  prepared->eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (data::Batch batch : *test) {
    torch::Tensor pred = prepared->forward(batch.at("x")).argmax(1);
    torch::Tensor predictions = accelerator.gather_for_metrics(pred);
    torch::Tensor targets = accelerator.gather_for_metrics(batch.at("labels"));
    correct += predictions.eq(targets).sum().item<int64_t>();
  }
  accelerator.print("Accuracy: {:.2f}",
                    100.0 * static_cast<double>(correct) / static_cast<double>(test_dset->size()));
  accelerator.print(
      "Throughput: {:.1f} samples/s ({} process{}, {:.1f} s); steady state: {:.1f} samples/s "
      "after the first {} steps, of which data {:.3f} ms a step ({:.2f}%)",
      static_cast<double>(train_dset->size()) / seconds, accelerator.num_processes(),
      accelerator.num_processes() > 1 ? "es" : "", seconds,
      static_cast<double>(steady_examples) / steady_seconds, warmup,
      1e3 * data_seconds / static_cast<double>(std::max<int64_t>(1, step - warmup)),
      100.0 * data_seconds / steady_seconds);
}

int main(int argc, char** argv) {
  try {
    std::optional<Options> o = parse(argc, argv);
    if (!o) return 0;
    // notebook_launcher(train_ddp_accelerate, args=(), num_processes=N)
    launch([&o] { train_ddp_accelerate(*o); }, o->num_processes);
    return 0;
  } catch (...) {
    return report_error("accelerate_basic: ");
  }
}
