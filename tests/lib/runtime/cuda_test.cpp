// The GPU path (issue 13). Where CUDA is absent the CUDA tests skip with a message and the CPU
// halves run: the device-loader plumbing over a CPU copy, tf32's error and cuda_graphs' fallback
// line. Where it is present: device placement, bf16 training, the GPU-resident loader giving the
// host loader's batches, the device-side non-finite skip, CUDA-graph steps against eager steps,
// and an NCCL process group of one rank.
#include <cstdlib>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "lib/models/models.h"
#include "lib/accelerate/accelerator.h"
#include "lib/base/errors.h"
#include "lib/data/mnist.h"
#include "lib/distributed/process_group.h"
#include "lib/optim/adamw.h"
#include "lib/runtime/cuda.h"
#include "tests/test_util.h"
#include "tests/torch_test_util.h"
#include "trainer/trainer.h"

namespace trainer {
namespace cuda_test {

#define REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine"

std::shared_ptr<data::MnistDataset> random_images(int64_t n, int seed = 3) {
  return testing::random_mnist(n, seed);
}

TrainingArguments args_in(const testing::TempDir& dir) {
  return TrainingArguments()
      .output_dir(dir.path())
      .disable_tqdm(true)
      .learning_rate(1e-3)
      .per_device_train_batch_size(32)
      .num_train_epochs(1)
      .save_strategy("no")
      .logging_steps(4);
}

std::vector<torch::Tensor> parameters_on_cpu(Trainer& t) {
  std::vector<torch::Tensor> out;
  for (const auto& p : t.model().parameters()) out.push_back(p.detach().to(torch::kCPU).clone());
  return out;
}

double max_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i)
    most = std::max(most, (a[i] - b[i]).abs().max().item<double>());
  return most;
}

// Every batch of two epochs from `a` and `b`: the same labels, the same images to float32
// rounding (CUDA divides by a scalar as a multiplication by its reciprocal).
void expect_same_batches(data::DataLoader& a, data::DataLoader& b) {
  ASSERT_EQ(a.size(), b.size());
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    a.set_epoch(epoch);
    b.set_epoch(epoch);
    for (int64_t i = 0; i < a.size(); ++i) {
      data::Batch x = a.batch(i), y = b.batch(i);
      EXPECT_TRUE(torch::equal(x.at("labels").cpu(), y.at("labels").cpu())) << epoch << " " << i;
      EXPECT_TRUE(torch::allclose(x.at("x").cpu(), y.at("x").cpu(), 1e-6, 1e-6))
          << epoch << " " << i;
    }
  }
}

TEST(DeviceLoader, WithDatasetKeepsTheOrderAndEpoch) {
  auto data = random_images(100);
  data::DataLoader host(data, std::make_shared<data::RandomSampler>(100, 7), {16, false});
  host.set_epoch(1);
  auto copy = data->to_device(torch::kCPU, 1 << 30);
  ASSERT_TRUE(copy);
  data::DataLoader other = host.with_dataset(copy);
  EXPECT_TRUE(torch::equal(other.batch(0).at("labels"), host.batch(0).at("labels")));
  expect_same_batches(host, other);
  EXPECT_FALSE(data->to_device(torch::kCPU, 100)) << "78 KB of images do not fit in 100 bytes";
  EXPECT_THROW(host.with_dataset(random_images(99)), std::invalid_argument);
}

TEST(DeviceLoader, OnCudaGivesTheHostLoadersBatches) {
  REQUIRE_CUDA();
  auto data = random_images(1000);
  auto sampler = std::make_shared<data::RandomSampler>(1000, 7);
  data::DataLoader host(data, sampler, {64, false});
  auto copy = data->to_device(torch::Device(torch::kCUDA, 0), int64_t{1} << 30);
  ASSERT_TRUE(copy);
  EXPECT_TRUE(copy->device().is_cuda());
  data::DataLoader device = host.with_dataset(copy);
  EXPECT_TRUE(device.batch(0).at("x").is_cuda());
  expect_same_batches(host, device);

  // The Accelerator's prepare() makes the same copy by itself, and only with data_on_device.
  Accelerator on;
  auto shard = on.prepare(host);
  EXPECT_TRUE(shard->data_on_device());
  EXPECT_TRUE(shard->batch(0).at("x").is_cuda());
  Accelerator off(AcceleratorOptions().data_on_device(false));
  EXPECT_FALSE(off.prepare(host)->data_on_device());
}

TEST(Cuda, PlacesModelDataAndOptimizerStateOnTheDevice) {
  REQUIRE_CUDA();
  testing::TempDir dir;
  Trainer t(models::make_model("basic_net"), args_in(dir).max_steps(3), random_images(256));
  EXPECT_EQ(t.device(), torch::Device(torch::kCUDA, 0));
  t.train();
  for (const auto& p : t.model().parameters()) EXPECT_TRUE(p.is_cuda());
  auto* adamw = dynamic_cast<optim::AdamW*>(t.optimizer().get());
  ASSERT_TRUE(adamw);
  EXPECT_TRUE(adamw->capturable());
  for (const auto& [key, state] : t.optimizer()->state()) {
    EXPECT_TRUE(static_cast<torch::optim::AdamWParamState&>(*state).exp_avg().is_cuda());
  }
  testing::TempDir cpu_dir;
  Trainer cpu(models::make_model("basic_net"), args_in(cpu_dir).use_cpu(true), random_images(64));
  EXPECT_TRUE(cpu.device().is_cpu());
}

