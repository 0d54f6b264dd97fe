// A program the distributed tests start as real ranks (under `trainer launch` or torchrun):
//   ddp_worker train --steps N --batch B [--accumulation A] --out FILE   DDP training on 2,560
//       synthetic examples in float64, checked
//       after every step to have identical parameters on every rank; rank 0 saves them to FILE
//       and, with --print-buckets 1, prints the DDP bucket sizes before each step; --float32 1
//       trains in float32, --shared-memory 0 keeps Gloo's all-reduce for the gradients
//   ddp_worker env                       joins the group, runs each collective, prints its place
//   ddp_worker hang --pid-dir DIR        writes its pid and a child's pid, then sleeps
//   ddp_worker skip --timeout-ms T       rank 1 never joins an all_reduce that rank 0 starts
//   ddp_worker mismatch                  rank 1 builds a model with a different fc2
//   ddp_worker shard --strategy S        trains a 4-block gpt sharded (full_shard, shard_grad_op,
//       shard_optimizer; one unit per block) or with DDP (ddp) for 3 steps and prints what each
//       rank holds between steps: "rank R params P grads G optimizer O unit U total T" (bytes)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include <torch/torch.h>
#include <unistd.h>

#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/data/dataloader.h"
#include "lib/data/mnist.h"
#include "lib/distributed/ddp.h"
#include "lib/distributed/fsdp.h"
#include "lib/distributed/process_group.h"
#include "lib/io/safetensors.h"
#include "lib/models/gpt.h"
#include "lib/models/models.h"
#include "tests/worker_flags.h"

using namespace trainer;

