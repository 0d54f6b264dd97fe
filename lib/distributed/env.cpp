// Reads torchrun's, SLURM's or Open MPI's environment into a DistEnv.
#include "lib/distributed/env.h"

#include <cstdlib>

#include <fmt/format.h>

#include "lib/base/errors.h"

namespace trainer::dist {
namespace {

int parse_int(const char* name, const char* value, int min, int max) {
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || parsed < min || parsed > max) {
    throw InputError(
        fmt::format("environment variable {}={} is not allowed (an integer from {} to {})", name,
                    value, min, max));
  }
  return static_cast<int>(parsed);
}

}  // namespace

// The variables each kind of launcher sets, in the order they are looked for.
struct Scheme {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};
constexpr Scheme kSchemes[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

DistEnv read_dist_env(const GetEnv& getenv) {
  auto get_int = [&](const char* name, int fallback, int min = 0, int max = 1 << 20) {
    const char* value = getenv(name);
    if (!value) return fallback;
    if (!*value) {
      throw InputError(
          fmt::format("environment variable {} is set but empty (unset it, or give an "
                      "integer from {} to {})",
                      name, min, max));
    }
    // SLURM_NTASKS_PER_NODE may read "2(x3)": the leading count is this node's.
    std::string text = value;
    if (std::string(name) == "SLURM_NTASKS_PER_NODE") text = text.substr(0, text.find('('));
    try {
      return parse_int(name, text.c_str(), min, max);
    } catch (const InputError&) {
      return parse_int(name, value, min, max);  // the message quotes the value as set
    }
  };
  DistEnv env;
  if (getenv("RANK") || getenv("WORLD_SIZE")) {
    if (!getenv("RANK") || !getenv("WORLD_SIZE")) {
      throw InputError(fmt::format(
          "environment variable {} is set but {} is not (torchrun sets both)",
          getenv("RANK") ? "RANK" : "WORLD_SIZE", getenv("RANK") ? "WORLD_SIZE" : "RANK"));
    }
  }
  for (const Scheme& scheme : kSchemes) {
    if (!getenv(scheme.rank) || !getenv(scheme.world_size)) continue;
    env.source = scheme.source;
    env.rank = get_int(scheme.rank, 0);
    env.world_size = get_int(scheme.world_size, 1, 1);
    env.local_rank = get_int(scheme.local_rank, env.source == "torchrun" ? env.rank : 0);
    env.local_world_size = get_int(scheme.local_world_size, env.world_size, 1);
    if (env.rank >= env.world_size) {
      throw InputError(
          fmt::format("environment variable {}={} is not allowed (must be below {}={})",
                      scheme.rank, env.rank, scheme.world_size, env.world_size));
    }
    break;
  }
  if (env.local_rank >= env.local_world_size) {
    throw InputError(
        fmt::format("local rank {} is not allowed (must be below the local world size {})",
                    env.local_rank, env.local_world_size));
  }
  if (const char* addr = getenv("MASTER_ADDR"); addr) {
    if (!*addr && env.world_size > 1) {
      throw InputError(
          "environment variable MASTER_ADDR is set but empty (the host name or address of rank 0)");
    }
    if (*addr) env.master_addr = addr;
  }
  env.master_port = get_int("MASTER_PORT", kDefaultMasterPort, 1, 65535);
  if (const char* agent = getenv("TORCHELASTIC_USE_AGENT_STORE")) {
    env.use_agent_store =
        std::string(agent) == "True" || std::string(agent) == "true" || std::string(agent) == "1";
  }
  env.restart_count = get_int("TORCHELASTIC_RESTART_COUNT", 0);
  env.elastic_world_size = get_int("TRAINER_ELASTIC_WORLD_SIZE", 0);
  return env;
}

}  // namespace trainer::dist
