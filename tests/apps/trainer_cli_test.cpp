// End-to-end runs of build/bin/trainer on a 2,000-example subset of the real Fashion-MNIST: the
// banner, the table, the output files (read back and compared, also by PyTorch itself), and the
// one-line errors with exit code 2 for bad arguments and bad data.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "lib/data/mnist_defaults.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "tests/test_util.h"

namespace trainer {
namespace trainer_cli_test {

using nlohmann::json;
using testing::run;
using testing::slurp;
using testing::TempDir;

const std::string& kTrainer = testing::kTrainerBin;
const std::string kConfigs = std::string(SOURCE_DIR) + "/configs";

// One training run shared by the TrainedRun tests, which ctest starts as separate processes:
// the first to come trains into a directory named after the trainer binary's identity (under a
// lock), and each test works on its own copy of it.
testing::ProcessResult trained_run_into(const std::string& dir) {
  struct stat binary {};
  ::stat(kTrainer.c_str(), &binary);
  std::string cache = fmt::format("{}/trainer-trained-run-{}-{}-{}", ::testing::TempDir(),
                                  binary.st_ino, binary.st_size, binary.st_mtim.tv_sec);
  std::filesystem::create_directories(cache);
  int lock = ::open((cache + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ::flock(lock, LOCK_EX);
  if (slurp(cache + "/code").empty()) {
    auto result = run(kTrainer + " train " + kConfigs + "/fashion_mnist_lr1e-3.json --output_dir " +
                      cache + "/run --max_train_samples 2000 --max_eval_samples 1000");
    std::ofstream(cache + "/out") << result.out;
    std::ofstream(cache + "/err") << result.err;
    std::ofstream(cache + "/code") << result.exit_code;
  }
  ::close(lock);
  run("cp -R " + cache + "/run/. " + dir);
  return {std::stoi(slurp(cache + "/code")), slurp(cache + "/out"), slurp(cache + "/err")};
}

class TrainedRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    result_ = new testing::ProcessResult(trained_run_into(dir_->path()));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete dir_;
  }
  static json read(const std::string& name) { return json::parse(slurp(dir_->file(name))); }
  static TempDir* dir_;
  static testing::ProcessResult* result_;
};
TempDir* TrainedRun::dir_ = nullptr;
testing::ProcessResult* TrainedRun::result_ = nullptr;

TEST_F(TrainedRun, PrintsTransformersBanner) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  const std::string banner =
      "***** Running training *****\n"
      "  Num examples = 2,000\n"
      "  Num Epochs = 1\n"
      "  Instantaneous batch size per device = 64\n"
      "  Total train batch size (w. parallel, distributed & accumulation) = 64\n"
      "  Gradient Accumulation steps = 1\n"
      "  Total optimization steps = 32\n"
      "  Number of trainable parameters = 1,199,882\n";
  EXPECT_EQ(result_->out.substr(0, banner.size()), banner);
}

TEST_F(TrainedRun, PrintsOneTableRowWithTheEvaluation) {
  json state = read("trainer_state.json");
  const json& eval = state["log_history"][0];
  std::string row =
      fmt::format("1         No log         {:.6f}         {:.6f}\n",
                  eval["eval_loss"].get<double>(), eval["eval_accuracy"].get<double>());
  EXPECT_NE(result_->out.find("Epoch     Training Loss  Validation Loss  Accuracy\n" + row),
            std::string::npos)
      << result_->out;
  EXPECT_NE(result_->out.find("***** train metrics *****\n"), std::string::npos);
  EXPECT_NE(result_->out.find(fmt::format(
                "  eval_accuracy           = {:>10}\n",
                fmt::format("{}", std::round(eval["eval_accuracy"].get<double>() * 1e4) / 1e4))),
            std::string::npos)
      << result_->out;
}

TEST_F(TrainedRun, WritesTrainerStateInTransformersSchema) {
  json state = read("trainer_state.json");
  EXPECT_EQ(state["global_step"], 32);
  EXPECT_EQ(state["max_steps"], 32);
  EXPECT_EQ(state["epoch"], 1.0);
  EXPECT_EQ(state["train_batch_size"], 64);
  ASSERT_EQ(state["log_history"].size(), 2u);
  const json& eval = state["log_history"][0];
  EXPECT_EQ(eval["step"], 32);
  // Far above chance (0.1) after one epoch on 2,000 examples.
  EXPECT_GT(eval["eval_accuracy"].get<double>(), 0.6);
  EXPECT_LT(eval["eval_loss"].get<double>(), 1.2);
  const json& final_entry = state["log_history"][1];
  for (const char* key :
       {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}) {
    EXPECT_TRUE(final_entry.contains(key)) << key;
  }
  json args = read("training_args.json");
  EXPECT_EQ(args["learning_rate"], 1e-3);
  EXPECT_EQ(args["max_train_samples"], 2000);
  json all = read("all_results.json");
  EXPECT_EQ(all["eval_accuracy"], eval["eval_accuracy"]);
  EXPECT_EQ(all["train_samples"], 2000);
  EXPECT_EQ(read("eval_results.json")["eval_samples"], 1000);
}

TEST_F(TrainedRun, SafetensorsHoldTheModelThatEvaluatesTheSame) {
  auto tensors = io::load_safetensors(dir_->file("model.safetensors"));
  auto model = models::make_model("basic_net");
  auto expected = io::state_dict(*model);
  ASSERT_EQ(tensors.size(), expected.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].first, expected[i].first);
    EXPECT_EQ(tensors[i].second.sizes(), expected[i].second.sizes());
  }
  json trained = read("trainer_state.json")["log_history"][0];
  auto evaluated =
      run(kTrainer + " evaluate " + kConfigs + "/fashion_mnist_lr1e-3.json --output_dir " +
          dir_->path() + " --max_eval_samples 1000");
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  json eval = read("eval_results.json");
  EXPECT_EQ(eval["eval_accuracy"], trained["eval_accuracy"]);
  EXPECT_NEAR(eval["eval_loss"].get<double>(), trained["eval_loss"].get<double>(), 1e-6);
}

