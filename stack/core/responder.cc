// Responder: requests against the receive queue and registered memory (IBA 9.7.5.1). Checks
// come first and in the spec's order -- PSN, opcode sequence, QP access, length, resources,
// R_Key / PD / access / bounds -- and a failed check touches no memory. Output (ACKs, NAKs, READ
// response streams, atomic ACKs) is queued in PSN order and emitted by resp_step().
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "stack/core/engine.h"
#include "stack/wire/opcode.h"
#include "stack/wire/psn.h"

namespace roce {

using wire::NakCode;
using wire::psn_add;
using wire::psn_diff;
namespace op = wire::op;

namespace {
// A queued response of `kind` whose next PSN lies in [first, last], or nullptr.
RespOut* find_queued(Qp::Recv& r, RespOut::Kind kind, uint32_t first, uint32_t last) {
  for (uint32_t i = r.out_head; i != r.out_tail; ++i) {
    RespOut& e = r.out[i % Qp::Recv::kOutSize];
    if (e.kind == kind && psn_diff(e.psn, first) >= 0 && psn_diff(e.psn, last) <= 0) return &e;
  }
  return nullptr;
}
}  // namespace

RespOut* Engine::resp_out_push(Qp& qp) {
  auto& r = qp.rcv_;
  if (r.out_tail - r.out_head >= Qp::Recv::kOutSize) return nullptr;
  RespOut* e = &r.out[r.out_tail++ % Qp::Recv::kOutSize];
  *e = RespOut{};
  schedule_resp(qp);
  return e;
}

// Queues an ACK / NAK. Consecutive plain ACKs coalesce into the latest (IBA 9.7.5.1.1).
// A plain ACK leaves no earlier than the engine's next poll: by then an application that
// answers the request (a ping-pong, an RPC) has usually posted its reply, and the ACK shares
// the reply's tx burst instead of costing a burst of its own ahead of it (in inline mode the
// application polls the engine, so the ACK would otherwise always go first). An ACK that
// coalesces later requests keeps its poll: a stream of requests is still acknowledged every
// poll. If the QP's requester has output in the same poll as the request (an application on
// another thread answered between the receive and the engine's doorbell check), the ACK leaves
// at once, ahead of it: a peer may take its send completion and its next receive in the order
// they arrive (perftest's send_lat -e reads a stale completion otherwise). So does it when the
// poll raises a completion event: no reply can join it before the woken thread has run.
void Engine::resp_push_ack(Qp& qp, uint8_t syndrome, uint32_t psn) {
  if (qp.type() == QpType::kUc) return;  // UC acknowledges nothing (IBA 9.7.5.2)
  auto& r = qp.rcv_;
  const bool plain_ack = wire::aeth_type(syndrome) == wire::AethType::kAck;
  if (plain_ack && r.out_tail != r.out_head) {
    RespOut& tail = r.out[(r.out_tail - 1) % Qp::Recv::kOutSize];
    if (tail.kind == RespOut::kAck && wire::aeth_type(tail.syndrome) == wire::AethType::kAck) {
      tail.psn = psn;
      tail.msn = r.msn;
      schedule_resp(qp);  // (a no-op when scheduled; the queue is not empty either way)
      return;
    }
  }
  RespOut* e = resp_out_push(qp);
  if (!e) return;  // queue full of READ streams: the requester's timer recovers
  e->kind = RespOut::kAck;
  e->syndrome = syndrome;
  e->psn = psn;
  e->msn = r.msn;
  if (plain_ack) e->not_before_poll = poll_seq_ + 1;
}

// Builds an ACK / NAK frame and puts it on the tx queue at once, outside the responder's
// output queue (the QP is about to be put in error or destroyed). Dropped if the tx queue stays
// full or the peer's MAC is not known.
void Engine::send_ack_now(Qp& qp, uint8_t syndrome, uint32_t psn) {
  if (!tx_room()) flush_tx();
  if (!tx_room() || !qp.path_ready_) return;
  PktBuf* b = tx_buf();
  if (!b) return;
  wire::BthFields bth;
  bth.opcode = op::kRcAck;
  bth.dest_qp = qp.attr_.dest_qp_num;
  bth.psn = psn;
  wire::ExtHeaders ext;
  ext.aeth.syndrome = syndrome;
  ext.aeth.msn.set(qp.rcv_.msn);
  const uint32_t hdr = qp.l2l4_.len + wire::opcode_info(op::kRcAck).transport_hdr_len();
  qp.path_.traffic_class = qp.ctrl_tclass_;
  finish_frame(b, qp, begin_frame(b, hdr), 0, bth, ext);
}

// A connected RC QP that has received requests is going away: acknowledge everything it
// received once more. Its last ACK may have been lost, and with no QP left to answer the
// retransmission, the peer would retry until its budget runs out (for ever with retry_cnt 7)
// for a message that was delivered. A duplicate ACK is harmless (IBA 9.7.5.1.1).
void Engine::resp_farewell(Qp& qp) {
  const QpState st = qp.attr_.qp_state;
  if (qp.type() != QpType::kRc ||
      (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd && st != QpState::kSqe)) {
    return;
  }
  if (qp.rcv_.epsn == (qp.attr_.rq_psn & wire::kPsnMask)) return;  // nothing received
  send_ack_now(qp, wire::kAethAckUnlimitedCredits, psn_add(qp.rcv_.epsn, -1));
  ++ctr_.farewell_acks;
  flush_tx();
}

// A request the responder must refuse for good: NAK it, complete the receive in progress with
// `recv_status`, and put the QP in the error state (IBA 9.7.5.1.3, classes B-D). Responses to
// earlier requests still queued (atomic ACKs, READ streams, ACKs) leave first, in PSN order
// (IBA 9.5): the error costs the failing request, not the ones before it. Until they have
// left the responder takes no further request; resp_step then sends the NAK.
void Engine::resp_fatal(Qp& qp, NakCode code, uint32_t psn, WcStatus recv_status) {
  auto& r = qp.rcv_;
  if (qp.type() == QpType::kUc) {
    // UC sends no NAK. What the requester got wrong (a bad opcode, length, R_Key ...) costs the
    // message, not the QP; only a fault of our own receive WQE (its buffer) completes it in
    // error.
    if (recv_status != WcStatus::kLocProtErr) {
      uc_drop_message(qp);
      return;
    }
    resp_enter_error(qp, code, recv_status);
    return;
  }
  ++qp.counters_.error_naks_sent;
  // Output at or after the failing PSN (a READ stream that failed, what a duplicate READ
  // overtook) is superseded by the NAK; the queue is in PSN order.
  while (r.out_tail != r.out_head &&
         psn_diff(r.out[(r.out_tail - 1) % Qp::Recv::kOutSize].psn, psn) >= 0) {
    --r.out_tail;
  }
  if (r.out_tail != r.out_head && qp.path_ready_) {
    r.fatal_pending = true;
    r.fatal_code = code;
    r.fatal_psn = psn;
    r.fatal_status = recv_status;
    return;
  }
  send_ack_now(qp, static_cast<uint8_t>(code), psn);
  resp_enter_error(qp, code, recv_status);
}

// The second half of resp_fatal, once its NAK is on the tx queue (RC) or at once (UC).
void Engine::resp_enter_error(Qp& qp, NakCode code, WcStatus recv_status) {
  qp.rcv_.fatal_pending = false;
  if (qp.rcv_.have_wqe) {
    Cqe c;
    c.wr_id = qp.rcv_.wqe()->wr_id;
    c.status = recv_status;
    c.opcode = WcOpcode::kRecv;
    c.qp_num = qp.qpn();
    push_cqe(qp.init_.recv_cq, c, false, &qp);
    qp.rcv_.have_wqe = false;
  }
  raise_event(code == NakCode::kRemoteAccessError ? AsyncEventType::kQpAccessErr
                                                  : AsyncEventType::kQpReqErr,
              qp.qpn());
  qp_error(qp);
}

// Takes the next receive WQE (RQ or SRQ) into the QP's scratch; false if none is posted.
bool Engine::resp_take_wqe(Qp& qp) {
  auto& r = qp.rcv_;
  if (r.have_wqe) return true;
  if (SharedReceiveQueue* srq = qp.init_.srq) {
    if (!srq->take(r.wqe())) return false;
    if (srq->take_limit_event()) raise_event(AsyncEventType::kSrqLimitReached, srq->srqn());
  } else {
    const uint32_t cons = qp.rq_.cons_local();
    if (qp.rq_.prod_acquire() == cons) return false;
    const RecvWqe* w = qp.rq_.at<RecvWqe>(cons);
    std::memcpy(r.wqe(), w, recv_slot_bytes(w->num_sge));
    qp.rq_.retire(cons + 1);
  }
  r.have_wqe = true;
  r.offset = 0;
  return true;
}

// Copies payload into the receive WQE's buffers at the message offset; every SGE is checked
// against its region (LOCAL_WRITE) before a byte is written.
bool Engine::resp_scatter(Qp& qp, const uint8_t* src, uint32_t len) {
  auto& r = qp.rcv_;
  const RecvWqe* w = r.wqe();
  const Sge* sge = w->sges();
  uint32_t offset = r.offset;
  uint32_t i = 0;
  while (i < w->num_sge && offset >= sge[i].length) offset -= sge[i++].length;
  // Validate first, copy second: a bad SGE must leave memory untouched.
  uint8_t* hosts[kMaxSge];
  uint32_t lens[kMaxSge];
  uint32_t n = 0, left = len, off = offset;
  for (uint32_t j = i; left; ++j) {
    if (j >= w->num_sge) return false;
    const uint32_t chunk = std::min(left, sge[j].length - off);
    if (chunk == 0) continue;  // a zero-length SGE: its key is not looked at, as in gather
    if (mrs_.check(sge[j].lkey, qp.init_.pd, sge[j].addr + off, chunk, kAccessLocalWrite,
                   &hosts[n]) != MrCheck::kOk) {
      return false;
    }
    lens[n++] = chunk;
    left -= chunk;
    off = 0;
  }
  for (uint32_t k = 0; k < n; ++k) {
    std::memcpy(hosts[k], src, lens[k]);
    src += lens[k];
  }
  r.offset += len;
  return true;
}

void Engine::resp_complete_recv(Qp& qp, const wire::PacketInfo& info, WcStatus st, bool write_imm) {
  auto& r = qp.rcv_;
  CompletionQueue* cq = qp.init_.recv_cq;
  Cqe* c = cqe_begin(cq);
  if (c) {
    c->wr_id = r.wqe()->wr_id;
    c->status = st;
    c->opcode = write_imm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
    c->byte_len = write_imm ? r.write_len : r.offset;
    c->qp_num = qp.qpn();
    c->src_qp = qp.attr_.dest_qp_num;
    const wire::OpcodeInfo& op = *info.op;
    if (op.has_ext(wire::Ext::kImmDt)) {
      std::memcpy(&c->imm_data, info.ext<wire::ImmDt>(wire::Ext::kImmDt).data.data(), 4);
      c->wc_flags |= kWcWithImm;
    }
  }
  r.have_wqe = false;
  cqe_commit(cq, c, info.solicited, &qp);
}

// UC (IBA 9.7.5.1): a message that cannot complete is dropped without a word to the
// requester, which never retransmits. What it wrote so far stays written; its receive WQE, if
// it had one, takes the next message from the start. The responder then waits for a FIRST or
// ONLY packet.
// uc_abandon ends the open message, if any; uc_drop_message drops the message of the packet in
// hand (open or not) and skips its remaining packets. Each dropped message counts once.
void Engine::uc_abandon(Qp& qp) {
  auto& r = qp.rcv_;
  if (r.in_msg != Qp::Recv::kNone) ++qp.counters_.uc_messages_dropped;
  r.in_msg = Qp::Recv::kNone;
  r.offset = 0;
  r.write_remaining = 0;
}

void Engine::uc_drop_message(Qp& qp) {
  // An open message is counted by uc_abandon; one that this packet would have opened, here.
  if (qp.rcv_.in_msg == Qp::Recv::kNone) ++qp.counters_.uc_messages_dropped;
  uc_abandon(qp);
  qp.rcv_.uc_drop = true;
}

// No receive WQE for a SEND or a WRITE with immediate: an RNR NAK with our minimum RNR timer
// (the PSN does not advance, the requester retries). UC has no RNR: the message is lost.
void Engine::resp_not_ready(Qp& qp, uint32_t psn) {
  if (qp.type() == QpType::kUc) {
    uc_drop_message(qp);
    return;
  }
  ++qp.counters_.rnr_naks_sent;
  qp.rcv_.nak_sent = true;
  resp_push_ack(qp, static_cast<uint8_t>(wire::kAethRnrNak | (qp.attr_.min_rnr_timer & 0x1F)), psn);
}

void Engine::resp_handle(Qp& qp, const wire::PacketInfo& info) {
  auto& r = qp.rcv_;
  if (r.fatal_pending) return;  // a fatal NAK waits behind earlier responses: take nothing more
  const wire::OpcodeInfo& op = *info.op;
  const uint32_t psn = info.psn;
  const int32_t d = psn_diff(psn, r.epsn);
  const bool uc = qp.type() == QpType::kUc;
  const bool first = op.flags & wire::kOpFirst;

  // --- UC: no retransmission, so no NAK and no waiting for a PSN (IBA 9.7.5.1.1). A packet
  // off the expected PSN ends the message in progress; a FIRST or ONLY starts the next one
  // wherever its PSN is, anything else is dropped until one comes.
  if (uc && (d != 0 || r.uc_drop)) {
    if (d != 0 && !r.uc_drop) ++qp.counters_.out_of_sequence;  // a gap seen while in step
    if (!first) {
      if (!r.uc_drop) uc_drop_message(qp);
      return;
    }
    uc_abandon(qp);
    r.uc_drop = false;
    r.epsn = psn;
  }

  // --- PSN (IBA 9.7.5.1.1; UC's above) ---
  if (!uc && d > 0) {
    // A gap: NAK the first out-of-sequence packet with the expected PSN, then drop silently
    // until the expected one arrives.
    ++qp.counters_.out_of_sequence;
    if (!r.nak_sent) {
      r.nak_sent = true;
      ++qp.counters_.seq_naks_sent;
      resp_push_ack(qp, static_cast<uint8_t>(NakCode::kPsnSeqError), r.epsn);
    }
    return;
  }
  if (!uc && d < 0) {
    resp_duplicate(qp, info);
    return;
  }
  r.nak_sent = false;

  // --- opcode sequence (IBA 9.7.5.1.2 / C9-? "Opcode sequence check") ---
  const bool last = op.flags & wire::kOpLast;
  const bool is_send = op.flags & wire::kOpSend;
  const bool is_write = op.flags & wire::kOpWrite;
  bool seq_ok;
  switch (r.in_msg) {
    case Qp::Recv::kSend:
      seq_ok = is_send && !first;
      break;
    case Qp::Recv::kWrite:
      seq_ok = is_write && !first;
      break;
    default:
      seq_ok = first;
      break;
  }
  if (!seq_ok && uc && first) {
    uc_abandon(qp);  // UC: a new message while one is open (its LAST was lost) replaces it
    seq_ok = true;
  }
  if (!seq_ok) {
    resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
    return;
  }

  // --- QP access flags for RDMA and atomics; READs and atomics also need a responder
  // resource (max_dest_rd_atomic 0 grants none: rxe NAKs them the same way) ---
  const uint32_t acc = qp.attr_.qp_access_flags;
  const bool rd_atomic = op.has(wire::kOpRead) || op.has(wire::kOpAtomic);
  if ((is_write && first && !(acc & kAccessRemoteWrite)) ||
      (op.has(wire::kOpRead) && !(acc & kAccessRemoteRead)) ||
      (op.has(wire::kOpAtomic) && !(acc & kAccessRemoteAtomic)) ||
      (rd_atomic && qp.attr_.max_dest_rd_atomic == 0)) {
    resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
    return;
  }

  // --- packet length against the path MTU (IBA 9.7.5.1.3: C9-...) ---
  const uint32_t pay = info.payload_len;
  if (op.has(wire::kOpPayload)) {
    const bool full_only = !last;  // FIRST and MIDDLE carry exactly one MTU
    if ((full_only && pay != qp.mtu_) || pay > qp.mtu_ || (last && !first && pay == 0)) {
      resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return;
    }
  }

  if (is_send) {
    if (first && !resp_take_wqe(qp)) {
      resp_not_ready(qp, psn);
      return;
    }
    if (op.has_ext(wire::Ext::kIeth)) {
      // SEND with Invalidate asks us to invalidate the R_Key in its IETH. Only type-2 memory
      // windows and fast-registered regions can be invalidated remotely (IBA 10.6.7, 11.4.1.3);
      // this stack has neither, so no R_Key is one it could invalidate. rxe fails such a key
      // as class J: the receive completes with REM_INV_REQ_ERR and the QP enters the error
      // state. We also NAK it (invalid request), so that the requester's WQE fails too instead
      // of completing as if the invalidation had happened.
      resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return;
    }
    if (r.offset + pay > r.wqe()->length) {
      resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kLocLenErr);
      return;
    }
    if (!resp_scatter(qp, info.payload(), pay)) {
      resp_fatal(qp, NakCode::kRemoteOperationalError, psn, WcStatus::kLocProtErr);
      return;
    }
    if (last) {
      r.in_msg = Qp::Recv::kNone;
      r.msn = (r.msn + 1) & 0xFFFFFF;
      resp_complete_recv(qp, info, WcStatus::kSuccess, false);
    } else {
      r.in_msg = Qp::Recv::kSend;
    }
  } else if (is_write) {
    if (first) {
      const wire::Reth& reth = info.ext<wire::Reth>(wire::Ext::kReth);
      const uint32_t dlen = reth.dma_length.get();
      // The DMA length must agree with the packets: an ONLY carries all of it, a FIRST less.
      if ((last && pay != dlen) || (!last && pay >= dlen)) {
        resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
        return;
      }
      uint8_t* host = nullptr;
      if (dlen && mrs_.check(reth.rkey.get(), qp.init_.pd, reth.va.get(), dlen, kAccessRemoteWrite,
                             &host) != MrCheck::kOk) {
        resp_fatal(qp, NakCode::kRemoteAccessError, psn, WcStatus::kRemAccessErr);
        return;
      }
      r.write_va = reth.va.get();
      r.write_rkey = reth.rkey.get();
      r.write_remaining = dlen;
      r.write_len = dlen;
    }
    if (pay > r.write_remaining || (last && pay != r.write_remaining)) {
      resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return;
    }
    const bool imm = op.has(wire::kOpImm);
    if (imm && !resp_take_wqe(qp)) {
      // WRITE with immediate consumes a receive WQE: RNR before any byte is written, so
      // the retried packet finds the same state.
      resp_not_ready(qp, psn);
      if (first) r.write_remaining = 0;
      return;
    }
    if (pay) {
      uint8_t* host = nullptr;
      if (mrs_.check(r.write_rkey, qp.init_.pd, r.write_va, pay, kAccessRemoteWrite, &host) !=
          MrCheck::kOk) {
        resp_fatal(qp, NakCode::kRemoteAccessError, psn, WcStatus::kRemAccessErr);
        return;
      }
      std::memcpy(host, info.payload(), pay);
      r.write_va += pay;
      r.write_remaining -= pay;
    }
    if (last) {
      r.in_msg = Qp::Recv::kNone;
      r.msn = (r.msn + 1) & 0xFFFFFF;
      if (imm) resp_complete_recv(qp, info, WcStatus::kSuccess, true);
    } else {
      r.in_msg = Qp::Recv::kWrite;
    }
  } else if (op.has(wire::kOpRead)) {
    const wire::Reth& reth = info.ext<wire::Reth>(wire::Ext::kReth);
    const uint32_t dlen = reth.dma_length.get();
    if (dlen > kMaxMsgSize) {
      resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return;
    }
    uint8_t* host = nullptr;
    if (dlen && mrs_.check(reth.rkey.get(), qp.init_.pd, reth.va.get(), dlen, kAccessRemoteRead,
                           &host) != MrCheck::kOk) {
      resp_fatal(qp, NakCode::kRemoteAccessError, psn, WcStatus::kRemAccessErr);
      return;
    }
    const uint32_t npkts = dlen == 0 ? 1 : (dlen + qp.mtu_ - 1) / qp.mtu_;
    RespOut* e = resp_out_push(qp);
    if (!e) return;  // output queue full: drop, the requester retries (PSN not advanced)
    r.msn = (r.msn + 1) & 0xFFFFFF;
    RdResource& res = r.rd[r.rd_next++ % qp.attr_.max_dest_rd_atomic];
    res = RdResource{
        RdResource::kRead, psn, psn_add(psn, npkts - 1), reth.va.get(), reth.rkey.get(), dlen, 0};
    e->kind = RespOut::kRead;
    e->psn = psn;
    e->msn = r.msn;
    e->va = reth.va.get();
    e->rkey = reth.rkey.get();
    e->remaining = dlen;
    r.epsn = psn_add(psn, npkts);
    return;
  } else if (op.has(wire::kOpAtomic)) {
    const wire::AtomicEth& a = info.ext<wire::AtomicEth>(wire::Ext::kAtomicEth);
    const uint64_t va = a.va.get();
    if (va & 7) {
      resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return;
    }
    uint8_t* host = nullptr;
    if (mrs_.check(a.rkey.get(), qp.init_.pd, va, 8, kAccessRemoteAtomic, &host) != MrCheck::kOk) {
      resp_fatal(qp, NakCode::kRemoteAccessError, psn, WcStatus::kRemAccessErr);
      return;
    }
    // The word itself must be aligned too: a region may map an aligned iova onto an unaligned
    // address (ibv_reg_mr_iova), and an unaligned atomic is undefined (rxe checks the same).
    if (reinterpret_cast<uintptr_t>(host) & 7) {
      resp_fatal(qp, NakCode::kInvalidRequest, psn, WcStatus::kRemInvReqErr);
      return;
    }
    RespOut* e = resp_out_push(qp);
    if (!e) return;  // output queue full: drop before executing, the requester retries
    // Atomic against local CPUs too (IBV_ATOMIC_HCA): a real atomic on host memory, in host
    // byte order, executed exactly once; duplicates are answered from the saved result.
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(host));
    uint64_t orig;
    if (info.opcode == op::kRcCmpSwap) {
      orig = a.compare.get();
      word.compare_exchange_strong(orig, a.swap_add.get());
    } else {
      orig = word.fetch_add(a.swap_add.get());
    }
    ++qp.counters_.atomics_executed;
    r.msn = (r.msn + 1) & 0xFFFFFF;
    RdResource& res = r.rd[r.rd_next++ % qp.attr_.max_dest_rd_atomic];
    res = RdResource{RdResource::kAtomic, psn, psn, va, a.rkey.get(), 8, orig};
    e->kind = RespOut::kAtomic;
    e->psn = psn;
    e->msn = r.msn;
    e->orig = orig;
    r.epsn = psn_add(psn, 1);
    return;
  }

  r.epsn = psn_add(psn, 1);
  if (info.ack_req) resp_push_ack(qp, wire::kAethAckUnlimitedCredits, psn);
}

