// roce-soak: the loop (completions, new batches, the stall watch, samples), the end of the run
// with the peer, and the summary.
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "apps/perf/oob.h"
#include "apps/soak/soak.h"
#include "dpdk/device.h"
#include "stack/core/engine.h"
#include "stack/core/qp.h"

namespace roce::soak {

namespace {

// The first completion of a QP also waits for its peer's MAC to resolve (ARP: a solicitation a
// second, three of them), which the transport's timeout does not bound.
constexpr auto kFirstWait = std::chrono::seconds(10);
// No completion for this long (or 4 x the limit, if longer) is a stall: the run ends.
constexpr auto kStallMin = std::chrono::seconds(10);
constexpr auto kMbufReadEvery = std::chrono::milliseconds(100);
// How long the end waits for the peer's last batches and its record.
constexpr auto kEndWait = std::chrono::seconds(120);
// Buffers out of the pool with the link quiet, before the traffic and after it: the same, give or
// take the engine's stash of empty transmit buffers (Engine::kSpareCap, 64: it takes them from
// the pool in bulk). A leak of one buffer in a million frames is more than that in a minute.
constexpr uint64_t kQuietSlack = 64;
constexpr auto kQuietAfter = std::chrono::milliseconds(300);

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

void nap() {
  const timespec ts{0, 20'000};
  nanosleep(&ts, nullptr);
}

// What each side tells the other at the end.
struct Record {
  uint64_t magic;
  uint64_t batches, ops, bytes;
};
constexpr uint64_t kRecordMagic = 0x736f616b2d656e64ull;

}  // namespace

bool Soak::fail(const std::string& why) {
  if (!failed_) {
    failed_ = true;
    error_ = why;
  }
  return false;
}

int Soak::run() {
  std::string err;
  wait_limit_ns_ = (o_.retry + 1ull) * local_ack_timeout_ns(o_.timeout);
  if ((!o_.csv.empty() && !csv_.open(o_.csv, &err)) || !setup(&err) || !connect(&err)) {
    fail(err);
  } else {
    t0_ = Clock::now();
    next_sample_ = poll_at_ = t0_;
    const Clock::time_point stop = t0_ + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o_.seconds));
    unsigned idle = 0;
    while (!failed_) {
      const bool more = Clock::now() < stop && !perf::interrupted();
      if (!more && perf::interrupted()) fail("interrupted");
      bool busy = false;
      for (uint32_t q = 0; q < o_.qps; ++q) busy |= is_active(q) && active_[q].busy;
      if (!more && !busy) break;
      idle = step(more) ? 0 : idle + 1;
      if (idle > 64 && dev_.runner().threaded()) nap();
    }
    if (!failed_ && finish_with_peer()) check_quiet_mbufs();
    sample(Clock::now(), true);
    check(waits_over_limit_ == 0, [&] {
      return std::string(std::to_string(waits_over_limit_) +
                         " completions came later than the limit allows after the "
                         "one before (the longest " +
                         std::to_string(run_max_wait_ns_ / 1'000'000) + " ms)");
    });
  }
  summary();
  teardown();
  // Neither side stops its port while the other still uses the link (net_memif unmaps the
  // shared rings under the peer's bursts otherwise): both close their half, then wait.
  oob_.finish(10);
  return failed_ ? 1 : 0;
}

bool Soak::step(bool may_start) {
  const Clock::time_point at = Clock::now();
  poll_gap_ = at - poll_at_;
  poll_at_ = at;
  max_gap_ = std::max(max_gap_, poll_gap_);
  run_max_gap_ = std::max(run_max_gap_, poll_gap_);
  if (!dev_.runner().threaded()) dev_.runner().poll();
  Cqe cqes[32];
  int n = send_cq_->poll(cqes, 32);
  for (int i = 0; i < n && !failed_; ++i) on_send_completion(cqes[i]);
  const int m = recv_cq_->poll(cqes, 32);
  for (int i = 0; i < m && !failed_; ++i) on_recv_completion(cqes[i]);
  n += m;
  for (uint32_t q = 0; q < o_.qps && may_start && !failed_; ++q) {
    if (is_active(q) && !active_[q].busy) {
      start_batch(q);
      ++n;
    }
  }
  const Clock::time_point now = Clock::now();
  watch(now);
  sample(now, false);
  return n > 0;
}

