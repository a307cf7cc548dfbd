// Requester: turns send WQEs into request packets (IBA 9.7.4, 9.5 segmentation by path MTU),
// within the go-back-N window and the READ/atomic limit, and rewinds on NAK or timeout. Packets
// are always rebuilt from the WQE and registered memory: nothing is kept for retransmission.
#include <algorithm>
#include <cstring>

#include "stack/core/engine.h"
#include "stack/wire/opcode.h"
#include "stack/wire/psn.h"

namespace roce {

using wire::psn_add;
using wire::psn_diff;
namespace op = wire::op;

namespace {
bool is_rd_atomic(WrOpcode o) {
  return o == WrOpcode::kRdmaRead || o == WrOpcode::kAtomicCmpAndSwp ||
         o == WrOpcode::kAtomicFetchAndAdd;
}
bool is_atomic(WrOpcode o) {
  return o == WrOpcode::kAtomicCmpAndSwp || o == WrOpcode::kAtomicFetchAndAdd;
}
uint32_t packets_for(uint32_t len, uint32_t mtu) { return len == 0 ? 1 : (len + mtu - 1) / mtu; }

// Opcode of a SEND or WRITE packet by its place in the message (IBA table 38).
uint8_t send_write_opcode(WrOpcode o, bool first, bool last, uint8_t base) {
  const bool only = first && last;
  switch (o) {
    case WrOpcode::kSend:
      return base + (only    ? op::kRcSendOnly
                     : first ? op::kRcSendFirst
                     : last  ? op::kRcSendLast
                             : op::kRcSendMiddle);
    case WrOpcode::kSendWithImm:
      return base + (only    ? op::kRcSendOnlyImm
                     : first ? op::kRcSendFirst
                     : last  ? op::kRcSendLastImm
                             : op::kRcSendMiddle);
    case WrOpcode::kSendWithInv:
      return only    ? op::kRcSendOnlyInv
             : first ? op::kRcSendFirst
             : last  ? op::kRcSendLastInv
                     : op::kRcSendMiddle;
    case WrOpcode::kRdmaWrite:
      return base + (only    ? op::kRcWriteOnly
                     : first ? op::kRcWriteFirst
                     : last  ? op::kRcWriteLast
                             : op::kRcWriteMiddle);
    case WrOpcode::kRdmaWriteWithImm:
      return base + (only    ? op::kRcWriteOnlyImm
                     : first ? op::kRcWriteFirst
                     : last  ? op::kRcWriteLastImm
                             : op::kRcWriteMiddle);
    default:
      return 0xFF;
  }
}
}  // namespace

// Copies `len` bytes of the WQE's payload, starting `offset` bytes into the message, to `dst`.
// Every SGE is checked against its memory region on every packet: a region deregistered while
// the WQE is outstanding turns into a local protection error, never a stray read.
bool Engine::gather(Qp& qp, const SendWqe& w, uint32_t offset, uint8_t* dst, uint32_t len,
                    WcStatus* err, uint32_t* crc) {
  if (len == 0) return true;
  if (w.is_inline()) {
    copy_payload(dst, w.inline_data() + offset, len, crc);
    return true;
  }
  const Sge* sge = w.sges();
  uint32_t i = 0;
  while (i < w.num_sge && offset >= sge[i].length) offset -= sge[i++].length;
  while (len) {
    if (i >= w.num_sge) {
      *err = WcStatus::kLocLenErr;
      return false;
    }
    const uint32_t chunk = std::min(len, sge[i].length - offset);
    if (chunk == 0) {  // a zero-length SGE: its key is not looked at (rxe and mlx5 skip it)
      ++i;
      continue;
    }
    uint8_t* host = nullptr;
    if (mrs_.check(sge[i].lkey, qp.init_.pd, sge[i].addr + offset, chunk, 0, &host) !=
        MrCheck::kOk) {
      *err = WcStatus::kLocProtErr;
      return false;
    }
    copy_payload(dst, host, chunk, crc);
    dst += chunk;
    len -= chunk;
    offset = 0;
    ++i;
  }
  return true;
}

// Checks made once, when a WQE is about to start: limits, fence, local buffers.
bool Engine::req_can_start(Qp& qp, const SendWqe& w) {
  if (qp.attr_.qp_state == QpState::kSqd) return false;  // drain: nothing new starts
  const uint32_t max_rd = std::max<uint32_t>(1, qp.attr_.max_rd_atomic);
  // IBA 10.8.3.3: a fenced WQE waits for every earlier READ and atomic to complete.
  if ((w.flags & kSendFence) && qp.snd_.rd_atomic > 0) return false;
  if (is_rd_atomic(w.opcode) && qp.snd_.rd_atomic >= max_rd) return false;
  return true;
}

// Local buffers of READ and atomic WQEs receive data: they need LOCAL_WRITE.
static WcStatus check_local_write(const MrTable& mrs, uint32_t pd, const SendWqe& w) {
  const Sge* sge = w.sges();
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    if (sge[i].length == 0) continue;
    uint8_t* host = nullptr;
    if (mrs.check(sge[i].lkey, pd, sge[i].addr, sge[i].length, kAccessLocalWrite, &host) !=
        MrCheck::kOk) {
      return WcStatus::kLocProtErr;
    }
  }
  return WcStatus::kSuccess;
}

