// Queue pairs: create (plain and extended), modify, query, destroy, and the attribute
// conversions between verbs.h structs and the stack's. The modify-QP rules (IBA table 91:
// allowed transitions, required and optional attributes, value ranges) are the engine's; it
// refuses with EINVAL and leaves the QP unchanged.
#include <algorithm>
#include <cstring>

#include "verbs_shim/shim.h"

namespace roce::verbs {

AhAttr to_ah_attr(const ibv_ah_attr& a) {
  AhAttr r;
  std::memcpy(r.dgid.data(), a.grh.dgid.raw, 16);
  r.flow_label = a.grh.flow_label;
  r.sgid_index = a.grh.sgid_index;
  r.hop_limit = a.grh.hop_limit;
  r.traffic_class = a.grh.traffic_class;
  r.sl = a.sl;
  r.port_num = a.port_num;
  r.is_global = a.is_global != 0;
  return r;
}

void from_ah_attr(const AhAttr& a, ibv_ah_attr* out) {
  std::memset(out, 0, sizeof *out);
  std::memcpy(out->grh.dgid.raw, a.dgid.data(), 16);
  out->grh.flow_label = a.flow_label;
  out->grh.sgid_index = a.sgid_index;
  out->grh.hop_limit = a.hop_limit;
  out->grh.traffic_class = a.traffic_class;
  out->sl = a.sl;
  out->port_num = a.port_num ? a.port_num : 1;
  out->is_global = a.is_global;
}

namespace {

// A QP state from the raw bits of an ibv_qp_state field; false for a value no state has.
bool to_state(uint32_t v, QpState* out) {
  if (v > static_cast<uint32_t>(QpState::kErr)) return false;
  *out = static_cast<QpState>(v);
  return true;
}

// False if an enum field the mask names holds a value no state or MTU has (an int from C: 0x101
// was taken as INIT when cut to the engine's 8 bits). Enum fields the mask does not name are not
// read: a program need not set them.
bool to_qp_attr(const ibv_qp_attr& a, int mask, QpAttr* out) {
  QpAttr& r = *out;
  if ((mask & IBV_QP_STATE) && !to_state(enum_bits(a.qp_state), &r.qp_state)) return false;
  if ((mask & IBV_QP_CUR_STATE) && !to_state(enum_bits(a.cur_qp_state), &r.cur_qp_state)) {
    return false;
  }
  if (mask & IBV_QP_PATH_MTU) {
    const uint32_t v = enum_bits(a.path_mtu);
    if (v > 0xff || !mtu_valid(static_cast<uint8_t>(v))) return false;
    r.path_mtu = static_cast<Mtu>(v);
  }
  r.qkey = a.qkey;
  r.rq_psn = a.rq_psn;
  r.sq_psn = a.sq_psn;
  r.dest_qp_num = a.dest_qp_num;
  r.qp_access_flags = a.qp_access_flags;
  r.cap = QpCap{a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge,
                a.cap.max_inline_data};
  if (mask & IBV_QP_AV) r.ah_attr = to_ah_attr(a.ah_attr);
  r.pkey_index = a.pkey_index;
  r.en_sqd_async_notify = a.en_sqd_async_notify;
  r.sq_draining = a.sq_draining;
  r.max_rd_atomic = a.max_rd_atomic;
  r.max_dest_rd_atomic = a.max_dest_rd_atomic;
  r.min_rnr_timer = a.min_rnr_timer;
  r.port_num = a.port_num;
  r.timeout = a.timeout;
  r.retry_cnt = a.retry_cnt;
  r.rnr_retry = a.rnr_retry;
  r.rate_limit = a.rate_limit;
  return true;
}

void from_qp_attr(const QpAttr& a, ibv_qp_attr* out) {
  std::memset(out, 0, sizeof *out);
  out->qp_state = static_cast<ibv_qp_state>(a.qp_state);
  out->cur_qp_state = static_cast<ibv_qp_state>(a.cur_qp_state);
  out->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  out->path_mig_state = IBV_MIG_MIGRATED;
  out->qkey = a.qkey;
  out->rq_psn = a.rq_psn;
  out->sq_psn = a.sq_psn;
  out->dest_qp_num = a.dest_qp_num;
  out->qp_access_flags = a.qp_access_flags;
  out->cap.max_send_wr = a.cap.max_send_wr;
  out->cap.max_recv_wr = a.cap.max_recv_wr;
  out->cap.max_send_sge = a.cap.max_send_sge;
  out->cap.max_recv_sge = a.cap.max_recv_sge;
  out->cap.max_inline_data = a.cap.max_inline_data;
  from_ah_attr(a.ah_attr, &out->ah_attr);
  out->pkey_index = a.pkey_index;
  out->en_sqd_async_notify = a.en_sqd_async_notify;
  out->sq_draining = a.sq_draining;
  out->max_rd_atomic = a.max_rd_atomic;
  out->max_dest_rd_atomic = a.max_dest_rd_atomic;
  out->min_rnr_timer = a.min_rnr_timer;
  out->port_num = a.port_num ? a.port_num : 1;
  out->timeout = a.timeout;
  out->retry_cnt = a.retry_cnt;
  out->rnr_retry = a.rnr_retry;
  out->rate_limit = a.rate_limit;
}

constexpr uint64_t kSupportedSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV;

ibv_qp* create_qp_common(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  constexpr uint32_t kKnownMask =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (!attr || !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    errno = EINVAL;
    return nullptr;
  }
  if ((attr->comp_mask & ~kKnownMask) ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
    errno = EOPNOTSUPP;  // XRC, TSO, RSS, source QPN, create flags
    return nullptr;
  }
  const bool ex_ops = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (ex_ops && (attr->send_ops_flags & ~kSupportedSendOps)) {
    errno = EOPNOTSUPP;  // LOCAL_INV, BIND_MW, TSO, ATOMIC_WRITE: no memory windows here
    return nullptr;
  }
  const uint32_t qp_type = enum_bits(attr->qp_type);
  if (qp_type != IBV_QPT_RC && qp_type != IBV_QPT_UC && qp_type != IBV_QPT_UD) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (!attr->send_cq || !attr->recv_cq) {
    errno = EINVAL;
    return nullptr;
  }
  ShimPd* pd = to_pd(attr->pd);
  ShimContext* ctx = to_ctx(context);
  if (attr->pd->context != context || attr->send_cq->context != context ||
      attr->recv_cq->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  ShimCq* scq = to_cq(attr->send_cq);
  ShimCq* rcq = to_cq(attr->recv_cq);
  ShimSrq* srq = attr->srq ? to_srq(attr->srq) : nullptr;

  QpInitAttr ia;
  ia.type = static_cast<QpType>(attr->qp_type);
  ia.pd = pd->id;
  ia.send_cq = scq->q;
  ia.recv_cq = rcq->q;
  ia.srq = srq ? srq->q : nullptr;
  ia.cap = QpCap{attr->cap.max_send_wr, attr->cap.max_recv_wr, attr->cap.max_send_sge,
                 attr->cap.max_recv_sge, attr->cap.max_inline_data};
  ia.sq_sig_all = attr->sq_sig_all != 0;
  ia.user_context = reinterpret_cast<uintptr_t>(attr->qp_context);

  auto qp = std::make_unique<ShimQp>();
  std::memset(&qp->qpx, 0, sizeof qp->qpx);
  qp->ctx = ctx;
  qp->pd = pd;
  qp->send_cq = scq;
  qp->recv_cq = rcq;
  qp->srq = srq;
  qp->sq_sig_all = ia.sq_sig_all;
  qp->has_qp_ex_ops = ex_ops;
  qp->send_ops_flags = ex_ops ? attr->send_ops_flags : kSupportedSendOps;

  int err = 0;
  Qp* q = on_engine(ctx, [&] { return ctx->engine->create_qp(ia, &err); });
  if (!q) {
    errno = err ? err : ENOMEM;
    return nullptr;
  }
  qp->q = q;
  // The granted capabilities go back to the caller (it sizes its posts by them).
  const QpCap& g = q->init_attr().cap;
  attr->cap.max_send_wr = g.max_send_wr;
  attr->cap.max_send_sge = g.max_send_sge;
  attr->cap.max_inline_data = g.max_inline_data;
  attr->cap.max_recv_wr = srq ? 0 : g.max_recv_wr;
  attr->cap.max_recv_sge = srq ? 0 : g.max_recv_sge;
  if (ex_ops && !init_wr_batch(qp.get(), g)) {
    on_engine(ctx, [&] { return ctx->engine->destroy_qp(q); });
    errno = ENOMEM;
    return nullptr;
  }

  ibv_qp& b = qp->qpx.qp_base;
  b.context = context;
  b.qp_context = attr->qp_context;
  b.pd = attr->pd;
  b.send_cq = attr->send_cq;
  b.recv_cq = attr->recv_cq;
  b.srq = attr->srq;
  b.handle = q->qpn();
  b.qp_num = q->qpn();
  b.state = IBV_QPS_RESET;
  b.qp_type = attr->qp_type;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  install_qp_ex_ops(qp.get());

  ++pd->users;
  ++scq->users;
  ++rcq->users;
  if (srq) ++srq->users;
  register_qp(qp.get());
  {
    std::lock_guard<std::mutex> lock(ctx->obj_mu);
    ctx->objs.qps.insert(qp.get());
  }
  return &qp.release()->qpx.qp_base;
}

// Runs fn (an engine-side change that leaves the QP reset or gone) on the engine's thread and,
// if it succeeds, removes the QP's completions from its CQs there, as mlx5 does on reset and
// destroy (__mlx5_cq_clean): a QP brought up again must not poll the flushes of its former
// connection, and a destroyed QP's wr_ids name nothing. The CQs' consumer locks are held
// meanwhile (in address order: two QPs may share both CQs the other way round), so no poll
// sees a ring being compacted.
template <typename F>
int on_engine_cleaning_cqs(ShimQp* qp, F&& fn) {
  ShimCq* first = std::min(qp->send_cq, qp->recv_cq);
  ShimCq* second = std::max(qp->send_cq, qp->recv_cq);
  std::unique_lock<SpinLock> l1(first->poll_lock);
  std::unique_lock<SpinLock> l2;
  if (second != first) l2 = std::unique_lock<SpinLock>(second->poll_lock);
  const uint32_t qpn = qp->qpx.qp_base.qp_num;
  return on_engine(qp->ctx, [&] {
    const int rc = fn();
    if (rc == 0) {
      first->q->discard_qp(qpn);
      if (second != first) second->q->discard_qp(qpn);
    }
    return rc;
  });
}

}  // namespace

int destroy_qp_now(ShimQp* qp, bool wait_acks) {
  ShimContext* ctx = qp->ctx;
  const int rc = on_engine_cleaning_cqs(qp, [&] { return ctx->engine->destroy_qp(qp->q); });
  if (rc) return rc;
  unregister_qp(qp, wait_acks);
  --qp->pd->users;
  --qp->send_cq->users;
  --qp->recv_cq->users;
  if (qp->srq) --qp->srq->users;
  {
    std::lock_guard<std::mutex> lock(ctx->obj_mu);
    ctx->objs.qps.erase(qp);
  }
  pthread_mutex_destroy(&qp->qpx.qp_base.mutex);
  pthread_cond_destroy(&qp->qpx.qp_base.cond);
  delete qp;
  return 0;
}

ibv_qp* op_create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  return guard_ptr([&] { return create_qp_common(context, attr); });
}

// ibv_modify_qp_rate_limit: IBV_QP_RATE_LIMIT with a burst cap, as an RTS->RTS modify (EINVAL in
// any other state). Returns an errno value, as ibv_modify_qp does.
int op_modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr) {
  return guard_errno([&] {
    if (!qp || !attr || attr->comp_mask) return EINVAL;  // no extension is defined
    ShimQp* q = to_qp(qp);
    QpAttr a;
    a.rate_limit = attr->rate_limit;
    a.max_burst_sz = attr->max_burst_sz;
    a.typical_pkt_sz = attr->typical_pkt_sz;
    return on_engine(q->ctx, [&] { return q->ctx->engine->modify_qp(q->q, a, kQpRateLimit); });
  });
}

}  // namespace roce::verbs

