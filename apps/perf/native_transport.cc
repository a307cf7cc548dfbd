#include "apps/perf/native_transport.h"

#include "apps/perf/oob.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dpdk/device.h"
#include "stack/core/connect.h"
#include "stack/core/counters_format.h"

namespace roce::perf {

namespace {
std::string errno_text(int rc) {
  return std::string(std::strerror(rc)) + " (" + std::to_string(rc) + ")";
}
}  // namespace

std::unique_ptr<NativeTransport> NativeTransport::open(const DeviceConfig& cfg, std::string* err) {
  std::unique_ptr<NativeTransport> t(new NativeTransport());
  t->dev_ = dpdk::Device::open(cfg, err);
  if (!t->dev_) return nullptr;
  t->inline_ = cfg.inline_mode;
  t->info_.name = cfg.name;
  t->info_.gids = t->dev_->gids();
  t->info_.active_mtu = t->dev_->active_mtu();
  t->info_.max_inline = kMaxInlineData;
  t->info_.max_rd_atomic = kMaxRdAtomic;
  t->info_.max_qp_wr = kMaxQpWr;
  return t;
}

NativeTransport::~NativeTransport() {
  close();
  if (event_fd_ >= 0) ::close(event_fd_);
}

void NativeTransport::quiesce() {
  if (!dev_) return;
  dev_->runner().run([this] {
    Engine& e = dev_->engine();
    for (Qp* q : qps_) e.destroy_qp(q);
    if (srq_) e.destroy_srq(srq_);
    for (const UdDest& d : ud_dest_) {
      if (d.valid) e.destroy_ah(d.ah);
    }
    for (uint32_t k : mr_keys_) e.dereg_mr(k);
    if (send_cq_) e.destroy_cq(send_cq_);
    if (recv_cq_) e.destroy_cq(recv_cq_);
    if (have_pd_) e.dealloc_pd(pd_);
  });
  qps_.clear();
  ud_dest_.clear();
  mr_keys_.clear();
  send_cq_ = recv_cq_ = nullptr;
  srq_ = nullptr;
  have_pd_ = false;
  dev_->runner().stop();  // the engine thread, if any: nothing polls the port any more
}

void NativeTransport::close() {
  quiesce();
  dev_.reset();  // flushes the capture, stops the port
}

bool NativeTransport::create_qps(const QpSetup& s, std::string* err) {
  const uint32_t list = s.max_post_list ? s.max_post_list : 1;
  wr_scratch_.assign(list, SendWr{});
  sge_scratch_.assign(list, Sge{});
  cqe_scratch_.assign(64, Cqe{});
  type_ = s.type;
  ud_dest_.assign(s.num_qps, UdDest{});
  std::string why;
  const bool ok = dev_->runner().run([&] {
    Engine& e = dev_->engine();
    if (!have_pd_) {
      pd_ = e.alloc_pd();
      have_pd_ = true;
    }
    int rc = 0;
    send_cq_ = e.create_cq(s.send_cq_depth, &rc);
    if (!send_cq_) {
      why = "cannot create a CQ of " + std::to_string(s.send_cq_depth) + ": " + errno_text(rc);
      return false;
    }
    if (s.recv_cq_depth) {
      recv_cq_ = e.create_cq(s.recv_cq_depth, &rc);
      if (!recv_cq_) {
        why = "cannot create a CQ of " + std::to_string(s.recv_cq_depth) + ": " + errno_text(rc);
        return false;
      }
    }
    if (s.srq_depth) {
      srq_ = e.create_srq(pd_, s.srq_depth, 1, &rc);
      if (!srq_) {
        why = "cannot create an SRQ of " + std::to_string(s.srq_depth) + ": " + errno_text(rc);
        return false;
      }
    }
    for (uint32_t i = 0; i < s.num_qps; ++i) {
      QpInitAttr ia;
      ia.srq = srq_;
      ia.type = s.type;
      ia.pd = pd_;
      ia.send_cq = send_cq_;
      ia.recv_cq = recv_cq_ ? recv_cq_ : send_cq_;
      ia.cap.max_send_wr = s.max_send_wr;
      ia.cap.max_recv_wr = s.max_recv_wr;
      ia.cap.max_send_sge = 1;
      ia.cap.max_recv_sge = 1;
      ia.cap.max_inline_data = s.max_inline;
      Qp* q = e.create_qp(ia, &rc);
      if (!q) {
        why = "cannot create QP " + std::to_string(i) + ": " + errno_text(rc);
        return false;
      }
      qps_.push_back(q);
    }
    return true;
  });
  if (!ok) *err = why;
  return ok;
}

uint32_t NativeTransport::qpn(uint32_t qp) const { return qps_[qp]->qpn(); }

bool NativeTransport::reg_mr(void* addr, uint64_t length, uint32_t access, MemoryRegion* out,
                             std::string* err) {
  uint32_t key = 0;
  const int rc = dev_->runner().run([&] {
    Engine& e = dev_->engine();
    if (!have_pd_) {
      pd_ = e.alloc_pd();
      have_pd_ = true;
    }
    // IOVA = virtual address, as ibv_reg_mr does: the peer's perftest sends our VAs back.
    return e.reg_mr(pd_, addr, length, reinterpret_cast<uint64_t>(addr), access, &key);
  });
  if (rc) {
    *err = "cannot register " + std::to_string(length) + " bytes: " + errno_text(rc);
    return false;
  }
  mr_keys_.push_back(key);
  out->addr = static_cast<uint8_t*>(addr);
  out->length = length;
  out->lkey = key;
  out->rkey = key;
  return true;
}

bool NativeTransport::connect(uint32_t qp, const ConnectAttr& a, std::string* err) {
  Qp* q = qps_[qp];
  const char* step = "INIT";
  const bool ud = type_ == QpType::kUd;
  const int rc = dev_->runner().run([&] {
    Engine& e = dev_->engine();
    ConnectParams p;
    p.access = a.access;
    p.qkey = a.qkey;
    p.ah.is_global = true;
    p.ah.dgid = a.dgid;
    p.ah.sgid_index = a.sgid_index;
    p.ah.hop_limit = a.hop_limit;
    p.ah.traffic_class = a.traffic_class;
    p.ah.sl = a.sl;
    p.ah.port_num = 1;
    p.mtu = a.path_mtu;
    p.dest_qpn = a.dest_qpn;
    p.rq_psn = a.rq_psn;
    p.max_dest_rd_atomic = a.max_dest_rd_atomic;
    p.min_rnr_timer = a.min_rnr_timer;
    p.to_rts = a.to_rts;
    p.sq_psn = a.sq_psn;
    p.timeout = a.timeout;
    p.retry_cnt = a.retry_cnt;
    p.rnr_retry = a.rnr_retry;
    p.max_rd_atomic = a.max_rd_atomic;
    p.rate_limit_kbps = a.rate_limit_kbps;
    if (int r = connect_qp(e, q, p, &step)) return r;
    if (!a.to_rts || !ud) return 0;
    step = nullptr;  // the address handle
    UdDest& d = ud_dest_[qp];
    if (int r = e.create_ah(pd_, p.ah, &d.ah)) return r;
    d.qpn = a.dest_qpn;
    d.qkey = a.qkey;
    d.valid = true;
    return 0;
  });
  if (rc) {
    *err = step ? std::string("cannot move QP ") + std::to_string(q->qpn()) + " to " + step
                : "cannot create an address handle for QP " + std::to_string(q->qpn());
    *err += ": " + errno_text(rc);
    return false;
  }
  return true;
}

int NativeTransport::post_send(uint32_t qp, const WorkRequest* wrs, uint32_t n) {
  static constexpr WrOpcode kOpcode[] = {WrOpcode::kSend, WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead,
                                         WrOpcode::kAtomicFetchAndAdd, WrOpcode::kAtomicCmpAndSwp};
  if (n > wr_scratch_.size()) return EINVAL;
  for (uint32_t i = 0; i < n; ++i) {
    const WorkRequest& w = wrs[i];
    sge_scratch_[i] = Sge{w.local_addr, w.length, w.lkey};
    SendWr& s = wr_scratch_[i];
    s.wr_id = w.wr_id;
    s.sg_list = &sge_scratch_[i];
    s.num_sge = w.length ? 1 : 0;
    s.opcode = kOpcode[static_cast<unsigned>(w.op)];
    s.send_flags =
        static_cast<uint8_t>((w.signaled ? kSendSignaled : 0) | (w.inline_data ? kSendInline : 0));
    s.remote_addr = w.remote_addr;
    s.rkey = w.rkey;
    s.compare_add = w.compare_add;
    s.swap = w.swap;
    if (type_ == QpType::kUd) {
      const UdDest& d = ud_dest_[qp];
      s.ah = d.ah;
      s.remote_qpn = d.qpn;
      s.remote_qkey = d.qkey;
    }
  }
  if (n == 1) return qps_[qp]->post_send(wr_scratch_[0]);
  uint32_t bad = 0;
  return qps_[qp]->post_send_list(wr_scratch_.data(), n, &bad);
}

int NativeTransport::post_recv(uint32_t qp, const RecvRequest* wrs, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    Sge sge{wrs[i].addr, wrs[i].length, wrs[i].lkey};
    const RecvWr wr{wrs[i].wr_id, &sge, 1};
    if (int rc = srq_ ? srq_->post_recv(wr) : qps_[qp]->post_recv(wr)) return rc;
  }
  return 0;
}

