// One size of one collective: its buffers' shape and nccl-tests' bandwidth factor, a checked
// run counting wrong elements, and timed runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "apps/coll_perf/options.h"
#include "apps/coll_perf/report.h"
#include "collectives/communicator.h"

namespace roce::coll::perf {

struct Shape {
  size_t count = 0;   // elements in the size column (nccl-tests': the larger buffer)
  size_t send = 0;    // elements of each rank's input
  size_t recv = 0;    // elements of each rank's output
  size_t block = 0;   // per-rank block (all_gather, reduce_scatter, alltoall)
  double factor = 1;  // busbw = algbw x factor
};
Shape shape_of(Collective c, size_t bytes, size_t elem, int ranks);
bool reduces(Collective c);
bool rooted(Collective c);

struct Case {
  Collective op;
  DataType type;
  ReduceOp redop;
  int root;
  Shape shape;
};

class Bench {
 public:
  Bench(Communicator& comm, const Options& o);
  ~Bench();
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;
  // Times one placement (iterations after warm-up, aggregated over ranks by -a) and checks it
  // (-c runs, wrong elements summed over ranks; -1 when not checked).
  Placement run(const Case& k, bool in_place);

 private:
  Work once(const Case& k, bool in_place, bool async);  // async: started, not waited for
  int64_t checked(const Case& k, bool in_place);
  double over_ranks(double seconds);

  Communicator& comm_;
  const Options& o_;
  uint8_t* send_;
  uint8_t* recv_;
  size_t capacity_;
};

}  // namespace roce::coll::perf