void Soak::watch(Clock::time_point now) {
  if (now >= next_mbuf_read_) {
    next_mbuf_read_ = now + kMbufReadEvery;
    const uint64_t in_use = dev_.buffers_in_use();
    if (in_use < mbufs_min_) mbufs_min_ = in_use;
    if (in_use > mbufs_max_) mbufs_max_ = in_use;
  }
  const auto stall_after =
      std::max<Clock::duration>(kStallMin, 4 * std::chrono::nanoseconds(wait_limit_ns_));
  for (uint32_t q = 0; q < o_.qps && !failed_; ++q) {
    const Active& a = active_[q];
    if (!is_active(q) || !a.busy) continue;
    const auto waited = now - a.last;
    const bool over = a.warm ? wait_limit_ns_ && waited > stall_after : waited > kFirstWait;
    if (!over) continue;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "QP %u batch %" PRIu64
                  ": stalled: no completion for %.1f ms (the stall watch: %.1f ms; a QP may go "
                  "%u tries x %.1f ms without progress); %u of %zu ops done, acknowledged: %s%s",
                  q, a.batch, std::chrono::duration<double, std::milli>(waited).count(),
                  a.warm ? std::chrono::duration<double, std::milli>(stall_after).count()
                         : 1e3 * kFirstWait.count(),
                  o_.retry + 1u, ms(local_ack_timeout_ns(o_.timeout)), a.completed,
                  a.plan.ops.size(), a.acked ? "yes" : "no",
                  oob_.peer_left() ? " (the peer has left)" : "");
    fail(buf);
  }
}

void Soak::sample(Clock::time_point now, bool force) {
  if (!force && now < next_sample_) return;
  next_sample_ =
      now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.interval));
  Sample s;
  s.t_s = std::chrono::duration<double>(now - t0_).count();
  s.mbufs_in_use = dev_.buffers_in_use();
  s.mbufs_min = mbufs_min_ == UINT64_MAX ? s.mbufs_in_use : mbufs_min_;
  s.mbufs_max = std::max(mbufs_max_, s.mbufs_in_use);
  s.mbufs_total = dev_.buffers_total();
  mbufs_min_ = UINT64_MAX;
  mbufs_max_ = 0;
  const ProcStats ps = read_proc_stats();
  s.rss_kib = ps.rss_kib;
  s.fds = ps.fds;
  s.threads = ps.threads;
  s.batches = batches_;
  for (uint64_t v : ops_verified_) s.ops_verified += v;
  s.bytes_verified = bytes_verified_;
  QpCounters c{};
  EngineCounters ec{};
  FaultCounters fc{};
  dev_.runner().run([&] {
    fc = dev_.fault_counters();
    Engine& e = dev_.engine();
    c = e.destroyed_qp_counters();
    e.for_each_qp([&](const Qp& q) { add_counters(c, q.counters_); });
    ec = e.counters();
  });
  s.retransmitted_packets = c.retransmitted_packets;
  s.retransmit_events = c.retransmit_events;
  s.local_ack_timeouts = c.local_ack_timeouts;
  s.seq_naks_sent = c.seq_naks_sent;
  s.seq_naks_received = c.seq_naks_received;
  s.rnr_naks_received = c.rnr_naks_received;
  s.implicit_naks = c.implicit_naks;
  s.duplicate_requests = c.duplicate_requests;
  s.fault_rx_dropped = fc.rx_dropped;
  s.fault_tx_dropped = fc.tx_dropped;
  s.tx_frames = ec.tx_frames;
  s.rx_frames = ec.rx_frames;
  s.tx_backpressure = ec.tx_backpressure;
  s.tx_no_buffer = ec.tx_no_buffer;
  s.max_wait_ms = ms(max_wait_ns_);
  s.run_max_wait_ms = ms(run_max_wait_ns_);
  s.wait_limit_ms = ms(wait_limit_ns_);
  s.waits_over_limit = waits_over_limit_;
  s.cpu_pressure = ps.cpu_pressure;
  s.max_poll_gap_ms = std::chrono::duration<double, std::milli>(max_gap_).count();
  s.run_max_poll_gap_ms = std::chrono::duration<double, std::milli>(run_max_gap_).count();
  max_wait_ns_ = 0;
  max_gap_ = {};
  csv_.write(s);
  last_ = s;
  std::printf("roce-soak: %s\n", describe(s).c_str());
  std::fflush(stdout);
  if (!force && !failed_ && oob_.peer_left()) fail("the peer has left (its output says why)");
}

