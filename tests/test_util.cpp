// Helpers shared by the tests.
#include "tests/test_util.h"

#include "lib/base/sha256.h"
#include "lib/distributed/launcher.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include <chrono>

#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

namespace trainer::testing {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "trainer-test-XXXXXX").string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buffer.data();
}

namespace {

// The files start() wrote a program's output into, until the TempDir holding them goes.
std::mutex g_output_files_mutex;
std::vector<std::string> g_output_files;

// Whether `command` runs one of our programs (not Python, which prints LibTorch's text its own
// way, nor with TORCH_CPP_LOG_LEVEL, which asks for LibTorch's text).
bool runs_our_program(const std::string& command) {
  const std::string python = TRAINER_PYTHON;
  return command.find(std::string(BINARY_DIR) + "/bin/") != std::string::npos &&
         (python.empty() || command.find(python) == std::string::npos) &&
         command.find("torchrun") == std::string::npos &&
         command.find("TORCH_CPP_LOG_LEVEL") == std::string::npos;
}

void expect_no_libtorch_text(const std::string& output, const std::string& what) {
  const std::string line = libtorch_text(output);
  EXPECT_EQ(line, "") << "LibTorch's own text in the output of " << what;
}

}  // namespace

TempDir::~TempDir() {
  {
    std::lock_guard<std::mutex> lock(g_output_files_mutex);
    auto inside = [&](const std::string& file) { return file.rfind(path_ + "/", 0) == 0; };
    for (const auto& file : g_output_files) {
      if (inside(file)) expect_no_libtorch_text(slurp(file), file);
    }
    g_output_files.erase(std::remove_if(g_output_files.begin(), g_output_files.end(), inside),
                         g_output_files.end());
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string libtorch_text(const std::string& output) {
  static const std::regex kLibTorch(
      R"(^(\[rank\d+\]: )?(\[[WEIF]\d{4} \d\d:\d\d:\d\d|frame #\d+: |libgomp: |OMP: ))");
  for (const std::string& line : lines_of(output)) {
    if (std::regex_search(line, kLibTorch) ||
        line.find("Exception raised from ") != std::string::npos) {
      return line;
    }
  }
  return "";
}

void write_idx(const std::string& path, const std::vector<uint32_t>& dims,
               const std::vector<uint8_t>& data, bool gzip, uint8_t type) {
  std::string bytes = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((d >> shift) & 0xff);
  }
  bytes.append(data.begin(), data.end());
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

std::string gunzip_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    ADD_FAILURE() << "cannot open " << path;
    return "";
  }
  std::string bytes;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0) bytes.append(buffer, static_cast<size_t>(n));
  if (n < 0) ADD_FAILURE() << "corrupt gzip file " << path;
  gzclose(f);
  return bytes;
}

void write_mnist_dir(const std::string& dir, uint32_t train_n, uint32_t test_n, bool gzip) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(7);
  auto write_split = [&](const std::string& prefix, uint32_t n) {
    std::vector<uint8_t> images(static_cast<size_t>(n) * 28 * 28), labels(n);
    for (auto& p : images) p = static_cast<uint8_t>(rng() % 256);
    for (auto& l : labels) l = static_cast<uint8_t>(rng() % 10);
    std::string suffix = gzip ? ".gz" : "";
    write_idx(dir + "/" + prefix + "-images-idx3-ubyte" + suffix, {n, 28, 28}, images, gzip);
    write_idx(dir + "/" + prefix + "-labels-idx1-ubyte" + suffix, {n}, labels, gzip, 0x08);
  };
  write_split("train", train_n);
  write_split("t10k", test_n);
}

int free_port() { return dist::free_port(); }

std::string launch(const std::string& args) {
  return kTrainerBin + " launch --master-port " + std::to_string(free_port()) + " " + args;
}

PortHolder::PortHolder() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(fd_, 4);
  socklen_t len = sizeof addr;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
}

PortHolder::~PortHolder() { ::close(fd_); }

