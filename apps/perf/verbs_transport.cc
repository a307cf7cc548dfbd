#include "apps/perf/verbs_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>

#include <chrono>

#include <cerrno>
#include <cstring>

namespace roce::perf {

namespace {

std::string errno_text(int rc) {
  return std::string(std::strerror(rc)) + " (" + std::to_string(rc) + ")";
}

// The loops' values are the stack's, whose enums equal verbs.h's (verbs_shim/abi_checks.cc):
// access flags, MTUs and completion statuses pass through; opcodes are mapped.
constexpr ibv_wr_opcode kOpcode[] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
                                     IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP};

constexpr int kStash = 16;

}  // namespace

std::unique_ptr<VerbsTransport> VerbsTransport::open(const std::string& name, bool inline_engine,
                                                     std::string* err) {
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (!list) {
    *err = "ibv_get_device_list: " + errno_text(errno);
    return nullptr;
  }
  ibv_device* dev = nullptr;
  std::string names;
  for (int i = 0; i < num; ++i) {
    const char* n = ibv_get_device_name(list[i]);
    names += (names.empty() ? "" : " ") + std::string(n);
    if (!dev && (name.empty() || name == n)) dev = list[i];
  }
  if (!dev) {
    *err = num == 0 ? "no verbs device (configure one: --device / --config, ROCE_DEVICE / "
                      "ROCE_CONFIG)"
                    : "ib-dev: no verbs device '" + name + "' (devices: " + names + ")";
    ibv_free_device_list(list);
    return nullptr;
  }
  std::unique_ptr<VerbsTransport> t(new VerbsTransport());
  t->info_.name = ibv_get_device_name(dev);
  t->ctx_ = ibv_open_device(dev);  // starts the stack instance
  const int open_errno = errno;
  ibv_free_device_list(list);
  if (!t->ctx_) {
    *err = "ibv_open_device(" + t->info_.name + "): " + errno_text(open_errno);
    return nullptr;
  }
  t->inline_ = inline_engine;
  ibv_device_attr da{};
  if (int rc = ibv_query_device(t->ctx_, &da)) {
    *err = "ibv_query_device: " + errno_text(rc);
    return nullptr;
  }
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(t->ctx_, 1, &pa)) {
    *err = "ibv_query_port: " + errno_text(rc);
    return nullptr;
  }
  t->info_.active_mtu = static_cast<Mtu>(pa.active_mtu);
  t->info_.max_rd_atomic = static_cast<uint32_t>(da.max_qp_rd_atom);
  t->info_.max_qp_wr = static_cast<uint32_t>(da.max_qp_wr);
  t->info_.num_comp_vectors = t->ctx_->num_comp_vectors;
  // The GID table up to its first empty entry (0: link-local, 1: IPv4-mapped, then IPv6).
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(t->ctx_, 1, i, &g)) break;
    Gid gid;
    std::memcpy(gid.data(), g.raw, gid.size());
    if (gid == Gid{}) break;
    t->info_.gids.push_back(gid);
  }
  t->stash_.assign(kStash, ibv_wc{});
  t->info_.max_inline = t->probe_max_inline();
  return t;
}

VerbsTransport::~VerbsTransport() { close(); }

// Verbs has no query for the largest inline size: ask for a QP with perftest's largest and
// take what create_qp grants, or halve until one is created.
uint32_t VerbsTransport::probe_max_inline() {
  std::string err;
  if (!alloc_pd(&err)) return 0;
  ibv_cq* cq = ibv_create_cq(ctx_, 2, nullptr, nullptr, 0);
  if (!cq) return 0;
  uint32_t granted = 0;
  for (uint32_t want = 1024; want >= 16 && granted == 0; want /= 2) {
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = want;
    if (ibv_qp* qp = ibv_create_qp(pd_, &ia)) {
      granted = ia.cap.max_inline_data;
      ibv_destroy_qp(qp);
    }
  }
  ibv_destroy_cq(cq);
  return granted;
}

bool VerbsTransport::alloc_pd(std::string* err) {
  if (pd_) return true;
  pd_ = ibv_alloc_pd(ctx_);
  if (!pd_) {
    *err = "ibv_alloc_pd: " + errno_text(errno);
    return false;
  }
  return true;
}

