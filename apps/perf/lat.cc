// Latency loops: perftest 6.06's run_iter_lat_write (ping-pong by RDMA WRITE, each side
// polling the last byte of its buffer), run_iter_lat (READ: post, wait for the completion) and
// run_iter_lat_send (ping-pong by SEND). A sample is the time between two posts, as perftest
// takes it; write and send halve the round trip, read reports it whole.
#include <cstring>

#include "apps/perf/perf_test.h"

namespace roce::perf {

// Spins until pred() holds, driving an inline engine; with -e and `cqs` (Transport::kSendCq /
// kRecvCq), sleeps on those CQs' events between tries instead. False on stall, interruption
// or a failed wait (then fail() was called).
template <typename Pred>
bool PerfTest::spin(StallWatch& watch, unsigned cqs, Pred pred) {
  watch.progress();
  while (!pred()) {
    if (o_.use_event && cqs) {
      if (!await_cqs(cqs)) return false;
    } else {
      t_.progress();
      t_.relax();
    }
    if (watch.stalled() || interrupted()) return false;
  }
  return true;
}

// --latency_gap: perftest spins this many microseconds before each post, after the previous
// sample's end and before the next one's timestamp, so the gap is part of every sample (a
// ping-pong's gets both sides' gaps, halved with the round trip). An inline engine is driven
// meanwhile, as a NIC would go on working.
void PerfTest::latency_gap() {
  if (o_.latency_gap_us == 0) return;
  const uint64_t end = StallWatch::now_ns() + static_cast<uint64_t>(o_.latency_gap_us) * 1000;
  while (StallWatch::now_ns() < end) t_.progress();
}

bool PerfTest::run_iter_lat_write(uint64_t size) {
  const bool duration = o_.duration_mode;
  const uint64_t iters = o_.iters;
  WorkRequest w = wr_[0];
  w.length = static_cast<uint32_t>(size);
  w.signaled = true;
  w.inline_data = size <= static_cast<uint64_t>(o_.inline_size);
  // The last byte of the message carries the sequence number (perftest's post_buf/poll_buf).
  volatile uint8_t* post_buf = reinterpret_cast<uint8_t*>(layout_[0].send + size - 1);
  volatile uint8_t* poll_buf = reinterpret_cast<uint8_t*>(layout_[0].target + size - 1);
  uint64_t scnt = 0, ccnt = 0, rcnt = 0;
  measured_iters_ = 0;
  DurationClock dur(cpu());
  StallWatch watch = stall_watch();
  if (duration) dur.start(StallWatch::now_ns(), o_.duration, o_.margin);
  Completion c;

  while (scnt < iters || ccnt < iters || rcnt < iters || (duration && !dur.done())) {
    if ((rcnt < iters || duration) && !(scnt < 1 && !o_.client())) {
      ++rcnt;
      const auto want = static_cast<uint8_t>(rcnt);
      if (!spin(watch, 0, [&] {
            if (duration) dur.tick(StallWatch::now_ns());
            return *poll_buf == want || (duration && dur.done());
          })) {
        return fail(interrupted() ? "interrupted"
                                  : "no WRITE from the peer " + watch.for_text() + " (" +
                                        std::to_string(rcnt - 1) + " received)");
      }
    }
    if (scnt < iters || duration) {
      latency_gap();
      if (!duration) tposted_[scnt] = StallWatch::now_ns();
      *post_buf = static_cast<uint8_t>(++scnt);
      if (const int rc = t_.post_send(0, &w, 1)) {
        return fail("Couldn't post send: scnt=" + std::to_string(scnt) + ": " + std::strerror(rc));
      }
    }
    if (duration && dur.done()) break;
    if (ccnt < iters || duration) {
      int ne = 0;
      if (!spin(watch, 0, [&] { return (ne = t_.poll_send(&c, 1)) != 0; })) {
        return fail(interrupted() ? "interrupted"
                                  : "no completion for a WRITE " + watch.for_text());
      }
      if (c.status != WcStatus::kSuccess) return completion_error(c, "client", ccnt, iters);
      ++ccnt;
      if (duration && dur.sampling()) ++measured_iters_;
    }
  }
  sample_ns_ = duration ? dur.sample_end() - dur.sample_start() : 0;
  return true;
}

bool PerfTest::run_iter_lat(uint64_t size) {
  const bool duration = o_.duration_mode;
  const uint64_t iters = o_.iters;
  WorkRequest w = wr_[0];
  w.length = static_cast<uint32_t>(size);
  w.signaled = true;
  uint64_t scnt = 0;
  measured_iters_ = 0;
  DurationClock dur(cpu());
  StallWatch watch = stall_watch();
  if (duration) dur.start(StallWatch::now_ns(), o_.duration, o_.margin);
  Completion c;

  while (scnt < iters || (duration && !dur.done())) {
    latency_gap();
    if (!duration) tposted_[scnt++] = StallWatch::now_ns();
    if (const int rc = t_.post_send(0, &w, 1)) {
      return fail("Couldn't post send: scnt=" + std::to_string(scnt) + ": " + std::strerror(rc));
    }
    if (duration) {
      dur.tick(StallWatch::now_ns());
      if (dur.done()) break;
    }
    int ne = 0;
    if (!spin(watch, Transport::kSendCq, [&] { return (ne = t_.poll_send(&c, 1)) != 0; })) {
      return fail(interrupted() ? "interrupted" : "no completion for a READ " + watch.for_text());
    }
    if (c.status != WcStatus::kSuccess) return completion_error(c, "client", scnt, iters);
    if (duration && dur.sampling()) ++measured_iters_;
  }
  sample_ns_ = duration ? dur.sample_end() - dur.sample_start() : 0;
  return true;
}

bool PerfTest::run_iter_lat_send(uint64_t size) {
  const bool duration = o_.duration_mode;
  const uint64_t iters = o_.iters;
  const uint64_t cq_mod = static_cast<uint64_t>(o_.cq_mod);
  const uint64_t size_per_qp = static_cast<uint64_t>(o_.rx_depth);
  WorkRequest w = wr_[0];
  w.length = static_cast<uint32_t>(size);
  w.signaled = false;
  w.inline_data = size <= static_cast<uint64_t>(o_.inline_size);
  uint64_t scnt = 0, rcnt = 0;
  bool first_rx = true;
  measured_iters_ = 0;
  DurationClock dur(cpu());
  StallWatch watch = stall_watch();
  Completion c;

  while (scnt < iters || rcnt < iters || (duration && !dur.done())) {
    // The server waits for the client's message first; the client sends first.
    if ((rcnt < iters || duration) && !(scnt < 1 && o_.client())) {
      int ne = 0;
      if (!spin(watch, Transport::kRecvCq, [&] {
            if (duration && !first_rx) dur.tick(StallWatch::now_ns());
            if (duration && dur.done()) return true;
            return (ne = t_.poll_recv(&c, 1)) != 0;
          })) {
        return fail(interrupted() ? "interrupted"
                                  : "no SEND from the peer " + watch.for_text() + " (" +
                                        std::to_string(rcnt) + " received)");
      }
      if (ne > 0) {
        if (first_rx) {
          if (duration) dur.start(StallWatch::now_ns(), o_.duration, o_.margin);
          first_rx = false;
        }
        if (c.status != WcStatus::kSuccess) return completion_error(c, "server", rcnt, iters);
        if (!recv_len_ok(c.byte_len, size)) return false;
        ++rcnt;
        if (duration && dur.sampling()) ++measured_iters_;
        if (duration || rcnt + size_per_qp <= iters) {
          if (const int rc = t_.post_recv(0, &rwr_[0], 1)) {
            return fail("Couldn't post recv: rcnt=" + std::to_string(rcnt) + ": " +
                        std::strerror(rc));
          }
        }
      }
    }
    if (scnt < iters || (duration && !dur.done())) {
      latency_gap();
      if (!duration) tposted_[scnt] = StallWatch::now_ns();
      ++scnt;
      const bool poll = scnt % cq_mod == 0 || (!duration && scnt == iters);
      w.signaled = poll;
      if (duration && dur.done()) break;
      if (const int rc = t_.post_send(0, &w, 1)) {
        return fail("Couldn't post send: scnt=" + std::to_string(scnt) + ": " + std::strerror(rc));
      }
      if (poll) {
        int ne = 0;
        if (!spin(watch, Transport::kSendCq, [&] { return (ne = t_.poll_send(&c, 1)) != 0; })) {
          return fail(interrupted() ? "interrupted"
                                    : "no completion for a SEND " + watch.for_text());
        }
        if (c.status != WcStatus::kSuccess) return completion_error(c, "client", scnt, iters);
      }
    }
  }
  sample_ns_ = duration ? dur.sample_end() - dur.sample_start() : 0;
  return true;
}

void PerfTest::lat_report(uint64_t size) {
  if (o_.duration_mode) {
    print_lat_duration_report(o_, size, measured_iters_, sample_ns_, cpu_.percent());
    return;
  }
  print_lat_report(o_, size, tposted_.data(), o_.iters, scratch_.data());
}

}  // namespace roce::perf
