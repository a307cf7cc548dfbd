// MPI over whatever transport mpirun chose (the tests force Open MPI's pml ucx onto the verbs
// shim): collective and one-sided results checked exactly, and an osu-style MPI_Allreduce
// latency loop.
//
//   mpi_exact check [MAX_BYTES]   MPI_Allreduce (int64 sum, out of place and in place),
//                                 MPI_Alltoall (int64) and MPI_Put / MPI_Get into a window, for
//                                 element counts 1 .. MAX_BYTES (default 1 MiB) in steps of 4x;
//                                 every value of every rank checked; rank 0 prints
//                                 "mpi_exact: N checks on R ranks, W wrong; at least B bytes
//                                 reached each rank from the others"; exit 1 if W > 0
//   mpi_exact allreduce_lat [MIN_BYTES MAX_BYTES ITERS REPEATS]
//                                 per size (x4), osu_allreduce's figure: the average time of
//                                 ITERS MPI_Allreduce calls (float sum) after ITERS/10 warm-up,
//                                 taken REPEATS times; rank 0 prints each size's median and range
#include <mpi.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int g_rank = 0, g_size = 1;

// A value no other (rank, peer, index) produces, so a misplaced block shows.
int64_t tag(int64_t from, int64_t to, int64_t i) { return (from << 48) | (to << 32) | i; }

// Counts mismatches (printing the first few) and returns how many.
int64_t expect_equal(const char* what, size_t count, const std::vector<int64_t>& got,
                     const std::vector<int64_t>& want) {
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (++wrong <= 3) {
      std::fprintf(stderr,
                   "mpi_exact: rank %d: %s, %zu elements: [%zu] = %" PRId64 ", want %" PRId64 "\n",
                   g_rank, what, count, i, got[i], want[i]);
    }
  }
  return wrong;
}

