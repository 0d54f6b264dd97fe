// The Accelerator in one process: how a prepared loader shards batches over N processes, when
// accumulate() synchronises, clip_grad_norm_ against LibTorch's, the fp16 GradScaler's arithmetic
// (its kernels run on CPU too), autocast only when asked for, the option errors, trainer::launch's
// guards, and the shared dataset cache.
#include "lib/accelerate/accelerator.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include "lib/accelerate/launch.h"
#include "lib/accelerate/mixed_precision.h"
#include "lib/base/errors.h"
#include "lib/data/mnist.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "tests/test_util.h"

namespace trainer {
namespace accelerator_test {

std::shared_ptr<data::MnistDataset> indexed(int64_t n) {
  return std::make_shared<data::MnistDataset>(torch::zeros({n, 28, 28}, torch::kUInt8),
                                              torch::arange(n));
}

data::DataLoader sequential(int64_t n, int64_t batch, bool drop_last = false) {
  return data::DataLoader(indexed(n), std::make_shared<data::SequentialSampler>(n),
                          {batch, drop_last});
}

std::vector<int64_t> labels_of(const data::Batch& batch) {
  torch::Tensor l = batch.at("labels");
  return std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
}

TEST(DataLoaderShard, ProcessPRunsBatchesPPlusNAndTheLastRoundRepeatsTheFirst) {
  // 11 examples at batch 3: batches {0,1,2} {3,4,5} {6,7,8} {9,10}; on 3 processes, 2 rounds.
  auto state = std::make_shared<GradientState>();
  std::vector<std::vector<std::vector<int64_t>>> seen(3);
  for (int p = 0; p < 3; ++p) {
    DataLoaderShard shard(sequential(11, 3), 3, p, torch::kCPU, state);
    ASSERT_EQ(shard.size(), 2);
    for (data::Batch batch : shard) {
      seen[p].push_back(labels_of(batch));
      if (seen[p].size() == 2) {
        // The last round: every process's rows, and which of them are real examples.
        EXPECT_EQ(state->batch_rows, (std::vector<int64_t>{2, 3, 3}));
        EXPECT_EQ(state->real_rows, (std::vector<int64_t>{2, 0, 0}));
        EXPECT_TRUE(state->end_of_dataloader);
      }
    }
    // The iteration over, gather_for_metrics no longer drops rows.
    EXPECT_TRUE(state->batch_rows.empty());
  }
  EXPECT_EQ(seen[0], (std::vector<std::vector<int64_t>>{{0, 1, 2}, {9, 10}}));
  EXPECT_EQ(seen[1], (std::vector<std::vector<int64_t>>{{3, 4, 5}, {0, 1, 2}}));
  EXPECT_EQ(seen[2], (std::vector<std::vector<int64_t>>{{6, 7, 8}, {3, 4, 5}}));
  DataLoaderShard first(sequential(11, 3), 3, 0, torch::kCPU, state);
  first.batch(0);
  EXPECT_EQ(state->batch_rows, (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(state->real_rows, (std::vector<int64_t>{3, 3, 3}));
  EXPECT_FALSE(state->end_of_dataloader);
  EXPECT_EQ(first.total_batch_size(), 9);
  EXPECT_EQ(first.num_examples(), 11);
}

TEST(DataLoaderShard, DropLastKeepsOnlyCompleteRounds) {
  auto state = std::make_shared<GradientState>();
  // 11 at batch 3 with drop_last: 3 full batches, 1 round of 2 processes.
  DataLoaderShard shard(sequential(11, 3, true), 2, 1, torch::kCPU, state);
  ASSERT_EQ(shard.size(), 1);
  EXPECT_EQ(labels_of(shard.batch(0)), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_THROW(shard.batch(1), std::out_of_range);
}

TEST(DataLoaderShard, OneProcessRunsTheLoadersBatchesAsTheyAre) {
  Accelerator accelerator;
  data::DataLoader loader(indexed(10), std::make_shared<data::RandomSampler>(10, 3), {4, false});
  auto shard = accelerator.prepare(loader);
  shard->set_epoch(2);
  loader.set_epoch(2);
  ASSERT_EQ(shard->size(), loader.size());
  for (int64_t i = 0; i < loader.size(); ++i) {
    EXPECT_EQ(labels_of(shard->batch(i)), labels_of(loader.batch(i)));
  }
  torch::Tensor rows = torch::arange(4);
  EXPECT_TRUE(torch::equal(accelerator.gather_for_metrics(rows), rows));
  EXPECT_TRUE(torch::equal(accelerator.gather(rows), rows));
  EXPECT_TRUE(torch::equal(accelerator.reduce(rows.to(torch::kDouble), Reduction::kMean),
                           rows.to(torch::kDouble)));
  EXPECT_EQ(accelerator.num_processes(), 1);
  EXPECT_TRUE(accelerator.is_main_process());
  EXPECT_EQ(accelerator.main_process_first([] { return 5; }), 5);
}

TEST(Accelerator, AccumulateSynchronisesEveryKthAndTheLastBatch) {
  Accelerator accelerator(AcceleratorOptions().gradient_accumulation_steps(3));
  torch::manual_seed(1);
  std::shared_ptr<models::Model> model = models::make_model("basic_net");
  auto prepared = accelerator.prepare(model);
  auto shard = accelerator.prepare(sequential(7, 1));
  std::vector<bool> syncs;
  for (int64_t i = 0; i < shard->size(); ++i) {
    shard->batch(i);
    auto guard = accelerator.accumulate(*prepared);
    syncs.push_back(accelerator.sync_gradients());
  }
  EXPECT_EQ(syncs, (std::vector<bool>{false, false, true, false, false, true, true}));
}

TEST(Accelerator, ThePreparedOptimizerStepsOnlyWhenGradientsSync) {
  Accelerator accelerator(AcceleratorOptions().gradient_accumulation_steps(2));
  auto w = torch::ones({2}, torch::requires_grad());
  auto sgd = std::make_shared<torch::optim::SGD>(std::vector<torch::Tensor>{w},
                                                 torch::optim::SGDOptions(0.5));
  auto optimizer = accelerator.prepare(sgd);
  models::BasicNet net;
  // Micro-batch 1: no sync, no step; micro-batch 2: sync, one step with the accumulated gradient
  // of both, each divided by 2 in backward().
  for (int micro = 0; micro < 2; ++micro) {
    auto guard = accelerator.accumulate(net);
    accelerator.backward((w * static_cast<double>(micro + 1)).sum());
    optimizer->step();
    optimizer->zero_grad();
    if (micro == 0) {
      EXPECT_TRUE(torch::equal(w.detach(), torch::ones({2})));
    }
  }
  // Gradient (1 + 2) / 2 = 1.5 per element; w = 1 - 0.5 * 1.5.
  EXPECT_TRUE(torch::allclose(w.detach(), torch::full({2}, 0.25)));
}

TEST(Accelerator, ClipGradNormMatchesLibTorchs) {
  torch::manual_seed(3);
  std::vector<torch::Tensor> a = {torch::randn({5, 4}, torch::requires_grad()),
                                  torch::randn({3}, torch::requires_grad())};
  std::vector<torch::Tensor> b;
  for (auto& p : a) b.push_back(p.detach().clone().requires_grad_());
  for (auto* set : {&a, &b}) ((*set)[0].pow(2).sum() * 3 + (*set)[1].sum() * 7).backward();
  Accelerator accelerator;
  torch::Tensor ours = accelerator.clip_grad_norm_(a, 0.5);
  double theirs = torch::nn::utils::clip_grad_norm_(b, 0.5);
  EXPECT_NEAR(ours.item<double>(), theirs, 1e-6 * theirs);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad()));
  EXPECT_NEAR(torch::cat({a[0].grad().flatten(), a[1].grad()}).norm().item<double>(), 0.5, 1e-5);
}

TEST(GradScaler, UnscalesSkipsOverflowAndAdjustsTheScale) {
  // PyTorch's AMP kernels run on CPU too, so the fp16 arithmetic is checked here.
  GradScaler scaler(torch::kCPU, /*init_scale=*/8.0, 2.0, 0.5, /*growth_interval=*/2);
  auto w = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.1));
  auto step = [&](double factor) {
    sgd.zero_grad();
    scaler.scale((w * factor).sum()).backward();
    bool stepped = scaler.step(sgd);
    scaler.update();
    return stepped;
  };
  EXPECT_EQ(scaler.scale(torch::tensor(1.5)).item<double>(), 12.0);
  EXPECT_TRUE(step(1.0));  // gradient 8 unscaled to 1: w = 0.9
  EXPECT_TRUE(torch::allclose(w.detach(), torch::full({2}, 0.9)));
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_TRUE(step(1.0));  // second good step in a row: the scale doubles
  EXPECT_EQ(scaler.get_scale(), 16.0);
  EXPECT_FALSE(step(std::numeric_limits<double>::infinity()));  // overflow: no step, scale halves
  EXPECT_TRUE(torch::allclose(w.detach(), torch::full({2}, 0.8)));
  EXPECT_EQ(scaler.get_scale(), 8.0);
}

TEST(GradScaler, EachOptimizerIsUnscaledOnceAndOverflowsCombine) {
  GradScaler scaler(torch::kCPU, 4.0);
  auto a = torch::ones({1}, torch::requires_grad());
  auto b = torch::ones({1}, torch::requires_grad());
  torch::optim::SGD first({a}, torch::optim::SGDOptions(1.0));
  torch::optim::SGD second({b}, torch::optim::SGDOptions(1.0));
  scaler.scale(a.sum() + b.sum() * std::numeric_limits<double>::infinity()).backward();
  scaler.unscale_(first);
  scaler.unscale_(second);
  scaler.unscale_(first);  // a second call changes nothing
  EXPECT_EQ(a.grad().item<double>(), 1.0);
  EXPECT_TRUE(scaler.step(first));    // a's gradient is finite
  EXPECT_FALSE(scaler.step(second));  // b's is not
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 2.0);  // one overflow among them halves the scale
  EXPECT_EQ(a.item<double>(), 0.0);
  EXPECT_EQ(b.item<double>(), 1.0);
}

