// The default process group: rendezvous through c10d's TCPStore, a Gloo or NCCL backend, and
// collectives that fail with a clear DistError instead of hanging past the timeout.
#include "lib/distributed/process_group.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>

#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <netdb.h>

#include "lib/base/errors.h"
#include "lib/base/text.h"
#include "lib/distributed/c10d.h"
#include "lib/distributed/launcher_network.h"
#include "lib/distributed/shm_all_reduce.h"
#include "lib/runtime/error_text.h"
#include "lib/runtime/torch_logs.h"

namespace trainer::dist {
namespace {

struct State {
  DistEnv env;
  std::string backend;
  std::chrono::milliseconds timeout{0};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

std::mutex g_mutex;
std::unique_ptr<State> g_state;
const DistEnv kSingleProcess;

// Only fatal messages from LibTorch's own logging while it lives, unless the user chose a level
// (TORCH_CPP_LOG_LEVEL). Process-wide: meant for the rendezvous, before training starts.
class QuietC10Logs {
 public:
  QuietC10Logs() : previous_(FLAGS_caffe2_log_level) {
    if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = 3;
  }
  ~QuietC10Logs() { FLAGS_caffe2_log_level = previous_; }
  QuietC10Logs(const QuietC10Logs&) = delete;
  QuietC10Logs& operator=(const QuietC10Logs&) = delete;