// The shim's engine keeps running until the device closes: verbs has no call that stops it.
void VerbsTransport::quiesce() {
  if (!ctx_) return;
  for (ibv_qp* q : qps_) ibv_destroy_qp(q);
  if (srq_) ibv_destroy_srq(srq_);
  srq_ = nullptr;
  for (const UdDest& d : ud_dest_) {
    if (d.ah) ibv_destroy_ah(d.ah);
  }
  ud_dest_.clear();
  for (ibv_mr* m : mrs_) ibv_dereg_mr(m);
  if (send_cq_) ibv_destroy_cq(send_cq_);
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  channel_ = nullptr;
  qps_.clear();
  mrs_.clear();
  send_cq_ = recv_cq_ = nullptr;
  pd_ = nullptr;
}

void VerbsTransport::close() {
  if (!ctx_) return;
  quiesce();
  ibv_close_device(ctx_);  // the last context stops the instance (engine, port, capture)
  ctx_ = nullptr;
}

bool VerbsTransport::create_qps(const QpSetup& s, std::string* err) {
  const uint32_t list = s.max_post_list ? s.max_post_list : 1;
  wr_scratch_.assign(list, ibv_send_wr{});
  sge_scratch_.assign(list, ibv_sge{});
  rwr_scratch_.assign(1, ibv_recv_wr{});
  wc_scratch_.assign(64, ibv_wc{});
  if (!alloc_pd(err)) return false;
  if (s.events) {
    channel_ = ibv_create_comp_channel(ctx_);
    if (!channel_) {
      *err = "cannot create a completion channel: " + errno_text(errno);
      return false;
    }
    // Waits poll() the descriptor with a timeout; ibv_get_cq_event must not block then.
    const int fl = fcntl(channel_->fd, F_GETFL);
    if (fl < 0 || fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
      *err = "cannot make the completion channel non-blocking: " + errno_text(errno);
      return false;
    }
  }
  send_cq_ =
      ibv_create_cq(ctx_, static_cast<int>(s.send_cq_depth), nullptr, channel_, s.comp_vector);
  if (!send_cq_) {
    *err = "cannot create a CQ of " + std::to_string(s.send_cq_depth) + ": " + errno_text(errno);
    return false;
  }
  if (s.recv_cq_depth) {
    recv_cq_ =
        ibv_create_cq(ctx_, static_cast<int>(s.recv_cq_depth), nullptr, channel_, s.comp_vector);
    if (!recv_cq_) {
      *err = "cannot create a CQ of " + std::to_string(s.recv_cq_depth) + ": " + errno_text(errno);
      return false;
    }
  }
  if (s.srq_depth) {
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = s.srq_depth;
    sa.attr.max_sge = 1;
    srq_ = ibv_create_srq(pd_, &sa);
    if (!srq_) {
      *err = "cannot create an SRQ of " + std::to_string(s.srq_depth) + ": " + errno_text(errno);
      return false;
    }
  }
  type_ = s.type == QpType::kUd ? IBV_QPT_UD : s.type == QpType::kUc ? IBV_QPT_UC : IBV_QPT_RC;
  ud_dest_.assign(s.num_qps, UdDest{});
  for (uint32_t i = 0; i < s.num_qps; ++i) {
    ibv_qp_init_attr ia{};
    ia.send_cq = send_cq_;
    ia.recv_cq = recv_cq_ ? recv_cq_ : send_cq_;
    ia.srq = srq_;
    ia.qp_type = type_;
    ia.sq_sig_all = 0;
    ia.cap.max_send_wr = s.max_send_wr;
    ia.cap.max_recv_wr = s.max_recv_wr;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = s.max_inline;
    ibv_qp* q = ibv_create_qp(pd_, &ia);
    if (!q) {
      *err = "cannot create QP " + std::to_string(i) + ": " + errno_text(errno);
      return false;
    }
    qps_.push_back(q);
  }
  return true;
}

uint32_t VerbsTransport::qpn(uint32_t qp) const { return qps_[qp]->qp_num; }

bool VerbsTransport::reg_mr(void* addr, uint64_t length, uint32_t access, MemoryRegion* out,
                            std::string* err) {
  if (!alloc_pd(err)) return false;
  ibv_mr* mr = ibv_reg_mr(pd_, addr, length, static_cast<int>(access));
  if (!mr) {
    *err = "cannot register " + std::to_string(length) + " bytes: " + errno_text(errno);
    return false;
  }
  mrs_.push_back(mr);
  out->addr = static_cast<uint8_t*>(addr);
  out->length = length;
  out->lkey = mr->lkey;
  out->rkey = mr->rkey;
  return true;
}