TEST_F(TrainedRun, PyTorchLoadsTheSafetensorsIntoTheTutorialsBasicNet) {
  std::string python = TRAINER_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python with torch and safetensors configured";
  auto checked = run(python + " " + SOURCE_DIR + "/tests/reference/scripts/check_safetensors.py " +
                     dir_->file("model.safetensors") + " " + data::kFashionMnistDir + " 1000");
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  json got = json::parse(checked.out);
  json ours = read("trainer_state.json")["log_history"][0];
  // The same 1,000 predictions: PyTorch's float32 mean and our double agree on the count.
  EXPECT_EQ(std::lround(got["accuracy"].get<double>() * 1000),
            std::lround(ours["eval_accuracy"].get<double>() * 1000));
  EXPECT_NEAR(got["loss"].get<double>(), ours["eval_loss"].get<double>(), 1e-5);
}

// trainer predict: Trainer.predict on the eval split, its metrics under "test_", and the outputs
// and labels as .npy files that NumPy reads, agreeing with the metrics and with evaluate.
TEST_F(TrainedRun, PredictWritesWhatNumPyReadsAndAgreesWithEvaluate) {
  auto predicted =
      run(kTrainer + " predict " + kConfigs + "/fashion_mnist_lr1e-3.json --output_dir " +
          dir_->path() + " --max_eval_samples 1000");
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  EXPECT_NE(predicted.out.find("***** predict metrics *****\n"), std::string::npos)
      << predicted.out;
  json metrics = read("predict_results.json");
  json trained = read("trainer_state.json")["log_history"][0];
  EXPECT_EQ(metrics["test_accuracy"], trained["eval_accuracy"]);
  EXPECT_NEAR(metrics["test_loss"].get<double>(), trained["eval_loss"].get<double>(), 1e-6);
  EXPECT_EQ(metrics["predict_samples"], 1000);
  EXPECT_EQ(read("all_results.json")["test_accuracy"], metrics["test_accuracy"]);
  std::string python = TRAINER_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python with NumPy configured";
  auto checked = run(python + " -c \"import numpy as np, sys; d = sys.argv[1]; " +
                     "p = np.load(d + '/predictions.npy'); y = np.load(d + '/label_ids.npy'); " +
                     "print(p.dtype, p.shape, y.dtype, y.shape, int((p.argmax(1) == y).sum()), " +
                     "repr(float(np.exp(p).sum(1).mean())))\" " + dir_->path());
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  std::istringstream fields(checked.out);
  std::string pdtype, pshape1, pshape2, ydtype, yshape;
  int64_t correct = 0;
  double mass = 0;
  fields >> pdtype >> pshape1 >> pshape2 >> ydtype >> yshape >> correct >> mass;
  EXPECT_EQ(pdtype + " " + pshape1 + " " + pshape2, "float32 (1000, 10)") << checked.out;
  EXPECT_EQ(ydtype + " " + yshape, "int64 (1000,)") << checked.out;
  EXPECT_EQ(correct, std::lround(metrics["test_accuracy"].get<double>() * 1000));
  EXPECT_NEAR(mass, 1.0, 1e-5);  // BasicNet's outputs are log-probabilities
}

