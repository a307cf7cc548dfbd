// One roce-perf run: the out-of-band exchange, the resources, the measurement loops and the
// reports. Methods are split by topic, as the engine's are:
//   session.cc   the connection sequence of each perftest test, and the reports
//   resources.cc buffers, QPs, addresses, connecting, work request templates
//   bw.cc        bandwidth loops (perftest's run_iter_bw / run_iter_bw_server / run_iter_bi)
//   lat.cc       latency loops (run_iter_lat_write / run_iter_lat / run_iter_lat_send)
//   verify.cc    --verify: every byte of every message checked end to end
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/perf/oob.h"
#include "apps/perf/options.h"
#include "apps/perf/report.h"
#include "apps/perf/transport.h"

namespace roce::perf {

// Where a QP's messages come from and go to inside the one registered buffer.
struct QpLayout {
  uint64_t send = 0;    // source of WRITE / SEND, destination of READ / atomic results
  uint64_t target = 0;  // what the peer writes / reads (advertised as VAddr)
  uint64_t recv = 0;    // SEND receive buffers
};

// Detects a transfer that stopped making progress (bounded by --timeout), or one that waits on
// a port whose link went down: with retry_cnt 7 a QP retries for ever, so without this a
// survivor whose net_memif peer was killed would wait out the whole stall limit.
class StallWatch {
 public:
  // `sleeping`: the idle passes sleep (-e waits on events), so each one reads the clock.
  // `link`: asked whether its link is lost once nothing moved for `link_grace_s`, then again
  // every tenth of that (nullptr: never).
  // `peer`: asked likewise whether the peer left (closed the out-of-band connection).
  explicit StallWatch(double timeout_s, bool sleeping = false, const LinkState* link = nullptr,
                      double link_grace_s = kLinkGraceS, const PeerState* peer = nullptr)
      : limit_ns_(static_cast<uint64_t>(timeout_s * 1e9)),
        mask_(sleeping ? 0 : 4095),
        link_(link),
        peer_(peer),
        grace_ns_(static_cast<uint64_t>(link_grace_s * 1e9)) {}
  static constexpr double kLinkGraceS = 1.0;
  void progress() { idle_ = 0; }
  // Called on every idle pass; a busy loop looks at the clock only every 4096 passes. True once
  // the limit passed without progress (--timeout 0: never), or the link was found lost.
  bool stalled() {
    if (limit_ns_ == 0) return false;
    ++idle_;
    if (mask_ && (idle_ & mask_) != 1) return false;
    const uint64_t now = now_ns();
    if (idle_ == 1) {
      since_ = now;
      probe_at_ = now + grace_ns_;
    }
    idle_ns_ = now - since_;
    if (idle_ns_ > limit_ns_) return true;
    if ((link_ || peer_) && now >= probe_at_) {
      probe_at_ = now + grace_ns_ / 10;
      lost_ = link_ && link_->link_lost();
      left_ = !lost_ && peer_ && peer_->peer_left();
      return lost_ || left_;
    }
    return false;
  }
  // What stalled() found, to follow "no progress": "for 60 s", or "for 1 s and the port's
  // link went down".
  std::string for_text() const {
    const std::string secs =
        "for " + std::to_string((idle_ns_ + 500'000'000) / 1'000'000'000) + " s";
    if (lost_) return secs + " and the port's link went down";
    return left_ ? secs + " and the peer closed the out-of-band connection" : secs;
  }
  static uint64_t now_ns() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }

 private:
  uint64_t limit_ns_;
  uint64_t mask_;
  const LinkState* link_;
  const PeerState* peer_;
  uint64_t grace_ns_;
  uint64_t idle_ = 0;
  uint64_t since_ = 0;
  uint64_t probe_at_ = 0;
  uint64_t idle_ns_ = 0;
  bool lost_ = false;
  bool left_ = false;
};

// "n of total", or "n" where there is no total (a -D run): how far a failed transfer got.
inline std::string count_text(uint64_t n, uint64_t total) {
  return total ? std::to_string(n) + " of " + std::to_string(total) : std::to_string(n);
}

// --cpu_util: perftest's figure, from the first line of /proc/stat ("cpu user nice system idle
// ...", in clock ticks, all CPUs) read as the sample window opens and as it closes: user time
// over user + idle time, in percent. (perftest's formula: nice, system, iowait and the rest count
// in neither.) 0 when the window never closed.
class CpuUtil {
 public:
  void read(int at);  // 0: the window opens, 1: it closes
  double percent() const;