 private:
  int previous_;
};

// Runs f (a collective's start or its wait); turns c10d's and gloo's errors into one DistError
// line.
template <typename F>
auto guarded(const char* name, F&& f) -> decltype(f()) {
  std::string cause;
  try {
    return f();
  } catch (const c10::Error& e) {
    cause = runtime::error_line(e);
  } catch (const std::exception& e) {  // gloo's own IoException: "[file:line] message"
    cause = base::first_line(e.what());
    size_t end = cause.find("] ");
    if (cause.rfind('[', 0) == 0 && end != std::string::npos) cause = cause.substr(end + 2);
  }
  throw DistError(fmt::format("{} failed on rank {} of {} (timeout {} s): {}", name,
                              g_state->env.rank, g_state->env.world_size,
                              g_state->timeout.count() / 1000.0, cause));
}

// Starts a collective and waits for it.
void wait_for(const char* name, const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
  guarded(name, [&] { start()->wait(); });
}

c10::intrusive_ptr<c10d::Store> rendezvous(const DistEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = !env.use_agent_store && env.rank == 0;
  options.numWorkers = env.world_size;
  options.waitWorkers = false;
  options.timeout = timeout;
  // c10d's client retries an unknown host name until the timeout: a name that no resolver knows
  // is bad input, said at once (a resolver that is only slow to answer gets the timeout).
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int resolved = ::getaddrinfo(env.master_addr.c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  if (resolved == EAI_NONAME || resolved == EAI_FAIL || resolved == EAI_NODATA) {
    throw InputError(fmt::format("MASTER_ADDR {} is not a known host name or address ({})",
                                 env.master_addr, ::gai_strerror(resolved)));
  }
  c10::intrusive_ptr<c10d::Store> store;
  try {
    // c10d logs each failed connection attempt with a C++ backtrace; the one error line below
    // says what happened.
    QuietC10Logs quiet;
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const c10::Error& e) {
    std::string cause = runtime::error_line(e);
    if (options.isServer && cause.find("EADDRINUSE") != std::string::npos) {
      throw InputError(fmt::format(
          "MASTER_PORT {} is busy on this machine (another run holds it; choose a free port)",
          env.master_port));
    }
    throw DistError(fmt::format("rank {} could not join the rendezvous at {}:{} within {} s: {}",
                                env.rank, env.master_addr, env.master_port,
                                timeout.count() / 1000.0, cause));
  }
  if (env.use_agent_store) {
    store = c10::make_intrusive<c10d::PrefixStore>(
        fmt::format("/worker/attempt_{}", env.restart_count), store);
  }
  return c10::make_intrusive<c10d::PrefixStore>("default_pg/", store);
}

// Where Gloo listens: the interfaces GLOO_SOCKET_IFNAME names (comma-separated, as PyTorch reads
// it); else, when the master is another machine, the address of the interface that reaches it (the
// host name may resolve to 127.0.0.1, which no other node could connect to); else Gloo's default
// (the host name's address, or loopback).
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const DistEnv& env) {
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  const char* names = std::getenv("GLOO_SOCKET_IFNAME");
  if (names && *names) {
    for (const std::string& name : base::comma_list(names)) {
      if (!std::filesystem::exists("/sys/class/net/" + name)) {
        throw InputError(
            fmt::format("GLOO_SOCKET_IFNAME names interface {}, which this machine does not have{}",
                        name, env.world_size > 1 ? fmt::format(" (rank {})", env.rank) : ""));
      }
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
    if (!devices.empty()) return devices;
  }
  if (env.world_size > 1 && !is_loopback(env.master_addr)) {
    const std::string local = local_address_towards(env.master_addr, env.master_port);
    if (!local.empty()) {
      devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
      return devices;
    }
  }
  devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  return devices;
}

c10::intrusive_ptr<c10d::Backend> make_backend(const std::string& backend,
                                               const c10::intrusive_ptr<c10d::Store>& store,
                                               const DistEnv& env,
                                               std::chrono::milliseconds timeout) {
  if (backend == "gloo") {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices = gloo_devices(env);
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
  }
#ifdef USE_C10D_NCCL
  if (backend == "nccl") {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
  }
#endif
  throw InputError(fmt::format("backend \"{}\" is not allowed (allowed: gloo, nccl)", backend));
}

}  // namespace

void init_process_group(const InitOptions& options) {
  runtime::route_torch_logs();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state)
    throw std::logic_error("init_process_group: the default process group is already initialised");
  if (options.backend != "gloo" && options.backend != "nccl") {
    throw InputError(
        fmt::format("backend \"{}\" is not allowed (allowed: gloo, nccl)", options.backend));
  }
  DistEnv env = read_dist_env();
  if (options.world_size > 0) env.world_size = options.world_size;
  if (options.rank >= 0) env.rank = options.rank;
  if (env.rank >= env.world_size) {
    throw InputError(fmt::format("rank {} is not allowed (must be below world_size {})", env.rank,
                                 env.world_size));
  }
  auto state = std::make_unique<State>();
  state->env = env;
  state->backend = options.backend;
  state->timeout = options.timeout;
  state->store = rendezvous(env, options.timeout);
  try {
    auto backend = make_backend(options.backend, state->store, env, options.timeout);
    state->group = c10::make_intrusive<c10d::ProcessGroup>(state->store, env.rank, env.world_size);
    auto type = options.backend == "gloo" ? c10d::ProcessGroup::BackendType::GLOO
                                          : c10d::ProcessGroup::BackendType::NCCL;
    state->group->setBackend(
        options.backend == "gloo" ? c10::DeviceType::CPU : c10::DeviceType::CUDA, type, backend);
    if (options.backend == "gloo") state->group->setBackend(c10::DeviceType::CUDA, type, backend);
    state->group->setDefaultBackend(type);
  } catch (const c10::Error& e) {
    throw DistError(fmt::format(
        "rank {} of {} could not set up the {} process group within {} s: {}", env.rank,
        env.world_size, options.backend, options.timeout.count() / 1000.0, runtime::error_line(e)));
  }
  g_state = std::move(state);
}

void init_process_group(const std::string& backend, int rank, int world_size) {
  InitOptions options;
  options.backend = backend;
  options.rank = rank;
  options.world_size = world_size;
  init_process_group(options);
}

void destroy_process_group() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_state.reset();
}

bool is_initialized() { return g_state != nullptr; }
int get_rank() { return g_state ? g_state->env.rank : 0; }
int get_world_size() { return g_state ? g_state->env.world_size : 1; }
int get_local_rank() { return g_state ? g_state->env.local_rank : 0; }
const DistEnv& environment() { return g_state ? g_state->env : kSingleProcess; }

c10::intrusive_ptr<c10d::ProcessGroup> default_group() {
  if (!g_state)
    throw std::logic_error(
        "the default process group is not initialised (call init_process_group)");
  return g_state->group;
}

std::unique_ptr<SharedMemoryAllReduce> shared_memory_all_reduce() {
  if (!g_state || g_state->backend != "gloo") return nullptr;
  // Each segment its own keys: every rank makes them in the same order.
  static std::atomic<uint64_t> made{0};
  const c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::PrefixStore>(
      fmt::format("shm_all_reduce/{}", made++), g_state->store);
  SharedMemoryAllReduce::Exchange exchange;
  exchange.publish = [store](const std::string& key, const std::string& value) {
    store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  };
  exchange.read = [store](const std::string& key) {
    std::vector<uint8_t> value = store->get(key);  // waits up to the store's timeout
    return std::string(value.begin(), value.end());
  };
  return guarded("the shared-memory all-reduce's setup", [&] {
    return SharedMemoryAllReduce::create(g_state->env.rank, g_state->env.world_size,
                                         g_state->timeout, exchange);
  });
}

void barrier() {
  if (!g_state) return;
  wait_for("barrier", [] { return g_state->group->barrier(); });
}

void all_reduce(torch::Tensor& tensor, ReduceOp op) {
  if (!g_state) return;
  c10d::AllreduceOptions options;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // Gloo has no AVG: sum, then divide
      options.reduceOp = c10d::ReduceOp::SUM;
      break;
    case ReduceOp::kMax:
      options.reduceOp = c10d::ReduceOp::MAX;
      break;
    case ReduceOp::kMin:
      options.reduceOp = c10d::ReduceOp::MIN;
      break;
  }
  std::vector<torch::Tensor> tensors = {tensor};
  wait_for("all_reduce", [&] { return g_state->group->allreduce(tensors, options); });
  if (op == ReduceOp::kAvg) tensor.div_(g_state->env.world_size);
}