bool VerbsTransport::connect(uint32_t qp, const ConnectAttr& a, std::string* err) {
  ibv_qp* q = qps_[qp];
  const bool rc_qp = type_ == IBV_QPT_RC, ud = type_ == IBV_QPT_UD;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = 1;
  attr.qp_access_flags = a.access;
  attr.qkey = a.qkey;
  const char* step = "INIT";
  int rc = ibv_modify_qp(
      q, &attr,
      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
  ibv_ah_attr av{};
  av.is_global = 1;
  std::memcpy(av.grh.dgid.raw, a.dgid.data(), a.dgid.size());
  av.grh.sgid_index = a.sgid_index;
  av.grh.hop_limit = a.hop_limit;
  av.grh.traffic_class = a.traffic_class;
  av.sl = a.sl;
  av.port_num = 1;
  if (!rc) {
    step = "RTR";
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    int mask = IBV_QP_STATE;
    if (!ud) {
      attr.path_mtu = static_cast<ibv_mtu>(a.path_mtu);
      attr.dest_qp_num = a.dest_qpn;
      attr.rq_psn = a.rq_psn;
      attr.ah_attr = av;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    }
    if (rc_qp) {
      attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
      attr.min_rnr_timer = a.min_rnr_timer;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    rc = ibv_modify_qp(q, &attr, mask);
  }
  if (!rc && a.to_rts) {
    step = "RTS";
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = a.sq_psn;
    int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (rc_qp) {
      attr.timeout = a.timeout;
      attr.retry_cnt = a.retry_cnt;
      attr.rnr_retry = a.rnr_retry;
      attr.max_rd_atomic = a.max_rd_atomic;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    if (a.rate_limit_kbps) {
      attr.rate_limit = a.rate_limit_kbps;
      mask |= IBV_QP_RATE_LIMIT;
    }
    rc = ibv_modify_qp(q, &attr, mask);
  }
  if (rc) {
    *err = "cannot move QP " + std::to_string(q->qp_num) + " to " + step + ": " + errno_text(rc);
    return false;
  }
  if (ud && a.to_rts) {
    UdDest& d = ud_dest_[qp];
    d.ah = ibv_create_ah(pd_, &av);
    if (!d.ah) {
      *err = "cannot create an address handle for QP " + std::to_string(q->qp_num) + ": " +
             errno_text(errno);
      return false;
    }
    d.qpn = a.dest_qpn;
    d.qkey = a.qkey;
  }
  return true;
}

int VerbsTransport::post_send(uint32_t qp, const WorkRequest* wrs, uint32_t n) {
  if (n == 0) return 0;
  if (n > wr_scratch_.size()) return EINVAL;
  for (uint32_t i = 0; i < n; ++i) {
    const WorkRequest& w = wrs[i];
    sge_scratch_[i] = ibv_sge{w.local_addr, w.length, w.lkey};
    ibv_send_wr& s = wr_scratch_[i];
    s.wr_id = w.wr_id;
    s.next = i + 1 < n ? &wr_scratch_[i + 1] : nullptr;
    s.sg_list = &sge_scratch_[i];
    s.num_sge = w.length ? 1 : 0;
    s.opcode = kOpcode[static_cast<unsigned>(w.op)];
    s.send_flags = (w.signaled ? unsigned{IBV_SEND_SIGNALED} : 0u) |
                   (w.inline_data ? unsigned{IBV_SEND_INLINE} : 0u);
    if (w.op == Op::kFetchAdd || w.op == Op::kCmpSwap) {
      s.wr.atomic.remote_addr = w.remote_addr;
      s.wr.atomic.rkey = w.rkey;
      s.wr.atomic.compare_add = w.compare_add;
      s.wr.atomic.swap = w.swap;
    } else if (type_ == IBV_QPT_UD) {
      const UdDest& d = ud_dest_[qp];
      s.wr.ud.ah = d.ah;
      s.wr.ud.remote_qpn = d.qpn;
      s.wr.ud.remote_qkey = d.qkey;
    } else {
      s.wr.rdma.remote_addr = w.remote_addr;
      s.wr.rdma.rkey = w.rkey;
    }
  }
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qps_[qp], wr_scratch_.data(), &bad);
}

int VerbsTransport::post_recv(uint32_t qp, const RecvRequest* wrs, uint32_t n) {
  ibv_recv_wr& r = rwr_scratch_[0];
  for (uint32_t i = 0; i < n; ++i) {
    ibv_sge sge{wrs[i].addr, wrs[i].length, wrs[i].lkey};
    r.wr_id = wrs[i].wr_id;
    r.next = nullptr;
    r.sg_list = &sge;
    r.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int rc = srq_ ? ibv_post_srq_recv(srq_, &r, &bad) : ibv_post_recv(qps_[qp], &r, &bad)) {
      return rc;
    }
  }
  return 0;
}

namespace {

inline Completion to_completion(const ibv_wc& w) {
  return Completion{w.wr_id, static_cast<WcStatus>(w.status), w.byte_len, w.qp_num};
}

}  // namespace

int VerbsTransport::poll_send(Completion* out, int n) {
  polled_ = true;
  if (stash_len_) {
    int got = 0;
    for (; got < n && stash_len_; ++got, ++stash_head_, --stash_len_) {
      out[got] = to_completion(stash_[static_cast<size_t>(stash_head_)]);
    }
    return got;
  }
  if (n > static_cast<int>(wc_scratch_.size())) n = static_cast<int>(wc_scratch_.size());
  const int got = ibv_poll_cq(send_cq_, n, wc_scratch_.data());
  for (int i = 0; i < got; ++i) out[i] = to_completion(wc_scratch_[static_cast<size_t>(i)]);
  return got < 0 ? 0 : got;
}

int VerbsTransport::poll_recv(Completion* out, int n) {
  if (!recv_cq_) return poll_send(out, n);
  polled_ = true;
  if (rstash_full_ && n > 0) {
    rstash_full_ = false;
    out[0] = to_completion(rstash_);
    return 1;
  }
  if (n > static_cast<int>(wc_scratch_.size())) n = static_cast<int>(wc_scratch_.size());
  const int got = ibv_poll_cq(recv_cq_, n, wc_scratch_.data());
  for (int i = 0; i < got; ++i) out[i] = to_completion(wc_scratch_[static_cast<size_t>(i)]);
  return got < 0 ? 0 : got;
}

// Inline mode: polling a CQ is what runs the engine (the shim has no other call for it). A
// loop that polled a CQ since the last progress() has driven the engine already: nothing to
// do, so the engine runs once per pass as with the native transport. A wait that polls no CQ
// (write_lat watches a byte of its buffer) gets a poll of the send CQ, whose completions are
// kept for the next poll_send.
void VerbsTransport::progress() {
  if (!inline_ || !send_cq_) return;
  if (polled_) {
    polled_ = false;
    return;
  }
  if (stash_len_) return;
  const int got = ibv_poll_cq(send_cq_, kStash, stash_.data());
  stash_head_ = 0;
  stash_len_ = got < 0 ? 0 : got;
}

// As the native transport: with an engine thread, give the CPU away when a wait found nothing.
bool VerbsTransport::link_lost() const {
  ibv_port_attr pa;
  if (ibv_query_port(ctx_, 1, &pa) != 0) return false;  // no answer: nothing known to be lost
  return pa.state != IBV_PORT_ACTIVE && pa.state != IBV_PORT_ACTIVE_DEFER;
}

void VerbsTransport::relax() {
  if (!inline_) sched_yield();
}

bool VerbsTransport::enable_events(std::string* err) {
  if (!channel_) {
    *err = "the CQs were created without a completion channel";
    return false;
  }
  for (ibv_cq* cq : {send_cq_, recv_cq_}) {
    if (cq && ibv_req_notify_cq(cq, 0)) {
      *err = "ibv_req_notify_cq: " + errno_text(errno);
      return false;
    }
  }
  return true;
}

bool VerbsTransport::peek(unsigned cq) {
  if (cq == kRecvCq && recv_cq_) {
    if (!rstash_full_) rstash_full_ = ibv_poll_cq(recv_cq_, 1, &rstash_) == 1;
    return rstash_full_;
  }
  if (!stash_len_) {
    stash_head_ = 0;
    stash_len_ = ibv_poll_cq(send_cq_, 1, stash_.data()) == 1 ? 1 : 0;
  }
  return stash_len_ > 0;
}

// The verbs idiom, as in await_completion of the native transport: every CQ is armed or has
// an event not yet taken; take events (ack, re-arm) until a CQ asked for holds a completion.
int VerbsTransport::await_completion(unsigned cqs, double timeout_s, std::string* err) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (((cqs & kSendCq) && peek(kSendCq)) || ((cqs & kRecvCq) && peek(kRecvCq))) return 1;
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &cq_ctx) == 0) {
      ibv_ack_cq_events(cq, 1);
      if (ibv_req_notify_cq(cq, 0)) {
        *err = "ibv_req_notify_cq: " + errno_text(errno);
        return -1;
      }
      continue;
    }
    if (errno != EAGAIN) {
      *err = "ibv_get_cq_event: " + errno_text(errno);
      return -1;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    pollfd p{channel_->fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      *err = "waiting for a completion event: " + errno_text(errno);
      return -1;
    }
  }
}

std::string VerbsTransport::counters_text() {
  return " Counters: not available over the verbs API (use --transport native)\n";
}

}  // namespace roce::perf