 private:
  long long user_[2] = {0, 0}, idle_[2] = {0, 0};
};

// perftest's -D state machine (catch_alarm), driven by the clock instead of SIGALRM:
// START --margin--> SAMPLE --duration-2*margin--> STOP_SAMPLE --margin--> END. Messages count
// only while sampling; the sample window's ends are the report's timestamps.
class DurationClock {
 public:
  enum State { kStart, kSample, kStopSample, kEnd };
  // With `cpu` (--cpu_util), /proc/stat is read as the window opens and closes.
  explicit DurationClock(CpuUtil* cpu = nullptr) : cpu_(cpu) {}
  void start(uint64_t now, int duration_s, int margin_s) {
    const uint64_t s = 1'000'000'000;
    sample_at_ = now + static_cast<uint64_t>(margin_s) * s;
    stop_at_ = sample_at_ + static_cast<uint64_t>(duration_s - 2 * margin_s) * s;
    end_at_ = stop_at_ + static_cast<uint64_t>(margin_s) * s;
    state_ = kStart;
    tick(now);
  }
  void tick(uint64_t now) {
    if (state_ == kStart && now >= sample_at_) {
      state_ = kSample;
      sample_start_ = now;
      if (cpu_) cpu_->read(0);
    }
    if (state_ == kSample && now >= stop_at_) {
      state_ = kStopSample;
      sample_end_ = now;
      if (cpu_) cpu_->read(1);
    }
    if (state_ == kStopSample && now >= end_at_) state_ = kEnd;
  }
  // tick(now()) on every kPollStride-th call only, for a loop that passes here once per burst:
  // perftest's alarm costs its loop nothing, a clock read (vDSO clock_gettime, ~25 ns here)
  // cost write_bw's sender ~4 % of its core when read on every pass. Under load a pass takes
  // about a microsecond, so the window's ends move by some microseconds in seconds; the
  // message count and the window's timestamps change at the same ticks and stay consistent.
  static constexpr uint32_t kPollStride = 16;
  template <typename NowFn>
  void poll(NowFn&& now) {
    if (++polls_ % kPollStride == 0) tick(now());
  }
  State state() const { return state_; }
  bool sampling() const { return state_ == kSample; }
  bool done() const { return state_ == kEnd; }
  uint64_t sample_start() const { return sample_start_; }
  uint64_t sample_end() const { return sample_end_; }

 private:
  State state_ = kStart;
  uint64_t sample_at_ = 0, stop_at_ = 0, end_at_ = 0;
  uint64_t sample_start_ = 0, sample_end_ = 0;
  uint32_t polls_ = 0;
  CpuUtil* cpu_;
};

class PerfTest {
 public:
  PerfTest(const PerfOptions& o, Transport& t) : o_(o), t_(t) {}
  ~PerfTest();
  // Runs the whole test; returns the exit code (0 ok, 1 runtime failure, 2 bad user input)
  // and has printed the one error line itself.
  int run();

 private:
  // session.cc
  bool prelude();
  bool run_write_read_atomic_bw();
  bool run_send_bw();
  bool run_write_lat();
  bool run_read_lat();
  bool run_send_lat();
  bool exchange_addresses(bool first_single);
  bool print_addresses_and_exchange();
  bool hand_shake();
  bool close_connection();
  bool bw_client_sizes();
  bool bw_duplex_sizes();
  bool send_bw_duplex();
  bool exchange_and_print_sum();
  bool fail(const std::string& why, int code = 1);
  // Prints a bandwidth result (print_bw_report) and counts it for the limit verifier.
  void report_bw(const BwReport& r, const BwReport* remote = nullptr);
  // A transfer that made no progress for --timeout / the default stall limit, or whose link
  // went down (`watch` says which).
  bool fail_stalled(const StallWatch& watch, uint64_t done, uint64_t total);
  void linger();

  // resources.cc
  bool check_device();
  // -c UD: a message fits one packet. After the MTU exchange, the sizes become at most the MTU
  // as perftest makes them (-a stops at the MTU, -s above it becomes the MTU); an explicit
  // --sizes list with a bigger size is an error.
  bool clamp_ud_sizes();
  bool allocate();
  bool ud() const { return o_.conn == Conn::kUd; }
  // The length of a receive for `size`-byte messages: UD's also hold the GRH.
  uint64_t recv_len(uint64_t size) const { return ud() ? size + kUdAddition : size; }
  // A receive completion's length against `size`-byte messages: a peer given another -s fills
  // our receives in part (or overflows them), and counted as ours its messages would skew the
  // results. False after fail() naming both sizes.
  bool recv_len_ok(uint32_t byte_len, uint64_t size);
  void set_up_connection();
  bool connect_qps();
  void set_send_wqes(uint64_t size);
  bool post_receives(uint64_t size);
  uint64_t inc(uint64_t size) const;  // perftest's INC(): stride of messages in a cycle buffer
  bool completion_error(const Completion& c, const char* where, uint64_t done, uint64_t total);
  // -e: sleeps until a CQ of `cqs` (Transport::kSendCq / kRecvCq) holds a completion, for at
  // most kEventSliceS so that the loops still see stalls and interrupts; false after an
  // error (fail() was called). Without -e, or with cqs 0, returns true at once.
  static constexpr double kEventSliceS = 0.1;
  bool await_cqs(unsigned cqs);
  StallWatch stall_watch(bool sleeping) const {
    return StallWatch(o_.stall_timeout_s, sleeping, &t_, StallWatch::kLinkGraceS, &oob_);
  }
  StallWatch stall_watch() const { return stall_watch(o_.use_event); }

