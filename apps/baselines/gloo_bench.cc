// The Gloo baseline (Debian's libgloo): AllreduceRingChunked (Gloo's ring-chunked AllReduce) or
// gloo::alltoall between ranks started as torchrun starts them, on the kernel's TCP, or with
// --transport ibverbs on Gloo's ibverbs transport (device roce0, GID index 1: whatever
// libibverbs.so.1 the loader finds, this project's shim on LD_LIBRARY_PATH); prints rows in
// roce-coll-perf's (nccl-tests') layout so that scripts/coll-baselines.sh can put them side by
// side. Gloo runs AllReduce in place and AlltoAll out of place only: that one measurement fills
// both placements' columns; #wrong is N/A (not checked).
//   gloo-bench all_reduce|alltoall --store DIR --host ADDR [--transport tcp|ibverbs]
//              [-b 8] [-e 64M] [-f 2] [-n 20] [-w 2]
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/ibverbs/device.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "apps/coll_perf/options.h"
#include "apps/coll_perf/report.h"

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v)
    throw std::invalid_argument(std::string(name) + " is not set (start it as torchrun does)");
  return std::atoi(v);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2)
      throw std::invalid_argument(
          "usage: gloo-bench all_reduce|alltoall --store DIR --host ADDR [-b] [-e] [-f] [-n] [-w]");
    const std::string op = argv[1];
    if (op != "all_reduce" && op != "alltoall")
      throw std::invalid_argument("OP: all_reduce or alltoall");
    std::string store_dir, host, transport = "tcp";
    roce::coll::perf::BaselineSweep sweep;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string f = argv[i], v = argv[i + 1];
      if (f == "--store") {
        store_dir = v;
      } else if (f == "--host") {
        host = v;
      } else if (f == "--transport" && (v == "tcp" || v == "ibverbs")) {
        transport = v;
      } else if (!roce::coll::perf::take_sweep_flag(f, v, sweep)) {
        throw std::invalid_argument("unknown option " + f);
      }
    }
    if (host.empty() && std::getenv("ROCE_TB_OOB_ADDR")) host = std::getenv("ROCE_TB_OOB_ADDR");
    if (store_dir.empty() || host.empty()) {
      throw std::invalid_argument("--store DIR and --host ADDR (or ROCE_TB_OOB_ADDR) are needed");
    }
    const int rank = env_int("RANK"), size = env_int("WORLD_SIZE");
    std::shared_ptr<gloo::transport::Device> dev;
    if (transport == "tcp") {
      dev = gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr(host.c_str()));
    } else {
      dev = gloo::transport::ibverbs::CreateDevice({"roce0", 1, 1});
    }
    gloo::rendezvous::FileStore file_store(store_dir);
    gloo::rendezvous::PrefixStore store("gloo-bench", file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->connectFullMesh(store, dev);
    if (rank == 0) {
      std::printf("# gloo-bench: %s, Gloo %s over %s, %d ranks (one placement: both columns)\n",
                  op == "all_reduce" ? "AllreduceRingChunked" : "gloo::alltoall", "0.0~git20220518",
                  transport == "tcp" ? "kernel TCP" : "its ibverbs transport", size);
      std::fputs(roce::coll::perf::table_header().c_str(), stdout);
    }
    std::vector<roce::coll::perf::Row> rows;
    for (size_t bytes :
         roce::coll::perf::sweep_sizes(sweep.min_bytes, sweep.max_bytes, sweep.factor, 0)) {
      size_t count = bytes / 4;
      if (op == "alltoall") count = count / size * size;
      std::vector<float> in(count, 1.0f), out(count);
      std::vector<float*> ptrs{in.data()};
      std::unique_ptr<gloo::AllreduceRingChunked<float>> ar;
      if (op == "all_reduce")
        ar = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, int(count));
      auto once = [&] {
        if (ar) {
          ar->run();
        } else {
          gloo::AlltoallOptions o(ctx);
          o.setInput(in.data(), count);
          o.setOutput(out.data(), count);
          gloo::alltoall(o);
        }
      };
      for (int i = 0; i < sweep.warmup; ++i) once();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < sweep.iters; ++i) once();
      const double sec =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
          sweep.iters;
      // Every rank is done with this size before its buffers go (Gloo's ibverbs buffers refuse
      // to be destroyed with a send's completion outstanding).
      gloo::BarrierOptions bo(ctx);
      gloo::barrier(bo);
      const roce::coll::perf::Row row =
          roce::coll::perf::baseline_row(op == "all_reduce", count, size, sec);
      if (rank == 0) {
        std::fputs(roce::coll::perf::row_line(row).c_str(), stdout);
        std::fflush(stdout);
      }
      rows.push_back(row);
    }
    if (rank == 0) {
      std::printf("# %-20s : %g \n", "Avg bus bandwidth", roce::coll::perf::average_busbw(rows));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-bench: %s\n", e.what());
    return 2;
  }
}
