// Control path: PDs, MRs, CQs, SRQs, AHs, QPs and the modify-QP state machine (IBA 10.3,
// table 91 "QP state transition properties"). Runs on the engine's thread, never per packet; it
// may allocate. Every check happens before anything changes: a refused modify leaves the QP
// exactly as it was.
#include <algorithm>
#include <cstring>

#include "stack/core/engine.h"
#include "stack/util/address_space.h"
#include "stack/wire/psn.h"

namespace roce {

namespace {
constexpr uint32_t kAccessKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                                  kAccessRemoteAtomic | kAccessMwBind | kAccessZeroBased |
                                  kAccessOnDemand | kAccessHugetlb;
constexpr uint32_t kPdFree = UINT32_MAX;
}  // namespace

// --- protection domains and memory regions ---------------------------------------------------

uint32_t Engine::alloc_pd() {
  for (uint32_t i = 1; i < pd_users_.size(); ++i) {
    if (pd_users_[i] == kPdFree) {
      pd_users_[i] = 0;
      return i;
    }
  }
  if (pd_users_.empty()) pd_users_.push_back(kPdFree);  // PD 0 is never handed out
  pd_users_.push_back(0);
  return static_cast<uint32_t>(pd_users_.size() - 1);
}

int Engine::dealloc_pd(uint32_t pd) {
  if (pd == 0 || pd >= pd_users_.size() || pd_users_[pd] == kPdFree) return EINVAL;
  if (pd_users_[pd] != 0) return EBUSY;
  pd_users_[pd] = kPdFree;
  return 0;
}

namespace {
// The checks a registration and a re-registration share; normalises access (optional flags
// dropped) and iova (0 for a zero-based region). 0 or the errno.
int check_mr(const std::vector<uint32_t>& pd_users, uint32_t pd, void* addr, uint64_t length,
             uint64_t* iova, uint32_t* access) {
  if (pd == 0 || pd >= pd_users.size() || pd_users[pd] == kPdFree) return EINVAL;
  *access &= ~kAccessOptionalRange;  // optional flags (relaxed ordering ...) are hints
  if (*access & ~kAccessKnown) return EINVAL;
  // IBA 10.6.3.1: remote write or atomic access requires local write.
  if ((*access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(*access & kAccessLocalWrite)) {
    return EINVAL;
  }
  if (*access & (kAccessMwBind | kAccessOnDemand)) return EOPNOTSUPP;
  if (!addr && length) return EINVAL;
  if (length && *iova + length < *iova) return EINVAL;
  // The engine reads the region, and writes it when anyone may (remote write and atomics need
  // local write): memory the process may not access so is refused now, with EFAULT as the
  // kernel refuses to pin it under rdma-core (ib_umem_get), not faulted on by the engine later.
  if (!range_accessible(addr, length, (*access & kAccessLocalWrite) != 0)) return EFAULT;
  if (*access & kAccessZeroBased) *iova = 0;
  return 0;
}
}  // namespace

int Engine::reg_mr(uint32_t pd, void* addr, uint64_t length, uint64_t iova, uint32_t access,
                   uint32_t* key) {
  if (int e = check_mr(pd_users_, pd, addr, length, &iova, &access)) return e;
  const uint32_t k = mrs_.add(static_cast<uint8_t*>(addr), iova, length, access, pd);
  if (!k) return ENOMEM;
  ++pd_users_[pd];
  *key = k;
  return 0;
}

// In place, the keys kept: rxe and mlx5 keep an MR's lkey and rkey when only its access or PD
// changes (a peer holding the rkey goes on using it), and this engine keeps them for a new
// translation too, as mlx5 does when it can (a UMR). Checked as a new registration is; a
// refused one changes nothing.
int Engine::rereg_mr(uint32_t key, uint32_t pd, void* addr, uint64_t length, uint64_t iova,
                     uint32_t access) {
  const MemoryRegion* r = mrs_.find(key);
  if (!r) return EINVAL;
  if (int e = check_mr(pd_users_, pd, addr, length, &iova, &access)) return e;
  const uint32_t old_pd = r->pd;
  mrs_.update(key, static_cast<uint8_t*>(addr), iova, length, access, pd);
  --pd_users_[old_pd];
  ++pd_users_[pd];
  return 0;
}

int Engine::dereg_mr(uint32_t key) {
  const MemoryRegion* r = mrs_.find(key);
  if (!r) return EINVAL;
  const uint32_t pd = r->pd;
  mrs_.remove(key);
  --pd_users_[pd];
  return 0;
}

// --- completion queues, shared receive queues, address handles -------------------------------

CompletionQueue* Engine::create_cq(uint32_t depth, int* err) {
  if (depth == 0 || depth > kMaxCqe) {
    *err = EINVAL;
    return nullptr;
  }
  uint32_t cqn = 0;
  while (cqn < cqs_.size() && cqs_[cqn]) ++cqn;
  if (cqn >= cfg_.max_cqs) {
    *err = ENOMEM;
    return nullptr;
  }
  auto cq = std::make_unique<CompletionQueue>();
  if (!cq->init(cqn, depth)) {
    *err = ENOMEM;
    return nullptr;
  }
  cq->set_notify_batch(&notify_batch_);
  if (cqn == cqs_.size()) cqs_.emplace_back();
  cqs_[cqn] = std::move(cq);
  *err = 0;
  return cqs_[cqn].get();
}

int Engine::destroy_cq(CompletionQueue* cq) {
  if (!cq || cq->cqn() >= cqs_.size() || cqs_[cq->cqn()].get() != cq) return EINVAL;
  for (const auto& q : qps_) {
    if (q && (q->init_.send_cq == cq || q->init_.recv_cq == cq)) return EBUSY;
  }
  cqs_[cq->cqn()].reset();
  return 0;
}

SharedReceiveQueue* Engine::create_srq(uint32_t pd, uint32_t max_wr, uint32_t max_sge, int* err) {
  if (pd == 0 || pd >= pd_users_.size() || pd_users_[pd] == kPdFree || max_wr == 0 ||
      max_wr > kMaxQpWr || max_sge == 0 || max_sge > kMaxSge) {
    *err = EINVAL;
    return nullptr;
  }
  uint32_t n = 0;
  while (n < srqs_.size() && srqs_[n]) ++n;
  if (n >= cfg_.max_srqs) {
    *err = ENOMEM;
    return nullptr;
  }
  auto srq = std::make_unique<SharedReceiveQueue>();
  if (!srq->init(n, pd, max_wr, max_sge)) {
    *err = ENOMEM;
    return nullptr;
  }
  if (n == srqs_.size()) srqs_.emplace_back();
  srqs_[n] = std::move(srq);
  ++pd_users_[pd];
  *err = 0;
  return srqs_[n].get();
}

int Engine::destroy_srq(SharedReceiveQueue* srq) {
  if (!srq || srq->srqn() >= srqs_.size() || srqs_[srq->srqn()].get() != srq) return EINVAL;
  for (const auto& q : qps_) {
    if (q && q->init_.srq == srq) return EBUSY;
  }
  --pd_users_[srq->pd()];
  srqs_[srq->srqn()].reset();
  return 0;
}

int Engine::create_ah(uint32_t pd, const AhAttr& attr, uint32_t* ah) {
  if (pd == 0 || pd >= pd_users_.size() || pd_users_[pd] == kPdFree) return EINVAL;
  if (!attr.is_global || attr.sgid_index >= cfg_.gids.size()) return EINVAL;
  uint32_t n = 1;  // AH 0 means "none"
  while (n < ahs_.size() && ahs_[n].in_use) ++n;
  if (n >= cfg_.max_ahs) return ENOMEM;
  if (n >= ahs_.size()) ahs_.resize(n + 1);
  AddressHandle& h = ahs_[n];
  h.attr = attr;
  if (!build_path(attr, 0, 0, &h.path, &h.path_ready)) return EINVAL;
  // The ECN bits are the stack's, as for connected QPs (modify_qp): datagrams leave Not-ECT. A
  // sender never marks CE (RFC 3168 5), and an AH made from a received GRH
  // (ibv_create_ah_from_wc) carries the ECN field the request arrived with, CE included.
  h.path.traffic_class = static_cast<uint8_t>(attr.traffic_class & ~3u);
  h.pd = pd;
  h.in_use = true;
  ++pd_users_[pd];
  *ah = n;
  return 0;
}

int Engine::destroy_ah(uint32_t ah) {
  if (ah == 0 || ah >= ahs_.size() || !ahs_[ah].in_use) return EINVAL;
  ahs_[ah].in_use = false;
  --pd_users_[ahs_[ah].pd];  // the reference create_ah took
  return 0;
}

// --- paths ----------------------------------------------------------------------------------

// UDP source port of a connected QP, as Linux computes it (rdma_calc_flow_label and
// rdma_flow_label_to_udp_sport): a flow label from the QPN pair (or the given label), folded
// into 14 bits above 0xC000.
static uint16_t roce_udp_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn) {
  uint32_t fl = flow_label;
  if (fl == 0) {
    uint64_t v = static_cast<uint64_t>(lqpn) * rqpn;
    v ^= v >> 20;
    v ^= v >> 40;
    fl = static_cast<uint32_t>(v & 0xFFFFF);
  }
  uint32_t low = fl & 0x3FFF;
  low ^= (fl & 0xFC000) >> 14;
  return static_cast<uint16_t>(low | 0xC000);
}

bool Engine::build_path(const AhAttr& ah, uint32_t lqpn, uint32_t rqpn, wire::PathSpec* path,
                        bool* ready) {
  if (ah.sgid_index >= cfg_.gids.size()) return false;
  const Gid& sgid = cfg_.gids[ah.sgid_index];
  const bool v4 = wire::gid_is_ipv4_mapped(sgid.data());
  if (v4 != wire::gid_is_ipv4_mapped(ah.dgid.data())) return false;  // families must match
  wire::PathSpec p;
  p.src_mac = cfg_.mac;
  p.has_vlan = cfg_.vlan;
  p.vlan_tci = cfg_.vlan_tci;
  p.family = v4 ? wire::IpFamily::kIpv4 : wire::IpFamily::kIpv6;
  p.src_gid = sgid;
  p.dst_gid = ah.dgid;
  p.traffic_class = ah.traffic_class;
  // RoCEv2 takes the hop limit from the route, as Linux does (it overrides the AH's value).
  p.hop_limit = 64;
  p.flow_label = v4 ? 0 : ah.flow_label;
  p.udp_sport = roce_udp_sport(ah.flow_label, lqpn, rqpn);
  if (is_own_gid(ah.dgid)) {
    p.dst_mac = cfg_.mac;  // loopback: flush_tx hands such frames to our own receive side
    loopback_used_ = true;
    *ready = true;
  } else if (auto mac = neighbors_.lookup(ah.dgid)) {
    p.dst_mac = *mac;
    *ready = true;
  } else {
    neighbors_.want(ah.dgid);
    *ready = false;
  }
  *path = p;
  return true;
}

// The neighbour agent learned `ip`'s MAC: a first answer, or a changed address (a gratuitous
// ARP, an override NA: the peer's NIC or VM moved). Paths waiting for it start; ready paths take
// the new address, as rxe's do through the kernel's neighbour table, instead of sending to the
// old one until their retries run out.
void Engine::on_neighbor_resolved(const Gid& ip) {
  auto mac = neighbors_.lookup(ip);
  if (!mac || is_own_gid(ip)) return;  // our own address stays ours (loopback), whoever claims it
  for (auto& q : qps_) {
    if (!q || q->path_.dst_gid != ip) continue;
    q->set_dst_mac(*mac);
    if (!q->path_ready_) {
      q->path_ready_ = true;
      q->path_failed_ = false;
      schedule_req(*q);
      // The responder left its schedule while the path was not ready, perhaps with ACKs or
      // READ responses queued: they go now.
      if (q->rcv_.out_head != q->rcv_.out_tail) schedule_resp(*q);
    }
  }
  for (auto& h : ahs_) {
    if (!h.in_use || h.path.dst_gid != ip) continue;
    h.path.dst_mac = *mac;
    h.path_ready = true;
    h.unreachable = false;
  }
  for (auto& q : qps_) {
    if (q && q->type() == QpType::kUd) schedule_req(*q);
  }
}

// The neighbour agent gave up on `ip` (no answer to its solicitations). rdma-core fails the
// transition to RTR, or ibv_create_ah, with ETIMEDOUT when the kernel cannot resolve a RoCE
// peer's MAC; here those calls succeeded long before, so what is sent to the address fails
// instead of waiting for ever: an RC or UC QP completes its first WQE with RETRY_EXC_ERR and
// goes to the error state (at once, or at its next post); a UD datagram for such an address
// handle is dropped (UD promises no delivery) and the address is asked again.
void Engine::on_neighbor_failed(const Gid& ip) {
  for (auto& q : qps_) {
    if (q && !q->path_ready_ && q->type() != QpType::kUd && q->path_.dst_gid == ip) {
      q->path_failed_ = true;
      schedule_req(*q);
    }
  }
  for (auto& h : ahs_) {
    if (h.in_use && !h.path_ready && h.path.dst_gid == ip) h.unreachable = true;
  }
  for (auto& q : qps_) {
    if (q && q->type() == QpType::kUd) schedule_req(*q);
  }
}

// --- queue pairs ----------------------------------------------------------------------------

Qp* Engine::create_qp(const QpInitAttr& init, int* err) {
  *err = EINVAL;
  if (init.type != QpType::kRc && init.type != QpType::kUd && init.type != QpType::kUc) {
    *err = EOPNOTSUPP;
    return nullptr;
  }
  if (init.pd == 0 || init.pd >= pd_users_.size() || pd_users_[init.pd] == kPdFree) return nullptr;
  if (!init.send_cq || !init.recv_cq) return nullptr;
  const QpCap& c = init.cap;
  if (c.max_send_wr > kMaxQpWr || c.max_send_sge > kMaxSge || c.max_inline_data > kMaxInlineData) {
    return nullptr;
  }
  if (!init.srq && (c.max_recv_wr > kMaxQpWr || c.max_recv_sge > kMaxSge)) return nullptr;
  if (init.srq && init.srq->pd() != init.pd) return nullptr;

  // QPNs are handed out round-robin from 0x11, so a fresh QP does not reuse the number of one
  // just destroyed (stale packets for it would land on the new QP).
  uint32_t qpn = 0;
  for (uint32_t tries = 0; tries < cfg_.max_qps; ++tries) {
    uint32_t cand = next_qpn_++;
    if (next_qpn_ >= cfg_.max_qps) next_qpn_ = 0x11;
    if (cand >= 0x11 && cand < cfg_.max_qps && !qps_[cand]) {
      qpn = cand;
      break;
    }
  }
  if (!qpn) {
    *err = ENOMEM;
    return nullptr;
  }
  QpInitAttr granted = init;
  // Grant at least one entry and SGE; inline data at least as large as the SGE array.
  QpCap& g = granted.cap;
  if (g.max_send_wr == 0) g.max_send_wr = 1;
  if (g.max_send_sge == 0) g.max_send_sge = 1;
  if (!init.srq && g.max_recv_wr == 0) g.max_recv_wr = 1;
  if (!init.srq && g.max_recv_sge == 0) g.max_recv_sge = 1;
  auto qp = std::make_unique<Qp>(qpn, granted, &doorbells_);
  if (!qp->init_queues()) {
    *err = ENOMEM;
    return nullptr;
  }
  qp->init_.cap.max_send_wr = qp->sq_.capacity();
  if (!init.srq) qp->init_.cap.max_recv_wr = qp->rq_.capacity();
  const uint32_t body = g.max_send_sge * sizeof(Sge);
  if (qp->init_.cap.max_inline_data < body) {
    qp->init_.cap.max_inline_data = body < kMaxInlineData ? body : kMaxInlineData;
  }
  qp->snd_.retransmit.kind = kTimerRetransmit;
  qp->snd_.rnr.kind = kTimerRnr;
  qp->cc_.pace.owner = qp->cc_.timer.owner = qpn;
  qp->cc_.pace.kind = kTimerPace;
  qp->cc_.timer.kind = kTimerCc;
  qp->cc_.kind = init.cc == CcKind::kEngineDefault ? cfg_.default_cc : init.cc;
  if (init.type != QpType::kRc) qp->cc_.kind = CcKind::kNone;  // rate control for RC only
  qp->attr_.cap = qp->init_.cap;
  ++pd_users_[init.pd];
  qps_[qpn] = std::move(qp);
  *err = 0;
  return qps_[qpn].get();
}

static void unlink_from(Qp*& head, Qp*& tail, Qp* target, Qp* Qp::*next) {
  Qp* prev = nullptr;
  for (Qp* q = head; q; prev = q, q = q->*next) {
    if (q != target) continue;
    if (prev) {
      prev->*next = q->*next;
    } else {
      head = q->*next;
    }
    if (tail == q) tail = prev;
    q->*next = nullptr;
    return;
  }
}

int Engine::destroy_qp(Qp* qp) {
  if (!qp || qp->qpn() >= qps_.size() || qps_[qp->qpn()].get() != qp) return EINVAL;
  resp_farewell(*qp);
  stop_retransmit(*qp);
  timers_.cancel(qp->snd_.rnr);
  timers_.cancel(qp->cc_.pace);
  timers_.cancel(qp->cc_.timer);
  if (qp->snd_.active) unlink_from(req_head_, req_tail_, qp, &Qp::next_req_);
  if (qp->rcv_.active) unlink_from(resp_head_, resp_tail_, qp, &Qp::next_resp_);
  if (qp->budget_wait_) unlink_from(budget_head_, budget_tail_, qp, &Qp::next_budget_);
  charge_port(*qp, /*gone=*/true);
  --pd_users_[qp->init_.pd];
  add_counters(destroyed_ctr_, qp->counters_);
  ++destroyed_qps_;
  qps_[qp->qpn()].reset();
  return 0;
}

// Allowed transitions and their required / optional attribute masks (IBA table 91; the same
// table drives Linux's ib_modify_qp_is_ok).
namespace {
struct Transition {
  bool valid = false;
  uint32_t req[3] = {0, 0, 0};  // RC, UC, UD
  uint32_t opt[3] = {0, 0, 0};
};

int type_index(QpType t) { return t == QpType::kRc ? 0 : t == QpType::kUc ? 1 : 2; }

Transition transition(QpState cur, QpState next) {
  using S = QpState;
  Transition t;
  if (next == S::kReset || next == S::kErr) {
    t.valid = true;  // from any state
    return t;
  }
  switch (cur) {
    case S::kReset:
      if (next == S::kInit) {
        t.valid = true;
        t.req[0] = t.req[1] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
        t.req[2] = kQpPkeyIndex | kQpPort | kQpQkey;
      }
      break;
    case S::kInit:
      if (next == S::kInit) {
        t.valid = true;
        t.opt[0] = t.opt[1] = kQpPkeyIndex | kQpPort | kQpAccessFlags;
        t.opt[2] = kQpPkeyIndex | kQpPort | kQpQkey;
      } else if (next == S::kRtr) {
        t.valid = true;
        t.req[0] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
        t.req[1] = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
        t.opt[0] = t.opt[1] = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
        t.opt[2] = kQpPkeyIndex | kQpQkey;
      }
      break;
    case S::kRtr:
      if (next == S::kRts) {
        t.valid = true;
        t.req[0] = kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
        t.req[1] = t.req[2] = kQpSqPsn;
        t.opt[0] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState |
                   kQpRateLimit;
        t.opt[1] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState | kQpRateLimit;
        t.opt[2] = kQpCurState | kQpQkey | kQpRateLimit;
      }
      break;
    case S::kRts:
      if (next == S::kRts) {
        t.valid = true;
        t.opt[0] = kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState | kQpMinRnrTimer |
                   kQpRateLimit;
        t.opt[1] = kQpCurState | kQpAccessFlags | kQpAltPath | kQpPathMigState | kQpRateLimit;
        t.opt[2] = kQpCurState | kQpQkey | kQpRateLimit;
      } else if (next == S::kSqd) {
        t.valid = true;
        t.opt[0] = t.opt[1] = t.opt[2] = kQpEnSqdAsyncNotify;
      }
      break;
    case S::kSqd:
      if (next == S::kRts) {
        t.valid = true;
        t.opt[0] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpMinRnrTimer | kQpPathMigState |
                   kQpRateLimit;
        t.opt[1] = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState | kQpRateLimit;
        t.opt[2] = kQpCurState | kQpQkey | kQpRateLimit;
      } else if (next == S::kSqd) {
        t.valid = true;
        t.opt[0] = kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpMinRnrTimer |
                   kQpPathMigState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic |
                   kQpMaxDestRdAtomic;
        t.opt[1] = kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState;
        t.opt[2] = kQpPkeyIndex | kQpQkey;
      }
      break;
    case S::kSqe:
      if (next == S::kRts) {
        t.valid = true;
        t.opt[1] = kQpCurState | kQpAccessFlags;
        t.opt[2] = kQpCurState | kQpQkey;
        // RC has no SQE state: an RC send queue error goes straight to ERR.
        t.req[0] = UINT32_MAX;
      }
      break;
    case S::kErr:
      break;
  }
  return t;
}
}  // namespace

int Engine::validate_modify(const Qp& qp, const QpAttr& a, uint32_t mask, QpState cur,
                            QpState next) {
  const Transition t = transition(cur, next);
  if (!t.valid) return EINVAL;
  const int ti = type_index(qp.type());
  const uint32_t req = t.req[ti];
  const uint32_t opt = t.opt[ti];
  if (req == UINT32_MAX) return EINVAL;
  const uint32_t attrs = mask & ~kQpState;
  if ((attrs & req) != req) return EINVAL;  // a required attribute is missing
  if (attrs & ~(req | opt)) return EINVAL;  // an attribute this transition does not take

  if ((mask & kQpCurState) && a.cur_qp_state != cur) return EINVAL;
  if ((mask & kQpPkeyIndex) && a.pkey_index != 0) return EINVAL;  // one P_Key: 0xFFFF
  if ((mask & kQpPort) && a.port_num != 1) return EINVAL;
  if ((mask & kQpAccessFlags) &&
      (a.qp_access_flags & ~(kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                             kAccessRemoteAtomic | kAccessMwBind))) {
    return EINVAL;
  }
  if (mask & kQpPathMtu) {
    if (!mtu_valid(static_cast<uint8_t>(a.path_mtu))) return EINVAL;
    if (static_cast<uint8_t>(a.path_mtu) > static_cast<uint8_t>(active_mtu_)) return EINVAL;
  }
  if ((mask & kQpDestQpn) && (a.dest_qp_num > 0xFFFFFF)) return EINVAL;
  if ((mask & kQpTimeout) && a.timeout > 31) return EINVAL;
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return EINVAL;
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return EINVAL;
  if ((mask & kQpMinRnrTimer) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & kQpMaxQpRdAtomic) && a.max_rd_atomic > kMaxRdAtomic) return EINVAL;
  if ((mask & kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > kMaxRdAtomic) return EINVAL;
  if (mask & kQpAv) {
    if (!a.ah_attr.is_global || a.ah_attr.sgid_index >= cfg_.gids.size()) return EINVAL;
    if (a.ah_attr.port_num != 0 && a.ah_attr.port_num != 1) return EINVAL;
    const Gid& sgid = cfg_.gids[a.ah_attr.sgid_index];
    if (wire::gid_is_ipv4_mapped(sgid.data()) != wire::gid_is_ipv4_mapped(a.ah_attr.dgid.data())) {
      return EINVAL;
    }
  }
  if (mask & kQpCap) return EINVAL;  // resizing queues is not supported
  if ((mask & kQpRateLimit) && a.rate_limit != 0 &&
      (a.rate_limit < kMinRateLimitKbps || a.rate_limit > kMaxRateLimitKbps)) {
    return EINVAL;
  }
  // Burst and packet sizes shape a limit: without one they are a caller's mistake.
  if ((mask & kQpRateLimit) && a.rate_limit == 0 && (a.max_burst_sz || a.typical_pkt_sz)) {
    return EINVAL;
  }
  return 0;
}

void Engine::set_state(Qp& qp, QpState s) {
  qp.attr_.qp_state = s;
  qp.attr_.cur_qp_state = s;
  qp.state_shadow_.store(s, std::memory_order_release);
  charge_port(qp);
}

void Engine::reset_qp_state(Qp& qp) {
  stop_retransmit(qp);
  timers_.cancel(qp.snd_.rnr);
  timers_.cancel(qp.cc_.pace);
  timers_.cancel(qp.cc_.timer);
  qp.attr_.rate_limit = 0;  // a reset QP starts again without a limit
  qp.attr_.max_burst_sz = 0;
  qp.attr_.typical_pkt_sz = 0;
  qp.cc_.limited = false;
  // Drop queued work without completions (IBA 10.3.1: RESET empties the queues).
  const uint32_t sq_prod = qp.sq_.prod_acquire();
  qp.sq_.retire(sq_prod);
  // Nothing of a WQE's transport state may outlive it: a slot reused after the reset would
  // otherwise take the old PSNs for its own.
  std::fill_n(qp.slots_.get(), qp.sq_.capacity(), SendSlot{});
  if (!qp.init_.srq) qp.rq_.retire(qp.rq_.prod_acquire());
  const bool sa = qp.snd_.active;
  const bool ra = qp.rcv_.active;
  TimerNode rt = qp.snd_.retransmit, rn = qp.snd_.rnr;
  qp.snd_ = Qp::Send{};
  qp.snd_.retransmit = rt;
  qp.snd_.rnr = rn;
  qp.snd_.head = qp.snd_.send = qp.snd_.tail = sq_prod;
  qp.snd_.active = sa;  // list membership is the scheduler's; the step functions see no work
  auto buf = std::move(qp.rcv_.wqe_buf);
  qp.rcv_ = Qp::Recv{};
  qp.rcv_.wqe_buf = std::move(buf);
  qp.rcv_.active = ra;
  qp.path_ready_ = false;
  qp.path_failed_ = false;
}

int Engine::modify_qp(Qp* qp, const QpAttr& a, uint32_t mask) {
  if (!qp || qp->qpn() >= qps_.size() || qps_[qp->qpn()].get() != qp) return EINVAL;
  const QpState cur = qp->attr_.qp_state;
  const QpState next = (mask & kQpState) ? a.qp_state : cur;
  if (int rc = validate_modify(*qp, a, mask, cur, next)) return rc;

  // The path is built (and checked) before anything changes.
  wire::PathSpec new_path = qp->path_;
  bool path_ready = qp->path_ready_;
  if (mask & kQpAv) {
    const uint32_t rqpn = (mask & kQpDestQpn) ? a.dest_qp_num : qp->attr_.dest_qp_num;
    if (!build_path(a.ah_attr, qp->qpn(), rqpn, &new_path, &path_ready)) return EINVAL;
  }

  // Apply.
  QpAttr& s = qp->attr_;
  if (mask & kQpAccessFlags) s.qp_access_flags = a.qp_access_flags;
  if (mask & kQpPkeyIndex) s.pkey_index = a.pkey_index;
  if (mask & kQpPort) s.port_num = a.port_num;
  if (mask & kQpQkey) s.qkey = a.qkey;
  if (mask & kQpAv) {
    s.ah_attr = a.ah_attr;
    qp->set_path(new_path);
    qp->path_ready_ = path_ready;
    qp->path_failed_ = false;
    // ECN bits are the stack's, not the application's: data packets ECT(0)/(1) when marking,
    // ACKs, NAKs and CNPs not ECN-capable (DCQCN marks data only).
    qp->ctrl_tclass_ = static_cast<uint8_t>(a.ah_attr.traffic_class & ~3u);
    const bool mark = qp->cc_.kind == CcKind::kDcqcn || cfg_.ecn_mark;
    qp->data_tclass_ =
        static_cast<uint8_t>(qp->ctrl_tclass_ | (mark ? static_cast<uint8_t>(cfg_.dcqcn.ecn) : 0));
  }
  if (mask & kQpPathMtu) {
    s.path_mtu = a.path_mtu;
    qp->mtu_ = mtu_bytes(a.path_mtu);
  }
  if (mask & kQpDestQpn) s.dest_qp_num = a.dest_qp_num;
  if (mask & kQpRqPsn) s.rq_psn = a.rq_psn & wire::kPsnMask;
  if (mask & kQpSqPsn) s.sq_psn = a.sq_psn & wire::kPsnMask;
  if (mask & kQpTimeout) s.timeout = a.timeout;
  if (mask & kQpRetryCnt) s.retry_cnt = a.retry_cnt;
  if (mask & kQpRnrRetry) s.rnr_retry = a.rnr_retry;
  if (mask & kQpMinRnrTimer) s.min_rnr_timer = a.min_rnr_timer;
  if (mask & kQpMaxQpRdAtomic) s.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kQpEnSqdAsyncNotify) s.en_sqd_async_notify = a.en_sqd_async_notify;
  if (mask & kQpRateLimit) {
    s.rate_limit = a.rate_limit;
    s.max_burst_sz = a.max_burst_sz;
    s.typical_pkt_sz = a.typical_pkt_sz;
    cc_set_limit(*qp);
  }