// Duplicate requests (IBA 9.7.5.1.5): SEND/WRITE are re-acknowledged; a READ is executed again
// from its saved resource (for the range the retried request asks, within the original); an
// atomic is answered from its saved result and never executed twice.
void Engine::resp_duplicate(Qp& qp, const wire::PacketInfo& info) {
  auto& r = qp.rcv_;
  const wire::OpcodeInfo& op = *info.op;
  ++qp.counters_.duplicate_requests;
  const uint32_t nres = qp.attr_.max_dest_rd_atomic;
  if (op.has(wire::kOpRead)) {
    const wire::Reth& reth = info.ext<wire::Reth>(wire::Ext::kReth);
    for (uint32_t i = 0; i < nres && i < kMaxRdAtomic; ++i) {
      const RdResource& res = r.rd[i];
      if (res.kind != RdResource::kRead) continue;
      const int32_t off = psn_diff(info.psn, res.first_psn);
      if (off < 0 || psn_diff(info.psn, res.last_psn) > 0) continue;
      const uint64_t va = reth.va.get();
      const uint32_t len = reth.dma_length.get();
      const uint64_t skip = static_cast<uint64_t>(off) * qp.mtu_;
      if (reth.rkey.get() != res.rkey || va != res.va + skip || skip + len != res.length) {
        return;  // not a retry of this READ: ignore (IBA C9-... silently drop)
      }
      uint8_t* host = nullptr;
      if (len &&
          mrs_.check(res.rkey, qp.init_.pd, va, len, kAccessRemoteRead, &host) != MrCheck::kOk) {
        resp_fatal(qp, NakCode::kRemoteAccessError, info.psn, WcStatus::kRemAccessErr);
        return;
      }
      // A stream of this READ still queued restarts at the retried PSN; otherwise queue one.
      RespOut* e = find_queued(r, RespOut::kRead, res.first_psn, res.last_psn);
      if (!e) e = resp_out_push(qp);
      if (!e) return;
      *e = RespOut{};
      e->kind = RespOut::kRead;
      e->psn = info.psn;
      e->msn = r.msn;
      e->va = va;
      e->rkey = res.rkey;
      e->remaining = len;
      return;
    }
    return;
  }
  if (op.has(wire::kOpAtomic)) {
    for (uint32_t i = 0; i < nres && i < kMaxRdAtomic; ++i) {
      const RdResource& res = r.rd[i];
      if (res.kind == RdResource::kAtomic && res.first_psn == info.psn) {
        if (find_queued(r, RespOut::kAtomic, info.psn, info.psn)) return;  // answer pending
        RespOut* e = resp_out_push(qp);
        if (!e) return;
        e->kind = RespOut::kAtomic;
        e->psn = info.psn;
        e->msn = r.msn;
        e->orig = res.orig;
        return;
      }
    }
    return;  // too old to answer: the requester has long moved on
  }
  // SEND / WRITE: acknowledge everything received so far.
  resp_push_ack(qp, wire::kAethAckUnlimitedCredits, psn_add(r.epsn, -1));
}

