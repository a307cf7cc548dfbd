#include "stack/core/counters_format.h"

#include <cstdio>

#include "stack/wire/parser.h"

namespace roce {

namespace {
void add(std::string& out, const char* name, uint64_t v) {
  if (v == 0) return;
  char buf[96];
  std::snprintf(buf, sizeof buf, "  %-28s %llu\n", name, static_cast<unsigned long long>(v));
  out += buf;
}
}  // namespace

std::string format_engine_counters(const Engine& e) {
  const EngineCounters& c = e.counters();
  std::string out = "port:\n";
  add(out, "rx_frames", c.rx_frames);
  add(out, "rx_bytes", c.rx_bytes);
  add(out, "rx_roce", c.rx_roce);
  add(out, "tx_frames", c.tx_frames);
  add(out, "tx_bytes", c.tx_bytes);
  for (unsigned i = 1; i < static_cast<unsigned>(wire::ParseError::kCount); ++i) {
    if (!c.rx_parse_error[i]) continue;
    const std::string name =
        "drop: " + std::string(wire::to_string(static_cast<wire::ParseError>(i)));
    add(out, name.c_str(), c.rx_parse_error[i]);
  }
  add(out, "rx_not_roce (to neighbour)", c.rx_not_roce);
  add(out, "drop: unknown QP", c.rx_unknown_qp);
  add(out, "drop: QP state", c.rx_bad_qp_state);
  add(out, "drop: wrong transport", c.rx_wrong_transport);
  add(out, "drop: P_Key", c.rx_pkey_mismatch);
  add(out, "drop: address mismatch", c.rx_addr_mismatch);
  add(out, "drop: not our MAC", c.rx_not_our_mac);
  add(out, "drop: another VLAN", c.rx_other_vlan);
  add(out, "drop: UD Q_Key", c.ud_qkey_mismatch);
  add(out, "drop: UD no receive", c.ud_no_recv);
  add(out, "drop: UD too long", c.ud_too_long);
  add(out, "drop: UD not our address", c.ud_not_our_address);
  add(out, "tx_no_buffer", c.tx_no_buffer);
  add(out, "tx_backpressure", c.tx_backpressure);
  add(out, "cq_overflow", c.cq_overflow);
  add(out, "neighbor_wait", c.neighbor_wait);
  add(out, "neighbor_failed_sends (destination never resolved)", c.neighbor_failed_sends);
  add(out, "rx_ce (CE-marked)", c.rx_ce);
  add(out, "cnps_sent", c.cnps_sent);
  add(out, "cnps_received", c.cnps_received);
  add(out, "cnps_ignored", c.cnps_ignored);
  add(out, "paced (pacer waits)", c.paced);
  add(out, "farewell_acks", c.farewell_acks);
  add(out, "port_budget_waits", c.port_budget_waits);
  add(out, "loopback_frames (to our own MAC, not through the port)", c.loopback_frames);
  add(out, "loopback_waits (the loopback ring was full)", c.loopback_waits);
  add(out, "longest_poll_gap_us", c.longest_poll_gap_us);
  add(out, "stalls (no poll for stall_ns)", c.stalls);
  add(out, "stall_restarted_timers", c.stall_restarted_timers);
  e.for_each_qp([&](const Qp& q) { out += format_qp_counters(q); });
  out += format_destroyed_qp_counters(e);
  return out;
}

std::string format_runner_counters(const RunnerStats& s) {
  std::string out = "engine thread:\n";
  add(out, "polls", s.polls);
  add(out, "polls that found work", s.busy_polls);
  add(out, "yields", s.yields);
  add(out, "yields that lost the core", s.long_yields);  // for 100 us or more
  add(out, "starved yields", s.starved_yields);
  add(out, "sleeps", s.sleeps);
  add(out, "sleeps ended by a doorbell", s.wakeups);
  return out;
}

std::string format_standby_counters(const RunnerStats& s) {
  if (!s.standby_polls && !s.standby_sleeps) return {};
  std::string out = "standby driver (inline mode, a CQ armed on a channel):\n";
  add(out, "polls", s.standby_polls);
  add(out, "polls that found work", s.standby_busy_polls);
  add(out, "sleeps", s.standby_sleeps);
  add(out, "sleeps ended by a doorbell or an arm", s.standby_wakeups);
  return out;
}

namespace {

void add_qp_lines(std::string& out, const QpCounters& c) {
  add(out, "tx_packets", c.tx_packets);
  add(out, "tx_bytes", c.tx_bytes);
  add(out, "rx_packets", c.rx_packets);
  add(out, "rx_bytes", c.rx_bytes);
  add(out, "retransmitted_packets", c.retransmitted_packets);
  add(out, "retransmit_events", c.retransmit_events);
  add(out, "local_ack_timeouts", c.local_ack_timeouts);
  add(out, "seq_naks_sent", c.seq_naks_sent);
  add(out, "seq_naks_received", c.seq_naks_received);
  add(out, "rnr_naks_sent", c.rnr_naks_sent);
  add(out, "rnr_naks_received", c.rnr_naks_received);
  add(out, "error_naks_sent", c.error_naks_sent);
  add(out, "error_naks_received", c.error_naks_received);
  add(out, "duplicate_requests", c.duplicate_requests);
  add(out, "out_of_sequence", c.out_of_sequence);
  add(out, "implicit_naks", c.implicit_naks);
  add(out, "dropped_responses", c.dropped_responses);
  add(out, "uc_messages_dropped", c.uc_messages_dropped);
  add(out, "atomics_executed", c.atomics_executed);
  add(out, "cnps_sent", c.cnps_sent);
  add(out, "cnps_received", c.cnps_received);
}

}  // namespace

std::string format_qp_counters(const Qp& q) {
  char head[64];
  if (const SharedReceiveQueue* srq = q.init_attr().srq) {
    std::snprintf(head, sizeof head, "qp 0x%06x (%s, receives from SRQ %u):\n", q.qpn(),
                  to_string(q.state()), srq->srqn());
  } else {
    std::snprintf(head, sizeof head, "qp 0x%06x (%s):\n", q.qpn(), to_string(q.state()));
  }
  std::string out = head;
  add_qp_lines(out, q.counters_);
  if (q.cc_.kind == CcKind::kDcqcn) {
    const auto& rc = q.cc_.rp.counters();
    add(out, "dcqcn rate cuts", rc.rate_cuts);
    add(out, "dcqcn fast recovery", rc.fast_recovery);
    add(out, "dcqcn additive increase", rc.additive_increase);
    add(out, "dcqcn hyper increase", rc.hyper_increase);
    char rate[96];
    std::snprintf(rate, sizeof rate, "  %-28s %.3f Gb/s (target %.3f, alpha %.4f)\n", "dcqcn rate",
                  q.cc_.rp.rate_gbps(), q.cc_.rp.target_gbps(), q.cc_.rp.alpha());
    out += rate;
  }
  return out;
}

// The QPs destroyed so far, their counters summed (a program that closed its QPs before the
// device's counters were written still shows its retransmissions and timeouts).
std::string format_destroyed_qp_counters(const Engine& e) {
  if (e.destroyed_qps() == 0) return "";
  std::string out = "destroyed qps (" + std::to_string(e.destroyed_qps()) + ", summed):\n";
  add_qp_lines(out, e.destroyed_qp_counters());
  return out;
}

}  // namespace roce