  if (!(mask & kQpState) || next == cur) {
    if (next == QpState::kRts) schedule_req(*qp);
    return 0;
  }
  switch (next) {
    case QpState::kReset:
      reset_qp_state(*qp);
      set_state(*qp, next);
      break;
    case QpState::kInit:
      set_state(*qp, next);
      break;
    case QpState::kRtr:
      qp->rcv_.epsn = s.rq_psn;
      qp->rcv_.msn = 0;
      if (qp->type() == QpType::kUd) qp->mtu_ = mtu_bytes(active_mtu_);
      // The responder works from RTR on: its CE marks are answered with CNPs (the NP) and its
      // READ responses are paced (the RP).
      cc_setup(*qp);
      set_state(*qp, next);
      break;
    case QpState::kRts:
      if (cur == QpState::kRtr) {
        qp->snd_.psn = qp->snd_.comp_psn = qp->snd_.max_psn = s.sq_psn;
      }
      reset_retry_budgets(*qp);
      qp->snd_.drained_event = false;
      s.sq_draining = 0;
      set_state(*qp, next);
      schedule_req(*qp);
      break;
    case QpState::kSqd:
      s.sq_draining = 1;
      qp->snd_.drained_event = false;
      set_state(*qp, next);
      comp_progress(*qp);  // raises the drained event if nothing is outstanding
      break;
    case QpState::kErr:
      qp_error(*qp);
      break;
    case QpState::kSqe:
      break;
  }
  return 0;
}