int NativeTransport::poll_cq(CompletionQueue* cq, Completion* out, int n) {
  if (n > static_cast<int>(cqe_scratch_.size())) n = static_cast<int>(cqe_scratch_.size());
  const int got = cq->poll(cqe_scratch_.data(), n);
  for (int i = 0; i < got; ++i) {
    const Cqe& c = cqe_scratch_[static_cast<size_t>(i)];
    out[i] = Completion{c.wr_id, c.status, c.byte_len, c.qp_num};
  }
  return got;
}

int NativeTransport::poll_send(Completion* out, int n) { return poll_cq(send_cq_, out, n); }

int NativeTransport::poll_recv(Completion* out, int n) {
  return poll_cq(recv_cq_ ? recv_cq_ : send_cq_, out, n);
}

void NativeTransport::progress() {
  if (inline_) dev_->runner().poll();
}

void NativeTransport::relax() {
  if (!inline_) sched_yield();
}

bool NativeTransport::wait_link(double timeout_s, std::string* err) {
  // In slices, so that an interrupt ends the wait; no timeout when timeout_s is 0.
  const auto start = std::chrono::steady_clock::now();
  while (!dev_->wait_link_up(std::chrono::milliseconds(100))) {
    if (interrupted()) {
      *err = "interrupted";
      return false;
    }
    if (timeout_s > 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeout_s)) {
      *err = "the link of " + dev_->config().port + " did not come up within " +
             std::to_string(static_cast<int>(timeout_s)) + " s";
      return false;
    }
  }
  return true;
}

