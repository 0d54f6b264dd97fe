// The distributed environment: torchrun's variables, SLURM's and Open MPI's, and bad values.
#include "lib/distributed/env.h"

#include <map>

#include <gtest/gtest.h>

#include "lib/base/errors.h"

namespace trainer::dist {
namespace dist_env_test {

DistEnv read(const std::map<std::string, std::string>& vars) {
  return read_dist_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    read(vars);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DistEnv, NothingSetIsOneProcess) {
  DistEnv e = read({});
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.source, "none");
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistEnv, Torchrun) {
  DistEnv e = read({{"RANK", "3"},
                    {"LOCAL_RANK", "1"},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_WORLD_SIZE", "2"},
                    {"MASTER_ADDR", "node0"},
                    {"MASTER_PORT", "1234"},
                    {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                    {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 1234);
  EXPECT_TRUE(e.use_agent_store);
  EXPECT_EQ(e.restart_count, 2);
}

TEST(DistEnv, SlurmAndOpenMpi) {
  DistEnv s = read({{"SLURM_PROCID", "5"},
                    {"SLURM_NTASKS", "8"},
                    {"SLURM_LOCALID", "1"},
                    {"SLURM_NTASKS_PER_NODE", "4(x2)"}});
  EXPECT_EQ(s.source, "slurm");
  EXPECT_EQ(s.rank, 5);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.local_world_size, 4);
  DistEnv m = read({{"OMPI_COMM_WORLD_RANK", "1"},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(m.source, "openmpi");
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.world_size, 2);
  // torchrun's variables win over the others.
  EXPECT_EQ(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}})
                .source,
            "torchrun");
}

TEST(DistEnv, BadValuesNameTheVariable) {
  EXPECT_EQ(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}),
            "environment variable RANK=x is not allowed (an integer from 0 to 1048576)");
  EXPECT_EQ(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
            "environment variable RANK=2 is not allowed (must be below WORLD_SIZE=2)");
  EXPECT_EQ(error_of({{"RANK", "0"}}),
            "environment variable RANK is set but WORLD_SIZE is not (torchrun sets both)");
  EXPECT_EQ(error_of({{"MASTER_PORT", "70000"}}),
            "environment variable MASTER_PORT=70000 is not allowed (an integer from 1 to 65535)");
  // Set but empty is not "unset": RANK="" must not quietly make a rank 0.
  EXPECT_EQ(error_of({{"RANK", ""}, {"WORLD_SIZE", "2"}}),
            "environment variable RANK is set but empty (unset it, or give an integer from 0 to "
            "1048576)");
  EXPECT_EQ(
      error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}}),
      "environment variable MASTER_ADDR is set but empty (the host name or address of rank 0)");
}

}  // namespace dist_env_test
}  // namespace trainer::dist
