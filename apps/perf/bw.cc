// Bandwidth loops: perftest 6.06's run_iter_bw (the requester, any verb) and
// run_iter_bw_server (the SEND receiver), same pacing, same signalling, same addresses.
// The loops allocate nothing, take no lock and make no system call; they only post, poll,
// drive an inline engine and write timestamps into arrays sized beforehand.
#include <cstring>

#include "apps/perf/perf_test.h"

namespace roce::perf {

namespace {
constexpr uint64_t kQpShift = 40;  // wr_id = qp index << 40 | messages posted on that QP
constexpr uint64_t kCountMask = (uint64_t{1} << kQpShift) - 1;
}  // namespace

bool PerfTest::run_iter_bw(uint64_t size) {
  const uint64_t nq = static_cast<uint64_t>(o_.num_qps);
  const uint64_t pl = static_cast<uint64_t>(o_.post_list);
  const uint64_t cq_mod = static_cast<uint64_t>(o_.cq_mod);
  const uint64_t tx_depth = static_cast<uint64_t>(o_.tx_depth);
  const bool duration = o_.duration_mode;
  const uint64_t iters = o_.iters;
  const uint64_t tot_iters = iters * nq;
  const uint64_t cb = static_cast<uint64_t>(cycle_buffer_);
  const uint64_t stride = inc(size), slots = cb / stride;
  // perftest cycles the addresses through one cycle buffer for small messages.
  const bool cycle = pl == 1 && size <= cb / 2;
  const bool send = o_.verb == Verb::kSend;
  const bool peak = !o_.no_peak;
  std::vector<uint64_t> local_base(nq), remote_base(nq);  // before the loop: no allocation in it
  for (uint64_t i = 0; i < nq; ++i) {
    scnt_[i] = ccnt_[i] = 0;
    local_base[i] = wr_[i * pl].local_addr;
    remote_base[i] = wr_[i * pl].remote_addr;
  }
  uint64_t totscnt = 0, totccnt = 0;
  measured_iters_ = 0;
  DurationClock dur;
  StallWatch watch(o_.stall_timeout_s);
  if (duration) dur.start(StallWatch::now_ns(), o_.duration, o_.margin);
  if (!duration && !peak) tposted_[0] = StallWatch::now_ns();

  while (totscnt < tot_iters || totccnt < tot_iters || (duration && !dur.done())) {
    bool busy = false;
    for (uint64_t q = 0; q < nq; ++q) {
      WorkRequest* w = &wr_[q * pl];
      while ((scnt_[q] < iters || duration) && scnt_[q] - ccnt_[q] + pl <= tx_depth) {
        if (duration && dur.done()) break;
        const uint64_t s = scnt_[q];
        for (uint64_t j = 0; j < pl; ++j) w[j].wr_id = q << kQpShift | (s + j + 1);
        if (pl == 1) {
          // A completion every cq_mod messages, and for the last one.
          w->signaled = s % cq_mod == cq_mod - 1 || (!duration && s == iters - 1);
        }
        if (peak) tposted_[totscnt] = StallWatch::now_ns();
        if (const int rc = t_.post_send(static_cast<uint32_t>(q), w, static_cast<uint32_t>(pl))) {
          return fail("Couldn't post send: qp " + std::to_string(q) + " scnt=" + std::to_string(s) +
                      ": " + std::strerror(rc));
        }
        if (cycle) {
          if ((s + 1) % slots == 0) {
            w->local_addr = local_base[q];
            if (!send) w->remote_addr = remote_base[q];
          } else {
            w->local_addr += stride;
            if (!send) w->remote_addr += stride;
          }
        }
        scnt_[q] += pl;
        totscnt += pl;
        busy = true;
      }
    }
    t_.progress();
    if (duration) dur.poll(StallWatch::now_ns);
    if (totccnt < tot_iters || (duration && totccnt < totscnt)) {
      const int ne = t_.poll_send(wc_.data(), static_cast<int>(wc_.size()));
      for (int i = 0; i < ne; ++i) {
        const Completion& c = wc_[static_cast<size_t>(i)];
        if (c.status != WcStatus::kSuccess) {
          return completion_error(c, "client", totccnt, tot_iters);
        }
        const uint64_t q = c.wr_id >> kQpShift, count = c.wr_id & kCountMask;
        const uint64_t covered = count - ccnt_[q];
        ccnt_[q] = count;
        totccnt += covered;
        if (peak)
          tcompleted_[(totccnt > tot_iters ? tot_iters : totccnt) - 1] = StallWatch::now_ns();
        if (duration && dur.sampling()) measured_iters_ += covered;
      }
      if (ne > 0) busy = true;
    }
    if (busy) {
      watch.progress();
      continue;
    }
    t_.relax();
    if (watch.stalled()) {
      return fail_stalled(totccnt, tot_iters);
    }
    if (interrupted()) return fail("interrupted");
  }
  if (duration) {
    tposted_[0] = dur.sample_start();
    tcompleted_[0] = dur.sample_end();
  } else {
    measured_iters_ = tot_iters;
    if (!peak) tcompleted_[0] = StallWatch::now_ns();
  }
  return true;
}

bool PerfTest::run_iter_bw_server(uint64_t size) {
  const uint64_t nq = static_cast<uint64_t>(o_.num_qps);
  const bool duration = o_.duration_mode;
  const uint64_t iters = o_.iters;
  const uint64_t tot_iters = iters * nq;
  const uint64_t cb = static_cast<uint64_t>(cycle_buffer_);
  const uint64_t stride = inc(size), slots = cb / stride;
  const bool cycle = size <= cb / 2;
  std::vector<uint64_t> posted(nq, rx_posted_), received(nq, 0);
  uint64_t rcnt = 0;
  bool first_rx = true;
  measured_iters_ = 0;
  DurationClock dur;
  StallWatch watch(o_.stall_timeout_s);

  while (rcnt < tot_iters || (duration && !dur.done())) {
    t_.progress();
    const int ne = t_.poll_recv(wc_.data(), static_cast<int>(wc_.size()));
    if (ne > 0) {
      const uint64_t now = StallWatch::now_ns();
      if (first_rx) {
        // The clock starts with the first message (set_on_first_rx_packet).
        if (duration) {
          dur.start(now, o_.duration, o_.margin);
        } else {
          tposted_[0] = now;
        }
        first_rx = false;
      }
      for (int i = 0; i < ne; ++i) {
        const Completion& c = wc_[static_cast<size_t>(i)];
        if (c.status != WcStatus::kSuccess) return completion_error(c, "server", rcnt, tot_iters);
        const uint64_t q = c.wr_id;
        ++received[q];
        ++rcnt;
        if (duration && dur.sampling()) ++measured_iters_;
        if (duration || posted[q] + 1 <= iters) {
          if (const int rc = t_.post_recv(static_cast<uint32_t>(q), &rwr_[q], 1)) {
            return fail("Couldn't post recv Qp=" + std::to_string(q) +
                        " rcnt=" + std::to_string(received[q]) + ": " + std::strerror(rc));
          }
          ++posted[q];
          if (cycle) {
            rwr_[q].addr += stride;
            if ((posted[q] + 1) % slots == 0) rwr_[q].addr = layout_[q].recv;
          }
        }
      }
      watch.progress();
    } else {
      t_.relax();
      if (watch.stalled()) {
        return fail("no message for " + std::to_string(static_cast<int>(o_.stall_timeout_s)) +
                    " s: " + std::to_string(rcnt) + " of " + std::to_string(tot_iters) +
                    " received");
      }
      if (interrupted()) return fail("interrupted");
    }
    if (duration && !first_rx) dur.poll(StallWatch::now_ns);
  }
  if (duration) {
    tposted_[0] = dur.sample_start();
    tcompleted_[0] = dur.sample_end();
  } else {
    measured_iters_ = tot_iters;
    tcompleted_[0] = StallWatch::now_ns();
  }
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
