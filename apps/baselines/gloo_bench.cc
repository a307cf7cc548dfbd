// The Gloo baseline (Debian's libgloo): AllreduceRingChunked (Gloo's ring-chunked AllReduce,
// the default), AllreduceRing (--algo ring) or gloo::alltoall between ranks started as torchrun
// starts them, on the kernel's TCP, or with --transport ibverbs on Gloo's ibverbs transport
// (device roce0, GID index 1: whatever libibverbs.so.1 the loader finds, this project's shim on
// LD_LIBRARY_PATH); prints rows in roce-coll-perf's (nccl-tests') layout so that
// scripts/coll-baselines.sh can put them side by side. Gloo runs AllReduce in place and AlltoAll
// out of place only: that one measurement fills both placements' columns. After each size's
// timed runs, one more run on exact values (apps/coll_perf/exact_values.h) is checked element
// by element: #wrong counts the elements that differ, and any makes the exit status 1.
//
// Gloo's ibverbs buffers refuse to be destroyed while a send of theirs awaits its completion
// (this Gloo aborts: "Destructing buffer expecting completions"), and its algorithms wait for
// none of their last sends: the last rank to finish may destroy its algorithm microseconds
// after posting a notification to its left, on any transport. So each size ends with a barrier
// whose every message is confirmed (its send completion awaited) before the size's buffers go:
// a peer's barrier message comes after its ACK of everything we sent it, on the same QP, so the
// algorithm's completions are in by then on any correct RC transport. --barrier 0 leaves it
// out, destroying each size's buffers at once, as a program that trusts prompt completions.
//   gloo-bench all_reduce|alltoall --store DIR --host ADDR [--transport tcp|ibverbs]
//              [--algo ring|ring_chunked] [--barrier 1|0] [-b 8] [-e 64M] [-f 2] [-n 20] [-w 2]
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/ibverbs/device.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "apps/coll_perf/exact_values.h"
#include "apps/coll_perf/options.h"
#include "apps/coll_perf/report.h"

namespace {

using roce::coll::exact_value;
using roce::coll::ReduceOp;

struct Args {
  std::string op, algo = "ring_chunked", store_dir, host, transport = "tcp";
  bool barrier = true;
  roce::coll::perf::BaselineSweep sweep;
};

// gloo::barrier needs unbound buffers, which this Gloo's ibverbs transport lacks; Gloo's
// BarrierAllToAll does not wait for its sends (see above).
class ConfirmedBarrier : public gloo::BarrierAllToAll {
 public:
  using gloo::BarrierAllToAll::BarrierAllToAll;
  void run() {
    gloo::BarrierAllToAll::run();
    for (auto& b : sendBuffers_) b->waitSend();
  }
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v)
    throw std::invalid_argument(std::string(name) + " is not set (start it as torchrun does)");
  return std::atoi(v);
}

Args parse_args(int argc, char** argv) {
  if (argc < 2)
    throw std::invalid_argument(
        "usage: gloo-bench all_reduce|alltoall --store DIR --host ADDR [--transport tcp|ibverbs] "
        "[--algo ring|ring_chunked] [--barrier 1|0] [-b] [-e] [-f] [-n] [-w]");
  Args a;
  a.op = argv[1];
  if (a.op != "all_reduce" && a.op != "alltoall")
    throw std::invalid_argument("OP: all_reduce or alltoall");
  for (int i = 2; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 == argc) throw std::invalid_argument(f + " needs a value");
    const std::string v = argv[i + 1];
    if (f == "--store") {
      a.store_dir = v;
    } else if (f == "--host") {
      a.host = v;
    } else if (f == "--transport" && (v == "tcp" || v == "ibverbs")) {
      a.transport = v;
    } else if (f == "--algo" && (v == "ring" || v == "ring_chunked")) {
      a.algo = v;
    } else if (f == "--barrier" && (v == "0" || v == "1")) {
      a.barrier = v == "1";
    } else if (!roce::coll::perf::take_sweep_flag(f, v, a.sweep)) {
      throw std::invalid_argument("unknown option or value: " + f + " " + v);
    }
  }
  if (a.host.empty() && std::getenv("ROCE_TB_OOB_ADDR")) a.host = std::getenv("ROCE_TB_OOB_ADDR");
  if (a.store_dir.empty() || a.host.empty()) {
    throw std::invalid_argument("--store DIR and --host ADDR (or ROCE_TB_OOB_ADDR) are needed");
  }
  return a;
}

