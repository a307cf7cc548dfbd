// The datapath verbs: post_send / post_recv / post_srq_recv, poll_cq and the ibv_cq_ex polling
// functions, CQ arming and completion-channel events. These touch only the queue ends the
// stack gives applications (stack/OWNERSHIP.md): no engine call, no allocation, no lock beyond
// the one spinlock per queue end that serialises concurrent callers.
#include <sched.h>
#include <time.h>

#include <cstring>

#include "verbs_shim/shim.h"

namespace roce::verbs {

// Sge is ibv_sge, field for field: scatter/gather lists pass through without a copy.
static_assert(sizeof(Sge) == sizeof(ibv_sge));
static_assert(offsetof(ibv_sge, addr) == 0 && offsetof(ibv_sge, length) == 8 &&
              offsetof(ibv_sge, lkey) == 12);

namespace {

constexpr uint32_t kBatch = 16;  // work requests converted per post_send_list call

// Fills `out` from `wr` for `qp`; 0 or EINVAL (a UD address handle missing or of another
// protection domain than the QP's, as rdmavt refuses it).
int to_send_wr(const ibv_send_wr* wr, const ibv_qp* qp, SendWr* out) {
  const uint32_t opcode = enum_bits(wr->opcode);
  if (wr->num_sge < 0 || opcode > IBV_WR_SEND_WITH_INV) return EINVAL;
  out->wr_id = wr->wr_id;
  out->sg_list = reinterpret_cast<const Sge*>(wr->sg_list);
  out->num_sge = static_cast<uint32_t>(wr->num_sge);
  out->opcode = static_cast<WrOpcode>(opcode);
  // FENCE, SIGNALED, SOLICITED, INLINE; IP_CSUM concerns raw packet QPs only.
  out->send_flags = static_cast<uint8_t>(wr->send_flags & 0xF);
  out->imm_data = wr->imm_data;  // or invalidate_rkey: the same 32 bits
  if (qp->qp_type == IBV_QPT_UD) {
    if (!wr->wr.ud.ah || wr->wr.ud.ah->pd != qp->pd) return EINVAL;
    out->ah = to_ah(wr->wr.ud.ah)->id;
    out->remote_qpn = wr->wr.ud.remote_qpn;
    out->remote_qkey = wr->wr.ud.remote_qkey;
    out->remote_addr = 0;
    out->rkey = 0;
    out->compare_add = out->swap = 0;
  } else if (opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    out->remote_addr = wr->wr.atomic.remote_addr;
    out->rkey = wr->wr.atomic.rkey;
    out->compare_add = wr->wr.atomic.compare_add;
    out->swap = wr->wr.atomic.swap;
    out->ah = out->remote_qpn = out->remote_qkey = 0;
  } else {
    out->remote_addr = wr->wr.rdma.remote_addr;
    out->rkey = wr->wr.rdma.rkey;
    out->compare_add = out->swap = 0;
    out->ah = out->remote_qpn = out->remote_qkey = 0;
  }
  return 0;
}

inline void to_wc(const Cqe& c, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = static_cast<ibv_wc_status>(c.status);
  wc->opcode = static_cast<ibv_wc_opcode>(c.opcode);
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  wc->imm_data = c.imm_data;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = c.pkey_index;
  wc->slid = 0;
  wc->sl = c.sl;
  wc->dlid_path_bits = 0;
}

uint64_t now_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// --- ibv_cq_ex polling: the lock is held from a successful start_poll to end_poll ---

bool take_one(ShimCq* cq) {
  if (cq->q->poll(&cq->cur, 1) != 1) return false;
  cq->cq.wr_id = cq->cur.wr_id;
  cq->cq.status = static_cast<ibv_wc_status>(cq->cur.status);
  if (cq->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) cq->cur_ts = now_ns(CLOCK_MONOTONIC);
  return true;
}

// Takes from the CQ (under its poll_lock). In inline mode the application's polling is what
// runs the engine, when the CQ has nothing for it (as the native API's loops do): completions
// already there go back first. A poll of the engine between a completion and the application's
// answer to it sends that poll's ACK in a burst of its own ahead of the answer; a ping-pong that
// waits for its send completion and then polls the receive CQ did exactly that (two tx bursts
// per message instead of one: 1.53 against 1.31 us native for an 8-byte send_lat).
template <typename Take>
auto take_or_drive(ShimCq* cq, Take take) {
  auto got = take();
  if (!got && cq->inline_mode && cq->runner->poll()) got = take();
  return got;
}

int cqx_start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (forked_child()) return refuse_in_forked_child();
  if (attr && attr->comp_mask) return EINVAL;
  ShimCq* cq = to_cq(c);
  cq->poll_lock.lock();
  if (!take_or_drive(cq, [cq] { return take_one(cq); })) {
    cq->poll_lock.unlock();  // ENOENT: the application does not call end_poll
    return ENOENT;
  }
  return 0;
}
int cqx_next_poll(ibv_cq_ex* c) { return take_one(to_cq(c)) ? 0 : ENOENT; }
void cqx_end_poll(ibv_cq_ex* c) { to_cq(c)->poll_lock.unlock(); }
ibv_wc_opcode cqx_read_opcode(ibv_cq_ex* c) {
  return static_cast<ibv_wc_opcode>(to_cq(c)->cur.opcode);
}
uint32_t cqx_read_vendor_err(ibv_cq_ex* c) { return to_cq(c)->cur.vendor_err; }
uint32_t cqx_read_byte_len(ibv_cq_ex* c) { return to_cq(c)->cur.byte_len; }
__be32 cqx_read_imm_data(ibv_cq_ex* c) { return to_cq(c)->cur.imm_data; }
uint32_t cqx_read_qp_num(ibv_cq_ex* c) { return to_cq(c)->cur.qp_num; }
uint32_t cqx_read_src_qp(ibv_cq_ex* c) { return to_cq(c)->cur.src_qp; }
unsigned int cqx_read_wc_flags(ibv_cq_ex* c) { return to_cq(c)->cur.wc_flags; }
uint32_t cqx_read_slid(ibv_cq_ex*) { return 0; }
uint8_t cqx_read_sl(ibv_cq_ex* c) { return to_cq(c)->cur.sl; }
uint8_t cqx_read_dlid_path_bits(ibv_cq_ex*) { return 0; }
uint64_t cqx_read_completion_ts(ibv_cq_ex* c) { return to_cq(c)->cur_ts; }
uint64_t cqx_read_completion_wallclock_ns(ibv_cq_ex*) { return now_ns(CLOCK_REALTIME); }
uint16_t cqx_read_cvlan(ibv_cq_ex*) { return 0; }
uint32_t cqx_read_flow_tag(ibv_cq_ex*) { return 0; }
void cqx_read_tm_info(ibv_cq_ex*, ibv_wc_tm_info* info) { std::memset(info, 0, sizeof *info); }

}  // namespace

