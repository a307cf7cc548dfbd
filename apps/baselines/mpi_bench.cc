// The Open MPI baseline: MPI_Allreduce or MPI_Alltoall timed over the ranks mpirun started,
// rows in roce-coll-perf's (nccl-tests') layout; run over TCP (--mca pml ob1 --mca btl
// tcp,self) by scripts/coll-baselines.sh. One placement (out of place) fills both columns;
// #wrong is N/A.
//   mpi-bench all_reduce|alltoall [-b 8] [-e 64M] [-f 2] [-n 20] [-w 2]
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/coll_perf/options.h"
#include "apps/coll_perf/report.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string op = argc > 1 ? argv[1] : "";
  roce::coll::perf::BaselineSweep sweep;
  try {
    if (op != "all_reduce" && op != "alltoall")
      throw std::invalid_argument("OP: all_reduce or alltoall");
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string f = argv[i], v = argv[i + 1];
      if (!roce::coll::perf::take_sweep_flag(f, v, sweep)) {
        throw std::invalid_argument("unknown option " + f);
      }
    }
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "mpi-bench: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  if (rank == 0) {
    std::printf("# mpi-bench: MPI_%s, Open MPI over TCP, %d ranks (one placement: both columns)\n",
                op == "all_reduce" ? "Allreduce" : "Alltoall", size);
    std::fputs(roce::coll::perf::table_header().c_str(), stdout);
  }
  std::vector<roce::coll::perf::Row> rows;
  for (size_t bytes :
       roce::coll::perf::sweep_sizes(sweep.min_bytes, sweep.max_bytes, sweep.factor, 0)) {
    size_t count = bytes / 4;
    if (op == "alltoall") count = count / size * size;
    std::vector<float> in(count, 1.0f), out(count);
    auto once = [&] {
      if (op == "all_reduce") {
        MPI_Allreduce(in.data(), out.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      } else {
        MPI_Alltoall(in.data(), int(count / size), MPI_FLOAT, out.data(), int(count / size),
                     MPI_FLOAT, MPI_COMM_WORLD);
      }
    };
    for (int i = 0; i < sweep.warmup; ++i) once();
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < sweep.iters; ++i) once();
    double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / sweep.iters;
    MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    sec /= size;  // the mean over ranks, as roce-coll-perf's -a 1
    const roce::coll::perf::Row row =
        roce::coll::perf::baseline_row(op == "all_reduce", count, size, sec);
    if (rank == 0) {
      std::fputs(roce::coll::perf::row_line(row).c_str(), stdout);
      std::fflush(stdout);
    }
    rows.push_back(row);
  }
  if (rank == 0)
    std::printf("# %-20s : %g \n", "Avg bus bandwidth", roce::coll::perf::average_busbw(rows));
  MPI_Finalize();
  return 0;
}
