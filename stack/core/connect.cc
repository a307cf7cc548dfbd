#include "stack/core/connect.h"

#include "stack/core/engine.h"
#include "stack/core/qp.h"

namespace roce {
namespace {

int to_init(Engine& e, Qp* q, const ConnectParams& p) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  if (q->type() == QpType::kUd) {
    a.qkey = p.qkey;
    mask |= kQpQkey;
  } else {
    a.qp_access_flags = p.access;
    mask |= kQpAccessFlags;
  }
  return e.modify_qp(q, a, mask);
}

// A UD QP has no peer: its address comes with each work request (IBA 11.2.5.3).
int to_rtr(Engine& e, Qp* q, const ConnectParams& p) {
  QpAttr a;
  a.qp_state = QpState::kRtr;
  uint32_t mask = kQpState;
  if (q->type() != QpType::kUd) {
    a.path_mtu = p.mtu;
    a.dest_qp_num = p.dest_qpn;
    a.rq_psn = p.rq_psn;
    a.ah_attr = p.ah;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  }
  if (q->type() == QpType::kRc) {
    a.max_dest_rd_atomic = p.max_dest_rd_atomic;
    a.min_rnr_timer = p.min_rnr_timer;
    mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
  }
  return e.modify_qp(q, a, mask);
}

// Only RC acknowledges, so only RC has a timeout, retries and outstanding reads (IBA 9.7.6).
int to_rts(Engine& e, Qp* q, const ConnectParams& p) {
  QpAttr a;
  a.qp_state = QpState::kRts;
  a.sq_psn = p.sq_psn;
  uint32_t mask = kQpState | kQpSqPsn;
  if (q->type() == QpType::kRc) {
    a.timeout = p.timeout;
    a.retry_cnt = p.retry_cnt;
    a.rnr_retry = p.rnr_retry;
    a.max_rd_atomic = p.max_rd_atomic;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  if (p.rate_limit_kbps) {
    a.rate_limit = p.rate_limit_kbps;
    mask |= kQpRateLimit;
  }
  return e.modify_qp(q, a, mask);
}

}  // namespace

int connect_qp(Engine& e, Qp* q, const ConnectParams& p, const char** failed_step) {
  const char* step = "INIT";
  int rc = to_init(e, q, p);
  if (rc == 0) {
    step = "RTR";
    rc = to_rtr(e, q, p);
  }
  if (rc == 0 && p.to_rts) {
    step = "RTS";
    rc = to_rts(e, q, p);
  }
  if (rc && failed_step) *failed_step = step;
  return rc;
}

}  // namespace roce