// The engine retires a WQE's slot before its completion becomes visible, so an application
// that saw a completion can post into that slot at once (max_send_wr = 1 programs do).
int post_send_wrs(Qp* q, const SendWr* wrs, uint32_t n, uint32_t* bad) {
  uint32_t b = 0;
  const int rc = q->post_send_list(wrs, n, &b);
  if (rc) *bad = b;
  return rc;
}

void install_cq_ex_ops(ShimCq* cq) {
  ibv_cq_ex& c = cq->cq;
  c.start_poll = &cqx_start_poll;
  c.next_poll = &cqx_next_poll;
  c.end_poll = &cqx_end_poll;
  c.read_opcode = &cqx_read_opcode;
  c.read_vendor_err = &cqx_read_vendor_err;
  c.read_byte_len = &cqx_read_byte_len;
  c.read_imm_data = &cqx_read_imm_data;
  c.read_qp_num = &cqx_read_qp_num;
  c.read_src_qp = &cqx_read_src_qp;
  c.read_wc_flags = &cqx_read_wc_flags;
  c.read_slid = &cqx_read_slid;
  c.read_sl = &cqx_read_sl;
  c.read_dlid_path_bits = &cqx_read_dlid_path_bits;
  c.read_completion_ts = &cqx_read_completion_ts;
  c.read_cvlan = &cqx_read_cvlan;
  c.read_flow_tag = &cqx_read_flow_tag;
  c.read_tm_info = &cqx_read_tm_info;
  c.read_completion_wallclock_ns = &cqx_read_completion_wallclock_ns;
}

namespace {
// A fork() child posts nothing (shim.h): the whole list is refused.
template <typename Wr>
int refuse_posts(Wr* wr, Wr** bad_wr) {
  if (bad_wr) *bad_wr = wr;
  return refuse_in_forked_child();
}
}  // namespace

int op_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  ShimQp* qp = to_qp(ibqp);
  if (forked_child()) return refuse_posts(wr, bad_wr);
  if (wr && !wr->next) {  // one work request: no batch array to initialise
    SendWr one;
    int rc = to_send_wr(wr, ibqp, &one);
    if (!rc) {
      qp->send_lock.lock();
      rc = qp->q->post_send(one);
      qp->send_lock.unlock();
    }
    if (rc && bad_wr) *bad_wr = wr;
    return rc;
  }
  SendWr batch[kBatch];
  ibv_send_wr* origin[kBatch];
  int rc = 0;
  qp->send_lock.lock();
  while (wr && !rc) {
    uint32_t n = 0;
    for (; wr && n < kBatch; wr = wr->next) {
      rc = to_send_wr(wr, ibqp, &batch[n]);
      if (rc) break;
      origin[n++] = wr;
    }
    if (n) {
      uint32_t bad = 0;
      if (int e = post_send_wrs(qp->q, batch, n, &bad)) {
        rc = e;
        wr = origin[bad];
        break;
      }
    }
  }
  qp->send_lock.unlock();
  if (rc && bad_wr) *bad_wr = wr;
  return rc;
}