bool Engine::req_step(Qp& qp, uint32_t budget) {
  const QpState st = qp.attr_.qp_state;
  if (st != QpState::kRts && st != QpState::kSqd) return false;
  // A packet that found no frame buffer (the port's pool ran dry) keeps the QP scheduled: no
  // ACK, timer or post may come to wake it, and the next poll may find buffers again.
  const uint64_t no_buffer = ctr_.tx_no_buffer;
  if (qp.type() != QpType::kRc) {
    // Datagram and unreliable QPs complete as they send.
    qp.snd_.tail = qp.sq_.prod_acquire();
    uint32_t n = 0;
    while (qp.snd_.send != qp.snd_.tail && n < budget && tx_room()) {
      // SQD: a UC message under way is finished, nothing new starts (req_can_start for RC);
      // the transition back to RTS schedules the QP.
      if (st == QpState::kSqd && qp.snd_.offset == 0) break;
      SendWqe& w = *qp.sq_.at<SendWqe>(qp.snd_.send);
      if (!ud_send(qp, w)) return ctr_.tx_no_buffer != no_buffer;
      ++n;
    }
    if (st == QpState::kSqd) {
      note_drained(qp);  // once the message under way has left
      if (qp.snd_.offset == 0) return false;
    }
    return qp.snd_.send != qp.snd_.tail;
  }
  if (!qp.path_ready_) {
    if (qp.path_failed_) {
      fail_unresolved(qp);
    } else {
      ++ctr_.neighbor_wait;
    }
    return false;
  }
  if (qp.snd_.rnr_wait) return false;
  qp.snd_.tail = qp.sq_.prod_acquire();
  uint32_t sent = 0;
  while (sent < budget && tx_room()) {
    if (qp.snd_.send == qp.snd_.tail) return false;
    // Go-back-N window: bounded unacknowledged PSNs.
    if (static_cast<uint32_t>(psn_diff(qp.snd_.psn, qp.snd_.comp_psn)) >= cfg_.max_inflight_psns) {
      return false;
    }
    // The port's budget, shared by its QPs: wait for an answer to any of them.
    if (port_budget_full()) {
      wait_port_budget(qp);
      return false;
    }
    SendWqe& w = *qp.sq_.at<SendWqe>(qp.snd_.send);
    SendSlot& slot = qp.slots_[qp.snd_.send & (qp.sq_.capacity() - 1)];
    if (slot.error != WcStatus::kSuccess) return false;  // the completer reports it in order
    if (!slot.started) {
      if (!req_can_start(qp, w)) return false;
      slot.started = true;
      slot.first_psn = qp.snd_.psn;
      slot.npkts = is_atomic(w.opcode) ? 1 : packets_for(w.length, qp.mtu_);
      slot.read_end = slot.first_psn;
      if (is_rd_atomic(w.opcode)) {
        ++qp.snd_.rd_atomic;
        const WcStatus s = check_local_write(mrs_, qp.init_.pd, w);
        if (s != WcStatus::kSuccess) {
          slot.error = s;
          comp_progress(qp);
          return false;
        }
      }
    }
    const bool ok = req_send_packet(qp, w, slot);
    charge_port(qp);
    if (!ok) return ctr_.tx_no_buffer != no_buffer;
    ++sent;
  }
  return qp.snd_.send != qp.snd_.tail;
}

