// roce-perf's flags as the command line gives them, before their values are checked. CLI11
// only collects them here; options.cc checks each against perftest's rules, in perftest's order,
// so that a bad command line gets perftest's one line.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "apps/perf/options.h"

namespace roce::perf::detail {

struct RawFlags {
  std::string test, server, dev, ib_port, gid, size, sizes, iters, duration, margin, qps, mtu, tx,
      rx, port, conn, atomic, outs, inl, post_list, cq_mod, qp_timeout, sl, eq_num, tclass,
      hop_limit, tos, output, limit_bw, limit_msgrate, latency_gap, rate_limit, rate_units,
      rate_limit_type, burst_size;
  bool all = false, cpu_freq = false, gbits = false, unsorted = false, histogram = false,
       rdma_cm = false, comm_rdma_cm = false, bidir = false, events = false, no_peak = false,
       run_infinitely = false, perform_warm_up = false, old_post_send = false, reversed = false,
       mr_per_qp = false, use_srq = false, cpu_util = false;
  // Whether --timeout / --sizes were given at all (an empty --sizes list too).
  const CLI::Option* timeout = nullptr;
  const CLI::Option* sizes_given = nullptr;
};

// The usage text of --help.
extern const char* const kUsage;

// Declares every flag on `app`: those whose values options.cc checks into *f, the rest (free
// text, plain switches) straight into *o.
void declare_flags(CLI::App& app, RawFlags* f, PerfOptions* o);

}  // namespace roce::perf::detail