int op_post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  ShimQp* qp = to_qp(ibqp);
  if (forked_child()) return refuse_posts(wr, bad_wr);
  int rc = 0;
  qp->recv_lock.lock();
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0) {
      rc = EINVAL;
      break;
    }
    rc = qp->q->post_recv(RecvWr{wr->wr_id, reinterpret_cast<const Sge*>(wr->sg_list),
                                 static_cast<uint32_t>(wr->num_sge)});
    if (rc) break;
  }
  qp->recv_lock.unlock();
  if (rc && bad_wr) *bad_wr = wr;
  return rc;
}

int op_post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  ShimSrq* srq = to_srq(ibsrq);
  if (forked_child()) return refuse_posts(wr, bad_wr);
  int rc = 0;
  srq->post_lock.lock();
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0) {
      rc = EINVAL;
      break;
    }
    rc = srq->q->post_recv(RecvWr{wr->wr_id, reinterpret_cast<const Sge*>(wr->sg_list),
                                  static_cast<uint32_t>(wr->num_sge)});
    if (rc) break;
  }
  srq->post_lock.unlock();
  if (rc && bad_wr) *bad_wr = wr;
  return rc;
}

int op_poll_cq(ibv_cq* ibcq, int num_entries, ibv_wc* wc) {
  ShimCq* cq = to_cq(ibcq);
  if (forked_child()) return -refuse_in_forked_child();
  if (num_entries <= 0) return 0;
  cq->poll_lock.lock();
  const int total = take_or_drive(
      cq, [&] { return cq->q->poll_each(num_entries, [&wc](const Cqe& c) { to_wc(c, wc++); }); });
  // An application spinning on an empty CQ shares its CPU with the thread that would fill it
  // when the machine has fewer cores than busy threads (two processes on two cores:
  // milliseconds per completion): in threaded mode the engine thread, in either mode the peer
  // process that answers (MPI ranks, ping-pongs on one machine). Every kYieldAfter empty polls
  // it lets the scheduler run something else; with a core to spare, sched_yield returns at
  // once. In threaded mode it first polls the engine itself if the engine thread is not polling
  // right now (assist); in inline mode each empty poll above did.
  constexpr uint32_t kYieldAfter = 64;
  const bool yield = total == 0 && ++cq->empty_polls >= kYieldAfter;
  if (total || yield) cq->empty_polls = 0;
  cq->poll_lock.unlock();
  if (yield && (cq->inline_mode || !cq->runner->assist())) sched_yield();
  return total;
}

int op_req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  ShimCq* cq = to_cq(ibcq);
  if (forked_child()) return refuse_in_forked_child();
  cq->q->arm(solicited_only != 0);  // fenced: a later poll or the engine's push sees it
  // Inline mode: the application may now wait on the channel instead of polling; the event
  // pump drives the engine meanwhile (EventPump), starting now.
  if (cq->inline_mode && cq->channel) cq->runner->kick_standby();
  return 0;
}

}  // namespace roce::verbs

using namespace roce;
using namespace roce::verbs;

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  if (forked_child()) {  // the channel's fd is shared with the parent: do not take its events
    errno = refuse_in_forked_child();
    return -1;
  }
  ShimCq* c = nullptr;
  ShimContext* ctx = to_channel(channel)->ctx;
  // Blocks unless the application set O_NONBLOCK (then EAGAIN). The delivery is counted while
  // the channel is locked: ibv_destroy_cq purges the channel first, so it either removed this
  // event or waits for its acknowledgement. In inline mode nothing polls the engine while this
  // thread waits but the event pump: it is told (a sleeping pump polls at once).
  const int rc = to_channel(channel)->events.take(
      &c,
      [](ShimCq* taken) {
        pthread_mutex_lock(&taken->cq.mutex);
        ++taken->comp_events_delivered;
        pthread_mutex_unlock(&taken->cq.mutex);
      },
      [ctx] {
        if (ctx->inline_mode) ctx->runner->kick_standby();
      });
  if (rc) {
    errno = rc;
    return -1;
  }
  *cq = reinterpret_cast<ibv_cq*>(&c->cq);
  *cq_context = c->cq.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (!cq) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

// The verbs of this file that also exist at IBVERBS_1.0 (compat_1_0.cc).
ROCE_DEFAULT_VERSION_1_1(ibv_ack_cq_events);
ROCE_DEFAULT_VERSION_1_1(ibv_get_cq_event);
