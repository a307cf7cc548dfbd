#include "apps/perf/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "stack/core/types.h"

namespace roce::perf {

namespace {

// perftest's limits (perftest_parameters.h).
constexpr int kMinIter = 5, kMaxIter = 100000000;
constexpr int kMinTx = 1, kMaxTx = 15000;
constexpr int kMinRx = 1, kMaxRx = 16384;
constexpr int kDefRxSend = 512;
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

bool parse_long(const std::string& s, long long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

// A value for flag `name` in [lo, hi]; false with *err otherwise.
bool int_in(const char* name, const std::string& s, long long lo, long long hi, int* out,
            std::string* err) {
  long long v = 0;
  if (!parse_long(s, &v) || v < lo || v > hi) {
    *err = std::string(name) + ": '" + s + "' is not a number in " + std::to_string(lo) + ".." +
           std::to_string(hi);
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

// A finite number of 0 or more (perftest's -w / -y), in int_in's manner.
bool nonnegative(const char* name, const std::string& s, double* out, std::string* err) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
    *err = std::string(name) + ": '" + s + "' is not a number of 0 or more";
    return false;
  }
  *out = v;
  return true;
}

// The value of `s` among `names` (perftest's strcmp chains); false if none is `s`.
template <typename E>
bool named(const std::string& s, std::initializer_list<std::pair<const char*, E>> names, E* out) {
  for (const auto& [name, value] : names) {
    if (s == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

// perftest's -s: a number with an optional K or M suffix, 1 .. UINT_MAX/2.
bool parse_size(const std::string& in, uint64_t* out, std::string* err) {
  std::string s = in;
  uint64_t factor = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M')) {
    factor = s.back() == 'K' ? 1024 : 1024 * 1024;
    s.pop_back();
  }
  long long v = 0;
  if (!parse_long(s, &v) || v < 1 || static_cast<uint64_t>(v) > UINT_MAX / 2 / factor) {
    *err = "size: '" + in + "' is not a message size in 1.." + std::to_string(UINT_MAX / 2) +
           " (a K or M suffix is allowed)";
    return false;
  }
  *out = static_cast<uint64_t>(v) * factor;
  return true;
}

bool parse_size_list(const std::string& in, std::vector<uint64_t>* out, std::string* err) {
  size_t start = 0;
  while (start <= in.size()) {
    const size_t comma = in.find(',', start);
    const std::string item = in.substr(start, comma == std::string::npos ? comma : comma - start);
    uint64_t v = 0;
    if (!parse_size(item, &v, err)) {
      *err = "--sizes: " + *err;
      return false;
    }
    out->push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
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
  CLI::App app{
      "roce-perf: perftest-style bandwidth and latency tests over the userspace RoCEv2 stack.\n"
      "  roce-perf TEST [options]          server side\n"
      "  roce-perf TEST [options] SERVER   client side (SERVER: the server's IPv4 address)\n"
      "TEST: write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw"};
  app.set_version_flag("-V,--version", std::string("Version: ") + kPerftestVersion +
                                           " (roce-perf, perftest-compatible)");
  std::string test, server, dev, ib_port, gid, size, sizes, iters, duration, margin, qps, mtu, tx,
      rx, port, conn, atomic, outs, inl, post_list, cq_mod, qp_timeout, sl, eq_num, tclass,
      hop_limit, tos, output, limit_bw, limit_msgrate, latency_gap, rate_limit, rate_units,
      rate_limit_type, burst_size;
  bool all = false, cpu_freq = false, gbits = false, unsorted = false, histogram = false,
       rdma_cm = false, comm_rdma_cm = false, bidir = false, events = false, no_peak = false,
       run_infinitely = false, perform_warm_up = false, old_post_send = false, reversed = false,
       mr_per_qp = false, use_srq = false, cpu_util = false;
  app.add_option("test", test, "test to run")->required()->type_name("TEST");
  app.add_option("server", server, "the server's IPv4 address or name (client side)")
      ->type_name("SERVER");
  app.add_option("-d,--ib-dev", dev, "device name (a [device NAME] of the configuration)")
      ->type_name("NAME");
  app.add_option("-i,--ib-port", ib_port, "port (1)")->type_name("N");
  app.add_option("-x,--gid-index", gid, "GID index (default: IPv4 GID if any, like perftest)")
      ->type_name("N");
  app.add_flag("--ipv6", o->ipv6, "prefer an IPv6 GID when choosing one");
  app.add_option("-s,--size", size, "message size (K/M suffix)")->type_name("BYTES");
  app.add_flag("-a,--all", all, "all sizes 2 .. 2^23");
  app.add_option("-n,--iters", iters, "iterations")->type_name("N");
  app.add_option("-D,--duration", duration, "run for this many seconds")->type_name("SECONDS");
  app.add_option("-f,--margin", margin, "margin (s) at both ends of a -D run")
      ->type_name("SECONDS");
  app.add_option("-q,--qp", qps, "number of QPs (bw tests)")->type_name("N");
  app.add_option("-m,--mtu", mtu, "path MTU: 256, 512, 1024, 2048, 4096")->type_name("BYTES");
  app.add_option("-t,--tx-depth", tx, "send queue depth")->type_name("N");
  app.add_option("-r,--rx-depth", rx, "receive queue depth (send tests)")->type_name("N");
  app.add_option("-p,--port", port, "TCP port of the exchange (18515)")->type_name("PORT");
  app.add_flag("-F,--CPU-freq", cpu_freq, "accepted, ignored (timestamps are nanoseconds)");
  app.add_flag("--report_gbits", gbits, "report Gb/s instead of MB/s");
  app.add_option("-c,--connection", conn, "connection type: RC (default), UC, UD")
      ->type_name("RC|UC|UD");
  app.add_option("-A,--atomic_type", atomic, "CMP_AND_SWAP or FETCH_AND_ADD")->type_name("TYPE");
  app.add_option("-o,--outs", outs, "outstanding READs / atomics")->type_name("N");
  app.add_option("-I,--inline_size", inl, "largest message sent inline")->type_name("BYTES");
  app.add_option("-l,--post_list", post_list, "work requests per post (bw tests)")->type_name("N");
  app.add_option("-Q,--cq-mod", cq_mod, "a completion every this many messages")->type_name("N");
  app.add_flag("-N,--noPeak", no_peak, "skip the peak bandwidth");
  app.add_flag("--mr_per_qp", mr_per_qp,
               "each QP registers the buffer in a memory region of its own and uses its keys");
  app.add_flag("--use-srq", use_srq,
               "SEND tests: the receiving side's QPs share one receive queue of -r entries");
  app.add_flag("--reversed", reversed,
               "the side given no SERVER sends and the other receives (both sides give it)");
  app.add_flag("--perform_warm_up", perform_warm_up,
               "write_bw, read_bw, atomic_bw: each QP sends a send queue's worth of messages, "
               "and waits for them, before each run");
  app.add_flag("--use_old_post_send", old_post_send,
               "accepted: roce-perf always posts with ibv_post_send (the banner's ibv_wr* API: "
               "OFF)");
  app.add_flag("--run_infinitely", run_infinitely,
               "bw tests: send until interrupted, printing the last -D seconds' result every -D "
               "seconds (default 5)");
  app.add_flag("-U,--report-unsorted", unsorted, "print every latency sample, unsorted");
  app.add_flag("-H,--report-histogrm", histogram, "print every latency sample, sorted");
  app.add_option("-u,--qp-timeout", qp_timeout, "local ACK timeout exponent (14)")->type_name("N");
  app.add_option("-S,--sl", sl, "service level")->type_name("N");
  app.add_option("--tclass", tclass,
                 "traffic class of the QPs' GRH: the IP header's DSCP (its two ECN bits are the "
                 "device's: key ecn)")
      ->type_name("N");
  app.add_option("-L,--hop_limit", hop_limit,
                 "64 only, as perftest takes for RC / UC / UD QPs (RoCEv2 frames carry the "
                 "route's hop limit)")
      ->type_name("N");
  app.add_option("-T,--tos", tos, "refused, as perftest refuses it without rdma_cm")
      ->type_name("N");
  app.add_option("--rate_limit", rate_limit,
                 "bw tests: send at most this rate (--rate_units), in bursts of --burst_size "
                 "messages (perftest's SW limiter)")
      ->type_name("RATE");
  app.add_option("--rate_units", rate_units, "g: Gb/s (default), M: MB/s, p: messages/s")
      ->type_name("g|M|p");
  app.add_option("--rate_limit_type", rate_limit_type,
                 "SW (roce-perf's only: HW, the default, falls back to it as perftest's does "
                 "where the port takes no static rate)")
      ->type_name("SW|HW|PP");
  app.add_option("--burst_size", burst_size, "messages per burst of the rate limiter (-t)")
      ->type_name("N");
  app.add_flag("--use_hugepages", o->use_hugepages,
               "the buffer in huge pages (2 MiB; they must be reserved: vm.nr_hugepages)");
  app.add_flag("--out_json", o->out_json,
               "also write each result to --out_json_file, in perftest's format (its \"JSON\": "
               "unquoted keys), replacing the file's last one");
  app.add_option("--out_json_file", o->out_json_file,
                 "the --out_json file (perftest_out.json in the working directory)")
      ->type_name("FILE");
  app.add_flag("--cpu_util", cpu_util,
               "-D runs: add the CPU's use over the sample window, in percent, to the report "
               "(perftest's: user / (user + idle) time of /proc/stat)");
  app.add_option("--latency_gap", latency_gap,
                 "lat tests: wait this many microseconds before each post (the samples include "
                 "it, as perftest's)")
      ->type_name("USEC");
  app.add_flag("-R,--rdma_cm", rdma_cm, "not supported");
  app.add_flag("-z,--comm_rdma_cm", comm_rdma_cm, "not supported");
  app.add_option("--output", output,
                 "print only this number per result: bandwidth or message_rate (bw tests), "
                 "latency (lat tests: t_avg)")
      ->type_name("UNITS");
  app.add_option("-w,--limit_bw", limit_bw,
                 "fail (exit 1) unless the bandwidth reaches this (the report's unit)")
      ->type_name("VALUE");
  app.add_option("-y,--limit_msgrate", limit_msgrate,
                 "fail (exit 1) unless the message rate reaches this (Mpps)")
      ->type_name("VALUE");
  app.add_flag("-b,--bidirectional", bidir, "both sides send at once (bw tests)");
  app.add_flag("-e,--events", events, "sleep on completion events instead of polling");
  app.add_option("-X,--eq_num", eq_num, "completion vector of the CQs (with -e)")->type_name("N");
  app.add_flag("--report-both", o->report_both,
               "with -b: also print each direction's result on its own (one size)");
  app.add_option("--config", o->config_file, "device configuration file (or ROCE_CONFIG)")
      ->type_name("FILE");
  app.add_option("--device", o->device_spec,
                 "device settings \"key=value; ...\" (port, ipv4, ipv6, mtu, mac, pcap, drop, "
                 "mode, cpu, ...), over ROCE_DEVICE")
      ->type_name("\"K=V; ...\"");
  app.add_flag("--verify", o->verify, "verify every byte (write_bw, read_bw, send_bw)");
  app.add_flag("--counters", o->counters, "print the device's counters at the end");
  app.add_flag("--inline-engine", o->inline_engine, "drive the engine from the test thread");
  app.add_option("--transport", o->transport,
                 "native: the stack's own API (roce-perf); verbs: <infiniband/verbs.h> over "
                 "our libibverbs (roce-perf-verbs)")
      ->check(CLI::IsMember({"native", "verbs"}))
      ->type_name("native|verbs");
  const CLI::Option* timeout_opt =
      app.add_option("--timeout", o->timeout_s,
                     "bound every wait: connecting (a refused connection is retried until then), "
                     "each exchange with the peer, a transfer without progress (default: "
                     "exchanges wait for ever as perftest's do; a stalled transfer fails after "
                     "60 s; 0: no bound)")
          ->type_name("SECONDS");
  const CLI::Option* sizes_opt =
      app.add_option("--sizes", sizes, "run these sizes in turn (comma-separated), like -a")
          ->type_name("LIST");
  app.add_option("--test-corrupt", o->test_corrupt)->group("");  // test hook, see options.h
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
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "roce-perf: %s\n", why.c_str());
    return 2;
  };
  const auto it = tests().find(test);
  if (it == tests().end()) {
    return fail("unknown test '" + test +
                "' (write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw)");
  }
  o->test_name = test;
  o->verb = it->second.verb;
  o->kind = it->second.kind;
  o->servername = server;
  o->reversed = reversed;  // before anything asks client()
  const bool bw = o->kind == TestKind::kBw;
  const bool rd_atomic = o->verb == Verb::kRead || o->verb == Verb::kAtomic;

  if (rdma_cm || comm_rdma_cm) {
    return fail(
        "rdma_cm (-R/-z) is not supported: roce-perf exchanges QP data over TCP, as "
        "perftest's Ethernet method does; run both sides without -R");
  }
  // perftest's change_conn_type: the same names and verb restrictions.
  if (conn == "UC") {
    if (rd_atomic) return fail("-c UC: UC connection not possible in READ/ATOMIC verbs");
    o->conn = Conn::kUc;
  } else if (conn == "UD") {
    if (o->verb != Verb::kSend) return fail("-c UD: UD connection only possible in SEND verb");
    o->conn = Conn::kUd;
  } else if (!conn.empty() && conn != "RC") {
    return fail("connection type '" + conn + "': choose RC, UC or UD (XRC, DC, SRD and RawEth " +
                "are not supported)");
  }
  if (!dev.empty()) o->ib_devname = dev;
  if (!ib_port.empty()) {
    if (!int_in("ib-port", ib_port, 1, 255, &o->ib_port, &err)) return fail(err);
    if (o->ib_port != 1) return fail("ib-port: a device has one port, port 1");
  }
  if (!gid.empty()) {
    if (!int_in("gid-index", gid, 0, kMaxGidIndex, &o->gid_index, &err)) return fail(err);
    o->use_gid_user = true;
  }
  o->size = o->verb == Verb::kAtomic ? 8 : (bw ? 65536 : 2);
  if (!size.empty()) {
    if (!parse_size(size, &o->size, &err)) return fail(err);
    o->req_size = true;
  }
  o->run_all = all;
  if (sizes_opt->count()) {  // (an empty list too: it names no size)
    if (all) return fail("--sizes and -a both choose the sizes: give one");
    if (!parse_size_list(sizes, &o->size_list, &err)) return fail(err);
  }
  o->iters = bw && o->verb == Verb::kWrite ? 5000 : 1000;
  if (!iters.empty()) {
    int n = 0;
    if (!int_in("iters", iters, kMinIter, kMaxIter, &n, &err)) return fail(err);
    o->iters = static_cast<uint64_t>(n);
  }
  if (!duration.empty()) {
    if (!int_in("duration", duration, 1, INT_MAX, &o->duration, &err)) return fail(err);
    o->duration_mode = true;
  }
  if (run_infinitely) {
    // perftest's "Run infinitely dependencies", in its order.
    if (events) return fail("--run_infinitely does not support events feature yet");
    if (!bw) return fail("--run_infinitely exists only in BW tests for now");
    if (bidir && o->verb == Verb::kSend) {
      return fail("--run_infinitely mode is not supported in SEND Bidirectional BW test");
    }
    if (all || sizes_opt->count()) return fail("--run_infinitely runs one size: no -a or --sizes");
    o->run_infinitely = true;
    o->duration_mode = true;  // perftest's test_type = DURATION: -D is the reporting period
  }
  if (!margin.empty() && !int_in("margin", margin, 0, INT_MAX, &o->margin, &err)) {
    return fail(err);
  }
  if (!qps.empty()) {
    if (!bw) return fail("-q: multiple QPs only available on bw tests");
    if (!int_in("qp", qps, 1, kMaxQps, &o->num_qps, &err)) return fail(err);
  }
  if (!mtu.empty()) {
    if (!int_in("mtu", mtu, 256, 4096, &o->mtu, &err)) return fail(err);
    if (o->mtu & (o->mtu - 1))
      return fail("mtu: '" + mtu + "' is not one of 256 512 1024 2048 4096");
  }
  o->tx_depth = bw ? 128 : 1;
  if (!tx.empty() && !int_in("tx-depth", tx, kMinTx, kMaxTx, &o->tx_depth, &err)) return fail(err);
  o->rx_depth = o->verb == Verb::kSend ? kDefRxSend : 1;
  if (!rx.empty()) {
    if (!int_in("rx-depth", rx, kMinRx, kMaxRx, &o->rx_depth, &err)) return fail(err);
    if (o->verb != Verb::kSend && o->rx_depth > 1)
      return fail("rx-depth: on RDMA verbs it can only be 1");
  }
  if (!port.empty() && !int_in("port", port, 1, 65535, &o->port, &err)) return fail(err);
  o->report_gbits = gbits;
  if (!atomic.empty()) {
    if (o->verb != Verb::kAtomic) return fail("-A: the atomic type applies to atomic tests only");
    if (atomic == "CMP_AND_SWAP") {
      o->atomic_type = AtomicType::kCmpAndSwap;
    } else if (atomic == "FETCH_AND_ADD") {
      o->atomic_type = AtomicType::kFetchAndAdd;
    } else {
      return fail("atomic_type: '" + atomic + "' is not CMP_AND_SWAP or FETCH_AND_ADD");
    }
  }
  if (!outs.empty()) {
    if (!rd_atomic) return fail("-o: outstanding reads apply to READ and atomic tests only");
    if (!int_in("outs", outs, 1, 65535, &o->out_reads, &err)) return fail(err);
  }
  if (!inl.empty()) {
    if (rd_atomic) return fail("-I: inline data is not available on READ/atomic tests");
    if (!int_in("inline_size", inl, 0, kMaxInline, &o->inline_size, &err)) return fail(err);
  }
  if (!post_list.empty()) {
    if (!int_in("post_list", post_list, 1, 1024, &o->post_list, &err)) return fail(err);
    if (o->post_list > 1 && !bw) return fail("-l: post lists are supported in bw tests only");
  }
  if (!cq_mod.empty()) {
    if (!int_in("cq-mod", cq_mod, 1, kMaxCqMod, &o->cq_mod, &err)) return fail(err);
    o->req_cq_mod = true;
  }
  if (events && o->inline_engine) {
    return fail("-e sleeps until the engine thread reports a completion: drop --inline-engine");
  }
  if (events && o->verb == Verb::kWrite) {
    return fail("-e: events are not available on the WRITE verb (write_bw, write_lat)");
  }
  o->use_event = events;
  if (!eq_num.empty()) {
    if (o->verb == Verb::kWrite) {
      return fail("-X: events are not available on the WRITE verb (write_bw, write_lat)");
    }
    if (!int_in("eq_num", eq_num, kMinEqNum, kMaxEqNum, &o->eq_num, &err)) return fail(err);
    if (!events) return fail("-X: events must be enabled (-e) to select a completion vector");
  }
  if (bidir && !bw) return fail("-b: bidirectional is only available in bw tests");
  o->duplex = bidir;
  if (no_peak && !bw) return fail("-N: noPeak is only valid for bw tests");
  o->no_peak = no_peak;
  if ((unsorted || histogram) && bw) return fail("-U/-H: available only on latency tests");
  o->report_unsorted = unsorted;
  o->report_histogram = histogram;
  if (!qp_timeout.empty() && !int_in("qp-timeout", qp_timeout, 0, 31, &o->qp_timeout, &err)) {
    return fail(err);
  }
  if (!sl.empty() && !int_in("sl", sl, 0, 15, &o->sl, &err)) return fail(err);
  if (!output.empty()) {
    using Out = PerfOptions::Output;
    if (!named(output,
               {std::pair{"bandwidth", Out::kBandwidth},
                std::pair{"message_rate", Out::kMessageRate}, std::pair{"latency", Out::kLatency}},
               &o->output)) {
      return fail("--output: '" + output +
                  "': invalid verbosity level output flag. Please use bandwidth, latency, "
                  "message_rate");
    }
    if (bw && o->output == PerfOptions::Output::kLatency) {
      return fail("--output: output verbosity level for BW can be: bandwidth, message_rate");
    }
    if (!bw && o->output != PerfOptions::Output::kLatency) {
      return fail("--output: output verbosity level for LAT can be: latency");
    }
  }
  o->limit_bw_on = !limit_bw.empty();
  o->limit_msgrate_on = !limit_msgrate.empty();
  if (o->limit_bw_on && !nonnegative("limit_bw", limit_bw, &o->limit_bw, &err)) return fail(err);
  if (o->limit_msgrate_on &&
      !nonnegative("limit_msgrate", limit_msgrate, &o->limit_msgrate, &err)) {
    return fail(err);
  }
  if (!bw && (o->limit_bw_on || o->limit_msgrate_on)) {
    return fail(std::string(o->limit_bw_on ? "limit_bw" : "limit_msgrate") +
                ": a limit applies to bw tests only");
  }
  if (!tclass.empty() && !int_in("tclass", tclass, 0, 255, &o->traffic_class, &err)) {
    return fail(err);
  }
  // perftest 6.06: both only for Raw Ethernet QPs (-T also with rdma_cm); -L may repeat the
  // default.
  if (!hop_limit.empty()) {
    int h = 0;
    if (!int_in("hop_limit", hop_limit, 0, 255, &h, &err)) return fail(err);
    if (h != kDefHopLimit) return fail("-L: Hop limit only valid for RawEth QP");
  }
  if (!tos.empty()) {
    int t = 0;
    if (!int_in("tos", tos, 0, 255, &t, &err)) return fail(err);
    return fail("-T: TOS only valid for rdma_cm based QP and RawEth QP (use --tclass)");
  }
  if (!latency_gap.empty()) {
    if (!int_in("latency_gap", latency_gap, 0, kMaxLatencyGapUs, &o->latency_gap_us, &err)) {
      return fail(err);
    }
    if (bw && o->latency_gap_us > 0) return fail("--latency_gap: only for latency tests");
  }
  // (-1 stands for "not given". The negated test refuses nan too.)
  if (timeout_opt->count() && o->timeout_s != -1 &&
      !(o->timeout_s >= 0 && o->timeout_s <= kMaxTimeoutS)) {
    return fail("timeout: '" + timeout_opt->results().back() +
                "' is not a number of seconds in 0..1000000");
  }
  if (o->timeout_s >= 0) o->oob_timeout_s = o->stall_timeout_s = o->timeout_s;
  (void)cpu_freq;  // perftest's -F: ignore CPU frequency warnings; we measure in nanoseconds

  if (o->verify) {
    if (o->test_name != "write_bw" && o->test_name != "read_bw" && o->test_name != "send_bw") {
      return fail("--verify applies to write_bw, read_bw and send_bw");
    }
    if (o->duration_mode) return fail("--verify counts messages: use -n, not -D");
    if (o->num_qps != 1) return fail("--verify works with one QP (-q 1)");
    if (o->post_list != 1) return fail("--verify works with -l 1");
    if (o->duplex) return fail("--verify checks one direction: run it without -b");
    if (o->use_event) return fail("--verify polls its completions: run it without -e");
    if (o->conn != Conn::kRc) {
      return fail(std::string("--verify needs a reliable connection: -c ") + conn_name(o->conn) +
                  " may lose messages without an error");
    }
  }
  if (perform_warm_up) {
    if (o->test_name != "write_bw" && o->test_name != "read_bw" && o->test_name != "atomic_bw") {
      return fail("--perform_warm_up: valid in write_bw, read_bw and atomic_bw");
    }
    if (o->verify) return fail("--perform_warm_up: --verify checks its own messages only");
    o->perform_warm_up = true;
  }
  (void)old_post_send;  // what roce-perf does anyway
  if (o->reversed && o->verify) return fail("--reversed: --verify runs in the usual direction");
  if (mr_per_qp && o->verify) return fail("--mr_per_qp: --verify uses one memory region");
  o->mr_per_qp = mr_per_qp;
  if (use_srq && o->verb != Verb::kSend) {
    return fail("--use-srq: a shared receive queue is only available in SEND tests");
  }
  o->use_srq = use_srq;
  o->cpu_util = cpu_util;
  if (!rate_units.empty()) {
    using Units = PerfOptions::RateUnits;
    if (!named(rate_units,
               {std::pair{"g", Units::kGbps}, std::pair{"M", Units::kMBps},
                std::pair{"p", Units::kPps}},
               &o->rate_units)) {
      return fail("rate_units: '" + rate_units +
                  "': Invalid rate limit units. Please use M,g or p");
    }
  }
  if (!rate_limit.empty() || !rate_limit_type.empty()) {
    // perftest: a rate makes the limiter HW unless a type is given; HW on a RoCE port (no
    // static rate) falls back to SW with the line below, unless HW was asked for by name.
    if (!rate_limit.empty() &&
        !(nonnegative("rate_limit", rate_limit, &o->rate_limit, &err) && o->rate_limit > 0)) {
      return fail("rate_limit: '" + rate_limit + "' is not a rate above 0");
    }
    if (rate_limit_type == "HW") {
      return fail("--rate_limit_type HW: a RoCE port takes no static rate: use SW");
    }
    if (!rate_limit_type.empty() && rate_limit_type != "SW" && rate_limit_type != "PP") {
      return fail("rate_limit_type: '" + rate_limit_type + "': use HW, SW or PP");
    }
    if (rate_limit.empty()) return fail("--rate_limit_type: give the rate (--rate_limit)");
    if (rate_limit_type == "PP") {
      // perftest takes PP for Raw Ethernet QPs only; here every RC, UC and UD QP can be limited.
      using Units = PerfOptions::RateUnits;
      if (o->rate_units == Units::kPps) {
        return fail("--rate_limit_type PP: a QP's limit is a bit rate: --rate_units g or M");
      }
      // perftest's PP conversion from MB/s (rate x 8 x 1024 kb/s); Gb/s x 10^6.
      const double kbps =
          o->rate_units == Units::kMBps ? o->rate_limit * 8 * 1024 : o->rate_limit * 1e6;
      if (!(kbps >= kMinRateLimitKbps && kbps <= kMaxRateLimitKbps)) {
        return fail("--rate_limit_type PP: a QP's limit is 1 Mb/s to 400 Gb/s");
      }
      if (!burst_size.empty()) return fail("--burst_size: bursts are the SW limiter's, not PP's");
      o->rate_limit_pp_kbps = static_cast<uint32_t>(kbps);
      o->rate_limit = 0;
    } else if (!bw || o->verb == Verb::kAtomic || (o->verb == Verb::kSend && bidir)) {
      return fail(
          "--rate_limit: SW Rate limiter cann't be executed on non-BW, ATOMIC or "
          "bidirectional SEND tests");
    }
    if (bidir && rate_limit_type != "PP") {
      return fail(
          "--rate_limit: perftest limits no -b run (it ignores the limit there): run "
          "one direction");
    }
    if (o->run_infinitely) return fail("--run_infinitely does not support rate limit feature yet");
  }
  if (!burst_size.empty()) {
    if (!int_in("burst_size", burst_size, 0, INT_MAX, &o->burst_size, &err)) return fail(err);
    if (o->burst_size > 0 && o->rate_limit == 0) {
      return fail("--burst_size: Can't enable burst mode when rate limiter is off");
    }
  }
  if (o->test_corrupt >= 0 && !o->verify) return fail("--test-corrupt needs --verify");
  const bool burst_defaulted = o->rate_limit > 0 && o->burst_size <= 0;
  if (!apply_dependencies(o, &err)) return fail(err);
  if (o->verify) {
    for (uint64_t s : o->size_list) {
      if (s > kMaxVerifySize) return fail("--verify: sizes up to 8 MiB");
    }
  }
  // perftest's notes, once every check has passed (a bad command line gets one line only).
  // --cpu_util: perftest warns and goes on without the column.
  if (cpu_util && !o->duration_mode) {
    std::fprintf(stderr, " CPU Utilization works only with Duration mode.\n");
  } else if (cpu_util && o->run_infinitely) {
    std::fprintf(stderr, " --cpu_util: --run_infinitely has no sample window: no CPU column.\n");
  }
  if (o->rate_limit > 0) {
    if (burst_defaulted)
      std::fprintf(stderr, " Setting burst size to tx depth = %d\n", o->tx_depth);
    if (rate_limit_type.empty()) {
      std::fprintf(stderr, "The QP failed to accept HW rate limit, providing SW rate limit\n");
    }
  }
  return -1;
}

bool apply_dependencies(PerfOptions* o, std::string* err) {
  const bool bw = o->kind == TestKind::kBw;
  if (o->verb == Verb::kAtomic && o->size != 8) {
    *err = "size: message size cannot be changed for atomic tests (8 bytes)";
    return false;
  }
  if (o->run_all && o->duration_mode) {
    *err = "-D does not support running on all sizes (-a)";
    return false;
  }
  if (!o->size_list.empty() && o->duration_mode) {
    *err = "-D does not support --sizes";
    return false;
  }
  if (o->verb == Verb::kAtomic && (!o->size_list.empty() || o->run_all)) {
    *err = "-a/--sizes: atomic tests use 8-byte messages";
    return false;
  }
  o->multi_size = o->run_all || !o->size_list.empty();
  if (!o->duration_mode) {
    if (static_cast<uint64_t>(o->tx_depth) > o->iters) o->tx_depth = static_cast<int>(o->iters);
    if (o->verb == Verb::kSend && static_cast<uint64_t>(o->rx_depth) > o->iters) {
      o->rx_depth = static_cast<int>(o->iters);
    }
    // UC and UD have no RNR flow control: a receiver that runs out of receives loses messages,
    // so perftest posts as many as the run sends (up to UC_MAX_RX) unless told otherwise.
    if (o->conn != Conn::kRc && o->rx_depth == kDefRxSend) {
      o->rx_depth = static_cast<int>(std::min<uint64_t>(o->iters, kUcMaxRx));
    }
  }
  // Each QP's share of the SRQ's receives is rx_depth / num_qps (perftest's size_per_qp).
  if (o->use_srq && o->num_qps > o->rx_depth) {
    *err = "--use-srq: the SRQ's depth (" + std::to_string(o->rx_depth) +
           "; -r, or -n when smaller) must be at least the number of QPs (" +
           std::to_string(o->num_qps) + "; -q)";
    return false;
  }
  if (o->rate_limit > 0 && o->burst_size <= 0) o->burst_size = o->tx_depth;
  // Big messages need no completion moderation, and with it the bandwidth would be skewed.
  // (Not with -e: perftest keeps the moderation there, one event per completion would cost.)
  // (Nor for UD, whose messages are never big.)
  if (o->size > 8192 && !o->run_all && o->size_list.empty() && !o->req_cq_mod && !o->use_event &&
      o->conn != Conn::kUd) {
    o->cq_mod = 1;
  }
  if (o->cq_mod > o->tx_depth) o->cq_mod = o->tx_depth;
  if (o->verb == Verb::kRead || o->verb == Verb::kAtomic) o->inline_size = 0;
  if (o->post_list > 1) {
    if (!o->duration_mode && o->iters % static_cast<uint64_t>(o->post_list) != 0) {
      *err = "post_list: the number of iterations must be a multiple of the post list size";
      return false;
    }
    // A list is posted whole once the send queue has room for it (bw.cc): one longer than the
    // TX depth never would be. perftest has no such check; its run_iter_bw then waits for ever.
    if (o->post_list > o->tx_depth) {
      *err = "post_list: the post list size (" + std::to_string(o->post_list) +
             ") must not exceed the TX depth (" + std::to_string(o->tx_depth) + "; -t)";
      return false;
    }
    if (!o->req_cq_mod) {
      o->cq_mod = o->post_list;
    } else if (o->post_list % o->cq_mod != 0) {
      *err = "post_list: the post list size must be a multiple of the CQ moderation";
      return false;
    }
  }
  if (o->duration_mode) {
    if (o->use_event) {
      *err = "-D: duration mode doesn't work with events (-e)";
      return false;
    }
    o->iters = 0;
    o->no_peak = true;
    if (o->margin < 0) o->margin = o->duration / 4;
    if (!(o->duration > 2 * static_cast<int64_t>(o->margin))) {  // (2 * margin may pass INT_MAX)
      *err = "duration: DURATION must be greater than 2 * MARGIN";
      return false;
    }
  }
  // A SEND receiver has no posts to time; in -b both sides send, and both compute the peak.
  if (o->verb == Verb::kSend && bw && !o->client() && !o->duplex) o->no_peak = true;
  // perftest's work-around for odd receive depths in SEND tests.
  // (perftest: RUN_REGULAR only; with several sizes the extra receive would stay posted.)
  if (o->verb == Verb::kSend && o->rx_depth % 2 == 1 && !o->run_all && o->size_list.empty()) {
    o->rx_depth += 1;
  }
  if (!o->duration_mode && o->iters > 20000 && bw) o->no_peak = true;
  // Inline defaults for a device that supports inline data (ctx_set_max_inline).
  if (o->inline_size < 0) {
    o->inline_size = 0;
    if (!bw && o->verb == Verb::kWrite) o->inline_size = 220;
    if (!bw && o->verb == Verb::kSend)
      o->inline_size = o->conn == Conn::kUd ? kDefInlineSendUd : 236;
  }
  if (o->conn == Conn::kUd && o->inline_size > kMaxInlineUd) {
    std::fprintf(stderr, "Setting inline size to %d (Max inline size in UD)\n", kMaxInlineUd);
    o->inline_size = kMaxInlineUd;
  }
  if (o->verify) o->cq_mod = 1;  // every completion is checked where it lands
  // The sizes a run goes through.
  if (o->run_all) {
    o->size_list.clear();
    for (int i = 1; i < 24; ++i) o->size_list.push_back(uint64_t{1} << i);
  } else if (o->size_list.empty()) {
    o->size_list.push_back(o->size);
  }
  // Buffers are laid out for the largest size (perftest: -a sizes them for MAX_SIZE).
  uint64_t largest = 0;
  for (uint64_t s : o->size_list) largest = s > largest ? s : largest;
  if (o->run_all) largest = kMaxSize;
  o->size = largest;
  return true;
}

}  // namespace roce::perf
