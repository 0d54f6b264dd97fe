// Where this process stands in a distributed run, read from the launcher's environment:
// torchrun's contract first (RANK, WORLD_SIZE, ...), then SLURM's, then Open MPI's. Torch-free.
#pragma once

#include <functional>
#include <string>

namespace trainer::dist {

inline constexpr int kDefaultMasterPort = 29500;

struct DistEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
  // torchrun hosts the TCPStore itself (TORCHELASTIC_USE_AGENT_STORE=True): every rank joins as
  // a client and keys live under /worker/attempt_<restart_count>.
  bool use_agent_store = false;
  int restart_count = 0;
  // An elastic run (trainer launch --nnodes MIN:MAX): the world size of the most nodes, for which
  // the arguments' batch is meant (TRAINER_ELASTIC_WORLD_SIZE); 0 otherwise.
  int elastic_world_size = 0;
  std::string source = "none";  // "torchrun", "slurm", "openmpi" or "none" (one process)
};

using GetEnv = std::function<const char*(const char*)>;

// Reads the environment (`getenv` is replaceable for tests). Throws InputError naming the
// variable, its value and what is allowed: a non-integer, RANK >= WORLD_SIZE, a port outside
// 1..65535, WORLD_SIZE without RANK.
DistEnv read_dist_env(const GetEnv& getenv = [](const char* name) { return std::getenv(name); });

}  // namespace trainer::dist
