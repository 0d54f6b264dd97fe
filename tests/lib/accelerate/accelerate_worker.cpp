// A program the Accelerator and multi-process Trainer tests start as real ranks (under
// `trainer launch`, or through trainer::launch from inside it):
//   accelerate_worker collectives        gather, pad_across_processes, reduce and
//                                        gather_for_metrics over a prepared loader; main prints
//   accelerate_worker trainer --batch B [--accumulation A] --out DIR
//                                        the Trainer on 512 synthetic examples with a float64
//                                        model without dropout; main writes DIR/model.safetensors
//                                        and DIR/trainer_state.json
//   accelerate_worker evaluate [--examples N] [--batch B]
//                                        Trainer::evaluate of a fixed model; main prints the
//                                        metrics with every digit
//   accelerate_worker launch-fail --processes N --pid-dir DIR
//                                        trainer::launch of N ranks in which rank 1 throws while
//                                        the others wait for it at a barrier
//   accelerate_worker launch-ok --processes N
//                                        trainer::launch of N ranks that each print their place
//   accelerate_worker resume-count --batch B --out DIR --seen FILE [--stop-at K] [--resume]
//                                        the Trainer for one epoch of 512 synthetic examples, each
//                                        example it reads appended to FILE.<rank>; --stop-at
//                                        raises SIGTERM at step K (the Trainer saves and stops),
//                                        --resume continues from the newest checkpoint
//   accelerate_worker elastic --out DIR --seen PREFIX [--batch B] [--epochs E] [--save-steps K]
//                             [--step-ms MS]
//                                        resume-count's Trainer for E epochs under an elastic
//                                        launch: PREFIX.<round>.<rank> gets "step N" before each
//                                        step's examples; resumes by itself in rounds after the
//                                        first; each step lasts at least MS; saves DIR's model
//   accelerate_worker pss --shared 0|1 [--cache-dir DIR]
//                                        every rank loads Fashion-MNIST's training split (mapped
//                                        from the shared cache, or decoded privately) and reads
//                                        it whole; main prints the PSS the ranks hold
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <torch/torch.h>
#include <unistd.h>

#include "lib/accelerate/accelerator.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/data/dataloader.h"
#include "lib/data/mnist.h"
#include "lib/models/models.h"
#include "lib/runtime/signals.h"
#include "tests/worker_flags.h"
#include "trainer/trainer.h"

using namespace trainer;

namespace {

using testing::flag;

std::string tensor_text(const torch::Tensor& t) {
  torch::Tensor flat = t.to(torch::kDouble).flatten().contiguous();
  std::string out;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    out += (i ? " " : "") + base::python_float(flat[i].item<double>());
  }
  return out;
}

