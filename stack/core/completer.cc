// Completer: ACKs, NAKs, READ responses and atomic ACKs against the send queue (IBA 9.7.5.2),
// the local ACK timeout and RNR timers, retry counters, and completions in order.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "stack/core/engine.h"
#include "stack/wire/opcode.h"
#include "stack/wire/psn.h"

namespace roce {

using wire::psn_add;
using wire::psn_diff;
using wire::psn_ge;

namespace {
bool is_read(WrOpcode o) { return o == WrOpcode::kRdmaRead; }
bool is_atomic(WrOpcode o) {
  return o == WrOpcode::kAtomicCmpAndSwp || o == WrOpcode::kAtomicFetchAndAdd;
}
WcStatus nak_status(uint8_t syndrome) {
  switch (static_cast<wire::NakCode>(syndrome)) {
    case wire::NakCode::kInvalidRequest:
      return WcStatus::kRemInvReqErr;
    case wire::NakCode::kRemoteAccessError:
      return WcStatus::kRemAccessErr;
    case wire::NakCode::kRemoteOperationalError:
      return WcStatus::kRemOpErr;
    case wire::NakCode::kInvalidRdRequest:
      return WcStatus::kRemInvRdReqErr;
    default:
      return WcStatus::kBadRespErr;
  }
}
}  // namespace

static constexpr uint8_t kMaxGapBackoff = 6;

static uint64_t gap_holdoff_ns(const Qp& qp) {
  const uint64_t h = local_ack_timeout_ns(qp.attr_.timeout) / 16;
  const uint64_t base = h == 0 ? 100'000 : std::clamp<uint64_t>(h, 8'000, 1'000'000);
  return base << qp.snd_.gap_backoff;
}

// A gap in the responses (a missing READ response, an implicit NAK) starts a go-back-N retry
// from comp_psn, at most once per hold-off: the stream being replaced keeps arriving for about
// a round trip and must not trigger retries of its own. Losses the hold-off hides are caught by
// the next gap after it, or by the local ACK timeout. When a hold-off ends without any answer
// to the last retry (comp_psn has not moved), the peer is slower than the hold-off: it doubles
// (up to 64x) instead of asking again for the whole window; any progress resets it.
bool Engine::gap_retry_allowed(Qp& qp) {
  auto& s = qp.snd_;
  const auto owe = [&] {  // the retransmit timer fires at the end of the hold-off to settle it
    if (!s.gap_owed) {
      s.gap_owed = true;
      rearm_retransmit(qp);
    }
    return false;
  };
  if (s.gap_retried && now_ - s.last_gap_retry_ns < gap_holdoff_ns(qp)) return owe();
  if (s.gap_retried && s.comp_psn == s.gap_retry_psn) {
    if (s.gap_backoff < kMaxGapBackoff) {  // unanswered: wait twice as long, still owed
      ++s.gap_backoff;
      s.gap_owed = true;
      rearm_retransmit(qp);
      return false;
    }
  } else {
    s.gap_backoff = 0;
  }
  s.gap_retried = true;
  s.gap_owed = false;
  s.last_gap_retry_ns = now_;
  s.gap_retry_psn = s.comp_psn;
  return true;
}

// The retransmit timer serves two deadlines: the local ACK timeout (IBA 9.7.6.1.3; timeout 0
// waits forever), restarted here, and the end of a gap hold-off with a retry owed.
void Engine::arm_retransmit(Qp& qp) {
  const uint64_t t = local_ack_timeout_ns(qp.attr_.timeout);
  qp.snd_.ack_deadline_ns = t ? now_ + t : UINT64_MAX;
  rearm_retransmit(qp);
}

// Nothing outstanding (or an RNR wait): no ACK deadline.
void Engine::stop_retransmit(Qp& qp) {
  timers_.cancel(qp.snd_.retransmit);
  qp.snd_.ack_deadline_ns = UINT64_MAX;
}

// The same timer for the same ACK deadline: a gap owed or settled is not progress.
void Engine::rearm_retransmit(Qp& qp) {
  auto& s = qp.snd_;
  uint64_t at = s.ack_deadline_ns;
  if (s.gap_owed) at = std::min(at, s.last_gap_retry_ns + gap_holdoff_ns(qp));
  if (at == UINT64_MAX) {
    timers_.cancel(s.retransmit);
    return;
  }
  timers_.arm(s.retransmit, at);
}

