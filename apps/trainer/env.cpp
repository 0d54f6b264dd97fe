// `trainer env`: the versions and devices a bug report needs, as `accelerate env` and
// `transformers env` print them.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <sys/utsname.h>

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "apps/trainer/commands.h"

// NCCL's version as LibTorch's CUDA library reports it: major << 32 | minor << 16 | patch
// (declared in torch/csrc/cuda/nccl.h, which would pull the CUDA headers into this file).
namespace torch::cuda::nccl {
std::uint64_t version();
}

namespace trainer::cli {
namespace {

// The value after `key` in LibTorch's build description (at::show_config()), up to a comma or
// the end of the line; "" when absent.
std::string config_value(const std::string& config, const std::string& key) {
  size_t at = config.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  size_t end = config.find_first_of(",\n", at);
  return config.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

int env_command() {
  const std::string config = at::show_config();
  utsname host{};
  uname(&host);
  std::string distro;
  std::ifstream release("/etc/os-release");
  for (std::string line; std::getline(release, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) distro = line.substr(12);
  }
  distro.erase(std::remove(distro.begin(), distro.end(), '"'), distro.end());
  std::string cpu;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; cpu.empty() && std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) cpu = line.substr(line.find(':') + 2);
  }
  const auto& cuda = at::detail::getCUDAHooks();
  const bool has_cuda = torch::cuda::is_available();
  const long cudnn = cuda.versionCuDNN();
  const uint64_t nccl = torch::cuda::nccl::version();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  fmt::print("Copy-and-paste the text below in your GitHub issue\n\n");
  fmt::print("- `trainer` version: {}\n", TRAINER_VERSION);
  fmt::print("- Platform: {} {} {}{}\n", host.sysname, host.release, host.machine,
             distro.empty() ? "" : " (" + distro + ")");
  fmt::print("- Compiler: {}\n",
#if defined(__clang__)
             "Clang " __clang_version__
#elif defined(__GNUC__)
             "GCC " __VERSION__
#else
             "unknown"
#endif
  );
  fmt::print("- LibTorch version: {}\n", TORCH_VERSION);
  const std::string built_cuda = config_value(config, "CUDA_VERSION=");
  const std::string built_cudnn = config_value(config, "CUDNN_VERSION=");
  fmt::print(
      "- LibTorch built with CUDA: {}; cuDNN: {}; NCCL: {}; Gloo: {}\n",
      built_cuda.empty() ? "no" : built_cuda,
      cudnn > 0             ? fmt::format("{}.{}.{}", cudnn / 10000, cudnn / 100 % 100, cudnn % 100)
      : built_cudnn.empty() ? "no"
                            : built_cudnn,
      nccl > 0 ? fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff) : "no",
      config_value(config, "USE_GLOO=") == "ON" ? "yes" : "no");
  if (has_cuda) {
    const long runtime = cuda.versionCUDART();
    fmt::print("- CUDA available: yes; GPUs: {} (cuda:0 to cuda:{}); CUDA runtime {}.{}\n",
               torch::cuda::device_count(), torch::cuda::device_count() - 1, runtime / 1000,
               runtime / 10 % 100);
  } else {
    fmt::print("- CUDA available: no (training runs on the CPU)\n");
  }
  fmt::print("- CPU: {} ({} logical CPUs)\n", cpu.empty() ? "unknown" : cpu,
             std::thread::hardware_concurrency());
  fmt::print("- Threads: {} intra-op (OMP_NUM_THREADS={}), {} inter-op\n", at::get_num_threads(),
             omp ? omp : "unset", at::get_num_interop_threads());
  fmt::print("- BLAS: {}\n",
             at::hasMKL() ? "Intel MKL " + config_value(config, "Math Kernel Library Version ")
                          : "not MKL");
  fmt::print("- oneDNN: {}\n", at::hasMKLDNN() ? config_value(config, "MKL-DNN ") : "no");
  fmt::print("- CPU capability: {}\n", config_value(config, "CPU capability usage: "));
  return 0;
}

}  // namespace trainer::cli
