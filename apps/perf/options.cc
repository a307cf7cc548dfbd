#include "apps/perf/options.h"

#include <CLI/CLI.hpp>

#include <climits>
#include <cstdio>
#include <map>
#include <utility>

#include "apps/perf/options_flags.h"
#include "apps/perf/options_values.h"
#include "stack/core/types.h"

namespace roce::perf {

using detail::int_in;
using detail::named;
using detail::nonnegative;
using detail::parse_size;
using detail::parse_size_list;
using detail::refuse;

namespace {

// perftest's limits (perftest_parameters.h).
constexpr int kMinIter = 5, kMaxIter = 100000000;
constexpr int kMinTx = 1, kMaxTx = 15000;
constexpr int kMinRx = 1, kMaxRx = 16384;
constexpr int kMaxQps = 4000;  // perftest allows 16384; the engine has 4096 QPNs
constexpr int kMaxInline = 912;
constexpr int kMaxCqMod = 1024;
constexpr int kMinEqNum = 0;  // perftest's MIN_EQ_NUM / MAX_EQ_NUM
constexpr int kMaxEqNum = 2048;
constexpr int kMaxGidIndex = 64;
// perftest takes any int; 10 s between posts already comes near the peer's stall limit (60 s).
constexpr int kMaxLatencyGapUs = 10'000'000;
constexpr uint64_t kMaxVerifySize = kMaxSize;
// --timeout: 1e6 s (11.6 days) bounds any real wait and keeps the waits' nanosecond and clock
// arithmetic far from overflowing.
constexpr double kMaxTimeoutS = 1e6;

struct TestEntry {
  Verb verb;
  TestKind kind;
};
const std::map<std::string, TestEntry>& tests() {
  static const std::map<std::string, TestEntry> t = {
      {"write_bw", {Verb::kWrite, TestKind::kBw}},   {"write_lat", {Verb::kWrite, TestKind::kLat}},
      {"read_bw", {Verb::kRead, TestKind::kBw}},     {"read_lat", {Verb::kRead, TestKind::kLat}},
      {"send_bw", {Verb::kSend, TestKind::kBw}},     {"send_lat", {Verb::kSend, TestKind::kLat}},
      {"atomic_bw", {Verb::kAtomic, TestKind::kBw}},
  };
  return t;
}

// Each step below checks a group of flags in perftest's order and fills *o; it returns false
// with the one line to print in *err. Steps run in the order parse_options lists them.

// The test, its role, the connection type and the device's port and GID.
bool take_test(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  const auto it = tests().find(f.test);
  if (it == tests().end()) {
    *err = "unknown test '" + f.test +
           "' (write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw)";
    return false;
  }
  o->test_name = f.test;
  o->verb = it->second.verb;
  o->kind = it->second.kind;
  o->servername = f.server;
  o->reversed = f.reversed;  // before anything asks client()
  const bool rd_atomic = o->verb == Verb::kRead || o->verb == Verb::kAtomic;
  if (f.rdma_cm || f.comm_rdma_cm) {
    return refuse(err,
                  "rdma_cm (-R/-z) is not supported: roce-perf exchanges QP data over TCP, as "
                  "perftest's Ethernet method does; run both sides without -R");
  }
  // perftest's change_conn_type: the same names and verb restrictions.
  if (f.conn == "UC") {
    if (rd_atomic) return refuse(err, "-c UC: UC connection not possible in READ/ATOMIC verbs");
    o->conn = Conn::kUc;
  } else if (f.conn == "UD") {
    if (o->verb != Verb::kSend)
      return refuse(err, "-c UD: UD connection only possible in SEND verb");
    o->conn = Conn::kUd;
  } else if (!f.conn.empty() && f.conn != "RC") {
    return refuse(err, "connection type '" + f.conn +
                           "': choose RC, UC or UD (XRC, DC, SRD and RawEth are not supported)");
  }
  if (!f.dev.empty()) o->ib_devname = f.dev;
  if (!f.ib_port.empty()) {
    if (!int_in("ib-port", f.ib_port, 1, 255, &o->ib_port, err)) return false;
    if (o->ib_port != 1) return refuse(err, "ib-port: a device has one port, port 1");
  }
  if (!f.gid.empty()) {
    if (!int_in("gid-index", f.gid, 0, kMaxGidIndex, &o->gid_index, err)) return false;
    o->use_gid_user = true;
  }
  return true;
}

// Sizes, iterations, duration, QPs and path MTU.
bool take_counts(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  const bool bw = o->kind == TestKind::kBw;
  o->size = o->verb == Verb::kAtomic ? 8 : (bw ? 65536 : 2);
  if (!f.size.empty()) {
    if (!parse_size(f.size, &o->size, err)) return false;
    o->req_size = true;
  }
  o->run_all = f.all;
  if (f.sizes_given->count()) {  // (an empty list too: it names no size)
    if (f.all) return refuse(err, "--sizes and -a both choose the sizes: give one");
    if (!parse_size_list(f.sizes, &o->size_list, err)) return false;
  }
  o->iters = bw && o->verb == Verb::kWrite ? 5000 : 1000;
  if (!f.iters.empty()) {
    int n = 0;
    if (!int_in("iters", f.iters, kMinIter, kMaxIter, &n, err)) return false;
    o->iters = static_cast<uint64_t>(n);
  }
  if (!f.duration.empty()) {
    if (!int_in("duration", f.duration, 1, INT_MAX, &o->duration, err)) return false;
    o->duration_mode = true;
  }
  if (f.run_infinitely) {
    // perftest's "Run infinitely dependencies", in its order.
    if (f.events) return refuse(err, "--run_infinitely does not support events feature yet");
    if (!bw) return refuse(err, "--run_infinitely exists only in BW tests for now");
    if (f.bidir && o->verb == Verb::kSend) {
      return refuse(err, "--run_infinitely mode is not supported in SEND Bidirectional BW test");
    }
    if (f.all || f.sizes_given->count()) {
      return refuse(err, "--run_infinitely runs one size: no -a or --sizes");
    }
    o->run_infinitely = true;
    o->duration_mode = true;  // perftest's test_type = DURATION: -D is the reporting period
  }
  if (!f.margin.empty() && !int_in("margin", f.margin, 0, INT_MAX, &o->margin, err)) return false;
  if (!f.qps.empty()) {
    if (!bw) return refuse(err, "-q: multiple QPs only available on bw tests");
    if (!int_in("qp", f.qps, 1, kMaxQps, &o->num_qps, err)) return false;
  }
  if (!f.mtu.empty()) {
    if (!int_in("mtu", f.mtu, 256, 4096, &o->mtu, err)) return false;
    if (o->mtu & (o->mtu - 1)) {
      return refuse(err, "mtu: '" + f.mtu + "' is not one of 256 512 1024 2048 4096");
    }
  }
  return true;
}

// Queue depths, the exchange's TCP port, atomics, outstanding reads, inline, post lists and
// completion moderation.
bool take_queues(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  const bool bw = o->kind == TestKind::kBw;
  const bool rd_atomic = o->verb == Verb::kRead || o->verb == Verb::kAtomic;
  o->tx_depth = bw ? 128 : 1;
  if (!f.tx.empty() && !int_in("tx-depth", f.tx, kMinTx, kMaxTx, &o->tx_depth, err)) return false;
  o->rx_depth = o->verb == Verb::kSend ? kDefRxSend : 1;
  if (!f.rx.empty()) {
    if (!int_in("rx-depth", f.rx, kMinRx, kMaxRx, &o->rx_depth, err)) return false;
    if (o->verb != Verb::kSend && o->rx_depth > 1) {
      return refuse(err, "rx-depth: on RDMA verbs it can only be 1");
    }
  }
  if (!f.port.empty() && !int_in("port", f.port, 1, 65535, &o->port, err)) return false;
  o->report_gbits = f.gbits;
  if (!f.atomic.empty()) {
    if (o->verb != Verb::kAtomic) {
      return refuse(err, "-A: the atomic type applies to atomic tests only");
    }
    if (!named(f.atomic,
               {std::pair{"CMP_AND_SWAP", AtomicType::kCmpAndSwap},
                std::pair{"FETCH_AND_ADD", AtomicType::kFetchAndAdd}},
               &o->atomic_type)) {
      return refuse(err, "atomic_type: '" + f.atomic + "' is not CMP_AND_SWAP or FETCH_AND_ADD");
    }
  }
  if (!f.outs.empty()) {
    if (!rd_atomic) return refuse(err, "-o: outstanding reads apply to READ and atomic tests only");
    if (!int_in("outs", f.outs, 1, 65535, &o->out_reads, err)) return false;
  }
  if (!f.inl.empty()) {
    if (rd_atomic) return refuse(err, "-I: inline data is not available on READ/atomic tests");
    if (!int_in("inline_size", f.inl, 0, kMaxInline, &o->inline_size, err)) return false;
  }
  if (!f.post_list.empty()) {
    if (!int_in("post_list", f.post_list, 1, 1024, &o->post_list, err)) return false;
    if (o->post_list > 1 && !bw)
      return refuse(err, "-l: post lists are supported in bw tests only");
  }
  if (!f.cq_mod.empty()) {
    if (!int_in("cq-mod", f.cq_mod, 1, kMaxCqMod, &o->cq_mod, err)) return false;
    o->req_cq_mod = true;
  }
  return true;
}

// --output: perftest's verbosity levels.
bool take_output(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  if (f.output.empty()) return true;
  const bool bw = o->kind == TestKind::kBw;
  using Out = PerfOptions::Output;
  if (!named(f.output,
             {std::pair{"bandwidth", Out::kBandwidth}, std::pair{"message_rate", Out::kMessageRate},
              std::pair{"latency", Out::kLatency}},
             &o->output)) {
    return refuse(err, "--output: '" + f.output +
                           "': invalid verbosity level output flag. Please use bandwidth, "
                           "latency, message_rate");
  }
  if (bw && o->output == Out::kLatency) {
    return refuse(err, "--output: output verbosity level for BW can be: bandwidth, message_rate");
  }
  if (!bw && o->output != Out::kLatency) {
    return refuse(err, "--output: output verbosity level for LAT can be: latency");
  }
  return true;
}

// -w / -y: the result's limits.
bool take_limits(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  o->limit_bw_on = !f.limit_bw.empty();
  o->limit_msgrate_on = !f.limit_msgrate.empty();
  if (o->limit_bw_on && !nonnegative("limit_bw", f.limit_bw, &o->limit_bw, err)) return false;
  if (o->limit_msgrate_on &&
      !nonnegative("limit_msgrate", f.limit_msgrate, &o->limit_msgrate, err)) {
    return false;
  }
  if (o->kind != TestKind::kBw && (o->limit_bw_on || o->limit_msgrate_on)) {
    return refuse(err, std::string(o->limit_bw_on ? "limit_bw" : "limit_msgrate") +
                           ": a limit applies to bw tests only");
  }
  return true;
}

// Events, direction, what the report prints and the limits it checks.
bool take_reporting(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  const bool bw = o->kind == TestKind::kBw;
  if (f.events && o->inline_engine) {
    return refuse(err,
                  "-e sleeps until the engine thread reports a completion: drop --inline-engine");
  }
  if (f.events && o->verb == Verb::kWrite) {
    return refuse(err, "-e: events are not available on the WRITE verb (write_bw, write_lat)");
  }
  o->use_event = f.events;
  if (!f.eq_num.empty()) {
    if (o->verb == Verb::kWrite) {
      return refuse(err, "-X: events are not available on the WRITE verb (write_bw, write_lat)");
    }
    if (!int_in("eq_num", f.eq_num, kMinEqNum, kMaxEqNum, &o->eq_num, err)) return false;
    if (!f.events)
      return refuse(err, "-X: events must be enabled (-e) to select a completion vector");
  }
  if (f.bidir && !bw) return refuse(err, "-b: bidirectional is only available in bw tests");
  o->duplex = f.bidir;
  if (f.no_peak && !bw) return refuse(err, "-N: noPeak is only valid for bw tests");
  o->no_peak = f.no_peak;
  if ((f.unsorted || f.histogram) && bw)
    return refuse(err, "-U/-H: available only on latency tests");
  o->report_unsorted = f.unsorted;
  o->report_histogram = f.histogram;
  if (!f.qp_timeout.empty() && !int_in("qp-timeout", f.qp_timeout, 0, 31, &o->qp_timeout, err)) {
    return false;
  }
  if (!f.sl.empty() && !int_in("sl", f.sl, 0, 15, &o->sl, err)) return false;
  return take_output(f, o, err) && take_limits(f, o, err);
}

// The GRH's traffic class and hop limit, TOS, the latency gap and --timeout.
bool take_network(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  if (!f.tclass.empty() && !int_in("tclass", f.tclass, 0, 255, &o->traffic_class, err)) {
    return false;
  }
  // perftest 6.06: both only for Raw Ethernet QPs (-T also with rdma_cm); -L may repeat the
  // default.
  if (!f.hop_limit.empty()) {
    int h = 0;
    if (!int_in("hop_limit", f.hop_limit, 0, 255, &h, err)) return false;
    if (h != kDefHopLimit) return refuse(err, "-L: Hop limit only valid for RawEth QP");
  }
  if (!f.tos.empty()) {
    int t = 0;
    if (!int_in("tos", f.tos, 0, 255, &t, err)) return false;
    return refuse(err, "-T: TOS only valid for rdma_cm based QP and RawEth QP (use --tclass)");
  }
  if (!f.latency_gap.empty()) {
    if (!int_in("latency_gap", f.latency_gap, 0, kMaxLatencyGapUs, &o->latency_gap_us, err)) {
      return false;
    }
    if (o->kind == TestKind::kBw && o->latency_gap_us > 0) {
      return refuse(err, "--latency_gap: only for latency tests");
    }
  }
  // (-1 stands for "not given". The negated test refuses nan too.)
  if (f.timeout->count() && o->timeout_s != -1 &&
      !(o->timeout_s >= 0 && o->timeout_s <= kMaxTimeoutS)) {
    return refuse(err, "timeout: '" + f.timeout->results().back() +
                           "' is not a number of seconds in 0..1000000");
  }
  if (o->timeout_s >= 0) o->oob_timeout_s = o->stall_timeout_s = o->timeout_s;
  // -F (ignore CPU frequency warnings) needs nothing: times are measured in nanoseconds.
  return true;
}

// --verify and the modes it excludes, --perform_warm_up, --mr_per_qp, --use-srq, --cpu_util.
bool take_modes(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  if (o->verify) {
    if (o->test_name != "write_bw" && o->test_name != "read_bw" && o->test_name != "send_bw") {
      return refuse(err, "--verify applies to write_bw, read_bw and send_bw");
    }
    if (o->duration_mode) return refuse(err, "--verify counts messages: use -n, not -D");
    if (o->num_qps != 1) return refuse(err, "--verify works with one QP (-q 1)");
    if (o->post_list != 1) return refuse(err, "--verify works with -l 1");
    if (o->duplex) return refuse(err, "--verify checks one direction: run it without -b");
    if (o->use_event) return refuse(err, "--verify polls its completions: run it without -e");
    if (o->conn != Conn::kRc) {
      return refuse(err, std::string("--verify needs a reliable connection: -c ") +
                             conn_name(o->conn) + " may lose messages without an error");
    }
  }
  if (f.perform_warm_up) {
    if (o->test_name != "write_bw" && o->test_name != "read_bw" && o->test_name != "atomic_bw") {
      return refuse(err, "--perform_warm_up: valid in write_bw, read_bw and atomic_bw");
    }
    if (o->verify) return refuse(err, "--perform_warm_up: --verify checks its own messages only");
    o->perform_warm_up = true;
  }
  // --use_old_post_send needs nothing: roce-perf always posts with ibv_post_send.
  if (o->reversed && o->verify)
    return refuse(err, "--reversed: --verify runs in the usual direction");
  if (f.mr_per_qp && o->verify) return refuse(err, "--mr_per_qp: --verify uses one memory region");
  o->mr_per_qp = f.mr_per_qp;
  if (f.use_srq && o->verb != Verb::kSend) {
    return refuse(err, "--use-srq: a shared receive queue is only available in SEND tests");
  }
  o->use_srq = f.use_srq;
  o->cpu_util = f.cpu_util;
  return true;
}

// --rate_limit_type PP: each QP's own limit (IBV_QP_RATE_LIMIT) in kb/s.
bool take_pp_rate(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  // perftest takes PP for Raw Ethernet QPs only; here every RC, UC and UD QP can be limited.
  using Units = PerfOptions::RateUnits;
  if (o->rate_units == Units::kPps) {
    return refuse(err, "--rate_limit_type PP: a QP's limit is a bit rate: --rate_units g or M");
  }
  // perftest's PP conversion from MB/s (rate x 8 x 1024 kb/s); Gb/s x 10^6.
  const double kbps =
      o->rate_units == Units::kMBps ? o->rate_limit * 8 * 1024 : o->rate_limit * 1e6;
  if (!(kbps >= kMinRateLimitKbps && kbps <= kMaxRateLimitKbps)) {
    return refuse(err, "--rate_limit_type PP: a QP's limit is 1 Mb/s to 400 Gb/s");
  }
  if (!f.burst_size.empty()) {
    return refuse(err, "--burst_size: bursts are the SW limiter's, not PP's");
  }
  o->rate_limit_pp_kbps = static_cast<uint32_t>(kbps);
  o->rate_limit = 0;
  return true;
}

// --rate_limit, --rate_units, --rate_limit_type, --burst_size (perftest's SW limiter, or PP).
bool take_rate_limit(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  if (!f.rate_units.empty()) {
    using Units = PerfOptions::RateUnits;
    if (!named(f.rate_units,
               {std::pair{"g", Units::kGbps}, std::pair{"M", Units::kMBps},
                std::pair{"p", Units::kPps}},
               &o->rate_units)) {
      return refuse(
          err, "rate_units: '" + f.rate_units + "': Invalid rate limit units. Please use M,g or p");
    }
  }
  if (!f.rate_limit.empty() || !f.rate_limit_type.empty()) {
    // perftest: a rate makes the limiter HW unless a type is given; HW on a RoCE port (no
    // static rate) falls back to SW with a note, unless HW was asked for by name.
    if (!f.rate_limit.empty() &&
        !(nonnegative("rate_limit", f.rate_limit, &o->rate_limit, err) && o->rate_limit > 0)) {
      return refuse(err, "rate_limit: '" + f.rate_limit + "' is not a rate above 0");
    }
    if (f.rate_limit_type == "HW") {
      return refuse(err, "--rate_limit_type HW: a RoCE port takes no static rate: use SW");
    }
    if (!f.rate_limit_type.empty() && f.rate_limit_type != "SW" && f.rate_limit_type != "PP") {
      return refuse(err, "rate_limit_type: '" + f.rate_limit_type + "': use HW, SW or PP");
    }
    if (f.rate_limit.empty()) return refuse(err, "--rate_limit_type: give the rate (--rate_limit)");
    const bool bw = o->kind == TestKind::kBw;
    if (f.rate_limit_type == "PP") {
      if (!take_pp_rate(f, o, err)) return false;
    } else if (!bw || o->verb == Verb::kAtomic || (o->verb == Verb::kSend && f.bidir)) {
      return refuse(err,
                    "--rate_limit: SW Rate limiter cann't be executed on non-BW, ATOMIC or "
                    "bidirectional SEND tests");
    }
    if (f.bidir && f.rate_limit_type != "PP") {
      return refuse(err,
                    "--rate_limit: perftest limits no -b run (it ignores the limit there): run "
                    "one direction");
    }
    if (o->run_infinitely) {
      return refuse(err, "--run_infinitely does not support rate limit feature yet");
    }
  }
  if (!f.burst_size.empty()) {
    if (!int_in("burst_size", f.burst_size, 0, INT_MAX, &o->burst_size, err)) return false;
    if (o->burst_size > 0 && o->rate_limit == 0) {
      return refuse(err, "--burst_size: Can't enable burst mode when rate limiter is off");
    }
  }
  return true;
}

// perftest's notes, once every check has passed (a bad command line gets one line only).
void print_notes(const detail::RawFlags& f, const PerfOptions& o, bool burst_defaulted) {
  // --cpu_util: perftest warns and goes on without the column.
  if (f.cpu_util && !o.duration_mode) {
    std::fprintf(stderr, " CPU Utilization works only with Duration mode.\n");
  } else if (f.cpu_util && o.run_infinitely) {
    std::fprintf(stderr, " --cpu_util: --run_infinitely has no sample window: no CPU column.\n");
  }
  if (o.rate_limit > 0) {
    if (burst_defaulted) std::fprintf(stderr, " Setting burst size to tx depth = %d\n", o.tx_depth);
    if (f.rate_limit_type.empty()) {
      std::fprintf(stderr, "The QP failed to accept HW rate limit, providing SW rate limit\n");
    }
  }
}

// Every check, in perftest's order; false with the one line to print.
bool take_flags(const detail::RawFlags& f, PerfOptions* o, std::string* err) {
  if (!(take_test(f, o, err) && take_counts(f, o, err) && take_queues(f, o, err) &&
        take_reporting(f, o, err) && take_network(f, o, err) && take_modes(f, o, err) &&
        take_rate_limit(f, o, err))) {
    return false;
  }
  if (o->test_corrupt >= 0 && !o->verify) return refuse(err, "--test-corrupt needs --verify");
  return true;
}

}  // namespace

const char* verb_name(Verb v) {
  static const char* const kNames[] = {"Send", "RDMA_Write", "RDMA_Read", "Atomic"};
  return kNames[static_cast<unsigned>(v)];
}

const char* conn_name(Conn c) {
  static const char* const kNames[] = {"RC", "UC", "UD"};
  return kNames[static_cast<unsigned>(c)];
}

int parse_options(int argc, char** argv, PerfOptions* o) {
  CLI::App app{detail::kUsage};
  detail::RawFlags f;
  detail::declare_flags(app, &f, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::printf("%s\n", app.version().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "roce-perf: %s\n", e.what());
    return 2;
  }
  std::string err;
  bool ok = take_flags(f, o, &err);
  const bool burst_defaulted = o->rate_limit > 0 && o->burst_size <= 0;
  ok = ok && apply_dependencies(o, &err);
  if (ok && o->verify) {
    for (uint64_t s : o->size_list) {
      if (s > kMaxVerifySize) ok = refuse(&err, "--verify: sizes up to 8 MiB");
    }
  }
  if (!ok) {
    std::fprintf(stderr, "roce-perf: %s\n", err.c_str());
    return 2;
  }
  print_notes(f, *o, burst_defaulted);
  return -1;
}

}  // namespace roce::perf