Cqe* Engine::begin_send_cqe(Qp& qp, const SendWqe& w, WcStatus st) {
  Cqe* c = cqe_begin(qp.init_.send_cq);
  if (c) {
    c->wr_id = w.wr_id;
    c->status = st;
    c->opcode = wc_opcode(w.opcode);
    c->byte_len = w.length;
    c->qp_num = qp.qpn();
  }
  return c;
}

// Retires the head WQE with status `st`; a completion is written when it was signalled or
// failed. Completions leave in send-queue order, so a signalled completion implies all earlier
// WQEs are done. The slot is retired before the completion is pushed: an application that sees
// the completion may post into that slot at once (max_send_wr = 1 programs do).
void Engine::comp_complete_head(Qp& qp, WcStatus st) {
  auto& s = qp.snd_;
  const uint32_t mask = qp.sq_.capacity() - 1;
  const SendWqe& w = *qp.sq_.at<SendWqe>(s.head);
  SendSlot& slot = qp.slots_[s.head & mask];
  const bool report = st != WcStatus::kSuccess || (w.flags & kSendSignaled);
  Cqe* c = report ? begin_send_cqe(qp, w, st) : nullptr;  // published once the slot is retired
  if (slot.started && (is_read(w.opcode) || is_atomic(w.opcode)) && s.rd_atomic) --s.rd_atomic;
  slot = SendSlot{};
  ++s.head;
  if (static_cast<int32_t>(s.head - s.send) > 0) s.send = s.head;  // never behind the head
  qp.sq_.retire(s.head);  // `w` may be overwritten from here on
  if (report) cqe_commit(qp.init_.send_cq, c, false, &qp);
}

void Engine::comp_error(Qp& qp, WcStatus st) {
  if (qp.snd_.head != qp.snd_.tail) comp_complete_head(qp, st);
  send_queue_error(qp);
}

// After progress: restart or stop the retransmit timer, unblock the requester, report a local
// error that reached the head, and signal a drained send queue.
void Engine::comp_progress(Qp& qp) {
  auto& s = qp.snd_;
  if (qp.attr_.qp_state == QpState::kErr) return;
  const uint32_t mask = qp.sq_.capacity() - 1;
  if (s.head != s.tail) {
    const SendSlot& slot = qp.slots_[s.head & mask];
    if (slot.error != WcStatus::kSuccess) {
      comp_error(qp, slot.error);
      return;
    }
  }
  // The requester may have rewound behind what is now acknowledged (a late response overtook
  // the rewind): skip ahead so nothing acknowledged is sent again.
  if (psn_diff(s.psn, s.comp_psn) < 0) req_rewind(qp, s.comp_psn);
  if (psn_diff(s.max_psn, s.comp_psn) > 0) {
    if (!s.rnr_wait) arm_retransmit(qp);
  } else {
    stop_retransmit(qp);
  }
  note_drained(qp);
  if (s.send != qp.sq_.prod_acquire()) schedule_req(qp);
}

// IBA 11.6.3: in SQD, the SQ Drained event comes once, when no message is under way (none
// partly sent, nothing unacknowledged).
void Engine::note_drained(Qp& qp) {
  auto& s = qp.snd_;
  if (qp.attr_.qp_state != QpState::kSqd || s.drained_event) return;
  if (s.head != s.send || s.offset != 0 || psn_diff(s.max_psn, s.comp_psn) > 0) return;
  s.drained_event = true;
  qp.attr_.sq_draining = 0;
  if (qp.attr_.en_sqd_async_notify) raise_event(AsyncEventType::kSqDrained, qp.qpn());
}

// Completes, in order, every SEND/WRITE WQE whose last PSN is at or before `psn` (a coalesced
// ACK, or the implicit ACK carried by any later response). A READ or atomic in the way stops
// the walk: it completes only with its own response data. If `psn` covers it, its responses were
// lost (the responder sent them before the later ACK): an implicit NAK, retried from comp_psn.
void Engine::comp_ack_upto(Qp& qp, uint32_t psn) {
  auto& s = qp.snd_;
  const uint32_t mask = qp.sq_.capacity() - 1;
  bool progress = false;
  while (s.head != s.tail && qp.attr_.qp_state != QpState::kErr) {
    const SendWqe& w = *qp.sq_.at<SendWqe>(s.head);
    const SendSlot& slot = qp.slots_[s.head & mask];
    if (!slot.started || slot.error != WcStatus::kSuccess) break;
    const uint32_t last = psn_add(slot.first_psn, slot.npkts - 1);
    if (is_read(w.opcode) || is_atomic(w.opcode)) {
      if (psn_ge(psn, last) && gap_retry_allowed(qp)) {
        ++qp.counters_.implicit_naks;
        req_rewind(qp, s.comp_psn);
      }
      break;
    }
    if (!psn_ge(psn, last)) {
      // Part of a multi-packet message is acknowledged.
      if (psn_ge(psn, s.comp_psn)) {
        s.comp_psn = psn_add(psn, 1);
        progress = true;
      }
      break;
    }
    s.comp_psn = psn_add(last, 1);
    comp_complete_head(qp, WcStatus::kSuccess);
    progress = true;
  }
  if (progress) reset_retry_budgets(qp);
}

