// Bandwidth loops: perftest 6.06's run_iter_bw (the requester, any verb), run_iter_bw_server
// (the SEND receiver) and run_iter_bi (send_bw -b: both at once), same pacing, same
// signalling, same addresses.
// The loops allocate nothing, take no lock and make no system call (but the sleeps of -e);
// they only post, poll, drive an inline engine and write timestamps into arrays sized
// beforehand.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "apps/perf/perf_test.h"

namespace roce::perf {

namespace {
// wr_id = qp index << 40 | messages posted on that QP, modulo 2^40 (a --run_infinitely run may
// pass it: the count in a completion is taken modulo 2^40 too).
constexpr uint64_t kQpShift = 40;
constexpr uint64_t kCountMask = (uint64_t{1} << kQpShift) - 1;
}  // namespace

// The requester's half of a bandwidth loop (run_iter_bw's posting and send-completion
// polling), shared by run_iter_bw and run_iter_bi.
class PerfTest::BwSender {
 public:
  // `gap_ns`: --rate_limit's gap between the starts of two bursts (0: no limit).
  BwSender(PerfTest& p, uint64_t size, uint64_t gap_ns = 0)
      : p_(p),
        nq_(static_cast<uint64_t>(p.o_.num_qps)),
        pl_(static_cast<uint64_t>(p.o_.post_list)),
        cq_mod_(static_cast<uint64_t>(p.o_.cq_mod)),
        tx_depth_(static_cast<uint64_t>(p.o_.tx_depth)),
        iters_(p.o_.iters),
        tot_iters_(p.o_.iters * nq_),
        stride_(p.inc(size)),
        slots_(static_cast<uint64_t>(p.cycle_buffer_) / stride_),
        // perftest cycles the addresses through one cycle buffer for small messages.
        cycle_(pl_ == 1 && size <= static_cast<uint64_t>(p.cycle_buffer_) / 2),
        send_(p.o_.verb == Verb::kSend),
        duration_(p.o_.duration_mode),
        peak_(!p.o_.no_peak),
        gap_ns_(gap_ns),
        burst_(static_cast<uint64_t>(p.o_.burst_size)),
        local_base_(nq_),
        remote_base_(nq_) {  // before the loop: no allocation in it
    for (uint64_t i = 0; i < nq_; ++i) {
      p.scnt_[i] = p.ccnt_[i] = 0;
      local_base_[i] = p.wr_[i * pl_].local_addr;
      remote_base_[i] = p.wr_[i * pl_].remote_addr;
    }
  }

  // Posts what the send queues have room for; false after a failed post (p.fail was called).
  // With a rate limit, perftest's SW limiter: a burst may start once the gap that the last
  // one started has passed, and ends after burst_size messages (whole lists), on any QPs.
  bool post(const DurationClock& dur, bool* busy) {
    for (uint64_t q = 0; q < nq_; ++q) {
      if (gap_ns_ && !in_burst_) {
        const uint64_t now = StallWatch::now_ns();
        if (gap_deadline_ > now) continue;
        gap_deadline_ = now + gap_ns_;
        in_burst_ = true;
        burst_iter_ = 0;
      }
      WorkRequest* w = &p_.wr_[q * pl_];
      uint64_t& scnt = p_.scnt_[q];
      while ((scnt < iters_ || duration_) && scnt - p_.ccnt_[q] + pl_ <= tx_depth_ &&
             (!gap_ns_ || in_burst_)) {
        if (duration_ && dur.done()) break;
        const uint64_t s = scnt;
        for (uint64_t j = 0; j < pl_; ++j) w[j].wr_id = q << kQpShift | ((s + j + 1) & kCountMask);
        if (pl_ == 1) {
          // A completion every cq_mod messages, and for the last one.
          w->signaled = s % cq_mod_ == cq_mod_ - 1 || (!duration_ && s == iters_ - 1);
        }
        if (peak_) p_.tposted_[totscnt_] = StallWatch::now_ns();
        if (const int rc =
                p_.t_.post_send(static_cast<uint32_t>(q), w, static_cast<uint32_t>(pl_))) {
          return p_.fail("Couldn't post send: qp " + std::to_string(q) +
                         " scnt=" + std::to_string(s) + ": " + std::strerror(rc));
        }
        if (cycle_) {
          if ((s + 1) % slots_ == 0) {
            w->local_addr = local_base_[q];
            if (!send_) w->remote_addr = remote_base_[q];
          } else {
            w->local_addr += stride_;
            if (!send_) w->remote_addr += stride_;
          }
        }
        scnt += pl_;
        totscnt_ += pl_;
        *busy = true;
        if (gap_ns_ && (burst_iter_ += pl_) >= burst_) in_burst_ = false;
      }
    }
    return true;
  }

