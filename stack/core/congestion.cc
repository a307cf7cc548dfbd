// Congestion control in the engine (DCQCN, Zhu et al. SIGCOMM 2015; the algorithm itself is in
// stack/cc/dcqcn.*): ECT marking of data packets, the notification point turning CE marks into
// CNPs (RoCEv2 annex A17.9), the reaction point cutting and recovering the QP's rate, and
// pacing through the timer wheel -- a paced QP leaves the schedule and a timer puts it back.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "stack/core/engine.h"
#include "stack/wire/opcode.h"

namespace roce {

// The notification point runs on every QP, whatever congestion control the QP applies to its
// own sending: the peer's choice is the peer's (a NIC's NP answers CE marks whether or not its
// own RP is on), and a sender that marks its packets ECT expects CNPs back when a switch marks
// them CE. Only the reaction point is DCQCN's.
void Engine::cc_setup(Qp& qp) {
  qp.cc_.np.init(cfg_.dcqcn);
  if (qp.cc_.kind != CcKind::kDcqcn) return;
  qp.cc_.rp.init(cfg_.dcqcn, now_);
}

// The later of what DCQCN's pacer and the QP's rate limit allow.
uint64_t Engine::cc_tx_time(const Qp& qp) const {
  uint64_t t = qp.cc_.kind == CcKind::kDcqcn ? qp.cc_.rp.tx_time(now_) : now_;
  if (qp.cc_.limited) t = std::max(t, qp.cc_.limit.tx_time(now_));
  return t;
}

bool Engine::cc_pacers_allow(Qp& qp) {
  const uint64_t t = cc_tx_time(qp);
  if (t <= now_) return true;
  ++ctr_.paced;
  if (!qp.cc_.pace.armed) timers_.arm(qp.cc_.pace, t);
  return false;
}

void Engine::cc_charge(Qp& qp, uint32_t frame_len) {
  if (qp.cc_.limited) qp.cc_.limit.on_sent(frame_len, now_);
  if (qp.cc_.kind != CcKind::kDcqcn) return;
  qp.cc_.rp.on_sent(frame_len, now_);
  // The byte counter may have produced an increase event with a timer of its own.
  const uint64_t next = qp.cc_.rp.next_timer_ns();
  if (next != cc::DcqcnRp::kNoTimer &&
      (!qp.cc_.timer.armed || TimerWheel::tick_of(next) < qp.cc_.timer.expiry_tick)) {
    timers_.arm(qp.cc_.timer, next);
  }
}

void Engine::cc_on_ce(Qp& qp) {
  if (qp.cc_.np.on_ce_packet(now_)) send_cnp(qp);
}

void Engine::cc_on_cnp(Qp& qp) {
  ++qp.counters_.cnps_received;
  if (qp.cc_.kind != CcKind::kDcqcn) {
    ++ctr_.cnps_ignored;
    return;
  }
  qp.cc_.rp.on_cnp(now_);
  cc_timer(qp);
}

void Engine::cc_timer(Qp& qp) {
  if (qp.cc_.kind != CcKind::kDcqcn) return;
  qp.cc_.rp.on_timer(now_);
  const uint64_t next = qp.cc_.rp.next_timer_ns();
  if (next == cc::DcqcnRp::kNoTimer) {
    timers_.cancel(qp.cc_.timer);
  } else {
    timers_.arm(qp.cc_.timer, next);
  }
  repace(qp);
}

// A rate that changed may let a QP held by its pacer go sooner, or later, than its pacing timer
// says (nothing else would wake it before that timer).
void Engine::repace(Qp& qp) {
  if (!qp.cc_.pace.armed) return;
  const uint64_t t = cc_tx_time(qp);
  if (t <= now_) {
    timers_.cancel(qp.cc_.pace);
    schedule_req(qp);
    schedule_resp(qp);
  } else {
    timers_.arm(qp.cc_.pace, t);
  }
}

void Engine::set_line_rate(double gbps) {
  if (!(gbps > 0) || !std::isfinite(gbps) || gbps == cfg_.dcqcn.line_gbps) return;
  cfg_.dcqcn.set_line_rate(gbps);
  for (const auto& q : qps_) {
    if (!q || q->cc_.kind != CcKind::kDcqcn) continue;
    if (q->state() == QpState::kReset || q->state() == QpState::kInit) continue;  // no RP yet
    q->cc_.rp.set_line_rate(gbps, now_);
    cc_timer(*q);  // recovery may be over; the pacer's rate moved
  }
}

// The longest frame carrying data the QP sends (ibv_modify_qp_rate_limit's default
// typical_pkt_sz): a connected QP's at its path and path MTU; a UD QP's at the port's MTU, with
// the longer IPv6 headers, since each of its address handles picks its own path.
uint32_t Engine::largest_data_frame(const Qp& qp) const {
  using namespace wire;
  if (qp.type() == QpType::kUd) {
    return l2l4_header_len(cfg_.vlan, IpFamily::kIpv6) +
           opcode_info(op::kUdSendOnlyImm).transport_hdr_len() + mtu_bytes(active_mtu_) + kIcrcSize;
  }
  return qp.l2l4_.len + opcode_info(op::kRcWriteOnlyImm).transport_hdr_len() +
         mtu_bytes(qp.attr_.path_mtu) + kIcrcSize;
}

// attr_.rate_limit changed (ibv_modify_qp with IBV_QP_RATE_LIMIT): pace at it from now on, or
// stop pacing for it (0). The pacer keeps what it charged, rescaled to the new rate.
void Engine::cc_set_limit(Qp& qp) {
  const uint32_t kbps = qp.attr_.rate_limit;
  qp.cc_.limited = kbps != 0;
  const double gbps = static_cast<double>(kbps) / 1e6;
  if (qp.cc_.limited && qp.attr_.max_burst_sz) {
    const uint32_t pkt = qp.attr_.typical_pkt_sz ? qp.attr_.typical_pkt_sz : largest_data_frame(qp);
    qp.cc_.limit.set_rate_burst(gbps, now_, qp.attr_.max_burst_sz, pkt);
  } else if (qp.cc_.limited) {
    qp.cc_.limit.set_rate(gbps, now_, cfg_.dcqcn.pacer_burst_ns, cfg_.dcqcn.pacer_burst_bytes);
  }
  repace(qp);
}

// CNP: BTH opcode 0x81 with BECN set, the sender's QP as destination, PSN 0, P_Key of the QP,
// then 16 reserved zero bytes and the ICRC (annex A17.9.2). Sent at once, not through the
// responder's queue: it must not wait behind READ responses.
void Engine::send_cnp(Qp& qp) {
  if (!qp.path_ready_) return;
  if (!tx_room()) flush_tx();
  if (!tx_room()) return;
  PktBuf* b = tx_buf();
  if (!b) return;
  wire::BthFields bth;
  bth.opcode = wire::op::kCnp;
  bth.dest_qp = qp.attr_.dest_qp_num;
  bth.becn = true;
  bth.psn = 0;
  wire::ExtHeaders ext;  // CnpPayload zeroed
  qp.path_.traffic_class = qp.ctrl_tclass_;
  const uint32_t hdr = qp.l2l4_.len + wire::opcode_info(wire::op::kCnp).transport_hdr_len();
  finish_frame(b, qp, begin_frame(b, hdr), 0, bth, ext);
  ++qp.counters_.cnps_sent;
  ++ctr_.cnps_sent;
}

}  // namespace roce