// Forward progress resets both retry budgets (IBA 9.7.5.2: retry_cnt and rnr_retry count the
// retries of the message being retried, not of the QP's lifetime; rxe does the same).
void Engine::reset_retry_budgets(Qp& qp) {
  qp.snd_.retry_left = qp.attr_.retry_cnt;
  qp.snd_.rnr_retry_left = qp.attr_.rnr_retry;
}

bool Engine::scatter_read(Qp& qp, const SendWqe& w, uint32_t offset, const uint8_t* src,
                          uint32_t len) {
  const Sge* sge = w.sges();
  uint32_t i = 0;
  while (i < w.num_sge && offset >= sge[i].length) offset -= sge[i++].length;
  while (len) {
    if (i >= w.num_sge) return false;
    const uint32_t chunk = std::min(len, sge[i].length - offset);
    if (chunk == 0) {  // a zero-length SGE: skipped, as check_local_write does
      ++i;
      continue;
    }
    uint8_t* host = nullptr;
    if (mrs_.check(sge[i].lkey, qp.init_.pd, sge[i].addr + offset, chunk, kAccessLocalWrite,
                   &host) != MrCheck::kOk) {
      return false;
    }
    std::memcpy(host, src, chunk);
    src += chunk;
    len -= chunk;
    offset = 0;
    ++i;
  }
  return true;
}

void Engine::comp_handle(Qp& qp, const wire::PacketInfo& info) {
  auto& s = qp.snd_;
  const wire::OpcodeInfo& op = *info.op;
  const uint32_t psn = info.psn;
  // Only PSNs that were sent and are not yet acknowledged mean anything; the rest are
  // duplicates or ghosts (IBA 9.7.5.2.1).
  if (psn_diff(psn, s.comp_psn) < 0 || psn_diff(psn, s.max_psn) >= 0) {
    ++qp.counters_.dropped_responses;
    return;
  }
  const uint32_t mask = qp.sq_.capacity() - 1;
  uint8_t syndrome = wire::kAethAckUnlimitedCredits;
  if (op.has_ext(wire::Ext::kAeth)) syndrome = info.ext<wire::Aeth>(wire::Ext::kAeth).syndrome;
  const wire::AethType type = wire::aeth_type(syndrome);

  if (op.has(wire::kOpAck) && !op.has(wire::kOpAtomic)) {
    switch (type) {
      case wire::AethType::kAck:
        comp_ack_upto(qp, psn);
        break;
      case wire::AethType::kRnrNak: {
        ++qp.counters_.rnr_naks_received;
        comp_ack_upto(qp, psn_add(psn, -1));
        if (qp.attr_.qp_state == QpState::kErr || s.head == s.tail) break;
        if (s.rnr_retry_left == 0) {
          comp_error(qp, WcStatus::kRnrRetryExcErr);
          return;
        }
        if (qp.attr_.rnr_retry != 7) --s.rnr_retry_left;  // 7 means retry forever
        req_rewind(qp, psn);
        s.rnr_wait = true;
        stop_retransmit(qp);
        timers_.arm(s.rnr, now_ + uint64_t{kRnrTimerUs[syndrome & 0x1F]} * 1000);
        return;
      }
      case wire::AethType::kNak: {
        comp_ack_upto(qp, psn_add(psn, -1));
        if (qp.attr_.qp_state == QpState::kErr) return;
        if (syndrome == static_cast<uint8_t>(wire::NakCode::kPsnSeqError)) {
          ++qp.counters_.seq_naks_received;
          if (s.retry_left == 0) {
            comp_error(qp, WcStatus::kRetryExcErr);
            return;
          }
          if (qp.attr_.retry_cnt != 7) --s.retry_left;
          req_rewind(qp, psn);  // the responder NAKs a gap once: always act on it
        } else {
          // Invalid request, remote access, remote operational: fatal for this WQE and QP.
          ++qp.counters_.error_naks_received;
          comp_error(qp, nak_status(syndrome));
          return;
        }
        break;
      }
      case wire::AethType::kReserved:
        ++qp.counters_.dropped_responses;
        return;
    }
    comp_progress(qp);
    return;
  }

  // READ responses and atomic ACKs: data for the WQE at the head, in PSN order. Anything before
  // them is implicitly acknowledged.
  comp_ack_upto(qp, psn_add(psn, -1));
  if (qp.attr_.qp_state == QpState::kErr || s.head == s.tail) return;
  const SendWqe& w = *qp.sq_.at<SendWqe>(s.head);
  const SendSlot& slot = qp.slots_[s.head & mask];
  const bool want_read = op.has(wire::kOpRead);
  if (!slot.started || (want_read ? !is_read(w.opcode) : !is_atomic(w.opcode))) {
    ++qp.counters_.dropped_responses;  // a response of the wrong kind for this PSN
    return;
  }
  if (psn != s.comp_psn) {
    // Responses are missing in front of this one: ask again from the first missing PSN, once.
    ++qp.counters_.out_of_sequence;
    if (gap_retry_allowed(qp)) req_rewind(qp, s.comp_psn);
    return;
  }
  if (type != wire::AethType::kAck) {
    // A NAK inside an AETH of a READ response is not legal; treat as a bad response.
    comp_error(qp, WcStatus::kBadRespErr);
    return;
  }

  if (want_read) {
    const uint32_t offset = static_cast<uint32_t>(psn_diff(psn, slot.first_psn)) * qp.mtu_;
    const uint32_t expect = std::min(qp.mtu_, w.length - offset);
    const bool last = offset + expect == w.length;
    // The last response of the request in progress (a READ larger than the window is asked
    // for in pieces: read_request_psns).
    const bool request_last = psn_add(psn, 1) == slot.read_end;
    const bool is_last_op = op.flags & wire::kOpLast;
    if (info.payload_len != expect || request_last != is_last_op) {
      ++qp.counters_.dropped_responses;  // malformed: wait for a retransmission
      return;
    }
    if (!scatter_read(qp, w, offset, info.payload(), info.payload_len)) {
      comp_error(qp, WcStatus::kLocProtErr);
      return;
    }
    s.comp_psn = psn_add(psn, 1);
    if (last) comp_complete_head(qp, WcStatus::kSuccess);
  } else {
    const uint64_t orig = info.ext<wire::AtomicAckEth>(wire::Ext::kAtomicAckEth).orig.get();
    if (!scatter_read(qp, w, 0, reinterpret_cast<const uint8_t*>(&orig), sizeof orig)) {
      comp_error(qp, WcStatus::kLocProtErr);
      return;
    }
    s.comp_psn = psn_add(psn, 1);
    comp_complete_head(qp, WcStatus::kSuccess);
  }
  reset_retry_budgets(qp);
  comp_progress(qp);
}