  // Polls the send CQ, with -e after waiting for the CQs `wait` (0: none); false after a
  // completion in error or a failed wait (p.fail was called).
  bool poll(const DurationClock& dur, const char* side, unsigned wait, bool* busy) {
    if (!(totccnt_ < tot_iters_ || (duration_ && totccnt_ < totscnt_))) return true;
    if (!p_.await_cqs(wait)) return false;
    const int ne = p_.t_.poll_send(p_.wc_.data(), static_cast<int>(p_.wc_.size()));
    for (int i = 0; i < ne; ++i) {
      const Completion& c = p_.wc_[static_cast<size_t>(i)];
      if (c.status != WcStatus::kSuccess) {
        return p_.completion_error(c, side, totccnt_, tot_iters_);
      }
      const uint64_t q = c.wr_id >> kQpShift, count = c.wr_id & kCountMask;
      const uint64_t covered = (count - p_.ccnt_[q]) & kCountMask;
      p_.ccnt_[q] += covered;
      totccnt_ += covered;
      if (peak_) {
        p_.tcompleted_[(totccnt_ > tot_iters_ ? tot_iters_ : totccnt_) - 1] = StallWatch::now_ns();
      }
      if (duration_ && dur.sampling()) p_.measured_iters_ += covered;
    }
    if (ne > 0) *busy = true;
    return true;
  }

  bool done() const { return totscnt_ >= tot_iters_ && totccnt_ >= tot_iters_; }
  uint64_t completed() const { return totccnt_; }
  uint64_t total() const { return tot_iters_; }

 private:
  PerfTest& p_;
  const uint64_t nq_, pl_, cq_mod_, tx_depth_, iters_, tot_iters_, stride_, slots_;
  const bool cycle_, send_, duration_, peak_;
  const uint64_t gap_ns_, burst_;
  std::vector<uint64_t> local_base_, remote_base_;
  uint64_t totscnt_ = 0, totccnt_ = 0;
  bool in_burst_ = false;
  uint64_t burst_iter_ = 0, gap_deadline_ = 0;
};

// The SEND receiver's half (run_iter_bw_server's polling and re-posting), shared by
// run_iter_bw_server and run_iter_bi.
class PerfTest::BwReceiver {
 public:
  BwReceiver(PerfTest& p, uint64_t size)
      : p_(p),
        iters_(p.o_.iters),
        tot_iters_(p.o_.iters * static_cast<uint64_t>(p.o_.num_qps)),
        size_(size),
        stride_(p.inc(size)),
        slots_(static_cast<uint64_t>(p.cycle_buffer_) / stride_),
        // perftest re-posts with SIZE(type, size, !machine): a UD server's receives count the
        // GRH when it decides whether they cycle, a client's (-b) do not.
        cycle_((p.o_.client() ? size : p.recv_len(size)) <=
               static_cast<uint64_t>(p.cycle_buffer_) / 2),
        duration_(p.o_.duration_mode),
        posted_(static_cast<size_t>(p.o_.num_qps), p.rx_posted_),
        received_(static_cast<size_t>(p.o_.num_qps), 0) {}

  // Polls the receive CQ (with -e after waiting for the CQs `wait`) and posts each consumed
  // receive again (with -n, no more than the peer sends); returns the completions seen, or -1
  // after an error (p.fail was called).
  int poll(const DurationClock& dur, const char* side, unsigned wait) {
    if (!p_.await_cqs(wait)) return -1;
    const int ne = p_.t_.poll_recv(p_.wc_.data(), static_cast<int>(p_.wc_.size()));
    for (int i = 0; i < ne; ++i) {
      const Completion& c = p_.wc_[static_cast<size_t>(i)];
      if (c.status != WcStatus::kSuccess) {
        p_.completion_error(c, side, rcnt_, tot_iters_);
        return -1;
      }
      // A peer given a smaller -s fills our receives only in part: counted as ours, its
      // messages would inflate the bandwidth. (UD: the byte count includes the GRH.)
      if (!p_.recv_len_ok(c.byte_len, size_)) return -1;
      const uint64_t q = c.wr_id;
      ++received_[q];
      ++rcnt_;
      if (duration_ && dur.sampling()) ++p_.measured_iters_;
      if (duration_ || posted_[q] + 1 <= iters_) {
        RecvRequest& r = p_.rwr_[q];
        if (const int rc = p_.t_.post_recv(static_cast<uint32_t>(q), &r, 1)) {
          p_.fail("Couldn't post recv Qp=" + std::to_string(q) +
                  " rcnt=" + std::to_string(received_[q]) + ": " + std::strerror(rc));
          return -1;
        }
        ++posted_[q];
        if (cycle_) {
          r.addr += stride_;
          if ((posted_[q] + 1) % slots_ == 0) r.addr = p_.layout_[q].recv;
        }
      }
    }
    return ne;
  }