bool Engine::req_send_packet(Qp& qp, SendWqe& w, SendSlot& slot) {
  uint32_t read_psns = 0;
  if (w.opcode == WrOpcode::kRdmaRead) {
    read_psns = read_request_psns(qp, w, slot);
    if (read_psns == 0) return false;  // progress (an answer) schedules the QP again
  }
  if (!cc_may_send(qp)) return false;
  PktBuf* b = tx_buf();
  if (!b) return false;
  auto& s = qp.snd_;
  const uint32_t mtu = qp.mtu_;
  wire::BthFields bth;
  bth.dest_qp = qp.attr_.dest_qp_num;
  bth.psn = s.psn;
  wire::ExtHeaders ext;
  uint32_t pay = 0;
  uint32_t psns = 1;  // PSNs this packet consumes
  bool last = true;   // the WQE is fully sent after this packet
  bool solicited = false;

  switch (w.opcode) {
    case WrOpcode::kRdmaRead: {
      // A request for `read_psns` response packets from s.offset (read_request_psns); after a
      // rewind into the middle of a request, for the rest of it (IBA 9.7.4.1.3).
      bth.opcode = op::kRcReadRequest;
      psns = read_psns;
      last = psns == packets_for(w.length - s.offset, mtu);
      ext.reth.va.set(w.remote_addr + s.offset);
      ext.reth.rkey.set(w.rkey);
      ext.reth.dma_length.set(last ? w.length - s.offset : psns * mtu);
      bth.ack_req = true;
      break;
    }
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
      bth.opcode = w.opcode == WrOpcode::kAtomicCmpAndSwp ? op::kRcCmpSwap : op::kRcFetchAdd;
      ext.atomic.va.set(w.remote_addr);
      ext.atomic.rkey.set(w.rkey);
      ext.atomic.swap_add.set(w.opcode == WrOpcode::kAtomicCmpAndSwp ? w.swap : w.compare_add);
      ext.atomic.compare.set(w.opcode == WrOpcode::kAtomicCmpAndSwp ? w.compare_add : 0);
      bth.ack_req = true;
      break;
    default: {
      const bool first = s.offset == 0;
      pay = std::min(mtu, w.length - s.offset);
      last = s.offset + pay == w.length;
      const uint8_t base = qp.type() == QpType::kUc ? op::kUcBase : 0;
      bth.opcode = send_write_opcode(w.opcode, first, last, base);
      const wire::OpcodeInfo& oi = wire::opcode_info(bth.opcode);
      if (oi.has_ext(wire::Ext::kReth)) {
        ext.reth.va.set(w.remote_addr);
        ext.reth.rkey.set(w.rkey);
        ext.reth.dma_length.set(w.length);
      }
      if (oi.has_ext(wire::Ext::kImmDt)) std::memcpy(ext.imm.data.data(), &w.imm_data, 4);
      if (oi.has_ext(wire::Ext::kIeth)) ext.ieth.rkey.set(w.imm_data);
      solicited = last && (w.flags & kSendSolicited);
      // AckReq on the last packet of every message, every ack_req_interval() packets, and on
      // the packet that fills the port's budget: then at least one packet in the full budget
      // is answered, whatever the intervals were when the others left.
      bth.ack_req = last || ++s.noack_pkts >= ack_req_interval() || port_room() <= 1;
      break;
    }
  }
  bth.solicited = solicited;
  if (bth.ack_req) s.noack_pkts = 0;

  const uint32_t hdr = qp.l2l4_.len + wire::opcode_info(bth.opcode).transport_hdr_len();
  uint8_t* payload = begin_frame(b, hdr, pay);
  WcStatus err = WcStatus::kSuccess;
  qp.path_.traffic_class = qp.data_tclass_;
  if (!build_data_frame(b, qp, payload, pay, bth, ext, [&](uint8_t* dst, uint32_t* crc) {
        return gather(qp, w, s.offset, dst, pay, &err, crc);
      })) {
    // The buffer stays ours (it was never queued); the WQE completes in error, in order.
    spare_[n_spare_++] = *b;
    slot.error = err;
    comp_progress(qp);
    return false;
  }
  cc_on_sent(qp, b->len);

  const bool retransmit = psn_diff(s.psn, s.max_psn) < 0;
  if (retransmit) ++qp.counters_.retransmitted_packets;
  s.psn = psn_add(s.psn, psns);
  if (psn_diff(s.psn, s.max_psn) > 0) s.max_psn = s.psn;
  if (last) {
    ++s.send;
    s.offset = 0;
  } else {
    s.offset += w.opcode == WrOpcode::kRdmaRead ? psns * mtu : pay;
  }
  if (!qp.snd_.retransmit.armed) arm_retransmit(qp);
  return true;
}