// A model without dropout, by default in float64 so that runs with different batch splits can
// be compared to rounding (float32 differences would be amplified by Adam).
class TinyNet : public models::Model {
 public:
  explicit TinyNet(torch::Dtype dtype = torch::kDouble) : dtype_(dtype) {
    fc1 = register_module("fc1", torch::nn::Linear(784, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 10));
    to(dtype_);
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    return torch::log_softmax(fc2->forward(torch::tanh(fc1->forward(x.flatten(1).to(dtype_)))), 1);
  }
  torch::Tensor loss(const torch::Tensor& outputs, const torch::Tensor& labels,
                     const torch::Tensor& = {}) override {
    return torch::nll_loss(outputs, labels);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::Dtype dtype_;
};

std::shared_ptr<data::MnistDataset> synthetic(int64_t n, int seed) {
  torch::manual_seed(seed);
  return std::make_shared<data::MnistDataset>(torch::randint(0, 256, {n, 28, 28}).to(torch::kUInt8),
                                              torch::randint(0, 10, {n}));
}

int collectives() {
  Accelerator accelerator;
  const int rank = accelerator.process_index();
  // Rank r holds r + 1 rows of [r, r, r].
  torch::Tensor mine = torch::full({rank + 1, 3}, static_cast<double>(rank));
  torch::Tensor gathered = accelerator.gather(mine);
  torch::Tensor padded = accelerator.pad_across_processes(mine, 0, -1);
  torch::Tensor front = accelerator.pad_across_processes(mine, 0, -1, /*pad_first=*/true);
  torch::Tensor sum = accelerator.reduce(torch::tensor({1.0, static_cast<double>(rank)}));
  torch::Tensor mean =
      accelerator.reduce(torch::tensor({static_cast<double>(rank)}), Reduction::kMean);
  // An evaluation of 10 examples at batch 2 on N processes: gather_for_metrics gives 0..9 once.
  auto dataset = std::make_shared<data::MnistDataset>(torch::zeros({10, 28, 28}, torch::kUInt8),
                                                      torch::arange(10));
  auto loader = accelerator.prepare(
      data::DataLoader(dataset, std::make_shared<data::SequentialSampler>(10), {2, false}));
  std::vector<torch::Tensor> seen;
  for (data::Batch batch : *loader)
    seen.push_back(accelerator.gather_for_metrics(batch.at("labels")));
  // A per-batch count (not per example) is gathered whole.
  torch::Tensor count = accelerator.gather_for_metrics(torch::tensor({7}));
  accelerator.print("rows {}", tensor_text(gathered.select(1, 0)));
  accelerator.print("padded {} front {}", tensor_text(padded.select(1, 0)),
                    tensor_text(front.select(1, 0)));
  accelerator.print("sum {} mean {}", tensor_text(sum), tensor_text(mean));
  accelerator.print("batches {} labels {}", loader->size(), tensor_text(torch::cat(seen)));
  accelerator.print("count {}", tensor_text(count));
  try {
    accelerator.gather(torch::zeros({1, rank + 2}));
  } catch (const std::invalid_argument& e) {
    accelerator.print("mismatch: {}", e.what());
  }
  accelerator.wait_for_everyone();
  return 0;
}

int train_with_trainer(int argc, char** argv) {
  std::string out = flag(argc, argv, "--out", "");
  auto args = TrainingArguments()
                  .output_dir(out)
                  .disable_tqdm(true)
                  .learning_rate(1e-2)
                  .num_train_epochs(1)
                  .logging_steps(2)
                  .per_device_train_batch_size(std::stoll(flag(argc, argv, "--batch", "64")))
                  .gradient_accumulation_steps(std::stoll(flag(argc, argv, "--accumulation", "1")));
  auto dataset = synthetic(512, 5);
  torch::manual_seed(11);
  auto model = std::make_shared<TinyNet>();
  Trainer trainer(model, args, dataset);
  trainer.train();
  trainer.save_model();
  trainer.save_state();
  return 0;
}

// A data set that appends the index of every example read to a file: what a run read.
class RecordingDataset : public data::Dataset {
 public:
  RecordingDataset(std::shared_ptr<const data::Dataset> inner, const std::string& path)
      : inner_(std::move(inner)), out_(std::fopen(path.c_str(), "a")) {}
  ~RecordingDataset() override { std::fclose(out_); }
  int64_t size() const override { return inner_->size(); }
  data::Example get(int64_t index) const override {
    std::fprintf(out_, "%lld\n", static_cast<long long>(index));
    std::fflush(out_);
    return inner_->get(index);
  }

 private:
  std::shared_ptr<const data::Dataset> inner_;
  std::FILE* out_;
};

class RaiseAtStep : public TrainerCallback {
 public:
  explicit RaiseAtStep(int64_t step) : step_(step) {}
  void on_step_end(const TrainingArguments&, TrainerState& state, TrainerControl&) override {
    if (state.global_step == step_) ::raise(SIGTERM);
  }

