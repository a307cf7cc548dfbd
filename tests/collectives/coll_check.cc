// One rank of a multi-process check of the collectives: started by a launcher (RANK /
// WORLD_SIZE / MASTER_ADDR / MASTER_PORT, or mpirun's, or srun's variables), it runs every
// operation at sizes up to --max-bytes on the communicator from_env() makes, compares each
// result bit for bit with coll_data.h's reference, and says so in one line:
//   coll_check: rank R of N: C checks passed, F failed (device)
// Exit 0: all passed; 1: a result was wrong; 2: an operation failed (its Error on stderr).
// --loop: AllReduce over and over until an error (a failure test kills a peer meanwhile);
// each iteration prints "iteration I", the error "error: peer P: ..." and exit 2.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "coll_checks.h"

using namespace roce::coll;
using namespace roce::coll::test;

namespace {

struct Args {
  size_t max_bytes = 64 << 20;
  bool loop = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--max-bytes" && i + 1 < argc) {
      a.max_bytes = std::strtoull(argv[++i], nullptr, 0);
    } else if (s == "--loop") {
      a.loop = true;
    } else {
      std::fprintf(stderr, "coll_check: unknown argument '%s' (--max-bytes N, --loop)\n", argv[i]);
      std::exit(64);
    }
  }
  return a;
}

int loop(Communicator& c) {
  std::vector<float> v(1 << 18);
  for (long i = 0;; ++i) {
    c.all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    std::printf("iteration %ld\n", i);
    std::fflush(stdout);
  }
}

// Every operation at each size (in bytes of float32, the other types scaled).
int run_checks(Communicator& c, size_t max_bytes) {
  int passed = 0, failed = 0;
  auto note = [&](const std::string& e) {
    if (e.empty()) {
      ++passed;
    } else {
      ++failed;
      std::fprintf(stderr, "coll_check: rank %d: %s\n", c.rank(), e.c_str());
    }
  };
  const int n = c.size();
  for (size_t bytes : {size_t{0}, size_t{4}, size_t{4092}, size_t{1} << 20, max_bytes}) {
    if (bytes > max_bytes) continue;
    const size_t count = bytes / 4 + (bytes > 4096 ? 3 : 0);  // uneven segments too
    for (bool ip : {false, true}) {
      note(check_all_reduce(c, count, DataType::kFloat32, ReduceOp::kSum, ip));
      note(check_reduce_scatter(c, count / n, DataType::kBfloat16, ReduceOp::kMax, ip));
      note(check_all_gather(c, count / n, DataType::kInt32, ip));
      note(check_broadcast(c, count, DataType::kFloat64, ip, n - 1));
      note(check_reduce(c, count, DataType::kInt64, ReduceOp::kAvg, ip, n / 2));
      note(check_all_to_all(c, count / n, DataType::kFloat16, ip));
    }
    note(check_all_reduce(c, count / 4, DataType::kUint8, ReduceOp::kProd, false));
    note(check_all_to_all_v(c, count / n / 3, DataType::kFloat32));
    note(check_send_recv(c, count / 2, DataType::kUint32));
    c.barrier();
  }
  std::printf("coll_check: rank %d of %d: %d checks passed, %d failed (%s)\n", c.rank(), n, passed,
              failed, c.describe().c_str());
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    auto comm = Communicator::from_env();
    std::printf("coll_check: rank %d of %d on %s\n", comm->rank(), comm->size(),
                comm->describe().c_str());
    std::fflush(stdout);
    return args.loop ? loop(*comm) : run_checks(*comm, args.max_bytes);
  } catch (const Error& e) {
    std::printf("error: peer %d: %s\n", e.peer(), e.what());
    std::fprintf(stderr, "coll_check: %s\n", e.what());
    return 2;
  }
}
