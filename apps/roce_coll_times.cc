// roce-coll-times: one collective, many times, each iteration's completion time kept, for the
// congestion scenarios (scripts/coll-bottleneck.sh). Started as ranks by a launcher, like
// roce-coll-perf. Every iteration is checked; rank 0 prints the percentiles of the completion
// time (the slowest rank's, each iteration starting after a barrier) and the admission counters.
//
//   roce-coll-times --op alltoall|incast --bytes N [--iters 50] [--warmup 3] [--csv FILE]
//     alltoall: each rank sends N / ranks bytes to every rank (AlltoAll of N bytes a rank)
//     incast:   every rank but 0 sends N bytes to rank 0 at once (AlltoAllv, all pairs in flight)
// Exit 0 when every iteration's result was exact, 1 if one was not, 2 for an error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "collectives/communicator.h"

using namespace roce::coll;

namespace {

struct Options {
  std::string op = "alltoall";
  size_t bytes = 1 << 20;
  int iters = 50;
  int warmup = 3;
  std::string csv;
};

// The pattern rank r sends to rank q: a byte of (r, q, i) that differs between iterations.
uint8_t pattern(int r, int q, size_t i, int iter) {
  return static_cast<uint8_t>(r * 31 + q * 7 + i * 13 + (i >> 8) + iter * 3);
}

class Exchange {
 public:
  Exchange(Communicator& c, const Options& o) : c_(c), n_(c.size()) {
    const bool incast = o.op == "incast";
    counts_.assign(n_, 0), rcounts_.assign(n_, 0);
    for (int q = 0; q < n_; ++q) {
      counts_[q] = incast ? (q == 0 && c.rank() != 0 ? o.bytes : 0) : o.bytes / n_;
      rcounts_[q] = incast ? (c.rank() == 0 && q != 0 ? o.bytes : 0) : o.bytes / n_;
    }
    sdispl_ = displs(counts_), rdispl_ = displs(rcounts_);
    in_.resize(sdispl_.back() + counts_.back());
    out_.resize(rdispl_.back() + rcounts_.back());
    if (!in_.empty()) c.register_memory(in_.data(), in_.size());
    if (!out_.empty()) c.register_memory(out_.data(), out_.size());
  }

  // One iteration; returns the wrong bytes.
  size_t run(int iter) {
    const int r = c_.rank();
    for (int q = 0; q < n_; ++q) {
      for (size_t i = 0; i < counts_[q]; ++i) in_[sdispl_[q] + i] = pattern(r, q, i, iter);
    }
    std::fill(out_.begin(), out_.end(), uint8_t{0xee});
    c_.all_to_all_v(in_.data(), counts_.data(), sdispl_.data(), out_.data(), rcounts_.data(),
                    rdispl_.data(), DataType::kUint8);
    size_t wrong = 0;
    for (int q = 0; q < n_; ++q) {
      for (size_t i = 0; i < rcounts_[q]; ++i)
        wrong += out_[rdispl_[q] + i] != pattern(q, r, i, iter);
    }
    return wrong;
  }

 private:
  static std::vector<size_t> displs(const std::vector<size_t>& counts) {
    std::vector<size_t> d(counts.size(), 0);
    for (size_t q = 1; q < counts.size(); ++q) d[q] = d[q - 1] + counts[q - 1];
    return d;
  }
  Communicator& c_;
  int n_;
  std::vector<size_t> counts_, rcounts_, sdispl_, rdispl_;
  std::vector<uint8_t> in_, out_;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()));
  return v[i];
}

int run(const Options& o) {
  auto comm = Communicator::from_env();
  Communicator& c = *comm;
  Exchange x(c, o);
  uint64_t wrong = 0;
  for (int i = 0; i < o.warmup; ++i) wrong += x.run(-1 - i);
  std::vector<double> mine(o.iters);
  for (int i = 0; i < o.iters; ++i) {
    c.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    wrong += x.run(i);
    mine[i] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<double> all(size_t(o.iters) * c.size());
  c.all_gather(mine.data(), all.data(), mine.size(), DataType::kFloat64);
  uint64_t wrong_all = 0;
  c.all_reduce(&wrong, &wrong_all, 1, DataType::kUint64, ReduceOp::kSum);
  if (c.rank() != 0) return wrong_all ? 1 : 0;
  std::vector<double> slowest(o.iters, 0);  // each iteration: its slowest rank
  for (int r = 0; r < c.size(); ++r) {
    for (int i = 0; i < o.iters; ++i) slowest[i] = std::max(slowest[i], all[r * o.iters + i]);
  }
  double sum = 0;
  for (double t : slowest) sum += t;
  const std::vector<PeerCounters> k = c.peer_counters();
  uint64_t grants = 0, peak_granted = 0;
  for (const PeerCounters& p : k) {
    grants += p.grants_sent;
    peak_granted = std::max(peak_granted, p.peak_granted_bytes);
  }
  std::printf(
      "roce-coll-times: %s, %d ranks, %zu B, %d iterations: p50 %.3f ms p99 %.3f ms max %.3f ms "
      "mean %.3f ms; wrong %llu; rank 0 granted %llu times, at most %llu B to one peer\n",
      o.op.c_str(), c.size(), o.bytes, o.iters, percentile(slowest, 50), percentile(slowest, 99),
      *std::max_element(slowest.begin(), slowest.end()), sum / o.iters,
      static_cast<unsigned long long>(wrong_all), static_cast<unsigned long long>(grants),
      static_cast<unsigned long long>(peak_granted));
  if (!o.csv.empty()) {
    std::ofstream f(o.csv);
    f << "iteration,ms\n";
    for (int i = 0; i < o.iters; ++i) f << i << "," << slowest[i] << "\n";
  }
  return wrong_all ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"One collective many times: completion-time percentiles, exact results"};
  app.add_option("--op", o.op, "alltoall or incast")->check(CLI::IsMember({"alltoall", "incast"}));
  app.add_option("--bytes", o.bytes, "bytes a rank sends (alltoall: in all; incast: to rank 0)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(size_t{1}, size_t{1} << 32));
  app.add_option("--iters", o.iters, "timed iterations")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", o.warmup, "untimed iterations first")->check(CLI::Range(0, 1000));
  app.add_option("--csv", o.csv, "each iteration's completion time (ms), rank 0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "roce-coll-times: %s\n", e.what());
    return 2;
  }
}