bool alive(int pid) {
  for (int i = 0; i < 20; ++i) {
    std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    if (stat.empty() || paren == std::string::npos || stat[paren + 2] == 'Z') return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

ProcessResult transformers_loads(const std::string& dir) {
  return run(std::string(TRAINER_PYTHON) +
             " -c \"import sys, torch; from transformers import AutoModelForCausalLM;"
             " m = AutoModelForCausalLM.from_pretrained(sys.argv[1]);"
             " print(torch.isfinite(m(torch.tensor([[1, 2, 3]])).logits).all().item())\" " +
             dir + " 2>&1");
}

ProcessResult transformers_classifies(const std::string& dir) {
  return run(std::string(TRAINER_PYTHON) +
             " -c \"import json, sys, torch; from transformers import "
             "AutoModelForSequenceClassification as A;"
             " m = A.from_pretrained(sys.argv[1]).eval();"
             " print(json.dumps(m(torch.tensor([[1, 2, 3]])).logits.tolist()))\" " +
             dir + " 2>/dev/null");
}

ProcessResult run(const std::string& command) {
  TempDir dir;
  std::string full =
      "( " + command + "\n) >" + dir.file("out") + " 2>" + dir.file("err") + " </dev/null";
  int status = std::system(full.c_str());
  ProcessResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = slurp(dir.file("out"));
  result.err = slurp(dir.file("err"));
  if (runs_our_program(command)) expect_no_libtorch_text(result.err + result.out, command);
  return result;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string command;
  for (const auto& arg : argv) command += arg + " ";
  return command;
}

std::vector<std::string> train_argv(const std::string& dataset_dir, const std::string& output_dir,
                                    const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {kTrainerBin, "train",        "--dataset_dir",
                                   dataset_dir, "--output_dir", output_dir};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  return argv;
}

int start(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  if (runs_our_program(command_line(argv))) {
    std::lock_guard<std::mutex> lock(g_output_files_mutex);
    g_output_files.push_back(std::filesystem::absolute(out).string());
    g_output_files.push_back(std::filesystem::absolute(err).string());
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int error = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  return error == 0 ? pid : -1;
}

std::vector<std::string> matches(const std::string& text, const std::string& pattern) {
  std::vector<std::string> out;
  std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

bool python_has(const std::string& module) {
  static std::mutex mutex;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(module); it != known.end()) return it->second;
  return known[module] =
             !std::string(TRAINER_PYTHON).empty() &&
             run(std::string(TRAINER_PYTHON) + " -c 'import " + module + "' 2>/dev/null")
                     .exit_code == 0;
}

bool python_has_torch() { return python_has("torch"); }

std::string torchrun_path() {
  const std::string python = TRAINER_PYTHON;
  if (python.empty()) return "";
  return python.substr(0, python.rfind('/')) + "/torchrun";
}

std::string reference_dir(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::string> found;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = found.find(name); it != found.end()) return it->second;
  const auto made = run("TRAINER_PYTHON=" + std::string(TRAINER_PYTHON) + " " + SOURCE_DIR +
                        "/scripts/reference path " + name);
  std::string dir = made.out;
  while (!dir.empty() && dir.back() == '\n') dir.pop_back();
  if (made.exit_code != 0 || dir.empty() || !std::filesystem::is_directory(dir)) {
    ADD_FAILURE() << "scripts/reference path " << name << " failed (exit " << made.exit_code
                  << "):\n"
                  << made.out << made.err;
    return "";
  }
  return found[name] = dir;
}

std::vector<std::pair<size_t, size_t>> differing_id_blocks(
    const std::string& name, const std::vector<std::string>& id_lines) {
  const std::string dir = reference_dir("tokenize_corpus");
  if (dir.empty()) return {{0, id_lines.size()}};
  const auto reference = nlohmann::json::parse(slurp(dir + "/" + name + ".json"));
  const size_t lines = reference["lines"], block = reference["block"];
  if (lines != id_lines.size()) {
    ADD_FAILURE() << name << ": " << id_lines.size() << " lines of ids, where tokenizers gave "
                  << lines;
    return {{0, id_lines.size()}};
  }
  std::vector<std::pair<size_t, size_t>> differing;
  for (size_t begin = 0, i = 0; begin < lines; begin += block, ++i) {
    const size_t end = std::min(lines, begin + block);
    std::string text;
    for (size_t line = begin; line < end; ++line) text += id_lines[line] + "\n";
    if (base::sha256_hex(text).substr(0, 16) != reference["blocks"][i].get<std::string>()) {
      differing.push_back({begin, end});
    }
  }
  return differing;
}

std::string torchscript_file(const std::string& model, int classes, int features) {
  if (model == "basic_net") return reference_dir("torchscript_basic_net") + "/basic_net.pt";
  return reference_dir("torchscript") + "/" + model +
         (classes == 3 ? "" : std::to_string(classes)) +
         (features == 4 ? "" : "f" + std::to_string(features)) + ".pt";
}

std::string hf_fixtures_dir() { return reference_dir("hf_fixtures"); }

std::string peft_fixtures_dir() { return reference_dir("peft_fixtures"); }

std::string sft_fixtures_dir() { return reference_dir("sft_fixtures"); }

TouchedMemory::TouchedMemory(int64_t bytes) : size(static_cast<size_t>(bytes)) {
  data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(data, MAP_FAILED);
  if (data == MAP_FAILED) {
    data = nullptr;
    return;
  }
  volatile char* page = static_cast<char*>(data);
  for (size_t i = 0; i < size; i += 4096) page[i] = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void TouchedMemory::unmap() {
  if (data) ::munmap(data, size);
  data = nullptr;
}

}  // namespace trainer::testing