TEST(GradScaler, PreparedOptimizersOfOneStepShareOneScale) {
  // As the Accelerator wires them: two prepared optimizers, one scaler, gradients unscaled for
  // clipping first. Each gradient is divided by the scale once, and the scale moves once.
  auto scaler = std::make_shared<GradScaler>(torch::kCPU, 4.0, 2.0, 0.5, /*growth_interval=*/1);
  auto state = std::make_shared<GradientState>();
  auto a = torch::ones({1}, torch::requires_grad());
  auto b = torch::ones({1}, torch::requires_grad());
  auto first = std::make_shared<torch::optim::SGD>(std::vector<torch::Tensor>{a},
                                                   torch::optim::SGDOptions(1.0));
  auto second = std::make_shared<torch::optim::SGD>(std::vector<torch::Tensor>{b},
                                                    torch::optim::SGDOptions(1.0));
  AcceleratedOptimizer one(first, state, scaler), two(second, state, scaler);
  scaler->scale(a.sum() * 0.5 + b.sum() * 0.25).backward();
  scaler->unscale_(*first);
  scaler->unscale_(*second);
  one.step();
  two.step();
  EXPECT_DOUBLE_EQ(a.item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(b.item<double>(), 0.75);
  EXPECT_EQ(scaler->get_scale(), 8.0);  // one good step at growth interval 1: doubled once
}

// Records the dtype its first layer computes in.
class DtypeProbe : public models::Model {
 public:
  DtypeProbe() { fc = register_module("fc", torch::nn::Linear(4, 3)); }
  torch::Tensor forward(const torch::Tensor& x) override {
    torch::Tensor out = fc->forward(x);
    inner = out.scalar_type();
    return out;
  }
  torch::nn::Linear fc{nullptr};
  torch::ScalarType inner = torch::kFloat;
};

TEST(Accelerator, Bf16AutocastOnlyWhenAskedFor) {
  auto probe = std::make_shared<DtypeProbe>();
  Accelerator plain;
  EXPECT_EQ(plain.mixed_precision(), "no");
  auto same = plain.prepare(std::static_pointer_cast<models::Model>(probe));
  EXPECT_EQ(same.get(), probe.get());  // nothing to wrap
  EXPECT_EQ(same->forward(torch::ones({2, 4})).scalar_type(), torch::kFloat);
  EXPECT_EQ(probe->inner, torch::kFloat);

  Accelerator bf16(AcceleratorOptions().mixed_precision("bf16"));
  auto wrapped = bf16.prepare(std::static_pointer_cast<models::Model>(probe));
  torch::Tensor out = wrapped->forward(torch::ones({2, 4}));
  EXPECT_EQ(probe->inner, torch::kBFloat16);
  EXPECT_EQ(out.scalar_type(), torch::kFloat);  // outputs come back as float32
  EXPECT_EQ(bf16.unwrap_model(wrapped).get(), probe.get());
  // Outside the prepared forward, autocast is off again.
  EXPECT_EQ(probe->forward(torch::ones({2, 4})).scalar_type(), torch::kFloat);
}

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(Accelerator, BadOptionsAreInputErrors) {
  EXPECT_EQ(input_error([] { Accelerator a(AcceleratorOptions().mixed_precision("fp8")); }),
            "mixed_precision \"fp8\" is not allowed (allowed: no, bf16, fp16)");
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(input_error([] { Accelerator a(AcceleratorOptions().mixed_precision("fp16")); }),
              "mixed precision fp16 is not supported on CPU (it needs a CUDA device; bf16 works "
              "on CPU)");
    EXPECT_EQ(input_error([] { Accelerator a(AcceleratorOptions().backend("nccl")); }),
              "backend nccl needs CUDA devices (on CPU, use gloo)");
  }
  EXPECT_EQ(input_error([] { Accelerator a(AcceleratorOptions().gradient_accumulation_steps(0)); }),
            "gradient_accumulation_steps 0 is not allowed (must be >= 1)");
}