void Soak::check_quiet_mbufs() {
  // The last ACKs may still be on their way: a moment of polling first.
  const Clock::time_point until = Clock::now() + kQuietAfter;
  while (Clock::now() < until) {
    if (!step(false)) nap();
  }
  quiet_end_ = dev_.buffers_in_use();
  check(quiet_end_ <= quiet_start_ + kQuietSlack, [&] {
    return std::string("mbufs in use with the link quiet: " + std::to_string(quiet_start_) +
                       " before the run, " + std::to_string(quiet_end_) +
                       " after it (the pool leaks)");
  });
}

bool Soak::finish_with_peer() {
  // Our batches are all acknowledged; the peer's may still be under way: serve them until its
  // record comes (it sends it once its own batches are acknowledged, so nothing is in flight
  // after that).
  Record mine{kRecordMagic, batches_, 0, bytes_verified_}, theirs{};
  for (uint64_t v : ops_verified_) mine.ops += v;
  std::string err;
  oob_.set_timeout(10);
  if (!oob_.write_all(&mine, sizeof mine, &err)) return fail(err);
  const Clock::time_point give_up = Clock::now() + kEndWait;
  while (!failed_ && !oob_.readable()) {
    if (Clock::now() > give_up) return fail("the peer did not finish its batches");
    if (!step(false)) nap();
  }
  if (failed_) return false;
  if (!oob_.read_all(&theirs, sizeof theirs, &err)) return fail(err);
  if (theirs.magic != kRecordMagic) return fail("the peer's record is garbled");
  std::printf("roce-soak: the peer verified %" PRIu64 " ops, %" PRIu64 " bytes, in %" PRIu64
              " batches of its own\n",
              theirs.ops, theirs.bytes, theirs.batches);
  return true;
}

void Soak::summary() {
  std::printf("roce-soak: %s side, %u QPs, %.0f s, seed %" PRIu64 ": %" PRIu64
              " batches posted and acknowledged; verified here:\n",
              o_.server ? "server" : "client", o_.qps, last_.t_s, o_.plan.seed, batches_);
  for (int k = 0; k < kOps; ++k) {
    std::printf("  %-15s %12" PRIu64 " ops\n", op_name(static_cast<Op>(k)), ops_verified_[k]);
  }
  std::printf("  total %" PRIu64 " ops, %" PRIu64 " bytes (%.1f MiB)\n", last_.ops_verified,
              bytes_verified_, bytes_verified_ / 1048576.0);
  std::printf("  retransmitted packets %" PRIu64 " (%" PRIu64
              " go-back-N rewinds), local ACK "
              "timeouts %" PRIu64 ", sequence NAKs sent %" PRIu64 " received %" PRIu64
              ", implicit NAKs %" PRIu64 ", RNR NAKs received %" PRIu64 "\n",
              last_.retransmitted_packets, last_.retransmit_events, last_.local_ack_timeouts,
              last_.seq_naks_sent, last_.seq_naks_received, last_.implicit_naks,
              last_.rnr_naks_received);
  std::printf("  fault injection dropped rx %" PRIu64 " of %" PRIu64 " frames, tx %" PRIu64
              " of %" PRIu64 "\n",
              last_.fault_rx_dropped, last_.rx_frames + last_.fault_rx_dropped,
              last_.fault_tx_dropped, last_.tx_frames);
  std::printf("  mbufs in use with the link quiet: %" PRIu64 " before the run, %" PRIu64
              " after it\n",
              quiet_start_, quiet_end_);
  std::printf("  longest wait for a completion %.1f ms (limit %.1f ms), %" PRIu64
              " over the limit; this loop went up to %.1f ms between two polls\n",
              last_.run_max_wait_ms, ms(wait_limit_ns_), waits_over_limit_,
              last_.run_max_poll_gap_ms);
  // The device's counters (per QP, the driver's drops, the memif gate's skips), for the record.
  if (have_pd_) std::printf("%s", dev_.counters_text().c_str());
  if (failed_) {
    std::fprintf(stderr, "roce-soak: FAIL: %s\n", error_.c_str());
  } else {
    std::printf("roce-soak: PASS\n");
  }
  std::fflush(stdout);
}

}  // namespace roce::soak