namespace {

using testing::flag;

// A BasicNet whose fc2 has `outputs` classes, for the mismatch test.
class OtherNet : public models::BasicNet {
 public:
  explicit OtherNet(int outputs) {
    fc2 = replace_module("fc2", trainer::models::Linear(128, outputs));
  }
};

int train(int argc, char** argv) {
  int steps = std::stoi(flag(argc, argv, "--steps", "20"));
  int batch = std::stoi(flag(argc, argv, "--batch", "32"));
  int accumulation = std::stoi(flag(argc, argv, "--accumulation", "1"));
  std::string out = flag(argc, argv, "--out", "");
  bool print_buckets = flag(argc, argv, "--print-buckets", "0") == "1";
  const bool float32 = flag(argc, argv, "--float32", "0") == "1";
  dist::DdpOptions options;
  options.shared_memory = flag(argc, argv, "--shared-memory", "1") == "1";
  dist::init_process_group();
  int rank = dist::get_rank(), world = dist::get_world_size();

  // The same synthetic data on every rank and in every run.
  torch::manual_seed(1234);
  int64_t n = std::stoll(flag(argc, argv, "--examples", "2560"));
  auto dataset = std::make_shared<data::MnistDataset>(
      torch::randint(0, 256, {n, 28, 28}).to(torch::kUInt8), torch::randint(0, 10, {n}));
  data::DataLoader loader(dataset,
                          std::make_shared<data::DistributedSampler>(n, world, rank, true, 42),
                          {batch, false});

  torch::manual_seed(rank + 100);  // different initial weights: DDP must broadcast rank 0's
  auto model = std::make_shared<models::BasicNet>();
  // In float64 the comparison with other batch splits sees DDP's arithmetic, not float32 rounding
  // amplified by Adam (float64 buckets go through Gloo; float32 ones through shared memory).
  const auto type = float32 ? torch::kFloat : torch::kDouble;
  model->to(type);
  auto ddp = std::make_shared<dist::DistributedDataParallel>(model, options);
  if (rank == 0) std::printf("shared memory %d\n", ddp->shares_memory() ? 1 : 0);
  ddp->eval();  // dropout off, so runs with different batch splits can be compared exactly
  torch::optim::AdamW optimizer(ddp->parameters(), torch::optim::AdamWOptions(1e-3));

  int64_t batch_index = 0;
  for (int step = 0; step < steps; ++step) {
    if (print_buckets && rank == 0) {
      std::printf("step %d buckets", step + 1);
      for (int64_t size : ddp->bucket_sizes()) std::printf(" %lld", static_cast<long long>(size));
      std::printf("\n");
    }
    for (int micro = 0; micro < accumulation; ++micro) {
      data::Batch b = loader.batch(batch_index++);
      auto run = [&] {
        torch::Tensor x = b.at("x").to(type);
        torch::Tensor loss = torch::nll_loss(ddp->forward(x), b.at("labels")) / accumulation;
        loss.backward();
      };
      if (micro + 1 < accumulation) {
        auto guard = ddp->no_sync();
        run();
      } else {
        run();
      }
    }
    optimizer.step();
    optimizer.zero_grad();
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> flat;
    for (const auto& p : model->parameters()) flat.push_back(p.detach().flatten());
    torch::Tensor mine = torch::cat(flat), high = mine.clone(), low = mine.clone();
    dist::all_reduce(high, dist::ReduceOp::kMax);
    dist::all_reduce(low, dist::ReduceOp::kMin);
    if (!torch::equal(high, low)) {
      std::fprintf(stderr, "parameters differ across ranks after step %d\n", step + 1);
      return 3;
    }
  }
  if (rank == 0 && !out.empty()) io::save_safetensors(out, io::state_dict(*model));
  dist::destroy_process_group();
  return 0;
}

int env() {
  dist::init_process_group();
  torch::Tensor t = torch::tensor({static_cast<double>(dist::get_rank())});
  dist::all_reduce(t);
  torch::Tensor b = torch::tensor({dist::get_rank() == 0 ? 7.0 : -1.0});
  dist::broadcast(b, 0);
  auto gathered = dist::all_gather(torch::tensor({dist::get_rank() * 10.0}));
  const auto& e = dist::environment();
  std::printf(
      "rank %d of %d local %d/%d agent_store %d rank_sum %.0f broadcast %.0f gathered %.0f\n",
      e.rank, e.world_size, e.local_rank, e.local_world_size, e.use_agent_store ? 1 : 0,
      t.item<double>(), b.item<double>(), torch::cat(gathered).sum().item<double>());
  dist::barrier();
  dist::destroy_process_group();
  return 0;
}

int hang(int argc, char** argv) {
  std::string dir = flag(argc, argv, "--pid-dir", "/tmp");
  std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
  std::string command = "sleep 300 & echo $! > " + dir + "/child." + rank;
  if (std::system(command.c_str()) != 0) return 4;
  std::ofstream(dir + "/rank." + rank) << ::getpid() << "\n";
  std::this_thread::sleep_for(std::chrono::seconds(300));
  return 0;
}

int skip(int argc, char** argv) {
  dist::InitOptions options;
  options.timeout = std::chrono::milliseconds(std::stoi(flag(argc, argv, "--timeout-ms", "2000")));
  dist::init_process_group(options);
  if (dist::get_rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  torch::Tensor t = torch::ones({4});
  dist::all_reduce(t);
  return 0;
}

int mismatch() {
  dist::init_process_group();
  std::shared_ptr<models::Model> model =
      dist::get_rank() == 1 ? std::make_shared<OtherNet>(5) : std::make_shared<models::BasicNet>();
  dist::DistributedDataParallel ddp(model);
  return 0;
}

// Bytes of every tensor's storage, each storage once.
int64_t storage_bytes(const std::vector<torch::Tensor>& tensors) {
  std::set<const void*> seen;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (!t.defined() || !seen.insert(t.storage().unsafeGetStorageImpl()).second) continue;
    total += static_cast<int64_t>(t.storage().nbytes());
  }
  return total;
}

int shard(int argc, char** argv) {
  const std::string strategy = flag(argc, argv, "--strategy", "full_shard");
  dist::init_process_group();
  const int rank = dist::get_rank();
  torch::manual_seed(7);
  models::GptConfig config;
  config.vocab_size = 64;
  config.block_size = 32;
  config.n_layer = 4;
  config.n_head = 4;
  config.n_embd = 64;
  auto model = std::make_shared<models::Gpt>(config);
  std::shared_ptr<models::Model> wrapped;
  std::shared_ptr<dist::FullyShardedDataParallel> sharded;
  std::vector<torch::Tensor> optimized;
  if (strategy == "ddp") {
    wrapped = std::make_shared<dist::DistributedDataParallel>(model);
    optimized = model->parameters();
  } else {
    dist::FsdpOptions options;
    options.strategy = strategy == "full_shard"      ? dist::ShardingStrategy::kFullShard
                       : strategy == "shard_grad_op" ? dist::ShardingStrategy::kShardGradOp
                                                     : dist::ShardingStrategy::kShardOptimizer;
    options.wrap_blocks = true;
    sharded = std::make_shared<dist::FullyShardedDataParallel>(model, options);
    wrapped = sharded;
    for (const auto& slice : sharded->local_slices()) optimized.push_back(slice.view);
  }
  torch::optim::AdamW optimizer(optimized, torch::optim::AdamWOptions(1e-3));
  for (int step = 0; step < 3; ++step) {
    torch::Tensor ids = torch::randint(0, 64, {4, 32});
    data::Batch batch{{"input_ids", ids}, {"labels", ids}};
    wrapped->forward(batch).loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    if (sharded) sharded->after_optimizer_step();
  }
  // Between steps: parameters, gradients (none left after zero_grad) and AdamW's moments.
  int64_t params = 0, grads = 0, moments = 0, unit = 0;
  if (sharded) {
    auto held = sharded->state_bytes();
    params = held.parameters;
    grads = held.gradients;
    for (const auto& [name, count] : sharded->units()) unit = std::max(unit, count * 4);
  } else {
    params = storage_bytes(model->parameters());
    std::vector<torch::Tensor> g;
    for (const auto& p : model->parameters()) g.push_back(p.grad());
    grads = storage_bytes(g);
  }
  std::vector<torch::Tensor> states;
  for (const auto& [key, state] : optimizer.state()) {
    auto& adam = static_cast<torch::optim::AdamWParamState&>(*state);
    states.push_back(adam.exp_avg());
    states.push_back(adam.exp_avg_sq());
  }
  moments = storage_bytes(states);
  std::printf("rank %d params %lld grads %lld optimizer %lld unit %lld total %lld\n", rank,
              static_cast<long long>(params), static_cast<long long>(grads),
              static_cast<long long>(moments), static_cast<long long>(unit),
              static_cast<long long>(params + grads + moments));
  std::fflush(stdout);
  dist::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "train") return train(argc, argv);
    if (mode == "env") return env();
    if (mode == "hang") return hang(argc, argv);
    if (mode == "skip") return skip(argc, argv);
    if (mode == "mismatch") return mismatch();
    if (mode == "shard") return shard(argc, argv);
    std::fprintf(stderr, "ddp_worker: unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (...) {
    return report_error("ddp_worker: ");
  }
}
