// The tutorial's first level in C++, `train_ddp`: setup, BasicNet wrapped in DDP, AdamW, one
// epoch over this rank's share of Fashion-MNIST, cleanup, and the test accuracy gathered over all
// ranks. Runs under `trainer launch --nproc-per-node 2 build/bin/ddp_basic`, torchrun, or alone.
//   ddp_basic [--dataset-dir DIR] [--max-train-samples N] [--batch-size B] [--bucket-cap-mb MB]
//             [--threads T] [--overlap 0|1] [--shared-memory 0|1]
// Prints the accuracy and, on rank 0, the training throughput in samples per second.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include <torch/torch.h>

#include "apps/examples/example_args.h"
#include "lib/data/dataloader.h"
#include "lib/data/mnist.h"
#include "lib/accelerate/launch.h"
#include "lib/distributed/ddp.h"
#include "lib/distributed/process_group.h"
#include "lib/base/errors.h"
#include "lib/models/models.h"
#include "lib/optim/adamw.h"

using namespace trainer;

struct Options {
  std::string dataset_dir = data::kFashionMnistDir;
  int64_t max_train_samples = -1;
  int64_t batch_size = 64;
  double bucket_cap_mb = 25;
  bool overlap = true;
  bool shared_memory = true;
  int threads = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) throw InputError(flag + " needs a value");
    std::string value = argv[++i];
    if (flag == "--dataset-dir")
      o.dataset_dir = value;
    else if (flag == "--max-train-samples")
      o.max_train_samples = examples::sample_count_arg(flag, value);
    else if (flag == "--batch-size")
      o.batch_size = examples::integer_arg(flag, value, 1, 1 << 20, "an integer from 1 to 1048576");
    else if (flag == "--bucket-cap-mb")
      o.bucket_cap_mb = examples::number_arg(flag, value, 0);
    else if (flag == "--threads")
      o.threads = static_cast<int>(
          examples::integer_arg(flag, value, 0, 1024, "an integer from 0 (default) to 1024"));
    else if (flag == "--overlap")
      o.overlap = examples::integer_arg(flag, value, 0, 1, "0 or 1") == 1;
    else if (flag == "--shared-memory")
      o.shared_memory = examples::integer_arg(flag, value, 0, 1, "0 or 1") == 1;
    else
      throw InputError("unknown option " + flag +
                       " (allowed: --dataset-dir, --max-train-samples, --batch-size, "
                       "--bucket-cap-mb, --threads, --overlap, --shared-memory)");
  }
  return o;
}

void train_ddp(const Options& o) {
  // docs-snippet: ddp
  dist::init_process_group("gloo", -1, -1);  // setup(): rank and world size from the environment
  int rank = dist::get_rank(), world_size = dist::get_world_size();

  auto train_dset =
      std::make_shared<data::MnistDataset>(o.dataset_dir, "train", o.max_train_samples);
  auto test_dset = std::make_shared<data::MnistDataset>(o.dataset_dir, "test");
  data::DataLoader train_loader(
      train_dset,
      std::make_shared<data::DistributedSampler>(train_dset->size(), world_size, rank, true, 42),
      {o.batch_size, false});
  data::DataLoader test_loader(test_dset,
                               std::make_shared<data::DistributedSampler>(
                                   test_dset->size(), world_size, rank, false, 0, true),
                               {o.batch_size, false});

  torch::manual_seed(42);
  auto model = std::make_shared<models::BasicNet>();
  dist::DdpOptions ddp_options;
  ddp_options.bucket_cap_mb = o.bucket_cap_mb;
  ddp_options.shared_memory = o.shared_memory;  // 0: Gloo's sockets for the gradients
  if (!o.overlap) {
    // One bucket for every gradient: its all-reduce can only start once backward has finished.
    ddp_options.bucket_cap_mb = ddp_options.first_bucket_cap_mb = 1 << 20;
  }
  auto ddp_model = std::make_shared<dist::DistributedDataParallel>(model, ddp_options);
  optim::AdamW optimizer(ddp_model->parameters(), torch::optim::AdamWOptions(1e-3));

  ddp_model->train();
  auto start = std::chrono::steady_clock::now();
  int64_t seen = 0;
  for (int64_t i = 0; i < train_loader.size(); ++i) {
    data::Batch batch = train_loader.batch(i);
    torch::Tensor output = ddp_model->forward(batch.at("x"));
    torch::Tensor loss = torch::nll_loss(output, batch.at("labels"));
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    seen += batch.size();
  }
  // docs-snippet-end
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor counts = torch::zeros({2}, torch::kLong);  // correct, total
  for (int64_t i = 0; i < test_loader.size(); ++i) {
    data::Batch batch = test_loader.batch(i);
    torch::Tensor pred = model->forward(batch.at("x")).argmax(1);
    counts[0] += pred.eq(batch.at("labels")).sum();
    counts[1] += batch.size();
  }
  dist::all_reduce(counts);
  torch::Tensor samples = torch::tensor({static_cast<double>(seen)}, torch::kDouble);
  dist::all_reduce(samples);
  if (rank == 0) {
    std::printf("Accuracy: %.2f\n", 100.0 * counts[0].item<double>() / counts[1].item<double>());
    std::printf("Throughput: %.1f samples/s (%d ranks, %.1f s)\n", samples.item<double>() / seconds,
                world_size, seconds);
  }
  dist::destroy_process_group();  // cleanup()
}

int main(int argc, char** argv) {
  try {
    Options o = parse(argc, argv);
    if (o.threads > 0) torch::set_num_threads(o.threads);
    train_ddp(o);
    return 0;
  } catch (...) {
    return report_error("ddp_basic: ");
  }
}