// How many response packets the next READ request of `w` asks for; 0: not yet. The responses
// of one request arrive back to back, as fast as the responder can send them, so a READ larger
// than the go-back-N window is asked for in pieces of at most the window: otherwise one READ
// could put far more frames in flight than a WRITE ever can, and overrun a receive ring sized
// for the window (1 MiB at MTU 1024 is 1,024 frames; an af_packet ring collapsed into timeouts).
// A piece after the first waits until everything sent before it is answered, so each READ WQE
// has one request outstanding and max_rd_atomic still bounds the requests the responder holds.
// The first piece waits for room for itself in the window, or for a quarter of the window when
// it is bigger. A re-request after a rewind asks for the rest of the piece it falls in.
uint32_t Engine::read_request_psns(Qp& qp, const SendWqe& w, SendSlot& slot) {
  auto& s = qp.snd_;
  if (psn_diff(s.psn, slot.read_end) < 0)
    return static_cast<uint32_t>(psn_diff(slot.read_end, s.psn));
  const uint32_t window = cfg_.max_inflight_psns;
  // Below the window: req_step checks that before every packet.
  const auto inflight = static_cast<uint32_t>(psn_diff(s.psn, s.comp_psn));
  if (s.offset != 0 && inflight != 0) return 0;
  const uint32_t left = packets_for(w.length - s.offset, qp.mtu_);
  const uint32_t room = window - inflight;
  if (room < std::min(left, std::max(1u, window / 4))) return 0;
  // And within the port's budget (req_step saw room for one PSN at least): a smaller piece
  // rather than a wait, which the QPs asking a PSN at a time could make endless.
  const uint32_t n = std::min({left, room, std::max(1u, port_room())});
  slot.read_end = psn_add(s.psn, n);
  return n;
}

// Go-back-N: the next packet sent is `psn` (IBA 9.7.4.1.5). Packets of later WQEs are rebuilt
// with the PSNs they had, since segmentation is deterministic.
void Engine::req_rewind(Qp& qp, uint32_t psn) {
  auto& s = qp.snd_;
  const uint32_t mask = qp.sq_.capacity() - 1;
  for (uint32_t i = s.head; i != s.tail; ++i) {
    SendSlot& slot = qp.slots_[i & mask];
    if (!slot.started) break;
    const int32_t d = psn_diff(psn, slot.first_psn);
    if (d >= 0 && static_cast<uint32_t>(d) < slot.npkts) {
      const SendWqe& w = *qp.sq_.at<SendWqe>(i);
      s.send = i;
      s.offset = is_atomic(w.opcode) ? 0 : static_cast<uint32_t>(d) * qp.mtu_;
      s.psn = psn;
      s.noack_pkts = 0;
      ++qp.counters_.retransmit_events;
      schedule_req(qp);
      return;
    }
  }
  // No outstanding WQE holds `psn`: everything before it is complete (a late ACK overtook a
  // rewind). Continue with the next WQE at that PSN.
  if (psn_diff(psn, s.psn) > 0) {
    if (static_cast<int32_t>(s.head - s.send) > 0) s.send = s.head;
    s.offset = 0;
    s.psn = psn;
    schedule_req(qp);
  }
}

// A connected QP whose destination never resolved (on_neighbor_failed) and that has work posted:
// its first WQE fails with RETRY_EXC_ERR, the rest are flushed by the error state.
void Engine::fail_unresolved(Qp& qp) {
  qp.snd_.tail = qp.sq_.prod_acquire();
  if (qp.snd_.head == qp.snd_.tail) return;
  ++ctr_.neighbor_failed_sends;
  comp_error(qp, WcStatus::kRetryExcErr);
}