  bool done() const { return rcnt_ >= tot_iters_; }
  uint64_t received() const { return rcnt_; }
  uint64_t total() const { return tot_iters_; }

 private:
  PerfTest& p_;
  const uint64_t iters_, tot_iters_, size_, stride_, slots_;
  const bool cycle_, duration_;
  std::vector<uint64_t> posted_, received_;
  uint64_t rcnt_ = 0;
};

void PerfTest::finish_bw_window(const DurationClock& dur, uint64_t tot_iters) {
  if (o_.duration_mode) {
    tposted_[0] = dur.sample_start();
    tcompleted_[0] = dur.sample_end();
  } else {
    measured_iters_ = tot_iters;
    if (o_.no_peak) tcompleted_[0] = StallWatch::now_ns();
  }
}

// --run_infinitely: perftest's print_bw_infinite_mode every -D seconds, the messages completed
// (or received) since the last line over the time since it; no peak. A -b run's line counts
// both directions, as perftest's run_inf_bi_factor assumes them equal.
class PerfTest::InfiniteReport {
 public:
  InfiniteReport(PerfTest& p, uint64_t size)
      : p_(p),
        size_(size),
        period_ns_(static_cast<uint64_t>(p.o_.duration) * 1'000'000'000),
        factor_(p.o_.duplex && p.o_.verb != Verb::kSend ? 2 : 1) {}
  void start(uint64_t now) { last_ns_ = now; }
  // Called once a loop pass; reads the clock every DurationClock::kPollStride-th call.
  void poll(uint64_t count) {
    if (++polls_ % DurationClock::kPollStride != 0) return;
    const uint64_t now = StallWatch::now_ns();
    if (now - last_ns_ < period_ns_) return;
    const uint64_t n = count - last_count_;
    const double secs = static_cast<double>(now - last_ns_) / 1e9;
    const double unit = p_.o_.report_gbits ? 125'000'000.0 : 1048576.0;
    BwReport r;
    r.size = size_;
    r.iters = n;
    r.bw_peak = 0;
    r.bw_avg = static_cast<double>(factor_ * size_ * n) / secs / unit;
    r.msg_rate = static_cast<double>(factor_ * n) / secs / 1e6;
    print_bw_infinite_report(p_.o_, r);
    last_ns_ = now;
    last_count_ = count;
  }

 private:
  PerfTest& p_;
  const uint64_t size_, period_ns_, factor_;
  uint64_t last_ns_ = 0, last_count_ = 0;
  uint32_t polls_ = 0;
};

// perftest's run_iter_bw_infinitely: the requester posts until it is interrupted (or fails).
bool PerfTest::run_iter_bw_infinitely(uint64_t size) {
  BwSender tx(*this, size);
  const DurationClock never;  // never started, so never done: the sender does not stop
  InfiniteReport report(*this, size);
  StallWatch watch = stall_watch();
  report.start(StallWatch::now_ns());
  for (;;) {
    bool busy = false;
    if (!tx.post(never, &busy)) return false;
    t_.progress();
    if (!tx.poll(never, "client", Transport::kSendCq, &busy)) return false;
    report.poll(tx.completed());
    if (busy) {
      watch.progress();
      continue;
    }
    t_.relax();
    if (watch.stalled()) {
      return fail("no progress " + watch.for_text() + ": " + std::to_string(tx.completed()) +
                  " messages completed");
    }
    if (interrupted()) return fail("interrupted");
  }
}

// perftest's run_iter_bw_infinitely_server: the SEND receiver counts and re-posts until it is
// interrupted; its lines start with the first message.
bool PerfTest::run_iter_bw_server_infinitely(uint64_t size) {
  BwReceiver rx(*this, size);
  const DurationClock never;
  InfiniteReport report(*this, size);
  StallWatch watch = stall_watch();
  bool first_rx = true;
  for (;;) {
    t_.progress();
    const int ne = rx.poll(never, "server", Transport::kRecvCq);
    if (ne < 0) return false;
    if (ne > 0) {
      if (first_rx) report.start(StallWatch::now_ns());
      first_rx = false;
      watch.progress();
    } else {
      t_.relax();
      if (watch.stalled()) {
        return fail("no message " + watch.for_text() + ": " + std::to_string(rx.received()) +
                    " received");
      }
      if (interrupted()) return fail("interrupted");
    }
    if (!first_rx) report.poll(rx.received());
  }
}

// perftest's perform_warm_up (--perform_warm_up): before a run each QP posts a send queue's
// worth of work requests (with -l, one list) from the run's first addresses, every one signaled,
// and waits for all of them. (perftest counts a list per completion, so with -l it stops waiting
// early and its run counts the rest; here every completion is awaited.) Outside the measured
// loop: it may allocate.
bool PerfTest::warm_up() {
  const auto pl = static_cast<uint64_t>(o_.post_list);
  const uint64_t session = pl == 1 ? static_cast<uint64_t>(o_.tx_depth) : pl;
  StallWatch watch = stall_watch();
  for (uint64_t q = 0; q < static_cast<uint64_t>(o_.num_qps); ++q) {
    WorkRequest* w = &wr_[q * pl];
    // The run's work requests come back as they were, however the warm-up ends.
    struct Restore {
      WorkRequest* w;
      std::vector<WorkRequest> saved;
      ~Restore() { std::copy(saved.begin(), saved.end(), w); }
    } restore{w, std::vector<WorkRequest>(w, w + pl)};
    for (uint64_t j = 0; j < pl; ++j) {
      w[j].signaled = true;
      w[j].wr_id = q << kQpShift;  // count 0: no run's
    }
    uint64_t posted = 0, done = 0;
    for (; posted < session; posted += pl) {
      if (const int rc = t_.post_send(static_cast<uint32_t>(q), w, static_cast<uint32_t>(pl))) {
        return fail("Couldn't post send during warm up: qp " + std::to_string(q) +
                    " scnt=" + std::to_string(posted) + ": " + std::strerror(rc));
      }
    }
    while (done < posted) {
      t_.progress();
      const int ne = t_.poll_send(wc_.data(), static_cast<int>(wc_.size()));
      for (int i = 0; i < ne; ++i) {
        const Completion& c = wc_[static_cast<size_t>(i)];
        if (c.status != WcStatus::kSuccess) {
          return completion_error(c, "warm up", done, posted);
        }
        ++done;
      }
      if (ne > 0) {
        watch.progress();
        continue;
      }
      t_.relax();
      if (watch.stalled() || interrupted()) {
        return fail(interrupted() ? "interrupted"
                                  : "warm up: " + std::to_string(done) + " of " +
                                        std::to_string(posted) + " completed " + watch.for_text());
      }
    }
  }
  return true;
}

// --rate_limit: perftest's gap between the starts of two bursts, from its rate in messages a
// second (an int there: truncated alike). False with fail() called if the rate is below one
// message a second, or the gap so long that the peer would take the run for stalled.
bool PerfTest::rate_gap_ns(uint64_t size, uint64_t* gap_ns) {
  *gap_ns = 0;
  if (o_.rate_limit <= 0) return true;
  const auto sz = static_cast<double>(size);
  double pps = o_.rate_limit;
  if (o_.rate_units == PerfOptions::RateUnits::kMBps) pps = o_.rate_limit / sz * 1048576;
  if (o_.rate_units == PerfOptions::RateUnits::kGbps) pps = o_.rate_limit / (sz * 8) * 1e9;
  const double whole = pps < 1e15 ? std::floor(pps) : 1e15;
  const double gap = whole >= 1 ? 1e9 * static_cast<double>(o_.burst_size) / whole : 0;
  if (!(gap > 0 && gap <= kMaxRateGapNs)) {
    return fail("--rate_limit: " + std::to_string(o_.burst_size) + "-message bursts at " +
                std::to_string(static_cast<int64_t>(whole)) + " messages of " +
                std::to_string(size) + " B a second leave more than 10 s between bursts");
  }
  *gap_ns = static_cast<uint64_t>(gap);
  return true;
}

bool PerfTest::run_iter_bw(uint64_t size) {
  if (o_.run_infinitely) return run_iter_bw_infinitely(size);
  const bool duration = o_.duration_mode;
  uint64_t gap_ns = 0;
  if (!rate_gap_ns(size, &gap_ns)) return false;
  BwSender tx(*this, size, gap_ns);
  measured_iters_ = 0;
  DurationClock dur(cpu());
  StallWatch watch = stall_watch();
  if (duration) dur.start(StallWatch::now_ns(), o_.duration, o_.margin);
  if (!duration && o_.no_peak) tposted_[0] = StallWatch::now_ns();

  while (!tx.done() || (duration && !dur.done())) {
    bool busy = false;
    if (!tx.post(dur, &busy)) return false;
    t_.progress();
    if (duration) dur.poll(StallWatch::now_ns);
    if (!tx.poll(dur, "client", Transport::kSendCq, &busy)) return false;
    if (busy) {
      watch.progress();
      continue;
    }
    t_.relax();
    if (watch.stalled()) return fail_stalled(watch, tx.completed(), tx.total());
    if (interrupted()) return fail("interrupted");
  }
  finish_bw_window(dur, tx.total());
  return true;
}

bool PerfTest::run_iter_bw_server(uint64_t size) {
  if (o_.run_infinitely) return run_iter_bw_server_infinitely(size);
  const bool duration = o_.duration_mode;
  BwReceiver rx(*this, size);
  bool first_rx = true;
  measured_iters_ = 0;
  DurationClock dur(cpu());
  StallWatch watch = stall_watch();

  while (!rx.done() || (duration && !dur.done())) {
    t_.progress();
    const int ne = rx.poll(dur, "server", Transport::kRecvCq);
    if (ne < 0) return false;
    if (ne > 0) {
      if (first_rx) {
        // The clock starts with the first message (set_on_first_rx_packet).
        const uint64_t now = StallWatch::now_ns();
        if (duration) {
          dur.start(now, o_.duration, o_.margin);
        } else {
          tposted_[0] = now;
        }
        first_rx = false;
      }
      watch.progress();
    } else {
      t_.relax();
      if (watch.stalled()) {
        return fail("no message " + watch.for_text() + ": " +
                    count_text(rx.received(), rx.total()) + " received");
      }
      if (interrupted()) return fail("interrupted");
    }
    if (duration && !first_rx) dur.poll(StallWatch::now_ns);
  }
  finish_bw_window(dur, rx.total());  // (a SEND receiver without -b always skips the peak)
  return true;
}

// perftest's run_iter_bi (send_bw -b): both sides send and receive at once. The client sends
// from the start, the server from its first receive on (and with -D its clock starts there).
// With -n a side is done when its own messages are completed and all of the peer's received;
// with -D at the end of its clock, and the sample counts both the receives and the completed
// sends. The peak and the average are over this side's sends, as run_iter_bw's.
bool PerfTest::run_iter_bi(uint64_t size) {
  const bool duration = o_.duration_mode;
  BwSender tx(*this, size);
  BwReceiver rx(*this, size);
  bool before_first_rx = !o_.client();
  measured_iters_ = 0;
  DurationClock dur(cpu());
  StallWatch watch = stall_watch();
  if (o_.no_peak) tposted_[0] = StallWatch::now_ns();
  if (duration && !before_first_rx) dur.start(StallWatch::now_ns(), o_.duration, o_.margin);

  while (!tx.done() || !rx.done() || (duration && !dur.done())) {
    bool busy = false;
    if (!before_first_rx && !tx.post(dur, &busy)) return false;
    t_.progress();
    if (duration && !before_first_rx) dur.poll(StallWatch::now_ns);
    // perftest's run_iter_bi waits for an event of either CQ before it polls the receives.
    const int ne = rx.poll(dur, "server", Transport::kSendCq | Transport::kRecvCq);
    if (ne < 0) return false;
    if (ne > 0) {
      busy = true;
      if (before_first_rx) {
        before_first_rx = false;
        if (duration) dur.start(StallWatch::now_ns(), o_.duration, o_.margin);
      }
    }
    if (!tx.poll(dur, "client", 0, &busy)) return false;
    if (busy) {
      watch.progress();
      continue;
    }
    t_.relax();
    if (watch.stalled()) {
      return fail("no progress " + watch.for_text() + ": " +
                  count_text(tx.completed(), tx.total()) + " messages completed, " +
                  count_text(rx.received(), rx.total()) + " received");
    }
    if (interrupted()) return fail("interrupted");
  }
  finish_bw_window(dur, tx.total());
  return true;
}

BwReport PerfTest::bw_report(uint64_t size) const {
  BwSamples s;
  s.posted = tposted_.data();
  s.completed = tcompleted_.data();
  s.iters = measured_iters_;
  s.no_peak = o_.no_peak;
  s.cq_mod = o_.cq_mod;
  s.post_list = o_.post_list;
  return compute_bw_report(o_, size, s);
}

}  // namespace roce::perf
