// Who am I, and how many are we: what the launcher that started this process says. Explicit
// values win; else the first complete set of these, in order:
//   RANK / WORLD_SIZE / LOCAL_RANK        torchrun, env://
//   OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK   Open MPI's mpirun
//   PMI_RANK / PMI_SIZE (MPI_LOCALRANKID)        MPICH / Hydra
//   SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID  srun
// A value that is not a number in range is refused with one line naming the variable.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace roce::coll {

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string source;  // "arguments", "torchrun", "openmpi", "pmi", "slurm"
};

// getenv by default; tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;
EnvLookup process_env();

// Throws Error(kInvalidArgument) when no launcher's variables are set, or one is invalid.
LaunchInfo launch_info(std::optional<int> rank, std::optional<int> size,
                       const EnvLookup& env = process_env());

// The TCP store's address: MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500, as
// torchrun), with the same one-line errors.
struct MasterAddress {
  std::string host;
  uint16_t port = 29500;
};
MasterAddress master_address(const EnvLookup& env = process_env());

}  // namespace roce::coll