TEST(AccelerateLaunch, OneProcessRunsTheFunctionHere) {
  int pid = -1;
  launch([&] { pid = ::getpid(); }, 1);
  EXPECT_EQ(pid, ::getpid());
  EXPECT_EQ(input_error([] { launch([] {}, 0); }),
            "trainer::launch: num_processes 0 is not allowed (must be >= 1)");
}

TEST(AccelerateLaunch, RefusesToForkAProcessThatRunsOtherThreads) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  std::string message;
  try {
    launch([] {}, 2);
  } catch (const std::logic_error& e) {
    message = e.what();
  }
  stop = true;
  busy.join();
  EXPECT_NE(message.find("trainer::launch: this process already runs "), std::string::npos)
      << message;
  EXPECT_NE(message.find("call trainer::launch before any tensor work"), std::string::npos);
}

TEST(SharedDataset, TheCacheIsWrittenOnceThenMappedAndRebuiltWhenDamaged) {
  testing::TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 50, 20, true);
  data::MnistDataset plain(dir.file("data"), "train", 30);
  auto first =
      data::MnistDataset::load_shared(dir.file("data"), "train", 30, dir.file("cache"), true);
  ASSERT_FALSE(first->cache_file().empty());
  EXPECT_TRUE(torch::equal(first->images(), plain.images()));
  EXPECT_TRUE(torch::equal(first->labels(), plain.labels()));
  auto mapped = io::map_safetensors(first->cache_file(), true);
  EXPECT_EQ(mapped.tensors.at(0).second.size(0), 50);  // the whole split, narrowed per use
  EXPECT_EQ(mapped.metadata.at("crc32"), fmt::format("{:08x}", mapped.data_crc32));
  auto written = std::filesystem::last_write_time(first->cache_file());
  auto second =
      data::MnistDataset::load_shared(dir.file("data"), "train", -1, dir.file("cache"), true);
  EXPECT_EQ(std::filesystem::last_write_time(second->cache_file()), written);  // reused
  EXPECT_EQ(second->size(), 50);
  // A flipped byte in the data: the verifying process rebuilds the file.
  {
    std::fstream f(first->cache_file(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  auto third =
      data::MnistDataset::load_shared(dir.file("data"), "train", 30, dir.file("cache"), true);
  EXPECT_TRUE(torch::equal(third->labels(), plain.labels()));
  EXPECT_EQ(io::map_safetensors(third->cache_file(), true).metadata.at("crc32"),
            fmt::format("{:08x}", io::map_safetensors(third->cache_file(), true).data_crc32));
  // New content of the same size and modification time: the cache notices (inode, ctime).
  auto labels_path = dir.file("data/train-labels-idx1-ubyte.gz");
  auto mtime = std::filesystem::last_write_time(labels_path);
  testing::write_idx(labels_path, {50}, std::vector<uint8_t>(50, 3), true);
  std::filesystem::last_write_time(labels_path, mtime);
  auto changed =
      data::MnistDataset::load_shared(dir.file("data"), "train", -1, dir.file("cache"), false);
  EXPECT_TRUE(torch::equal(changed->labels(), torch::full({50}, 3, torch::kLong)));
  // No usable cache directory: decoded in memory, with the same data.
  auto memory = data::MnistDataset::load_shared(dir.file("data"), "train", 30, "", true);
  EXPECT_TRUE(memory->cache_file().empty());
  EXPECT_TRUE(torch::equal(memory->images(), plain.images()));
}

}  // namespace accelerator_test
}  // namespace trainer
