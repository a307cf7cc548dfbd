// The ibv_wr_* work-request builder (struct ibv_qp_ex): ibv_wr_start takes the QP's send lock,
// each ibv_wr_<opcode> starts a work request in the QP's batch and the setters complete it,
// ibv_wr_complete posts the batch in one post_send_list (one doorbell) and releases the lock,
// ibv_wr_abort drops it. Inline data is copied when it is set, as a NIC copies it into the WQE,
// so the caller may reuse its buffer at once.
//
// A batch holds up to WrBatch::kMaxWrs requests; a longer one is posted in pieces (an abort
// then drops only the last piece). An error while building (an SGE list or inline data too
// long, an unsupported operation) makes ibv_wr_complete post nothing and return the error.
#include <cstring>

#include "verbs_shim/shim.h"

namespace roce::verbs {

namespace {

ShimQp* qp_of(ibv_qp_ex* q) { return to_qp(q); }

void fail(ShimQp* qp, int err) {
  if (!qp->batch.error) qp->batch.error = err;
}

// Posts what the batch holds; records the first error.
void flush(ShimQp* qp) {
  WrBatch& b = qp->batch;
  if (b.n && !b.error) {
    uint32_t bad = 0;
    if (int rc = post_send_wrs(qp->q, b.wrs.get(), b.n, &bad)) fail(qp, rc);
  }
  b.n = 0;
}

// Starts a work request with the QP's current wr_id / wr_flags.
SendWr* begin(ibv_qp_ex* qx, WrOpcode op, uint64_t ops_flag) {
  ShimQp* qp = qp_of(qx);
  WrBatch& b = qp->batch;
  if (!(qp->send_ops_flags & ops_flag)) {
    fail(qp, EOPNOTSUPP);  // not among the send_ops_flags the QP was created with
    return nullptr;
  }
  if (b.n == b.cap) flush(qp);
  SendWr* w = &b.wrs[b.n];
  *w = SendWr{};
  w->wr_id = qx->wr_id;
  w->send_flags = static_cast<uint8_t>(qx->wr_flags & 0xF);
  w->opcode = op;
  w->sg_list = &b.sges[static_cast<size_t>(b.n) * b.sge_per_wr];
  ++b.n;
  return w;
}

// The request the setters apply to.
SendWr* current(ibv_qp_ex* qx) {
  ShimQp* qp = qp_of(qx);
  if (qp->batch.n == 0) {
    fail(qp, EINVAL);
    return nullptr;
  }
  return &qp->batch.wrs[qp->batch.n - 1];
}

uint8_t* inline_slot(ShimQp* qp) {
  WrBatch& b = qp->batch;
  return &b.inline_buf[static_cast<size_t>(b.n - 1) * b.inline_per_wr];
}

void wr_start(ibv_qp_ex* qx) {
  ShimQp* qp = qp_of(qx);
  qp->send_lock.lock();
  WrBatch& b = qp->batch;
  if (!b.wrs) {
    // A QP created without send_ops_flags: its batch is allocated at first use.
    try {
      init_wr_batch(qp, qp->q->init_attr().cap);
    } catch (...) {
    }
  }
  b.n = 0;
  b.error = b.wrs ? 0 : ENOMEM;
}

int wr_complete(ibv_qp_ex* qx) {
  ShimQp* qp = qp_of(qx);
  if (forked_child() && !qp->batch.error) qp->batch.error = refuse_in_forked_child();
  if (qp->batch.error) qp->batch.n = 0;
  flush(qp);
  const int rc = qp->batch.error;
  qp->batch.error = 0;
  qp->send_lock.unlock();
  return rc;
}

void wr_abort(ibv_qp_ex* qx) {
  ShimQp* qp = qp_of(qx);
  qp->batch.n = 0;
  qp->batch.error = 0;
  qp->send_lock.unlock();
}

void wr_rdma_write(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr) {
  if (SendWr* w = begin(qx, WrOpcode::kRdmaWrite, IBV_QP_EX_WITH_RDMA_WRITE)) {
    w->rkey = rkey;
    w->remote_addr = addr;
  }
}

void wr_rdma_write_imm(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, __be32 imm) {
  if (SendWr* w = begin(qx, WrOpcode::kRdmaWriteWithImm, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->imm_data = imm;
  }
}

void wr_rdma_read(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr) {
  if (SendWr* w = begin(qx, WrOpcode::kRdmaRead, IBV_QP_EX_WITH_RDMA_READ)) {
    w->rkey = rkey;
    w->remote_addr = addr;
  }
}

void wr_send(ibv_qp_ex* qx) { begin(qx, WrOpcode::kSend, IBV_QP_EX_WITH_SEND); }

void wr_send_imm(ibv_qp_ex* qx, __be32 imm) {
  if (SendWr* w = begin(qx, WrOpcode::kSendWithImm, IBV_QP_EX_WITH_SEND_WITH_IMM)) {
    w->imm_data = imm;
  }
}

void wr_send_inv(ibv_qp_ex* qx, uint32_t rkey) {
  if (SendWr* w = begin(qx, WrOpcode::kSendWithInv, IBV_QP_EX_WITH_SEND_WITH_INV)) {
    w->imm_data = rkey;
  }
}

void wr_atomic_cmp_swp(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
  if (SendWr* w = begin(qx, WrOpcode::kAtomicCmpAndSwp, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->compare_add = compare;
    w->swap = swap;
  }
}

void wr_atomic_fetch_add(ibv_qp_ex* qx, uint32_t rkey, uint64_t addr, uint64_t add) {
  if (SendWr* w = begin(qx, WrOpcode::kAtomicFetchAndAdd, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)) {
    w->rkey = rkey;
    w->remote_addr = addr;
    w->compare_add = add;
  }
}

// Memory windows, local invalidation, TSO, XRC and atomic write do not exist here.
void wr_bind_mw(ibv_qp_ex* qx, ibv_mw*, uint32_t, const ibv_mw_bind_info*) {
  fail(qp_of(qx), EOPNOTSUPP);
}
void wr_local_inv(ibv_qp_ex* qx, uint32_t) { fail(qp_of(qx), EOPNOTSUPP); }
void wr_send_tso(ibv_qp_ex* qx, void*, uint16_t, uint16_t) { fail(qp_of(qx), EOPNOTSUPP); }
void wr_set_xrc_srqn(ibv_qp_ex* qx, uint32_t) { fail(qp_of(qx), EOPNOTSUPP); }
void wr_atomic_write(ibv_qp_ex* qx, uint32_t, uint64_t, const void*) {
  fail(qp_of(qx), EOPNOTSUPP);
}

void wr_set_ud_addr(ibv_qp_ex* qx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (SendWr* w = current(qx)) {
    if (!ah || ah->pd != qx->qp_base.pd) {  // as ibv_post_send: the QP's own PD
      fail(qp_of(qx), EINVAL);
      return;
    }
    w->ah = to_ah(ah)->id;
    w->remote_qpn = remote_qpn;
    w->remote_qkey = remote_qkey;
  }
}

void wr_set_sge(ibv_qp_ex* qx, uint32_t lkey, uint64_t addr, uint32_t length) {
  if (SendWr* w = current(qx)) {
    Sge* s = const_cast<Sge*>(w->sg_list);
    s[0] = Sge{addr, length, lkey};
    w->num_sge = 1;
    w->send_flags &= static_cast<uint8_t>(~kSendInline);
  }
}

void wr_set_sge_list(ibv_qp_ex* qx, size_t num_sge, const ibv_sge* list) {
  ShimQp* qp = qp_of(qx);
  if (SendWr* w = current(qx)) {
    if (num_sge > qp->batch.sge_per_wr) {
      fail(qp, EINVAL);
      return;
    }
    Sge* s = const_cast<Sge*>(w->sg_list);
    for (size_t i = 0; i < num_sge; ++i) s[i] = Sge{list[i].addr, list[i].length, list[i].lkey};
    w->num_sge = static_cast<uint32_t>(num_sge);
    w->send_flags &= static_cast<uint8_t>(~kSendInline);
  }
}

void wr_set_inline_data_list(ibv_qp_ex* qx, size_t num_buf, const ibv_data_buf* bufs) {
  ShimQp* qp = qp_of(qx);
  SendWr* w = current(qx);
  if (!w) return;
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) total += bufs[i].length;
  if (total > qp->batch.inline_per_wr) {
    fail(qp, EINVAL);
    return;
  }
  uint8_t* dst = inline_slot(qp);
  for (size_t i = 0; i < num_buf; ++i) {
    if (bufs[i].length) std::memcpy(dst, bufs[i].addr, bufs[i].length);
    dst += bufs[i].length;
  }
  Sge* s = const_cast<Sge*>(w->sg_list);
  s[0] = Sge{reinterpret_cast<uintptr_t>(inline_slot(qp)), static_cast<uint32_t>(total), 0};
  w->num_sge = 1;
  w->send_flags |= kSendInline;
}

void wr_set_inline_data(ibv_qp_ex* qx, void* addr, size_t length) {
  const ibv_data_buf b{addr, length};
  wr_set_inline_data_list(qx, 1, &b);
}

}  // namespace

bool init_wr_batch(ShimQp* qp, const QpCap& cap) {
  WrBatch& b = qp->batch;
  b.cap = cap.max_send_wr < WrBatch::kMaxWrs ? cap.max_send_wr : WrBatch::kMaxWrs;
  if (b.cap == 0) b.cap = 1;
  b.sge_per_wr = cap.max_send_sge ? cap.max_send_sge : 1;
  b.inline_per_wr = cap.max_inline_data;
  b.wrs.reset(new (std::nothrow) SendWr[b.cap]);
  b.sges.reset(new (std::nothrow) Sge[static_cast<size_t>(b.cap) * b.sge_per_wr]);
  b.inline_buf.reset(new (std::nothrow) uint8_t[static_cast<size_t>(b.cap) * b.inline_per_wr + 1]);
  if (!b.wrs || !b.sges || !b.inline_buf) {
    b.wrs.reset();
    return false;
  }
  return true;
}

void install_qp_ex_ops(ShimQp* qp) {
  ibv_qp_ex& x = qp->qpx;
  x.wr_atomic_cmp_swp = &wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = &wr_atomic_fetch_add;
  x.wr_bind_mw = &wr_bind_mw;
  x.wr_local_inv = &wr_local_inv;
  x.wr_rdma_read = &wr_rdma_read;
  x.wr_rdma_write = &wr_rdma_write;
  x.wr_rdma_write_imm = &wr_rdma_write_imm;
  x.wr_send = &wr_send;
  x.wr_send_imm = &wr_send_imm;
  x.wr_send_inv = &wr_send_inv;
  x.wr_send_tso = &wr_send_tso;
  x.wr_set_ud_addr = &wr_set_ud_addr;
  x.wr_set_xrc_srqn = &wr_set_xrc_srqn;
  x.wr_set_inline_data = &wr_set_inline_data;
  x.wr_set_inline_data_list = &wr_set_inline_data_list;
  x.wr_set_sge = &wr_set_sge;
  x.wr_set_sge_list = &wr_set_sge_list;
  x.wr_start = &wr_start;
  x.wr_complete = &wr_complete;
  x.wr_abort = &wr_abort;
  x.wr_atomic_write = &wr_atomic_write;
}

}  // namespace roce::verbs