int64_t check_allreduce(size_t count) {
  std::vector<int64_t> in(count), out(count, -1), want(count);
  const int64_t n = g_size;
  for (size_t i = 0; i < count; ++i) {
    in[i] = (g_rank + 1) * 1000003LL + static_cast<int64_t>(i);
    want[i] = 1000003LL * n * (n + 1) / 2 + n * static_cast<int64_t>(i);
  }
  MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_INT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  int64_t wrong = expect_equal("MPI_Allreduce", count, out, want);
  MPI_Allreduce(MPI_IN_PLACE, in.data(), static_cast<int>(count), MPI_INT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  return wrong + expect_equal("MPI_Allreduce in place", count, in, want);
}

int64_t check_alltoall(size_t count) {
  std::vector<int64_t> in(count * g_size), out(count * g_size, -1), want(count * g_size);
  for (int p = 0; p < g_size; ++p) {
    for (size_t i = 0; i < count; ++i) {
      in[p * count + i] = tag(g_rank, p, static_cast<int64_t>(i));
      want[p * count + i] = tag(p, g_rank, static_cast<int64_t>(i));
    }
  }
  MPI_Alltoall(in.data(), static_cast<int>(count), MPI_INT64_T, out.data(), static_cast<int>(count),
               MPI_INT64_T, MPI_COMM_WORLD);
  return expect_equal("MPI_Alltoall", count, out, want);
}

// Each rank puts a block into its right neighbour's window and gets one back from its left
// neighbour's (pml ucx's one-sided companion, osc ucx: RDMA WRITE and READ).
int64_t check_put_get(size_t count) {
  std::vector<int64_t> win_mem(count, -1), src(count), fetched(count, -1);
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  for (size_t i = 0; i < count; ++i) src[i] = tag(g_rank, right, static_cast<int64_t>(i));
  MPI_Win win;
  MPI_Win_create(win_mem.data(), static_cast<MPI_Aint>(count * sizeof(int64_t)), sizeof(int64_t),
                 MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_fence(0, win);
  MPI_Put(src.data(), static_cast<int>(count), MPI_INT64_T, right, 0, static_cast<int>(count),
          MPI_INT64_T, win);
  MPI_Win_fence(0, win);
  MPI_Get(fetched.data(), static_cast<int>(count), MPI_INT64_T, left, 0, static_cast<int>(count),
          MPI_INT64_T, win);
  MPI_Win_fence(0, win);
  MPI_Win_free(&win);
  std::vector<int64_t> want_put(count), want_get(count);
  for (size_t i = 0; i < count; ++i) {
    want_put[i] = tag(left, g_rank, static_cast<int64_t>(i));  // what the left one put here
    want_get[i] = tag((left + g_size - 1) % g_size, left, static_cast<int64_t>(i));
  }
  return expect_equal("MPI_Put", count, win_mem, want_put) +
         expect_equal("MPI_Get", count, fetched, want_get);
}

int run_check(size_t max_bytes) {
  int64_t wrong = 0, checks = 0, from_others = 0;
  for (size_t count = 1; count * sizeof(int64_t) <= max_bytes; count *= 4) {
    wrong += check_allreduce(count) + check_alltoall(count) + check_put_get(count);
    checks += 5;
    // The least any algorithm must bring each rank from the others: its share of two
    // allreduces' results ((n-1)/n of each), n-1 Alltoall blocks, one Put and one Get.
    const int64_t block = static_cast<int64_t>(count * sizeof(int64_t));
    from_others += 2 * block * (g_size - 1) / g_size + block * (g_size - 1) + 2 * block;
  }
  int64_t total = 0;
  MPI_Reduce(&wrong, &total, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) {
    std::printf("mpi_exact: %" PRId64 " checks on %d ranks, %" PRId64 " wrong; at least %" PRId64
                " bytes reached each rank from the others\n",
                checks, g_size, total, g_size > 1 ? from_others : 0);
  }
  MPI_Bcast(&total, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  return total == 0 ? 0 : 1;
}

int run_allreduce_lat(size_t min_bytes, size_t max_bytes, int iters, int repeats) {
  if (g_rank == 0) {
    std::printf("# MPI_Allreduce (float sum), %d ranks: average of %d calls, %d repeats\n", g_size,
                iters, repeats);
    std::printf("# %10s %12s %12s %12s\n", "bytes", "median_us", "min_us", "max_us");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int count = static_cast<int>(std::max<size_t>(1, bytes / sizeof(float)));
    std::vector<float> in(count, 1.0f), out(count);
    std::vector<double> us;
    for (int r = 0; r < repeats; ++r) {
      for (int i = 0; i < std::max(1, iters / 10); ++i) {
        MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      double mine = (MPI_Wtime() - t0) * 1e6 / iters, avg = 0;
      MPI_Reduce(&mine, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
      us.push_back(avg / g_size);  // osu_allreduce: the ranks' average
    }
    std::sort(us.begin(), us.end());
    if (g_rank == 0) {
      std::printf("  %10zu %12.2f %12.2f %12.2f\n", bytes, us[us.size() / 2], us.front(),
                  us.back());
      std::fflush(stdout);
    }
  }
  return 0;
}

// A positive number, or 0 (refused).
long long arg(int argc, char** argv, int i, long long dflt) {
  if (i >= argc) return dflt;
  char* end = nullptr;
  const long long v = std::strtoll(argv[i], &end, 10);
  return end && *end == '\0' && v > 0 ? v : 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const std::string mode = argc > 1 ? argv[1] : "";
  int rc = 2;
  if (mode == "check" && arg(argc, argv, 2, 1 << 20) > 0) {
    rc = run_check(static_cast<size_t>(arg(argc, argv, 2, 1 << 20)));
  } else if (mode == "allreduce_lat" && arg(argc, argv, 2, 8) && arg(argc, argv, 3, 1 << 20) &&
             arg(argc, argv, 4, 1000) && arg(argc, argv, 5, 5)) {
    rc = run_allreduce_lat(static_cast<size_t>(arg(argc, argv, 2, 8)),
                           static_cast<size_t>(arg(argc, argv, 3, 1 << 20)),
                           static_cast<int>(arg(argc, argv, 4, 1000)),
                           static_cast<int>(arg(argc, argv, 5, 5)));
  } else if (g_rank == 0) {
    std::fprintf(stderr,
                 "usage: mpi_exact check [MAX_BYTES] | allreduce_lat [MIN_BYTES MAX_BYTES ITERS "
                 "REPEATS] (positive integers)\n");
  }
  MPI_Finalize();
  return rc;
}