TEST(Cuda, Bf16TrainingLowersTheLoss) {
  REQUIRE_CUDA();
  testing::TempDir dir;
  auto data = random_images(512);
  Trainer t(models::make_model("basic_net"),
            args_in(dir).bf16(true).num_train_epochs(3).logging_steps(16), data);
  TrainOutput out = t.train();
  const auto& history = t.state().log_history;
  ASSERT_GE(history.size(), 3u);
  const double first = history.front()["loss"].get<double>();
  const double last = history[history.size() - 2]["loss"].get<double>();
  EXPECT_TRUE(std::isfinite(out.training_loss));
  EXPECT_LT(last, first) << "bf16 on CUDA did not learn the 512 examples";
  for (const auto& p : t.model().parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);
}

// compute_loss returns NaN at step 3: the update is skipped on the device, the step count too.
class NanAtStep3 : public Trainer {
 public:
  using Trainer::Trainer;
  LossOutput compute_loss(models::Model& model, const data::Batch& inputs, bool return_outputs,
                          const torch::Tensor& num_items_in_batch = {}) override {
    LossOutput out = Trainer::compute_loss(model, inputs, return_outputs, num_items_in_batch);
    if (state().global_step + 1 == 3) out.loss = out.loss * NAN;
    return out;
  }
};

TEST(Cuda, ANonFiniteStepIsSkippedOnTheDevice) {
  REQUIRE_CUDA();
  testing::TempDir dir;
  NanAtStep3 t(models::make_model("basic_net"), args_in(dir).max_steps(6).logging_steps(1),
               random_images(320));
  t.train();
  for (const auto& p : t.model().parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  for (const auto& log : t.state().log_history) {
    if (log.contains("loss")) {
      EXPECT_TRUE(std::isfinite(log["loss"].get<double>()));
    }
  }
  torch::serialize::OutputArchive archive;
  t.optimizer()->save(archive);  // brings the device's step counts to the host
  auto& group = t.optimizer()->param_groups()[0];
  auto& state = static_cast<torch::optim::AdamWParamState&>(
      *t.optimizer()->state().at(group.params()[0].unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 5);
}

// Replayed graph steps against eager steps from the same start, batches and random streams:
// within 1e-4 of each other after two epochs of 8 steps (the same kernels run in both, so they
// agree to float32 rounding; Adam's normalised updates keep differences near its rounding).
TEST(Cuda, GraphReplayedStepsEqualEagerSteps) {
  REQUIRE_CUDA();
  auto data = random_images(8 * 32 + 10);  // 8 full batches and a last one of 10: eager
  auto run = [&](bool graphs, std::vector<torch::Tensor>& params) {
    testing::TempDir dir;
    torch::manual_seed(1);
    Trainer t(models::make_model("basic_net"), args_in(dir).num_train_epochs(2).cuda_graphs(graphs),
              data);
    t.train();
    params = parameters_on_cpu(t);
    return t.cuda_graph_replays();
  };
  std::vector<torch::Tensor> eager, graphed;
  EXPECT_EQ(run(false, eager), 0);
  // 18 steps: 3 warm-up, the captured one replayed, then every full batch; 2 last batches eager.
  EXPECT_EQ(run(true, graphed), 18 - 3 - 2);
  EXPECT_LE(max_difference(eager, graphed), 1e-4);
}

TEST(Cuda, NcclProcessGroupOfOneRank) {
  REQUIRE_CUDA();
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(testing::free_port()).c_str(), 1);
  dist::init_process_group("nccl", 0, 1);
  torch::Tensor t = torch::arange(4, torch::TensorOptions(torch::kFloat).device(torch::kCUDA));
  dist::all_reduce(t, dist::ReduceOp::kSum);
  EXPECT_TRUE(torch::equal(t.cpu(), torch::arange(4, torch::kFloat)));
  auto gathered = dist::all_gather(t);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_TRUE(gathered[0].is_cuda());
  dist::destroy_process_group();
}

TEST(Cuda, Tf32TrueWithoutCudaIsAnInputError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  testing::TempDir dir;
  try {
    Trainer t(models::make_model("basic_net"), args_in(dir).tf32(true), random_images(64));
    FAIL() << "tf32 true was accepted on the CPU";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "argument tf32: true is not supported on CPU (it needs a CUDA device; use null or "
                 "false)");
  }
  Trainer off(models::make_model("basic_net"), args_in(dir).tf32(false), random_images(64));
  EXPECT_TRUE(off.device().is_cpu());
}

TEST(Cuda, CudaGraphsOnTheCpuTrainEagerlyAfterOneWarningLine) {
  testing::TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 96, 16, false);
  auto result = testing::run(testing::command_line(testing::train_argv(
                                 dir.file("data"), dir.file("out"),
                                 {"--use_cpu", "true", "--cuda_graphs", "true", "--max_steps", "2",
                                  "--per_device_train_batch_size", "32", "--save_strategy", "no",
                                  "--disable_tqdm", "true"})) +
                             " 2>&1");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  auto lines = testing::matches(result.out, "(trainer: warning: cuda_graphs[^\n]*)");
  ASSERT_EQ(lines.size(), 1u) << result.out;
  EXPECT_EQ(lines[0], "trainer: warning: cuda_graphs: the device is the CPU; steps run eagerly");
}

}  // namespace cuda_test
}  // namespace trainer