void broadcast(torch::Tensor& tensor, int src) {
  if (!g_state) return;
  c10d::BroadcastOptions options;
  options.rootRank = src;
  std::vector<torch::Tensor> tensors = {tensor};
  wait_for("broadcast", [&] { return g_state->group->broadcast(tensors, options); });
}

std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor) {
  if (!g_state) return {tensor.clone()};
  std::vector<std::vector<torch::Tensor>> outputs(1);
  for (int r = 0; r < g_state->env.world_size; ++r) outputs[0].push_back(torch::empty_like(tensor));
  std::vector<torch::Tensor> inputs = {tensor};
  wait_for("all_gather", [&] { return g_state->group->allgather(outputs, inputs); });
  return outputs[0];
}

Pending all_gather_into_tensor_async(torch::Tensor output, torch::Tensor input) {
  if (!g_state) {
    output.copy_(input);
    return Pending();
  }
  c10::intrusive_ptr<c10d::Work> work = guarded(
      "all_gather_into_tensor", [&] { return g_state->group->_allgather_base(output, input); });
  // The tensors stay alive until the wait.
  return Pending(
      [work, output, input] { guarded("all_gather_into_tensor", [&] { work->wait(); }); });
}

void all_gather_into_tensor(torch::Tensor output, torch::Tensor input) {
  all_gather_into_tensor_async(std::move(output), std::move(input)).wait();
}

void reduce_scatter_tensor(torch::Tensor output, torch::Tensor input) {
  if (!g_state) {
    output.copy_(input);
    return;
  }
  c10d::ReduceScatterOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  wait_for("reduce_scatter_tensor",
           [&] { return g_state->group->_reduce_scatter_base(output, input, options); });
}

std::vector<torch::Tensor> gather(const torch::Tensor& input, int dst) {
  if (!g_state) return {input.clone()};
  std::vector<std::vector<torch::Tensor>> outputs;
  if (g_state->env.rank == dst) {
    outputs.emplace_back();
    for (int r = 0; r < g_state->env.world_size; ++r)
      outputs[0].push_back(torch::empty_like(input));
  }
  std::vector<torch::Tensor> inputs = {input};
  c10d::GatherOptions options;
  options.rootRank = dst;
  wait_for("gather", [&] { return g_state->group->gather(outputs, inputs, options); });
  return outputs.empty() ? std::vector<torch::Tensor>{} : outputs[0];
}

}  // namespace trainer::dist