TEST_F(TrainedRun, EvaluationOnThreeProcessesGivesExactlyTheNumbersOfOne) {
  // 1,000 examples at batch 64: 16 batches, the last of 40, in 6 rounds of 3 processes.
  std::string args = " evaluate " + kConfigs + "/fashion_mnist_lr1e-3.json --output_dir " +
                     dir_->path() + " --max_eval_samples 1000";
  auto one = run("OMP_NUM_THREADS=1 " + kTrainer + args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  json single = read("eval_results.json");
  auto three = run("OMP_NUM_THREADS=1 " + testing::launch("--nproc-per-node 3 " + kTrainer + args));
  ASSERT_EQ(three.exit_code, 0) << three.err;
  json distributed = read("eval_results.json");
  EXPECT_EQ(distributed["eval_accuracy"], single["eval_accuracy"]);
  EXPECT_EQ(distributed["eval_loss"], single["eval_loss"]);
  EXPECT_EQ(distributed["eval_samples"], 1000);
  EXPECT_NE(three.out.find("[rank0]: ***** eval metrics *****\n"), std::string::npos);
  EXPECT_EQ(three.out.find("[rank1]"), std::string::npos) << three.out;
  EXPECT_EQ(three.out.find("[rank2]"), std::string::npos) << three.out;
}

// ddp_static_graph: the Reducer told the graph is static (its first iteration all-reduces every
// gradient once backward ends) trains the same weights as without; local_rank is the launcher's
// LOCAL_RANK (0 for the process that writes training_args.json).
TEST(TrainerCli, DdpStaticGraphTrainsTheSameWeightsAndLocalRankIsTheLaunchers) {
  TempDir dir;
  auto train = [&](const std::string& out, const std::string& extra) {
    return run(testing::launch("--nproc-per-node 2 " + kTrainer + " train " + kConfigs +
                               "/fashion_mnist_lr1e-3.json --output_dir " + dir.file(out) +
                               " --max_train_samples 512 --max_steps 4 --do_eval false"
                               " --eval_strategy no --save_strategy no " +
                               extra));
  };
  const auto plain = train("plain", ""), fixed = train("static", "--ddp_static_graph true");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_EQ(testing::slurp(dir.file("plain/model.safetensors")),
            testing::slurp(dir.file("static/model.safetensors")));
  const auto args = nlohmann::json::parse(testing::slurp(dir.file("static/training_args.json")));
  EXPECT_EQ(args["ddp_static_graph"], true);
  EXPECT_EQ(args["local_rank"], 0);
}

TEST(TrainerCli, OnTwoProcessesOnlyTheMainOnePrintsAndWrites) {
  TempDir dir;
  auto result = run(testing::launch("--nproc-per-node 2 " + kTrainer + " train " + kConfigs +
                                    "/fashion_mnist_lr1e-3.json --output_dir " + dir.path() +
                                    " --max_train_samples 2000 --max_eval_samples 1000"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The whole data set, 2 x 64 per step: 32 batches of 64 (the last of 16) in 16 rounds.
  const std::string banner =
      "[rank0]: ***** Running training *****\n"
      "[rank0]:   Num examples = 2,000\n"
      "[rank0]:   Num Epochs = 1\n"
      "[rank0]:   Instantaneous batch size per device = 64\n"
      "[rank0]:   Total train batch size (w. parallel, distributed & accumulation) = 128\n"
      "[rank0]:   Gradient Accumulation steps = 1\n"
      "[rank0]:   Total optimization steps = 16\n"
      "[rank0]:   Number of trainable parameters = 1,199,882\n";
  EXPECT_EQ(result.out.substr(0, banner.size()), banner) << result.out;
  EXPECT_EQ(testing::count(result.out, "***** Running training *****"), 1u);
  EXPECT_EQ(testing::count(result.out, "Epoch     Training Loss  Validation Loss  Accuracy"), 1u);
  EXPECT_EQ(testing::count(result.out, "***** train metrics *****"), 1u);
  EXPECT_EQ(testing::count(result.out, "***** eval metrics *****"), 1u);
  EXPECT_EQ(testing::count(result.out, "[rank1]"), 0u) << result.out;
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"all_results.json", "checkpoint-16", "eval_results.json",
                                          "loss.svg", "loss_curve.npy", "model.safetensors",
                                          "train_results.json", "trainer_state.json",
                                          "training_args.json"}));
  json state = json::parse(slurp(dir.file("trainer_state.json")));
  EXPECT_EQ(state["global_step"], 16);
  EXPECT_EQ(state["train_batch_size"], 64);
  EXPECT_GT(state["log_history"][0]["eval_accuracy"].get<double>(), 0.55);
}

