// Helpers shared by the tests: temporary directories, writing IDX files, and running a program
// to capture its exit code, stdout and stderr.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "lib/base/errors.h"

namespace trainer::testing {

// Where this build's tests find the sources, the build folder, Python and the programs
// (test_paths.cpp, made by tests/CMakeLists.txt): SOURCE_DIR, BINARY_DIR, TRAINER_PYTHON and the
// *_BIN names call these.
namespace paths {
const std::string& source_dir();
const std::string& binary_dir();
const std::string& python();
const std::string& trainer_bin();
const std::string& ddp_worker_bin();
const std::string& ddp_basic_bin();
const std::string& accelerate_worker_bin();
const std::string& accelerate_basic_bin();
const std::string& custom_loss_bin();
const std::string& grpo_worker_bin();
}  // namespace paths

// The programs under test, built beside the tests (paths from CMake).
inline const std::string kTrainerBin = TRAINER_BIN;
inline const std::string kWorkerBin = DDP_WORKER_BIN;
inline const std::string kDdpBasicBin = DDP_BASIC_BIN;
inline const std::string kAccelerateWorkerBin = ACCELERATE_WORKER_BIN;
inline const std::string kAccelerateBasicBin = ACCELERATE_BASIC_BIN;
inline const std::string kCustomLossBin = CUSTOM_LOSS_BIN;
inline const std::string kGrpoWorkerBin = GRPO_WORKER_BIN;

// A fresh empty directory under the system's temp directory, removed by the destructor (which
// first checks what start() wrote into it, as run() checks what it captures: see
// libtorch_text).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes an IDX file of unsigned bytes with the given dims; gzip-compressed when `gzip`.
// `data` may deliberately disagree with `dims` to make corrupt files.
void write_idx(const std::string& path, const std::vector<uint32_t>& dims,
               const std::vector<uint8_t>& data, bool gzip = false, uint8_t type = 0x08);

// Writes the four MNIST files (train and t10k) of `train_n` / `test_n` random images to `dir`.
void write_mnist_dir(const std::string& dir, uint32_t train_n, uint32_t test_n, bool gzip);

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The first line of `output` that is LibTorch's own text rather than ours (a c10 log line such as
// "[W1203 05:01:35.123456 42 TCPStore.cpp:125] ...", possibly behind a launcher's "[rankN]: ",
// a C++ backtrace's "Exception raised from ..." or "frame #3: ...", libgomp's or OpenMP's
// complaints), or "" when there is none.
std::string libtorch_text(const std::string& output);

// Runs `command` through /bin/sh, capturing stdout and stderr. When the command runs one of our
// programs (and neither Python nor TORCH_CPP_LOG_LEVEL is part of it), LibTorch's own text in
// what it printed is a test failure naming the line.
ProcessResult run(const std::string& command);
// Transformers loading the model folder `dir` (AutoModelForCausalLM) and running three tokens
// through it: its output ends in "True" when the logits are finite.
ProcessResult transformers_loads(const std::string& dir);
// Transformers loading the classifier folder `dir` (AutoModelForSequenceClassification) and
// scoring the tokens 1, 2, 3: its output's last line is the logits as a JSON list of one row.
ProcessResult transformers_classifies(const std::string& dir);

// `argv` as a command line for run(): its words, each followed by a space (none may need quotes).
std::string command_line(const std::vector<std::string>& argv);

// `trainer train --dataset_dir DATA --output_dir OUT ARGUMENTS...` as argv for start().
std::vector<std::string> train_argv(const std::string& dataset_dir, const std::string& output_dir,
                                    const std::vector<std::string>& arguments);

// A TCP port that was free a moment ago (the kernel's choice for port 0).
int free_port();

// `trainer launch --master-port <a free port> ARGS`, as a command line for run().
std::string launch(const std::string& args);

// Holds a listening TCP socket on a free port for its lifetime.
class PortHolder {
 public:
  PortHolder();
  ~PortHolder();
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// True while `pid` runs: a zombie (dead, not yet reaped by whoever adopted it) counts as gone.
// Gives the kernel up to a second to finish delivering a SIGKILL.
bool alive(int pid);

// Seconds since some fixed point, for timing what a test waits for.
double now_seconds();

// Starts `argv` with stdout and stderr into files and SIGINT/SIGTERM at their defaults (a shell
// would start a background job with SIGINT ignored, which the trainer respects, as Python does).
// Returns the pid, or -1. The files, when they lie in a TempDir, are checked for LibTorch's own
// text as run() checks its output, once the TempDir goes.
int start(const std::vector<std::string>& argv, const std::string& out, const std::string& err);

// Reads a whole file into a string ("" when missing).
std::string slurp(const std::string& path);

// The lines of `text`, without their newlines.
std::vector<std::string> lines_of(const std::string& text);

// The first group of each match of `pattern` (ECMAScript) in `text`, in order.
std::vector<std::string> matches(const std::string& text, const std::string& pattern);

// The InputError message of `f` ("" when it throws none).
template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Expects `f` to throw InputError whose message contains every one of `parts`.
template <typename F>
void expect_input_error(F&& f, const std::vector<std::string>& parts) {
  const std::string message = input_error_of(f);
  if (message.empty()) ADD_FAILURE() << "no InputError";
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << message << "\n(expected: " << part << ")";
  }
}

// How many times `part` occurs in `text` (overlapping occurrences counted).
size_t count(const std::string& text, const std::string& part);

// Whether TRAINER_PYTHON is set and imports `module` (asked once per process and module).
bool python_has(const std::string& module);

// python_has("torch"), asked once (the PyTorch cross-checks skip without it).
bool python_has_torch();

// torchrun beside TRAINER_PYTHON ("" without it).
std::string torchrun_path();

// The folder of the Python side's result NAME (a line of tests/reference/references): the
// committed tests/reference/results/NAME while its key holds, else (a script edited, a pinned
// version moved) the one `scripts/reference path NAME` makes with TRAINER_PYTHON in the reference
// cache ($TRAINER_CACHE/reference), once for every process and clone. "" after a test failure
// with scripts/reference's output when it cannot be made. Asked once per process and name.
std::string reference_dir(const std::string& name);

// The bytes of a gzip file (a committed reference kept small), "" with a test failure when it
// cannot be read.
std::string gunzip_file(const std::string& path);

// reference_dir of the fixtures: "hf_fixtures" (hf_fixtures.py: tiny GPT-2, Llama, Qwen2/3,
// Mistral and Gemma 3 folders, the fortunes BPE in GPT-2's and Llama-3's layouts, reference
// logits), "peft_fixtures" (peft_reference.py: PEFT's LoRA adapters on those, their merged
// models, the reference logits, print_trainable_parameters' lines) and "sft_fixtures"
// (sft_fixtures.py: tiny Qwen3 and Llama folders with TRL's chat templates, the data sets under
// data/).
std::string hf_fixtures_dir();
std::string peft_fixtures_dir();
std::string sft_fixtures_dir();

// The TorchScript file tests/reference/scripts/script_basicnet.py writes for `model` ("basic_net",
// "mlp", "mlp_bn", "own_loss") with `classes` and `features` (an MLP's; those of the results
// "torchscript" and "torchscript_basic_net" of tests/reference/references).
std::string torchscript_file(const std::string& model, int classes = 3, int features = 4);

// The blocks of `id_lines` (a tokenizer's ids for a corpus, a line of space-separated numbers per
// line of text, as `trainer tokenize` prints them) whose hash differs from the committed one of
// tokenize_corpus.py's case `name` (the `tokenizers` library's ids, kept as a hash a block of
// lines): each its first and past-the-end line. A line count that differs is one difference over
// every line.
std::vector<std::pair<size_t, size_t>> differing_id_blocks(
    const std::string& name, const std::vector<std::string>& id_lines);

// `bytes` of fresh anonymous memory, every page written (mmap: no allocator keeps it after unmap(),
// with or without a sanitizer's), then 20 ms for a sampling thread to see it; unmapped when it goes
// or at unmap().
struct TouchedMemory {
  explicit TouchedMemory(int64_t bytes);
  ~TouchedMemory() { unmap(); }
  TouchedMemory(const TouchedMemory&) = delete;
  TouchedMemory& operator=(const TouchedMemory&) = delete;
  void unmap();
  size_t size;
  void* data = nullptr;
};

}  // namespace trainer::testing