// Local ACK timeout: nothing heard for the QP's timeout while packets are outstanding.
void Engine::comp_timeout(Qp& qp) {
  auto& s = qp.snd_;
  if (qp.attr_.qp_state != QpState::kRts && qp.attr_.qp_state != QpState::kSqd) return;
  if (psn_diff(s.max_psn, s.comp_psn) <= 0 || s.rnr_wait) return;
  if (s.gap_owed && now_ < s.ack_deadline_ns) {
    // The end of a gap hold-off, not a timeout: retry without spending the retry budget (a
    // retry restarts the ACK timer; a longer hold-off keeps its deadline).
    if (gap_retry_allowed(qp)) {
      req_rewind(qp, s.comp_psn);
      arm_retransmit(qp);
    } else {
      rearm_retransmit(qp);  // the timer fired for the gap: the ACK deadline stands
    }
    return;
  }
  if (stalled_) {
    // The deadline passed while the engine was not running: the ACK may be in the receive
    // ring (or in the peer's transmit queue behind a ring we did not drain). IBA 9.7.6.1.3
    // times the responder, not our absence: a full period again, from now.
    ++ctr_.stall_restarted_timers;
    arm_retransmit(qp);
    return;
  }
  s.gap_owed = false;
  ++qp.counters_.local_ack_timeouts;
  if (s.retry_left == 0) {
    comp_error(qp, WcStatus::kRetryExcErr);
    return;
  }
  if (qp.attr_.retry_cnt != 7) --s.retry_left;
  req_rewind(qp, s.comp_psn);
  arm_retransmit(qp);
}

void Engine::comp_rnr_expired(Qp& qp) {
  qp.snd_.rnr_wait = false;
  if (qp.attr_.qp_state != QpState::kRts && qp.attr_.qp_state != QpState::kSqd) return;
  schedule_req(qp);
  arm_retransmit(qp);
}

}  // namespace roce