bool NativeTransport::link_lost() const { return dev_->link_lost(); }

void NativeTransport::on_notify(void* self, CompletionQueue* cq) {
  auto* t = static_cast<NativeTransport*>(self);
  t->fired_.fetch_or(cq == t->send_cq_ ? kSendCq : kRecvCq, std::memory_order_release);
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = write(t->event_fd_, &one, sizeof one);  // cannot overflow
}

bool NativeTransport::enable_events(std::string* err) {
  if (inline_) {
    *err = "completion events need the engine thread (the inline engine runs only when polled)";
    return false;
  }
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) {
    *err = std::string("eventfd: ") + std::strerror(errno);
    return false;
  }
  dev_->runner().run([this] {
    send_cq_->set_notify(&NativeTransport::on_notify, this);
    if (recv_cq_) recv_cq_->set_notify(&NativeTransport::on_notify, this);
  });
  send_cq_->arm(false);
  if (recv_cq_) recv_cq_->arm(false);
  return true;
}

int NativeTransport::await_completion(unsigned cqs, double timeout_s, std::string* err) {
  CompletionQueue* const recv = recv_cq_ ? recv_cq_ : send_cq_;
  const auto ready = [&] {
    return ((cqs & kSendCq) && send_cq_->ready()) || ((cqs & kRecvCq) && recv->ready());
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    // Every CQ is armed or has an event not yet taken (then it is re-armed below, before the
    // caller polls): a completion this check misses wakes the poll() below.
    if (ready()) return 1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    pollfd p{event_fd_, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno != EINTR) {
      *err = std::string("waiting for a completion event: ") + std::strerror(errno);
      return -1;
    }
    if (rc <= 0) continue;  // timed out (the deadline check returns) or interrupted
    uint64_t n = 0;
    [[maybe_unused]] const ssize_t r = read(event_fd_, &n, sizeof n);
    const unsigned fired = fired_.exchange(0, std::memory_order_acquire);
    if (fired & kSendCq) send_cq_->arm(false);
    if ((fired & kRecvCq) && recv_cq_) recv_cq_->arm(false);
  }
}

std::string NativeTransport::counters_text() { return dev_ ? dev_->counters_text() : ""; }

}  // namespace roce::perf