bool Engine::resp_step(Qp& qp, uint32_t budget) {
  auto& r = qp.rcv_;
  if (qp.attr_.qp_state == QpState::kErr || qp.attr_.qp_state == QpState::kReset) {
    r.out_head = r.out_tail = 0;
    return false;
  }
  if (!qp.path_ready_) return false;
  while (budget && tx_room() && r.out_head != r.out_tail) {
    RespOut& e = r.out[r.out_head % Qp::Recv::kOutSize];
    // A plain ACK waits for the next poll, unless this QP's requester is about to send (then
    // it goes first, so a reply never overtakes the ACK of the request it answers), or this
    // poll wakes an application (a CQ event): the reply, if any, comes after a context switch
    // that may keep this thread off its core, so the ACK leaves now (NotifyBatch).
    if (e.not_before_poll > poll_seq_ && !qp.snd_.active && notify_batch_.empty()) return true;
    // READ responses are data: the rate limit applies (ACKs are never held).
    if (e.kind == RespOut::kRead && !cc_may_send(qp)) return false;
    PktBuf* b = tx_buf();
    if (!b) return true;
    wire::BthFields bth;
    bth.dest_qp = qp.attr_.dest_qp_num;
    bth.psn = e.psn;
    wire::ExtHeaders ext;
    ext.aeth.syndrome = e.syndrome;
    ext.aeth.msn.set(e.msn);
    uint32_t pay = 0;
    const uint8_t* src = nullptr;
    bool done = true;
    switch (e.kind) {
      case RespOut::kAck:
        bth.opcode = op::kRcAck;
        break;
      case RespOut::kAtomic:
        bth.opcode = op::kRcAtomicAck;
        ext.aeth.syndrome = wire::kAethAckUnlimitedCredits;
        ext.atomic_ack.orig.set(e.orig);
        break;
      case RespOut::kRead: {
        pay = std::min(qp.mtu_, e.remaining);
        const bool last = pay == e.remaining;
        bth.opcode = e.first ? (last ? op::kRcReadRespOnly : op::kRcReadRespFirst)
                             : (last ? op::kRcReadRespLast : op::kRcReadRespMiddle);
        ext.aeth.syndrome = wire::kAethAckUnlimitedCredits;
        uint8_t* host = nullptr;
        if (pay &&
            mrs_.check(e.rkey, qp.init_.pd, e.va, pay, kAccessRemoteRead, &host) != MrCheck::kOk) {
          // The region went away while we were reading it.
          spare_[n_spare_++] = *b;
          resp_fatal(qp, NakCode::kRemoteAccessError, e.psn, WcStatus::kRemAccessErr);
          return false;
        }
        src = host;
        done = last;
        break;
      }
    }
    const uint32_t hdr = qp.l2l4_.len + wire::opcode_info(bth.opcode).transport_hdr_len();
    uint8_t* payload = begin_frame(b, hdr, pay);
    qp.path_.traffic_class = e.kind == RespOut::kRead ? qp.data_tclass_ : qp.ctrl_tclass_;
    build_data_frame(b, qp, payload, pay, bth, ext, [&](uint8_t* dst, uint32_t* crc) {
      copy_payload(dst, src, pay, crc);
      return true;
    });
    if (e.kind == RespOut::kRead) cc_on_sent(qp, b->len);
    if (e.kind == RespOut::kRead) {
      e.psn = psn_add(e.psn, 1);
      e.va += pay;
      e.remaining -= pay;
      e.first = false;
    }
    if (done) ++r.out_head;
    --budget;
  }
  if (r.out_head == r.out_tail && r.fatal_pending) {
    // What came before the failing request has left: now its NAK, then the error state.
    send_ack_now(qp, static_cast<uint8_t>(r.fatal_code), r.fatal_psn);
    resp_enter_error(qp, r.fatal_code, r.fatal_status);
    return false;
  }
  return r.out_head != r.out_tail;
}