 private:
  int64_t step_;
};

// resume-count's and elastic's arguments: --out, --batch (default `batch`), a fast rate.
TrainingArguments recording_arguments(int argc, char** argv, const char* batch) {
  return TrainingArguments()
      .output_dir(flag(argc, argv, "--out", ""))
      .disable_tqdm(true)
      .learning_rate(1e-2)
      .per_device_train_batch_size(std::stoll(flag(argc, argv, "--batch", batch)));
}

int resume_count(int argc, char** argv) {
  runtime::catch_interrupts("accelerate_worker: ");
  runtime::defer_interrupts();
  auto args = recording_arguments(argc, argv, "64")
                  .num_train_epochs(1)
                  .logging_steps(2)
                  .save_strategy("no");
  bool resume = false;
  for (int i = 2; i < argc; ++i) resume = resume || std::string(argv[i]) == "--resume";
  if (resume) args.resume_from_checkpoint("true");
  Accelerator probe;  // this process's rank, for the file name
  auto dataset = std::make_shared<RecordingDataset>(
      synthetic(512, 5),
      fmt::format("{}.{}", flag(argc, argv, "--seen", ""), probe.process_index()));
  torch::manual_seed(11);
  auto model = std::make_shared<TinyNet>();
  std::vector<std::shared_ptr<TrainerCallback>> callbacks;
  int64_t stop_at = std::stoll(flag(argc, argv, "--stop-at", "0"));
  if (stop_at > 0) callbacks.push_back(std::make_shared<RaiseAtStep>(stop_at));
  Trainer trainer(model, args, dataset, nullptr, data::default_collate, nullptr, callbacks);
  trainer.train();
  trainer.save_model();
  return 0;
}

// Writes "step N" to a file before each step, then sleeps `ms` after it.
class StepMarker : public TrainerCallback {
 public:
  StepMarker(const std::string& path, int ms) : out_(std::fopen(path.c_str(), "a")), ms_(ms) {}
  ~StepMarker() override { std::fclose(out_); }
  void on_step_begin(const TrainingArguments&, TrainerState& state, TrainerControl&) override {
    std::fprintf(out_, "step %lld\n", static_cast<long long>(state.global_step + 1));
    std::fflush(out_);
  }
  void on_step_end(const TrainingArguments&, TrainerState&, TrainerControl&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }

 private:
  std::FILE* out_;
  int ms_;
};

int elastic(int argc, char** argv) {
  runtime::catch_interrupts("accelerate_worker: ");
  runtime::defer_interrupts();
  auto args = recording_arguments(argc, argv, "8")
                  .num_train_epochs(std::stod(flag(argc, argv, "--epochs", "2")))
                  .logging_steps(4)
                  .save_steps(std::stoll(flag(argc, argv, "--save-steps", "2")))
                  .ddp_timeout(30);
  Accelerator probe;  // this process's round and rank, for the file name
  const std::string seen = fmt::format("{}.{}.{}", flag(argc, argv, "--seen", ""),
                                       probe.restart_count(), probe.process_index());
  auto dataset = std::make_shared<RecordingDataset>(synthetic(512, 5), seen);
  torch::manual_seed(11);
  auto model = std::make_shared<TinyNet>();
  std::vector<std::shared_ptr<TrainerCallback>> callbacks = {
      std::make_shared<StepMarker>(seen, std::stoi(flag(argc, argv, "--step-ms", "0")))};
  Trainer trainer(model, args, dataset, nullptr, data::default_collate, nullptr, callbacks);
  trainer.train();
  trainer.save_model();
  return 0;
}

int evaluate(int argc, char** argv) {
  auto args = TrainingArguments().output_dir("unused").per_device_eval_batch_size(
      std::stoll(flag(argc, argv, "--batch", "64")));
  auto dataset = synthetic(std::stoll(flag(argc, argv, "--examples", "1001")), 9);
  torch::manual_seed(11);
  auto model = std::make_shared<TinyNet>(torch::kFloat);
  Trainer trainer(model, args, nullptr, dataset, nullptr, compute_accuracy);
  Metrics metrics = trainer.evaluate();
  trainer.accelerator().print("eval_loss {:.17g} eval_accuracy {:.17g}", metrics.at("eval_loss"),
                              metrics.at("eval_accuracy"));
  return 0;
}

int launch_fail(int argc, char** argv) {
  std::string dir = flag(argc, argv, "--pid-dir", "/tmp");
  launch(
      [&dir] {
        Accelerator accelerator;
        std::ofstream(dir + "/rank." + std::to_string(accelerator.process_index()))
            << ::getpid() << "\n";
        if (accelerator.process_index() == 1) {
          // Once every rank has written its pid (on a loaded machine that can take a while after
          // the rendezvous) and waits at the barrier.
          for (int i = 0; i < 200; ++i) {
            bool all = true;
            for (int r = 0; r < accelerator.num_processes(); ++r)
              all = all && ::access((dir + "/rank." + std::to_string(r)).c_str(), F_OK) == 0;
            if (all) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          throw std::runtime_error("rank one gives up");
        }
        accelerator.wait_for_everyone();  // never passes: rank 1 is gone
      },
      std::stoi(flag(argc, argv, "--processes", "3")));
  return 0;
}

int launch_ok(int argc, char** argv) {
  launch(
      [] {
        Accelerator accelerator;
        torch::Tensor sum = accelerator.reduce(torch::ones({1}));
        std::printf("process %d of %d, %d threads, sum %.0f\n", accelerator.process_index(),
                    accelerator.num_processes(), torch::get_num_threads(), sum.item<double>());
      },
      std::stoi(flag(argc, argv, "--processes", "2")));
  return 0;
}

// In KiB: the pages this process alone maps (Private_Clean and Private_Dirty: its heap, the
// libraries' pages no other rank touched) outside the mappings of `file`, and the proportional set
// size of those mappings. Unlike the whole process' PSS, neither moves with how many other
// processes on the machine map the same libraries.
std::pair<int64_t, int64_t> private_and_file_pss_kib(const std::string& file) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_file = false;
  int64_t own = 0, of_file = 0;
  while (std::getline(smaps, line)) {
    if (line.rfind("Private_Clean:", 0) == 0 || line.rfind("Private_Dirty:", 0) == 0) {
      if (!in_file) own += std::stoll(line.substr(14));
    } else if (line.rfind("Pss:", 0) == 0) {
      if (in_file) of_file += std::stoll(line.substr(4));
    } else if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
               line.find('-') != std::string::npos && line.find(' ') > line.find('-')) {
      in_file = !file.empty() && line.size() >= file.size() &&
                line.compare(line.size() - file.size(), file.size(), file) == 0;
    }
  }
  return {own, of_file};
}