// One size: the algorithm's buffers live as long as this object. Gloo's ibverbs buffers must
// not be destroyed while a send of theirs awaits its completion, and Gloo waits for none of its
// last sends: the transport's completions have to be prompt.
class Collective {
 public:
  Collective(const Args& a, const std::shared_ptr<gloo::Context>& ctx, size_t count)
      : ctx_(ctx), count_(count), in_(count), out_(count) {
    std::vector<float*> ptrs{in_.data()};
    if (a.op == "alltoall") return;
    if (a.algo == "ring") {
      ar_ = std::make_unique<gloo::AllreduceRing<float>>(ctx, ptrs, int(count));
    } else {
      ar_ = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, int(count));
    }
  }
  void run() {
    if (ar_) {
      ar_->run();
      return;
    }
    gloo::AlltoallOptions o(ctx_);
    o.setInput(in_.data(), count_);
    o.setOutput(out_.data(), count_);
    gloo::alltoall(o);
  }
  // Runs once more on exact values; returns the number of elements that differ.
  int64_t check() {
    const int rank = ctx_->rank, size = ctx_->size;
    for (size_t i = 0; i < count_; ++i) in_[i] = float(exact_value(rank, i, ReduceOp::kSum));
    run();
    int64_t wrong = 0;
    const size_t block = count_ / size_t(size);
    for (size_t i = 0; i < count_; ++i) {
      double want = 0;
      if (ar_) {
        for (int r = 0; r < size; ++r) want += exact_value(r, i, ReduceOp::kSum);
      } else {
        // Block b of the output is block `rank` of rank b's input.
        want = exact_value(int(i / block), size_t(rank) * block + i % block, ReduceOp::kSum);
      }
      wrong += (ar_ ? in_[i] : out_[i]) != float(want);
    }
    return wrong;
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  size_t count_;
  std::vector<float> in_, out_;
  std::unique_ptr<gloo::Algorithm> ar_;
};

const char* algo_name(const Args& a) {
  if (a.op == "alltoall") return "gloo::alltoall";
  return a.algo == "ring" ? "AllreduceRing" : "AllreduceRingChunked";
}

int run(const Args& a) {
  const int rank = env_int("RANK"), size = env_int("WORLD_SIZE");
  std::shared_ptr<gloo::transport::Device> dev;
  if (a.transport == "tcp") {
    dev = gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr(a.host.c_str()));
  } else {
    dev = gloo::transport::ibverbs::CreateDevice({"roce0", 1, 1});
  }
  gloo::rendezvous::FileStore file_store(a.store_dir);
  gloo::rendezvous::PrefixStore store("gloo-bench", file_store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->connectFullMesh(store, dev);
  ConfirmedBarrier barrier(ctx);
  if (rank == 0) {
    std::printf("# gloo-bench: %s, Gloo %s over %s, %d ranks (one placement: both columns)\n",
                algo_name(a), "0.0~git20220518",
                a.transport == "tcp" ? "kernel TCP" : "its ibverbs transport", size);
    std::fputs(roce::coll::perf::table_header().c_str(), stdout);
  }
  std::vector<roce::coll::perf::Row> rows;
  int64_t wrong_total = 0;
  for (size_t bytes :
       roce::coll::perf::sweep_sizes(a.sweep.min_bytes, a.sweep.max_bytes, a.sweep.factor, 0)) {
    size_t count = bytes / 4;
    if (a.op == "alltoall") count = count / size * size;
    Collective coll(a, ctx, count);
    for (int i = 0; i < a.sweep.warmup; ++i) coll.run();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.sweep.iters; ++i) coll.run();
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
        a.sweep.iters;
    const int64_t wrong = coll.check();
    wrong_total += wrong;
    if (a.barrier) barrier.run();
    roce::coll::perf::Row row =
        roce::coll::perf::baseline_row(a.op == "all_reduce", count, size, sec);
    row.out_of_place.wrong = row.in_place.wrong = wrong;
    if (rank == 0) {
      std::fputs(roce::coll::perf::row_line(row).c_str(), stdout);
      std::fflush(stdout);
    }
    if (wrong)
      std::fprintf(stderr, "gloo-bench: rank %d: %lld wrong elements at %zu bytes\n", rank,
                   static_cast<long long>(wrong), bytes);
    rows.push_back(row);
  }
  if (rank == 0) {
    std::fputs(roce::coll::perf::footer(wrong_total, roce::coll::perf::average_busbw(rows), -1,
                                        "gloo-bench")
                   .c_str(),
               stdout);
  }
  // What follows is Gloo's teardown (context, pairs, device thread): tests tell a crash there
  // from one in the collectives by this line (tests/e2e/gloo_ibverbs_test.sh).
  std::fprintf(stderr, "gloo-bench: rank %d: every size checked, %lld wrong; tearing down\n", rank,
               static_cast<long long>(wrong_total));
  return wrong_total ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-bench: %s\n", e.what());
    return 2;
  }
}