  // bw.cc
  bool run_iter_bw(uint64_t size);
  bool run_iter_bw_server(uint64_t size);
  bool run_iter_bw_infinitely(uint64_t size);
  bool warm_up();
  bool run_iter_bw_server_infinitely(uint64_t size);
  bool run_iter_bi(uint64_t size);
  class BwSender;
  class BwReceiver;
  static constexpr double kMaxRateGapNs = 10e9;
  static constexpr uint64_t kHugePageSize = uint64_t{2} << 20;  // perftest's HUGEPAGE_ALIGN
  bool rate_gap_ns(uint64_t size, uint64_t* gap_ns);
  class InfiniteReport;
  // The report's window: -D's sample, or the end of a -n run without per-message stamps.
  void finish_bw_window(const DurationClock& dur, uint64_t tot_iters);
  BwReport bw_report(uint64_t size) const;

  // lat.cc
  bool run_iter_lat_write(uint64_t size);
  bool run_iter_lat(uint64_t size);
  bool run_iter_lat_send(uint64_t size);
  template <typename Pred>
  bool spin(StallWatch& watch, unsigned cqs, Pred pred);
  void latency_gap();
  void lat_report(uint64_t size);

  // verify.cc
  void plan_verify();
  uint64_t verify_slots(uint64_t size, bool region) const;
  bool verify_sync_params(uint64_t size);
  bool verify_post_receives(uint64_t size);
  bool verify_post_run(uint64_t size, uint64_t first, uint64_t count, uint32_t* crc);
  bool verify_write(uint64_t size);
  bool verify_read(uint64_t size);
  bool verify_send(uint64_t size);
  bool verified_run_done(uint64_t t0);
  void print_verify_summary() const;

  PerfOptions o_;
  Transport& t_;
  OobChannel oob_;
  VersionInfo peer_;
  int error_code_ = 0;
  std::string error_;

  // Negotiated.
  int cycle_buffer_ = 4096;
  int cache_line_ = 64;
  Mtu mtu_ = Mtu::k1024;
  int gid_index_ = 0;
  int out_reads_ = 1;

  // Resources.
  uint8_t* buf_ = nullptr;
  uint64_t buf_len_ = 0;
  MemoryRegion mr_;
  std::vector<MemoryRegion> qp_mrs_;  // --mr_per_qp: QP i's own region over the same buffer
  const MemoryRegion& mr_of(size_t qp) const { return qp_mrs_.empty() ? mr_ : qp_mrs_[qp]; }
  uint64_t unit_ = 0;  // perftest's BUFF_SIZE(size, cycle_buffer)
  std::vector<QpLayout> layout_;
  std::vector<KeyMessage> my_dest_, rem_dest_;
  std::vector<WorkRequest> wr_;   // num_qps x post_list templates
  std::vector<RecvRequest> rwr_;  // one per QP
  uint32_t rx_posted_ = 0;        // receives posted per QP by post_receives

  // Measurement (allocated once; the loops only write into them).
  std::vector<uint64_t> tposted_, tcompleted_, scratch_;
  std::vector<uint64_t> scnt_, ccnt_;
  std::vector<Completion> wc_;
  uint64_t measured_iters_ = 0;  // duration mode: messages in the sample window
  uint64_t sample_ns_ = 0;       // duration mode: length of the sample window
  BwReport last_report_;
  BwLimits limits_;  // -w / -y
  CpuUtil cpu_;      // --cpu_util
  CpuUtil* cpu() { return o_.cpu_util_on() ? &cpu_ : nullptr; }

  // --verify.
  struct VerifyState {
    uint64_t region_slots = 0;  // messages per pass (WRITE / READ) or receive slots (SEND)
    uint64_t src_slots = 0;     // requester-side slots
    uint64_t bytes = 0;         // verified so far
    uint64_t messages = 0;
    uint64_t passes = 0;
    uint64_t bad_msg = 0;  // where this side found the first bad byte
    uint64_t bad_off = 0;
    bool sizes_agreed = false;  // the kSizes record went both ways
  } vfy_;
};

}  // namespace roce::perf
