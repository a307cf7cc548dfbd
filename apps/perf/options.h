// roce-perf's command line: perftest's flags and defaults (perftest 6.06, as Debian 12 ships
// it: src/perftest_parameters.c init_perftest_params / parser / force_dependecies), plus the
// stack's own device options. Parsing checks every value; a bad one yields one line and exit 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roce::perf {

// perftest's VerbType and TestType, in perftest's order (the order is printed and compared).
enum class Verb : uint8_t { kSend = 0, kWrite = 1, kRead = 2, kAtomic = 3 };
enum class TestKind : uint8_t { kLat = 0, kBw = 1 };
enum class AtomicType : uint8_t { kCmpAndSwap = 0, kFetchAndAdd = 1 };
// perftest's connection types roce-perf runs (-c), in perftest's order: RC, UC, UD.
enum class Conn : uint8_t { kRc = 0, kUc = 1, kUd = 2 };

inline constexpr uint64_t kMaxSize = 8388608;  // -a runs 2^1 .. 2^23
inline constexpr int kDefaultPort = 18515;
inline constexpr const char* kPerftestVersion = "6.06";
// perftest's UD values: the Q_Key both sides use, the GRH room in front of every UD receive,
// the largest UD inline send and the default inline size of UD latency tests, and the receive
// depth a UC/UD test gets by default (perftest_parameters.h DEF_QKEY, UD_ADDITION,
// MAX_INLINE_UD, DEF_INLINE_SEND_UD, UC_MAX_RX).
inline constexpr uint32_t kDefQkey = 0x11111111;
inline constexpr uint32_t kUdAddition = 40;
inline constexpr int kMaxInlineUd = 884;
inline constexpr int kDefInlineSendUd = 188;
inline constexpr int kUcMaxRx = 16000;
inline constexpr int kDefRxSend = 512;   // a SEND test's receive depth (DEF_RX_SEND)
inline constexpr int kDefHopLimit = 64;  // the GRH's (-L takes only this, as perftest for RoCE)

struct PerfOptions {
  std::string test_name;  // "write_bw", ...
  Verb verb = Verb::kWrite;
  TestKind kind = TestKind::kBw;
  Conn conn = Conn::kRc;   // -c
  std::string servername;  // empty: this side listens for the out-of-band connection
  bool reversed = false;   // --reversed: the listening side is the test's client (it sends)
  // The test's role (perftest's machine): the side that connects, unless --reversed.
  bool client() const { return servername.empty() == reversed; }
  // Who connects the out-of-band TCP connection (and writes first in each exchange).
  bool connects() const { return !servername.empty(); }