// UD (and UC) sends: one packet per WQE for UD; complete when handed to the port.
bool Engine::ud_send(Qp& qp, SendWqe& w) {
  auto& s = qp.snd_;
  auto complete = [&](WcStatus st) {  // retire first: the completion frees the slot
    const bool report = st != WcStatus::kSuccess || (w.flags & kSendSignaled);
    Cqe* c = report ? begin_send_cqe(qp, w, st) : nullptr;  // published after the retire
    ++s.send;
    s.head = s.send;
    s.offset = 0;
    qp.sq_.retire(s.head);  // `w` may be overwritten from here on
    if (report) cqe_commit(qp.init_.send_cq, c, false, &qp);
  };

  if (qp.type() == QpType::kUc) {
    if (!qp.path_ready_) {
      if (qp.path_failed_) fail_unresolved(qp);
      return false;
    }
    if (!cc_may_send(qp)) return false;  // a rate limit (UC and UD have no DCQCN)
    PktBuf* b = tx_buf();
    if (!b) return false;
    const uint32_t pay = std::min(qp.mtu_, w.length - s.offset);
    const bool first = s.offset == 0, last = s.offset + pay == w.length;
    wire::BthFields bth;
    bth.opcode = send_write_opcode(w.opcode, first, last, op::kUcBase);
    bth.dest_qp = qp.attr_.dest_qp_num;
    bth.psn = s.psn;
    bth.solicited = last && (w.flags & kSendSolicited);
    wire::ExtHeaders ext;
    const wire::OpcodeInfo& oi = wire::opcode_info(bth.opcode);
    if (oi.has_ext(wire::Ext::kReth)) {
      ext.reth.va.set(w.remote_addr);
      ext.reth.rkey.set(w.rkey);
      ext.reth.dma_length.set(w.length);
    }
    if (oi.has_ext(wire::Ext::kImmDt)) std::memcpy(ext.imm.data.data(), &w.imm_data, 4);
    uint8_t* payload = begin_frame(b, qp.l2l4_.len + oi.transport_hdr_len(), pay);
    WcStatus err = WcStatus::kSuccess;
    if (!build_data_frame(b, qp, payload, pay, bth, ext, [&](uint8_t* dst, uint32_t* crc) {
          return gather(qp, w, s.offset, dst, pay, &err, crc);
        })) {
      spare_[n_spare_++] = *b;
      complete(err);
      send_queue_error(qp);
      return false;
    }
    cc_on_sent(qp, b->len);
    s.psn = psn_add(s.psn, 1);
    if (last) {
      complete(WcStatus::kSuccess);
    } else {
      s.offset += pay;
    }
    return true;
  }

  // UD: an address handle of the QP's own protection domain (as rdmavt checks at post).
  if (w.ah == 0 || w.ah >= ahs_.size() || !ahs_[w.ah].in_use || ahs_[w.ah].pd != qp.init_.pd) {
    complete(WcStatus::kLocQpOpErr);
    send_queue_error(qp);
    return false;
  }
  AddressHandle& ah = ahs_[w.ah];
  if (!ah.path_ready) {
    if (ah.unreachable) {  // dropped (on_neighbor_failed); the address is asked again
      neighbors_.want(ah.path.dst_gid);
      ++ctr_.neighbor_failed_sends;
      complete(WcStatus::kSuccess);
      return true;
    }
    ++ctr_.neighbor_wait;
    return false;
  }
  if (w.length > mtu_bytes(active_mtu_)) {
    complete(WcStatus::kLocLenErr);
    send_queue_error(qp);
    return false;
  }
  if (!cc_may_send(qp)) return false;
  PktBuf* b = tx_buf();
  if (!b) return false;
  wire::BthFields bth;
  bth.opcode = w.opcode == WrOpcode::kSendWithImm ? op::kUdSendOnlyImm : op::kUdSendOnly;
  bth.dest_qp = w.remote_qpn;
  bth.psn = s.psn;
  bth.solicited = w.flags & kSendSolicited;
  wire::ExtHeaders ext;
  // IBA 10.2.5: a Q_Key with the high bit set means "use the QP's own Q_Key".
  ext.deth.qkey.set((w.remote_qkey & 0x80000000u) ? qp.attr_.qkey : w.remote_qkey);
  ext.deth.src_qp.set(qp.qpn());
  if (bth.opcode == op::kUdSendOnlyImm) std::memcpy(ext.imm.data.data(), &w.imm_data, 4);
  ah.path.udp_sport = static_cast<uint16_t>(0xC000 | (qp.qpn() & 0x3FFF));
  const uint32_t hdr =
      wire::l2l4_header_len(ah.path) + wire::opcode_info(bth.opcode).transport_hdr_len();
  uint8_t* payload = begin_frame(b, hdr);
  WcStatus err = WcStatus::kSuccess;
  if (!gather(qp, w, 0, payload, w.length, &err)) {
    spare_[n_spare_++] = *b;
    complete(err);
    send_queue_error(qp);
    return false;
  }
  finish_frame(b, qp, ah.path, payload, w.length, bth, ext);
  cc_on_sent(qp, b->len);
  s.psn = psn_add(s.psn, 1);
  complete(WcStatus::kSuccess);
  return true;
}

}  // namespace roce