using namespace roce;
using namespace roce::verbs;

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  return guard_ptr([&]() -> ibv_qp* {
    if (!pd || !attr) {
      errno = EINVAL;
      return nullptr;
    }
    ibv_qp_init_attr_ex ex;
    std::memset(&ex, 0, sizeof ex);
    std::memcpy(&ex, attr, sizeof *attr);  // ibv_qp_init_attr is the prefix of the _ex form
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = pd;
    ibv_qp* qp = create_qp_common(pd->context, &ex);
    if (qp) attr->cap = ex.cap;
    return qp;
  });
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) { return qp ? &to_qp(qp)->qpx : nullptr; }

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  return guard_errno([&] {
    if (!qp || !attr) return EINVAL;
    ShimQp* q = to_qp(qp);
    QpAttr a;
    if (!to_qp_attr(*attr, attr_mask, &a)) return EINVAL;
    auto modify = [&] {
      return q->ctx->engine->modify_qp(q->q, a, static_cast<uint32_t>(attr_mask));
    };
    const bool to_reset = (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET;
    const int rc = to_reset ? on_engine_cleaning_cqs(q, modify) : on_engine(q->ctx, modify);
    if (rc) return rc;
    if (attr_mask & IBV_QP_STATE) qp->state = attr->qp_state;
    return 0;
  });
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init_attr) {
  return guard_errno([&] {
    if (!qp || !attr || !init_attr) return EINVAL;
    ShimQp* q = to_qp(qp);
    QpAttr a;
    const int rc = on_engine(q->ctx, [&] { return q->ctx->engine->query_qp(q->q, &a); });
    if (rc) return rc;
    from_qp_attr(a, attr);
    if (q->srq) {
      attr->cap.max_recv_wr = 0;
      attr->cap.max_recv_sge = 0;
    }
    qp->state = attr->qp_state;
    std::memset(init_attr, 0, sizeof *init_attr);
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = attr->cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = q->sq_sig_all;
    return 0;
  });
}