  // perftest flags.
  std::string ib_devname;
  int ib_port = 1;
  int gid_index = -1;  // -1: choose like perftest's get_best_gid_index
  bool use_gid_user = false;
  bool ipv6 = false;
  uint64_t size = 0;
  bool req_size = false;
  bool run_all = false;             // -a
  std::vector<uint64_t> size_list;  // the sizes a run goes through (one unless -a / --sizes)
  bool multi_size = false;          // -a or --sizes: perftest's RUN_ALL sequence
  uint64_t iters = 0;
  bool duration_mode = false;    // -D
  bool run_infinitely = false;   // --run_infinitely: bw tests send until stopped, a line every -D s
  bool perform_warm_up = false;  // --perform_warm_up: a send queue's worth of messages first
  bool mr_per_qp = false;        // --mr_per_qp: each QP's own memory region (and keys)
  bool use_srq = false;          // --use-srq: SEND receives go through one shared receive queue
  // Whether this side creates the SRQ (perftest's srq_exists): a side that receives SENDs.
  bool srq_exists() const { return use_srq && (kind == TestKind::kLat || !client() || duplex); }
  int duration = 5;
  int margin = -1;
  int num_qps = 1;
  int mtu = 0;  // 0: the port's active MTU
  int tx_depth = 0;
  int rx_depth = 0;
  int port = kDefaultPort;
  bool report_gbits = false;
  AtomicType atomic_type = AtomicType::kFetchAndAdd;
  int out_reads = 0;     // 0: the device's maximum
  int inline_size = -1;  // -1: perftest's default for the test
  int post_list = 1;
  int cq_mod = 100;
  bool req_cq_mod = false;
  bool no_peak = false;
  bool duplex = false;       // -b: both sides send (perftest's user_param.duplex)
  bool use_event = false;    // -e: sleep on completion events instead of polling the CQs
  int eq_num = 0;            // -X: the CQs' completion vector (with -e)
  bool report_both = false;  // --report-both: -b prints each direction's line too
  // --output: perftest's verbosity. Anything but kFull prints, per result, only that number
  // (the banner, addresses, headers and rule lines go).
  enum class Output { kFull, kBandwidth, kMessageRate, kLatency } output = Output::kFull;
  bool full_output() const { return output == Output::kFull; }
  // -w / -y: perftest's limit verifier (bandwidth in the report's unit, message rate in Mpps).
  bool limit_bw_on = false;
  double limit_bw = 0;
  bool limit_msgrate_on = false;
  double limit_msgrate = 0;
  bool report_unsorted = false;
  bool report_histogram = false;
  int qp_timeout = 14;
  int sl = 0;
  int traffic_class = 0;  // --tclass: the GRH's traffic class (IP DSCP + ECN)
  // --rate_limit (perftest's SW rate limiter): bursts of `burst_size` messages, each burst
  // starting a gap of burst_size / rate seconds before the next may start.
  enum class RateUnits { kGbps, kMBps, kPps };  // --rate_units g (default), M, p
  double rate_limit = 0;                        // 0: no limit
  RateUnits rate_units = RateUnits::kGbps;
  int burst_size = 0;  // 0: the TX depth
  // --rate_limit_type PP: each QP's own rate limit (IBV_QP_RATE_LIMIT, kb/s) instead of the SW
  // limiter (rate_limit then stays 0).
  uint32_t rate_limit_pp_kbps = 0;
  bool use_hugepages = false;                       // --use_hugepages: the buffer in huge pages
  bool out_json = false;                            // --out_json: the report file too
  std::string out_json_file = "perftest_out.json";  // --out_json_file (perftest's default)
  bool cpu_util = false;  // --cpu_util: a CPU_Util[%] column (perftest: -D runs only)
  bool cpu_util_on() const { return cpu_util && duration_mode && !run_infinitely; }
  int latency_gap_us = 0;  // --latency_gap: lat tests spin this long before each post

  // Our own.
  std::string config_file;
  std::string device_spec;
  bool verify = false;
  bool counters = false;
  bool inline_engine = false;
  // --transport: "native" (roce-perf) or "verbs" (roce-perf-verbs); empty: the binary's own.
  std::string transport;
  // --timeout: unset (-1), perftest's behaviour: exchanges with the peer wait for ever, a
  // refused connection fails at once; a transfer without progress still fails after 60 s.
  // Given (>= 0; 0 = for ever): it bounds all of these, and a refused connection is retried
  // until then (so both sides may be started at once).
  double timeout_s = -1;
  double oob_timeout_s = 0;
  double stall_timeout_s = 60;
  // Test hook (hidden flag --test-corrupt N): the verifying side flips a byte of message N
  // before checking it, so tests can show that a bad byte is found and reported.
  int64_t test_corrupt = -1;
};

// Parses argv into *o. Returns -1 to go on, or the exit code (0 after --help / --version, 2
// after a bad flag or value, with one line on stderr).
int parse_options(int argc, char** argv, PerfOptions* o);

// perftest's force_dependecies(): derived values (cq moderation for big messages, tx/rx depth
// capped by iterations, noPeak, ...). Returns false with *err for a contradiction.
bool apply_dependencies(PerfOptions* o, std::string* err);

const char* verb_name(Verb v);  // "Send", "RDMA_Write", "RDMA_Read", "Atomic"
const char* conn_name(Conn c);  // "RC", "UC", "UD"

}  // namespace roce::perf