// UD receive (IBA 9.8): Q_Key check, a receive WQE, the 40-byte GRH area, then the payload.
void Engine::ud_receive(Qp& qp, const wire::PacketInfo& info) {
  const wire::Deth& deth = info.ext<wire::Deth>(wire::Ext::kDeth);
  // Q_Keys with the high bit set are controlled and may not be used by UD senders here.
  if (deth.qkey.get() != qp.attr_.qkey) {
    ++ctr_.ud_qkey_mismatch;
    return;
  }
  if (!resp_take_wqe(qp)) {
    ++ctr_.ud_no_recv;  // UD has no RNR: the datagram is dropped
    return;
  }
  auto& r = qp.rcv_;
  r.offset = 0;
  // RoCEv2 GRH area: the IPv6 header, or 20 zero bytes then the IPv4 header (rdma-core's
  // convention for IPv4-based RoCEv2).
  uint8_t grh[40] = {};
  if (info.family == wire::IpFamily::kIpv6) {
    std::memcpy(grh, info.frame + info.l3_off, 40);
  } else {
    std::memcpy(grh + 20, info.frame + info.l3_off, 20);
  }
  const uint32_t total = 40 + info.payload_len;
  Cqe c;
  c.wr_id = r.wqe()->wr_id;
  c.opcode = WcOpcode::kRecv;
  c.qp_num = qp.qpn();
  c.src_qp = deth.src_qp.get();
  c.wc_flags = kWcGrh;
  c.sl = info.family == wire::IpFamily::kIpv6 ? kUdSlIpv6 : kUdSlIpv4;
  if (total > r.wqe()->length) {
    ++ctr_.ud_too_long;
    c.status = WcStatus::kLocLenErr;
  } else if (!resp_scatter(qp, grh, 40) || !resp_scatter(qp, info.payload(), info.payload_len)) {
    c.status = WcStatus::kLocProtErr;
  } else {
    c.byte_len = total;
    if (info.op->has_ext(wire::Ext::kImmDt)) {
      std::memcpy(&c.imm_data, info.ext<wire::ImmDt>(wire::Ext::kImmDt).data.data(), 4);
      c.wc_flags |= kWcWithImm;
    }
  }
  r.have_wqe = false;
  ++qp.counters_.rx_packets;
  qp.counters_.rx_bytes += info.frame_len;
  push_cqe(qp.init_.recv_cq, c, info.solicited, &qp);
}

}  // namespace roce