int ibv_destroy_qp(ibv_qp* qp) {
  return guard_errno([&] { return qp ? destroy_qp_now(to_qp(qp), true) : EINVAL; });
}

int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode, uint32_t flags) {
  // The responder places every message's bytes in order (out-of-sequence packets are dropped
  // and retransmitted), so the last byte of a WRITE lands last.
  return qp && flags == 0 ? 1 : 0;
}

int ibv_set_ece(ibv_qp* qp, ibv_ece*) { return qp ? EOPNOTSUPP : EINVAL; }

int ibv_query_ece(ibv_qp* qp, ibv_ece*) { return qp ? EOPNOTSUPP : EINVAL; }

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid*, uint16_t) { return qp ? EOPNOTSUPP : EINVAL; }

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid*, uint16_t) { return qp ? EOPNOTSUPP : EINVAL; }

// The verbs of this file that also exist at IBVERBS_1.0 (compat_1_0.cc).
ROCE_DEFAULT_VERSION_1_1(ibv_attach_mcast);
ROCE_DEFAULT_VERSION_1_1(ibv_create_qp);
ROCE_DEFAULT_VERSION_1_1(ibv_destroy_qp);
ROCE_DEFAULT_VERSION_1_1(ibv_detach_mcast);
ROCE_DEFAULT_VERSION_1_1(ibv_modify_qp);
ROCE_DEFAULT_VERSION_1_1(ibv_query_qp);
