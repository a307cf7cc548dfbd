// Rank and size from the arguments or the launcher's environment, and the TCP store's address.
// Every refusal is one line naming the variable, its value and who sets it, so a user sees at
// once whether the launcher or their own script is wrong.
#include "collectives/launch_env.h"

#include <charconv>
#include <cstdlib>

#include "collectives/error.h"

namespace roce::coll {

namespace {

struct LauncherVars {
  const char* source;  // LaunchInfo::source
  const char* who;     // for the errors: who sets these
  const char* rank;
  const char* size;
  const char* local_rank;
};

constexpr LauncherVars kLaunchers[] = {
    {"torchrun", "torchrun / env://", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "Open MPI's mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"pmi", "MPICH / Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"slurm", "srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, what);
}

// A whole decimal integer: no blanks, no sign but '-', nothing after the digits.
int parse_int(const char* name, const std::string& value, const char* who) {
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec == std::errc::result_out_of_range) {
    refuse(std::string(name) + "='" + value + "': out of range (set by " + who + ")");
  }
  if (ec != std::errc() || ptr != end) {
    refuse(std::string(name) + "='" + value + "': not an integer (set by " + who + ")");
  }
  return out;
}

// A number and how to name it in an error: "RANK=3" (from the environment) or "rank 3".
struct Named {
  int value = 0;
  std::string text;
  const char* who = nullptr;  // the launcher, null for an argument
};

Named from_env(const char* name, const std::string& value, const char* who) {
  int v = parse_int(name, value, who);
  return {v, std::string(name) + "=" + std::to_string(v), who};
}

Named from_argument(const char* what, int v) { return {v, what + (" " + std::to_string(v)), {}}; }

std::string by(const Named& a, const Named& b = {}) {
  const char* who = a.who != nullptr ? a.who : b.who;
  return who != nullptr ? std::string(" (set by ") + who + ")" : "";
}

void check_range(const Named& rank, const Named& size) {
  if (size.value < 1) refuse(size.text + " must be at least 1" + by(size));
  if (rank.value < 0) refuse(rank.text + " must not be negative" + by(rank));
  if (rank.value >= size.value) {
    refuse(rank.text + " is not below " + size.text + by(rank, size));
  }
}

// The first launcher whose rank and size are both set; null if none has either. One with only
// one of the two is a broken launch (or a stray export), refused rather than guessed around.
const LauncherVars* find_launcher(const EnvLookup& env) {
  for (const LauncherVars& l : kLaunchers) {
    bool has_rank = env(l.rank).has_value();
    bool has_size = env(l.size).has_value();
    if (has_rank && has_size) return &l;
    if (has_rank || has_size) {
      const char* set = has_rank ? l.rank : l.size;
      const char* missing = has_rank ? l.size : l.rank;
      refuse(std::string(missing) + " is not set but " + set + "='" + *env(set) + "' is (set by " +
             l.who + "): set both");
    }
  }
  return nullptr;
}

int local_rank_of(const LauncherVars& l, const EnvLookup& env) {
  auto value = env(l.local_rank);
  if (!value) return 0;
  Named local = from_env(l.local_rank, *value, l.who);
  if (local.value < 0) refuse(local.text + " must not be negative" + by(local));
  return local.value;
}

// Both given: the arguments; the local rank is that of the first launcher to give one.
LaunchInfo from_arguments(int rank, int size, const EnvLookup& env) {
  check_range(from_argument("rank", rank), from_argument("size", size));
  LaunchInfo info{rank, size, 0, "arguments"};
  for (const LauncherVars& l : kLaunchers) {
    if (env(l.local_rank)) {
      info.local_rank = local_rank_of(l, env);
      break;
    }
  }
  return info;
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

LaunchInfo launch_info(std::optional<int> rank, std::optional<int> size, const EnvLookup& env) {
  if (rank && size) return from_arguments(*rank, *size, env);
  const LauncherVars* l = find_launcher(env);
  if (l == nullptr && rank) {
    refuse(
        "a rank but no size given: pass the size too, or set WORLD_SIZE (torchrun), or start "
        "under mpirun or srun");
  }
  if (l == nullptr && size) {
    refuse(
        "a size but no rank given: pass the rank too, or set RANK (torchrun), or start under "
        "mpirun or srun");
  }
  if (l == nullptr) {
    refuse(
        "no rank given: set RANK and WORLD_SIZE (torchrun), or start under mpirun or srun, or "
        "pass the rank and size explicitly");
  }
  // An argument wins over its variable, which is then not even read (it may be stale).
  Named r = rank ? from_argument("rank", *rank) : from_env(l->rank, *env(l->rank), l->who);
  Named s = size ? from_argument("size", *size) : from_env(l->size, *env(l->size), l->who);
  check_range(r, s);
  return LaunchInfo{r.value, s.value, local_rank_of(*l, env), l->source};
}

MasterAddress master_address(const EnvLookup& env) {
  MasterAddress out;
  out.host = env("MASTER_ADDR").value_or("127.0.0.1");
  if (out.host.empty()) refuse("MASTER_ADDR='': empty (set it to rank 0's host, or unset it)");
  if (auto port = env("MASTER_PORT")) {
    int v = 0;
    const char* end = port->data() + port->size();
    auto [ptr, ec] = std::from_chars(port->data(), end, v);
    if (ec != std::errc() || ptr != end || v < 1 || v > 65535) {
      refuse("MASTER_PORT='" + *port + "': not a port number (1 to 65535)");
    }
    out.port = static_cast<uint16_t>(v);
  }
  return out;
}

}  // namespace roce::coll
