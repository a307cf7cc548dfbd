// roce-coll-perf OP [flags]: nccl-tests for the collectives library (collectives/), on any
// libibverbs.so.1 (this project's shim by default). Started as ranks by a launcher (torchrun's,
// Open MPI's or Slurm's variables; scripts/coll-run.sh on the testbed); rank 0 prints
// nccl-tests' table. Also callable as all_reduce_perf, all_gather_perf, ... (the names select
// OP). Exit 0 when every checked value is right and the average bus bandwidth is at least
// 0.9 x NCCL_TESTS_MIN_BW (when set); 1 otherwise; 2 for an error, with one line.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "apps/coll_perf/bench.h"
#include "apps/coll_perf/options.h"
#include "apps/coll_perf/report.h"

using namespace roce::coll;
using namespace roce::coll::perf;

namespace {

// "#  Rank  0 Pid 1234 on host device roce0 port 1 GID 1 ::ffff:10.77.0.101 MTU 4096", one line
// per rank, gathered to rank 0.
std::string device_lines(Communicator& c) {
  constexpr size_t kLine = 256;
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::vector<char> mine(kLine), all(kLine * c.size());
  std::snprintf(mine.data(), kLine, "#  Rank %2d Pid %6d on %10s device %s\n", c.rank(), getpid(),
                host, c.describe().c_str());
  c.all_gather(mine.data(), all.data(), kLine, DataType::kInt8);
  std::string s;
  for (int r = 0; r < c.size(); ++r) s += all.data() + r * kLine;
  return s;
}

std::string settings(const Communicator& c, const Options& o) {
  const CommOptions& co = c.options();
  const char* algo = co.all_reduce_algo == AllReduceAlgo::kRing                ? "ring"
                     : co.all_reduce_algo == AllReduceAlgo::kRecursiveDoubling ? "rd"
                                                                               : "auto";
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "# Settings: ranks %d, QPs per peer %u (%s), chunk %u B, grants in flight %u per "
                "peer (%u slots), grant TC %d, data TC %d, all_reduce algorithm %s (rd up to %llu "
                "B), timeout %lld ms, blocking %d\n",
                c.size(), co.qps_per_peer, co.qp_spread == QpSpread::kSplit ? "split" : "rr",
                co.chunk_bytes, co.window(), co.slots,
                co.grant_traffic_class < 0 ? co.traffic_class : co.grant_traffic_class,
                co.traffic_class, algo, static_cast<unsigned long long>(co.small_bytes),
                static_cast<long long>(co.timeout.count()), o.blocking);
  return buf;
}

// The admission counters (peer.h): one line per rank with its totals over its peers and its
// largest per-peer peaks, gathered to rank 0, then rank 0's own line per peer.
std::string admission_lines(Communicator& c) {
  const std::vector<PeerCounters> mine = c.peer_counters();
  PeerCounters sum;
  for (const PeerCounters& p : mine) {
    sum.grants_sent += p.grants_sent, sum.grants_received += p.grants_received;
    sum.bytes_sent += p.bytes_sent, sum.grant_wait_ns += p.grant_wait_ns;
    sum.peak_inflight_bytes = std::max(sum.peak_inflight_bytes, p.peak_inflight_bytes);
    sum.peak_granted_bytes = std::max(sum.peak_granted_bytes, p.peak_granted_bytes);
  }
  std::vector<PeerCounters> all(c.size());
  c.all_gather(&sum, all.data(), sizeof sum, DataType::kInt8);
  auto line = [](const char* who, int r, const PeerCounters& p) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "#  %s %2d: grants sent %llu received %llu, %llu B sent, waited %.1f ms for "
                  "grants, peak in flight %llu B, peak granted %llu B\n",
                  who, r, static_cast<unsigned long long>(p.grants_sent),
                  static_cast<unsigned long long>(p.grants_received),
                  static_cast<unsigned long long>(p.bytes_sent), p.grant_wait_ns / 1e6,
                  static_cast<unsigned long long>(p.peak_inflight_bytes),
                  static_cast<unsigned long long>(p.peak_granted_bytes));
    return std::string(buf);
  };
  const CommOptions& co = c.options();
  std::string s = "# Admission: window " + std::to_string(co.window()) + " x " +
                  std::to_string(co.chunk_bytes) +
                  " B per peer; per rank (peaks: its largest "
                  "per peer)\n";
  for (int r = 0; r < c.size(); ++r) s += line("Rank", r, all[r]);
  s += "# Rank 0 per peer\n";
  for (int q = 1; q < c.size(); ++q) s += line("Peer", q, mine[q]);
  return s;
}

int run(const Options& o) {
  auto comm = Communicator::from_env();
  Communicator& c = *comm;
  const bool main_rank = c.rank() == 0;
  if (rooted(o.op) && (o.root < 0 || o.root >= c.size())) {
    throw std::invalid_argument("-r " + std::to_string(o.root) + ": not a rank of " +
                                std::to_string(c.size()));
  }
  const std::string devices = device_lines(c);
  if (main_rank) {
    std::printf("# roce-coll-perf: %s over the collectives library (nccl-tests 2.19 layout)\n",
                o.program.c_str());
    std::printf("# Collective test starting: %s\n", o.program.c_str());
    std::printf(
        "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
        "iters: %d agg iters: 1 validation: %d graph: 0 unalign: 0\n",
        o.min_bytes, o.max_bytes, o.step_factor > 1 ? size_t(o.step_factor) : o.step_bytes,
        o.step_factor > 1 ? "factor" : "bytes", o.warmup, o.iters, o.check);
    std::printf("#\n# Using devices\n%s%s#\n%s", devices.c_str(), settings(c, o).c_str(),
                table_header().c_str());
    std::fflush(stdout);
  }
  Bench bench(c, o);
  std::vector<Row> rows;
  int64_t wrong = 0;
  for (DataType t : o.types) {
    for (ReduceOp op : reduces(o.op) ? o.redops : std::vector<ReduceOp>{ReduceOp::kSum}) {
      for (size_t bytes : sweep_sizes(o.min_bytes, o.max_bytes, o.step_factor, o.step_bytes)) {
        const Case k{o.op, t, op, rooted(o.op) ? o.root : -1,
                     shape_of(o.op, bytes, size_of(t), c.size())};
        Row row{k.shape.count * size_of(t),
                k.shape.count,
                std::string(name(t)),
                reduces(o.op) ? std::string(name(op)) : "none",
                k.root,
                {},
                {}};
        row.out_of_place = bench.run(k, false);
        row.in_place = bench.run(k, true);
        wrong +=
            std::max<int64_t>(0, row.out_of_place.wrong) + std::max<int64_t>(0, row.in_place.wrong);
        if (main_rank) {
          std::fputs(row_line(row).c_str(), stdout);
          std::fflush(stdout);
        }
        rows.push_back(row);
      }
    }
  }
  const char* floor_env = std::getenv("NCCL_TESTS_MIN_BW");
  const double floor = floor_env ? std::atof(floor_env) : -1;
  const double avg = average_busbw(rows);
  const bool below = floor >= 0 && avg < floor * 0.9;
  const std::string admission = admission_lines(c);
  if (main_rank) {
    std::fputs(admission.c_str(), stdout);
    std::fputs(footer(wrong, avg, floor, o.program).c_str(), stdout);
    if (!o.json_file.empty()) {
      std::ofstream(o.json_file) << json(o.program, rows, wrong, avg);
    }
  }
  return wrong || below ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "roce-coll-perf: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "roce-coll-perf: %s\n", e.what());
    return 2;
  }
}