TEST(TrainerCli, AShardedRunSavesEvaluatesAndResumesItsCheckpoint) {
  // Full sharding on 2 processes with an evaluation at each save: its checkpoint resumed on 2
  // ends with the uninterrupted run's weights, byte for byte; the evaluation scores what
  // `trainer evaluate` scores from the saved model.
  TempDir dir;
  const std::string arguments = " train " + kConfigs +
                                "/fashion_mnist_lr1e-3.json --max_train_samples 256 "
                                "--max_eval_samples 64 --per_device_train_batch_size 16 "
                                "--save_steps 4 --eval_strategy steps --eval_steps 4 "
                                "--fsdp full_shard ";
  auto whole = run(testing::launch("--nproc-per-node 2 " + kTrainer + arguments + "--output_dir " +
                                   dir.file("whole")));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_TRUE(
      std::filesystem::exists(dir.file("whole/checkpoint-4/sharded_state_1_of_2.safetensors")));
  std::filesystem::create_directories(dir.file("resumed"));
  std::filesystem::copy(dir.file("whole/checkpoint-4"), dir.file("resumed/checkpoint-4"),
                        std::filesystem::copy_options::recursive);
  auto resumed =
      run(testing::launch("--nproc-per-node 2 " + kTrainer + arguments + "--output_dir " +
                          dir.file("resumed") + " --resume_from_checkpoint true"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(slurp(dir.file("whole/model.safetensors")) ==
              slurp(dir.file("resumed/model.safetensors")));
  json state = json::parse(slurp(dir.file("whole/trainer_state.json")));
  double last_eval = -1;
  for (const auto& entry : state["log_history"]) {
    if (entry.contains("eval_loss")) last_eval = entry["eval_loss"].get<double>();
  }
  auto evaluated =
      run(kTrainer + " evaluate " + kConfigs +
          "/fashion_mnist_lr1e-3.json --max_eval_samples 64 --output_dir " + dir.file("whole"));
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  json metrics = json::parse(slurp(dir.file("whole/eval_results.json")));
  EXPECT_NEAR(metrics["eval_loss"].get<double>(), last_eval, 1e-5 * std::abs(last_eval));
}

TEST(TrainerCli, TorchrunStartsTheTrainerOnTwoProcesses) {
  const std::string torchrun = testing::torchrun_path();
  if (torchrun.empty()) GTEST_SKIP() << "no Python with torch configured";
  TempDir dir;
  auto result = run("OMP_NUM_THREADS=1 " + torchrun + " --nproc_per_node 2 --master_port " +
                    std::to_string(testing::free_port()) + " --no-python " + kTrainer + " train " +
                    kConfigs + "/fashion_mnist.json --output_dir " + dir.path() +
                    " --max_train_samples 1000 --max_eval_samples 500");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(testing::count(result.out, "***** Running training *****"), 1u) << result.out;
  EXPECT_NE(result.out.find("  Total train batch size (w. parallel, distributed & accumulation) = "
                            "128\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("  Total optimization steps = 8\n"), std::string::npos);
  EXPECT_EQ(json::parse(slurp(dir.file("trainer_state.json")))["global_step"], 8);
}

TEST(TrainerCli, Bf16TrainsOnCpu) {
  TempDir dir;
  auto result = run(kTrainer + " train " + kConfigs + "/fashion_mnist_lr1e-3.json --output_dir " +
                    dir.path() + " --max_train_samples 2000 --max_eval_samples 1000 --bf16 true " +
                    "--logging_steps 8");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json state = json::parse(slurp(dir.file("trainer_state.json")));
  std::vector<double> losses;
  double accuracy = 0;
  for (const auto& entry : state["log_history"]) {
    if (entry.contains("loss")) losses.push_back(entry["loss"].get<double>());
    if (entry.contains("eval_accuracy")) accuracy = entry["eval_accuracy"].get<double>();
  }
  ASSERT_EQ(losses.size(), 4u);  // steps 8, 16, 24, 32
  EXPECT_LT(losses.back(), losses.front() * 0.7);
  EXPECT_GT(accuracy, 0.6);
  EXPECT_EQ(json::parse(slurp(dir.file("training_args.json")))["bf16"], true);
}

// do_predict: after training, the eval split's outputs and metrics as `trainer predict` writes
// them (and no evaluation: do_eval false, eval_strategy no); eval_do_concat_batches false writes
// a file per batch; prediction_loss_only only the metrics.
TEST(TrainerCli, DoPredictWritesWhatPredictWritesAfterTraining) {
  TempDir dir;
  testing::write_mnist_dir(dir.file("data"), 64, 20, false);
  const std::string out = dir.file("run");
  const std::string common = " --dataset_dir " + dir.file("data") + " --output_dir " + out +
                             " --per_device_eval_batch_size 8";
  auto trained = run(kTrainer + " train" + common + " --max_steps 2 --do_predict true");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.out.find("***** predict metrics *****\n"), std::string::npos) << trained.out;
  const json metrics = json::parse(slurp(out + "/predict_results.json"));
  EXPECT_EQ(metrics["predict_samples"], 20);
  EXPECT_TRUE(metrics.contains("test_loss"));
  EXPECT_TRUE(metrics.contains("test_accuracy"));
  EXPECT_FALSE(std::filesystem::exists(out + "/eval_results.json"));
  const std::string predictions = slurp(out + "/predictions.npy");
  const std::string labels = slurp(out + "/label_ids.npy");
  ASSERT_FALSE(predictions.empty());
  // `trainer predict` of the saved model: the same outputs, labels and loss.
  auto predicted = run(kTrainer + " predict" + common);
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  EXPECT_EQ(slurp(out + "/predictions.npy"), predictions);
  EXPECT_EQ(slurp(out + "/label_ids.npy"), labels);
  EXPECT_EQ(json::parse(slurp(out + "/predict_results.json"))["test_loss"], metrics["test_loss"]);
  // A file per batch of 8: 8, 8 and 4 rows, the same outputs.
  auto apart = run(kTrainer + " predict" + common + " --eval_do_concat_batches false");
  ASSERT_EQ(apart.exit_code, 0) << apart.err;
  const std::string script =
      "import numpy as np, sys; d = sys.argv[1]; "
      "p = [np.load(f'{d}/predictions_{k}.npy') for k in range(3)]; "
      "print([len(x) for x in p], np.array_equal(np.concatenate(p), np.load(d + "
      "'/predictions.npy')))";
  auto check = run(std::string(TRAINER_PYTHON) + " -c \"" + script + "\" " + out);
  EXPECT_EQ(check.out, "[8, 8, 4] True\n") << check.err;
  // prediction_loss_only: the loss, no outputs.
  std::filesystem::remove(out + "/predictions.npy");
  auto loss_only = run(kTrainer + " predict" + common + " --prediction_loss_only true");
  ASSERT_EQ(loss_only.exit_code, 0) << loss_only.err;
  const json only = json::parse(slurp(out + "/predict_results.json"));
  EXPECT_EQ(only["test_loss"], metrics["test_loss"]);
  EXPECT_FALSE(only.contains("test_accuracy"));
  EXPECT_FALSE(std::filesystem::exists(out + "/predictions.npy"));
}

// Runs the trainer expecting exit code 2 and exactly `message` as the one line on stderr.
void expect_input_error(const std::string& arguments, const std::string& message) {
  auto result = run(kTrainer + " " + arguments);
  EXPECT_EQ(result.exit_code, 2) << arguments;
  EXPECT_EQ(result.err, "trainer: error: " + message + "\n") << arguments;
}

TEST(TrainerCli, ArgumentErrorsAreOneLineAndExitTwo) {
  expect_input_error("train --lerning_rate 0.1",
                     "unknown argument --lerning_rate (did you mean --learning_rate?)");
  expect_input_error(
      "train --per_device_train_batch_size 0",
      "argument per_device_train_batch_size: 0 is not allowed (must be in 1..2147483647)");
  expect_input_error(
      "train --learning_rate -1",
      "argument learning_rate: -1.0 is not allowed (must be in 0..3.4e38, float32's range)");
  expect_input_error(
      "train --lr_scheduler_type step",
      "argument lr_scheduler_type: \"step\" is not allowed (allowed: linear, cosine, "
      "cosine_with_restarts, polynomial, constant, constant_with_warmup, inverse_sqrt, "
      "reduce_lr_on_plateau, cosine_with_min_lr, cosine_warmup_with_min_lr, warmup_stable_decay)");
  expect_input_error("train --deepspeed /nonexistent/ds.json",
                     "argument deepspeed: cannot open DeepSpeed config /nonexistent/ds.json: No "
                     "such file or directory");
  expect_input_error("train /nonexistent/config.json",
                     "cannot open /nonexistent/config.json: No such file or directory");
}

TEST(TrainerCli, UnsupportedTransformersKeyInConfig) {
  TempDir dir;
  std::ofstream(dir.file("c.json")) << R"({"torch_compile": true})";
  expect_input_error("train " + dir.file("c.json"),
                     "argument torch_compile: true is not supported: torch.compile is Python's "
                     "(TorchDynamo); the C++ kernels here run as they are; accepted only as false");
  std::ofstream(dir.file("d.json")) << R"({"no_cuda": true})";
  expect_input_error("train " + dir.file("d.json"),
                     "argument no_cuda: Transformers' TrainingArguments no longer has it (removed "
                     "before 5.x); use use_cpu");
}

TEST(TrainerCli, BadDataIsOneLineAndKeepsWhatWasSaved) {
  TempDir dir;
  std::ofstream(dir.file("keep.txt")) << "earlier results";
  expect_input_error(
      "train --output_dir " + dir.path() + " --overwrite_output_dir --dataset_dir /nonexistent",
      "dataset directory /nonexistent does not exist (set dataset_dir to a directory with the "
      "MNIST-format files; Fashion-MNIST: apt-get install dataset-fashion-mnist)");
  testing::write_mnist_dir(dir.file("data"), 10, 10, true);
  testing::write_idx(dir.file("data/train-images-idx3-ubyte.gz"), {10, 28, 28},
                     std::vector<uint8_t>(100), true);
  expect_input_error("train --output_dir " + dir.path() +
                         " --overwrite_output_dir true --dataset_dir " + dir.file("data"),
                     "truncated IDX file " + dir.file("data/train-images-idx3-ubyte.gz") +
                         ": header promises 7840 bytes of data, found 100");
  EXPECT_EQ(slurp(dir.file("keep.txt")), "earlier results");
  EXPECT_FALSE(std::ifstream(dir.file("training_args.json")).good());
  expect_input_error("evaluate --output_dir " + dir.path(),
                     dir.file("model.safetensors") +
                         " does not exist (train first, or set output_dir to a trained run)");
}

TEST(TrainerCli, Fp16OnCpuIsOneLineAndWritesNothing) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  TempDir dir;
  expect_input_error("train --fp16 true --output_dir " + dir.path(),
                     "mixed precision fp16 is not supported on CPU (it needs a CUDA device; bf16 "
                     "works on CPU)");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(TrainerCli, AnInterruptedRunLeavesTheEarlierRunsArguments) {
  TempDir dir;
  std::ofstream(dir.file("training_args.json")) << "earlier run";
  std::string out = dir.file("out.txt");
  auto result = run(kTrainer + " train --output_dir " + dir.path() +
                    " --overwrite_output_dir --max_steps 100000 --disable_tqdm true >" + out +
                    " & pid=$!; for i in $(seq 300); do grep -qs 'Running training' " + out +
                    " && break; sleep 0.1; done; kill -TERM $pid; wait $pid; echo code=$?");
  EXPECT_NE(result.out.find("code=143"), std::string::npos) << result.out << result.err;
  EXPECT_EQ(slurp(dir.file("training_args.json")), "earlier run");
}

TEST(TrainerCli, ARankThatCannotReachItsMasterSaysSoInOneLine) {
  int port = testing::free_port();
  auto result =
      run("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
          kTrainer + " train --max_train_samples 100 --ddp_timeout 2 --output_dir /nonexistent/x");
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.err, fmt::format("trainer: error: rank 1 could not join the rendezvous at "
                                    "127.0.0.1:{0} within 2 s: The client socket has timed out "
                                    "after 2000ms while trying to connect to (127.0.0.1, {0}).\n",
                                    port));
}

// trainer env: the versions a bug report needs, LibTorch's among them, on stdout, exit 0; an
// argument after it is refused.
TEST(TrainerCli, EnvNamesLibTorchsVersionAndTheDevices) {
  auto result = run(kTrainer + " env");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err, "");
  const std::string libtorch = std::string("- LibTorch version: ") + TORCH_VERSION + "\n";
  // The compiler that built the tests built the program (GCC here, clang in the sanitizer build).
#ifdef __clang__
  const std::string compiler = "- Compiler: Clang ";
#else
  const std::string compiler = "- Compiler: GCC ";
#endif
  for (const std::string& text :
       {std::string("- `trainer` version: "), libtorch, compiler,
        std::string("- LibTorch built with CUDA: "), std::string("; NCCL: 2."),
        std::string("Gloo: yes"), std::string("- BLAS: Intel MKL "), std::string("- oneDNN: v"),
        std::string("- Threads: ")}) {
    EXPECT_NE(result.out.find(text), std::string::npos) << "lacks " << text << "\n" << result.out;
  }
  const std::string cuda =
      torch::cuda::is_available() ? "- CUDA available: yes; GPUs: " : "- CUDA available: no";
  EXPECT_NE(result.out.find(cuda), std::string::npos) << result.out;
  auto extra = run(kTrainer + " env --verbose");
  EXPECT_EQ(extra.exit_code, 2);
  EXPECT_NE(extra.err.find("--verbose"), std::string::npos) << extra.err;
}

TEST(TrainerCli, HelpListsEveryArgumentWithItsDefault) {
  auto top = run(kTrainer + " --help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* text : {"train", "evaluate", "launch", "trainer launch [--nproc-per-node N"}) {
    EXPECT_NE(top.out.find(text), std::string::npos) << top.out;
  }
  auto launch = run(kTrainer + " launch --help");
  EXPECT_EQ(launch.exit_code, 0);
  EXPECT_NE(launch.out.find("--grace-period SECONDS=5.0"), std::string::npos) << launch.out;
  EXPECT_NE(launch.out.find("--max-restarts,--max_restarts INT=0"), std::string::npos)
      << launch.out;
  EXPECT_EQ(launch.out.find("--learning_rate"), std::string::npos) << launch.out;
  for (const char* command : {" train --help", " evaluate --help"}) {
    auto result = run(kTrainer + command);
    EXPECT_EQ(result.exit_code, 0);
    for (const char* text : {"--learning_rate", "5e-05", "--per_device_train_batch_size",
                             "--max_train_samples", "--eval_strategy", "\"linear\""}) {
      EXPECT_NE(result.out.find(text), std::string::npos) << command << " lacks " << text << "\n"
                                                          << result.out;
    }
  }
}

}  // namespace trainer_cli_test
}  // namespace trainer