int Engine::query_qp(const Qp* qp, QpAttr* attr) const {
  if (!qp) return EINVAL;
  *attr = qp->attr_;
  attr->cap = qp->init_.cap;
  return 0;
}

// --- error state ----------------------------------------------------------------------------

void Engine::qp_error(Qp& qp) {
  if (qp.attr_.qp_state == QpState::kErr) return;
  set_state(qp, QpState::kErr);
  stop_retransmit(qp);
  timers_.cancel(qp.snd_.rnr);
  timers_.cancel(qp.cc_.pace);
  timers_.cancel(qp.cc_.timer);
  flush_qp(qp);
  // IBA 11.6.3.1: a QP on an SRQ reports Last WQE Reached when it enters the error state, once,
  // after flushing what it had (not for every later post, which flush_qp also completes).
  if (qp.init_.srq) raise_event(AsyncEventType::kQpLastWqeReached, qp.qpn());
}

void Engine::send_queue_error(Qp& qp) {
  if (qp.type() == QpType::kRc) {
    qp_error(qp);
    return;
  }
  const QpState st = qp.attr_.qp_state;
  if (st != QpState::kRts && st != QpState::kSqd) return;  // already SQE or ERR
  set_state(qp, QpState::kSqe);
  timers_.cancel(qp.cc_.pace);
  flush_sq(qp);
}

