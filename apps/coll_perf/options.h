// roce-coll-perf's settings: nccl-tests' flags, with nccl-tests' defaults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/types.h"

namespace roce::coll::perf {

enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kAllToAllV,
  kSendRecv,
};

struct Options {
  Collective op = Collective::kAllReduce;
  std::string program;  // nccl-tests' name: all_reduce_perf, ...
  size_t min_bytes = 32 << 20, max_bytes = 32 << 20;
  size_t step_bytes = 1 << 20;
  double step_factor = 1;  // > 1: sizes grow by this factor, else by step_bytes
  int iters = 20, warmup = 1, check = 1;
  std::vector<ReduceOp> redops{ReduceOp::kSum};
  std::vector<DataType> types{DataType::kFloat32};
  int root = 0;
  int average = 1;   // time over ranks: 0 rank 0's, 1 mean, 2 min, 3 max
  int blocking = 0;  // 0: start every iteration, then wait; 1: one after another
  std::string json_file;
  bool test_corrupt = false;  // tests only: one wrong element on rank 0
};

// The operation from the program's name (all_reduce_perf, ...) or the first argument (OP);
// throws std::invalid_argument with one line for anything it cannot take.
Options parse_options(int argc, char** argv);
const char* op_name(Collective c);  // all_reduce, ...
// The sizes from min to max: times `factor` when it is above 1, else plus `step` (nccl-tests'
// -b -e -f -i).
std::vector<size_t> sweep_sizes(size_t min, size_t max, double factor, size_t step);

// The baselines' sweep (gloo-bench, mpi-bench): -b -e -f -n -w, with these defaults.
struct BaselineSweep {
  size_t min_bytes = 8, max_bytes = 64 << 20;
  double factor = 2;
  int iters = 20, warmup = 2;
};
// Takes one of those flags and its value; false for any other flag.
bool take_sweep_flag(const std::string& flag, const std::string& value, BaselineSweep& s);
size_t parse_size(const std::string& s);  // 8, 64K, 1M, 2G

}  // namespace roce::coll::perf