int pss(int argc, char** argv) {
  bool shared = flag(argc, argv, "--shared", "1") == "1";
  std::string cache = flag(argc, argv, "--cache-dir", base::cache_dir());
  Accelerator accelerator;
  auto dataset = accelerator.local_main_process_first([&] {
    return shared ? data::MnistDataset::load_shared(data::kFashionMnistDir, "train", -1, cache,
                                                    accelerator.is_local_main_process())
                  : std::make_shared<data::MnistDataset>(data::kFashionMnistDir, "train");
  });
  // Read every example, as an epoch does.
  volatile int64_t checksum =
      dataset->images().sum().item<int64_t>() + dataset->labels().sum().item<int64_t>();
  (void)checksum;
  accelerator.wait_for_everyone();
  auto [own, of_file] = private_and_file_pss_kib(dataset->cache_file());
  // What the ranks hold between them: each one's private pages, and the file's pages once.
  torch::Tensor mine = torch::tensor({own + of_file, of_file}, torch::kLong);
  torch::Tensor sums = accelerator.reduce(mine);
  int64_t bytes = dataset->images().numel() + dataset->labels().numel() * 8;
  accelerator.print("processes {} dataset_kib {} data_pss_kib {} held_kib {} mapped {}",
                    accelerator.num_processes(), bytes / 1024, sums[1].item<int64_t>(),
                    sums[0].item<int64_t>(), dataset->cache_file().empty() ? 0 : 1);
  accelerator.wait_for_everyone();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "collectives") return collectives();
    if (mode == "trainer") return train_with_trainer(argc, argv);
    if (mode == "evaluate") return evaluate(argc, argv);
    if (mode == "launch-fail") return launch_fail(argc, argv);
    if (mode == "launch-ok") return launch_ok(argc, argv);
    if (mode == "pss") return pss(argc, argv);
    if (mode == "resume-count") return resume_count(argc, argv);
    if (mode == "elastic") return elastic(argc, argv);
    std::fprintf(stderr, "accelerate_worker: unknown mode '%s'\n", mode.c_str());
    return 2;
  } catch (...) {
    return report_error("accelerate_worker: ");
  }
}