void Engine::flush_sq(Qp& qp) {
  // Each slot is retired before its completion is pushed (see comp_complete_head).
  const uint32_t prod = qp.sq_.prod_acquire();
  for (uint32_t i = qp.snd_.head; i != prod; ++i) {
    Cqe c;
    c.wr_id = qp.sq_.at<SendWqe>(i)->wr_id;
    c.status = WcStatus::kWrFlushErr;
    c.qp_num = qp.qpn();
    qp.sq_.retire(i + 1);
    push_cqe(qp.init_.send_cq, c, false, nullptr);
  }
  qp.snd_.head = qp.snd_.send = qp.snd_.tail = prod;
  qp.snd_.offset = 0;
  qp.snd_.rd_atomic = 0;
}

// Completes every outstanding and posted work request with WR_FLUSH_ERR (IBA 10.3.1.7: in the
// error state, WRs complete in error whether signalled or not).
void Engine::flush_qp(Qp& qp) {
  flush_sq(qp);
  auto flush_recv = [&](uint64_t wr_id) {
    Cqe c;
    c.wr_id = wr_id;
    c.status = WcStatus::kWrFlushErr;
    c.opcode = WcOpcode::kRecv;
    c.qp_num = qp.qpn();
    push_cqe(qp.init_.recv_cq, c, false, nullptr);
  };
  if (qp.rcv_.have_wqe) {
    flush_recv(qp.rcv_.wqe()->wr_id);
    qp.rcv_.have_wqe = false;
  }
  if (!qp.init_.srq) {
    const uint32_t rprod = qp.rq_.prod_acquire();
    for (uint32_t i = qp.rq_.cons_local(); i != rprod; ++i) {
      const uint64_t wr_id = qp.rq_.at<RecvWqe>(i)->wr_id;
      qp.rq_.retire(i + 1);
      flush_recv(wr_id);
    }
  }
  qp.rcv_.in_msg = Qp::Recv::kNone;
  qp.rcv_.out_head = qp.rcv_.out_tail = 0;
}

}  // namespace roce
