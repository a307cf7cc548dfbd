#include "stack/core/qp.h"

#include <cstring>

namespace roce {

Qp::Qp(uint32_t qpn, const QpInitAttr& init, DoorbellSet* doorbells)
    : init_(init), qpn_(qpn), doorbells_(doorbells) {
  snd_.retransmit.owner = qpn;
  snd_.rnr.owner = qpn;
}

bool Qp::init_queues() {
  const QpCap& cap = init_.cap;
  if (!sq_.init(cap.max_send_wr ? cap.max_send_wr : 1, send_slot_bytes(cap))) return false;
  slots_ = std::make_unique<SendSlot[]>(sq_.capacity());
  if (!init_.srq &&
      !rq_.init(cap.max_recv_wr ? cap.max_recv_wr : 1, recv_slot_bytes(cap.max_recv_sge))) {
    return false;
  }
  const uint32_t max_sge = init_.srq ? init_.srq->max_sge() : cap.max_recv_sge;
  rcv_.wqe_buf = std::make_unique<uint8_t[]>(recv_slot_bytes(max_sge));
  return true;
}

namespace {
bool opcode_allowed(QpType t, WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return t != QpType::kUd;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv:
      return t == QpType::kRc;
    default:
      return false;  // LOCAL_INV, BIND_MW: no memory windows / fast registration here
  }
}

// Fills slot `w` from `wr`; 0 or an errno.
int fill_send_wqe(const SendWr& wr, const QpInitAttr& init, SendWqe* w) {
  if (!opcode_allowed(init.type, wr.opcode)) return EINVAL;
  if (wr.num_sge > init.cap.max_send_sge && !(wr.send_flags & kSendInline)) return EINVAL;
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  if (total > kMaxMsgSize) return EINVAL;
  const bool atomic =
      wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
  if (atomic && (wr.num_sge != 1 || total != 8)) return EINVAL;

  std::memset(w, 0, sizeof(SendWqe));
  w->wr_id = wr.wr_id;
  w->remote_addr = wr.remote_addr;
  w->compare_add = wr.compare_add;
  w->swap = wr.swap;
  w->rkey = wr.rkey;
  w->imm_data = wr.imm_data;
  w->length = static_cast<uint32_t>(total);
  w->ah = wr.ah;
  w->remote_qpn = wr.remote_qpn;
  w->remote_qkey = wr.remote_qkey;
  w->opcode = wr.opcode;
  w->flags = wr.send_flags;
  if (init.sq_sig_all) w->flags |= kSendSignaled;
  // Inline data is copied now: the caller may reuse its buffer as soon as post returns.
  const bool can_inline = wr.opcode != WrOpcode::kRdmaRead && !atomic;
  if ((wr.send_flags & kSendInline) && can_inline) {
    if (total > init.cap.max_inline_data) return EINVAL;
    uint8_t* dst = w->inline_data();
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
      if (wr.sg_list[i].length) {
        std::memcpy(dst, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      }
      dst += wr.sg_list[i].length;
    }
    w->num_sge = 0;
  } else {
    if (wr.num_sge > init.cap.max_send_sge) return EINVAL;
    w->flags &= static_cast<uint8_t>(~kSendInline);
    w->num_sge = static_cast<uint8_t>(wr.num_sge);
    if (wr.num_sge) std::memcpy(w->sges(), wr.sg_list, wr.num_sge * sizeof(Sge));
  }
  return 0;
}
}  // namespace

int Qp::post_send_list(const SendWr* wrs, uint32_t n, uint32_t* bad) {
  const QpState st = state();
  // Sends are accepted from RTS on, and in SQD/SQE/ERR (where they flush or wait).
  if (st == QpState::kReset || st == QpState::kInit || st == QpState::kRtr) {
    if (bad) *bad = 0;
    return EINVAL;
  }
  uint32_t prod = sq_.prod_local();
  uint32_t free = sq_.free_slots();
  int rc = 0;
  uint32_t i = 0;
  for (; i < n; ++i) {
    if (free == 0) {
      rc = ENOMEM;
      break;
    }
    rc = fill_send_wqe(wrs[i], init_, sq_.at<SendWqe>(prod));
    if (rc) break;
    ++prod;
    --free;
  }
  if (i) {
    sq_.publish(prod);
    doorbells_->ring(qpn_);
  }
  if (rc && bad) *bad = i;
  return rc;
}

int Qp::post_send(const SendWr& wr) { return post_send_list(&wr, 1, nullptr); }

int Qp::post_recv(const RecvWr& wr) {
  if (init_.srq) return EINVAL;  // receives go to the SRQ
  if (state() == QpState::kReset) return EINVAL;
  if (rq_.free_slots() == 0) return ENOMEM;
  const uint32_t prod = rq_.prod_local();
  int rc = fill_recv_wqe(wr, init_.cap.max_recv_sge, rq_.at<RecvWqe>(prod));
  if (rc) return rc;
  rq_.publish(prod + 1);
  // In ERR the engine flushes receives it finds posted: let it know.
  if (state() == QpState::kErr) doorbells_->ring(qpn_);
  return 0;
}

}  // namespace roce
