// Reads torchrun's, SLURM's or Open MPI's environment into a DistEnv.
#include "lib/dist/env.h"

#include <cstdlib>

#include <fmt/format.h>

#include "lib/io/errors.h"

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

DistEnv read_dist_env(const GetEnv& getenv) {
  auto get_int = [&](const char* name, int fallback, int min = 0, int max = 1 << 20) {
    const char* value = getenv(name);
    return value && *value ? parse_int(name, value, min, max) : fallback;
  };
  DistEnv env;
  const char* rank_name = nullptr;
  const char* size_name = nullptr;
  if (getenv("RANK") || getenv("WORLD_SIZE")) {
    env.source = "torchrun";
    rank_name = "RANK";
    size_name = "WORLD_SIZE";
    if (!getenv("RANK") || !getenv("WORLD_SIZE")) {
      throw InputError(fmt::format(
          "environment variable {} is set but {} is not (torchrun sets both)",
          getenv("RANK") ? "RANK" : "WORLD_SIZE", getenv("RANK") ? "WORLD_SIZE" : "RANK"));
    }
    env.rank = get_int("RANK", 0);
    env.world_size = get_int("WORLD_SIZE", 1, 1);
    env.local_rank = get_int("LOCAL_RANK", env.rank);
    env.local_world_size = get_int("LOCAL_WORLD_SIZE", env.world_size, 1);
  } else if (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS")) {
    env.source = "slurm";
    rank_name = "SLURM_PROCID";
    size_name = "SLURM_NTASKS";
    env.rank = get_int("SLURM_PROCID", 0);
    env.world_size = get_int("SLURM_NTASKS", 1, 1);
    env.local_rank = get_int("SLURM_LOCALID", 0);
    // SLURM_NTASKS_PER_NODE may read "2(x3)": the leading count is this node's.
    if (const char* per_node = getenv("SLURM_NTASKS_PER_NODE")) {
      env.local_world_size = std::max(1, std::atoi(per_node));
    } else {
      env.local_world_size = env.world_size;
    }
  } else if (getenv("OMPI_COMM_WORLD_RANK") && getenv("OMPI_COMM_WORLD_SIZE")) {
    env.source = "openmpi";
    rank_name = "OMPI_COMM_WORLD_RANK";
    size_name = "OMPI_COMM_WORLD_SIZE";
    env.rank = get_int("OMPI_COMM_WORLD_RANK", 0);
    env.world_size = get_int("OMPI_COMM_WORLD_SIZE", 1, 1);
    env.local_rank = get_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    env.local_world_size = get_int("OMPI_COMM_WORLD_LOCAL_SIZE", env.world_size, 1);
  }
  if (rank_name && env.rank >= env.world_size) {
    throw InputError(fmt::format("environment variable {}={} is not allowed (must be below {}={})",
                                 rank_name, env.rank, size_name, env.world_size));
  }
  if (env.local_rank >= env.local_world_size) {
    throw InputError(
        fmt::format("local rank {} is not allowed (must be below the local world size {})",
                    env.local_rank, env.local_world_size));
  }
  if (const char* addr = getenv("MASTER_ADDR"); addr && *addr) env.master_addr = addr;
  env.master_port = get_int("MASTER_PORT", kDefaultMasterPort, 1, 65535);
  if (const char* agent = getenv("TORCHELASTIC_USE_AGENT_STORE")) {
    env.use_agent_store =
        std::string(agent) == "True" || std::string(agent) == "true" || std::string(agent) == "1";
  }
  env.restart_count = get_int("TORCHELASTIC_RESTART_COUNT", 0);
  return env;
}

}  // namespace trainer::dist
