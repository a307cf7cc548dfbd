#include "sim_host.h"

#include <limits>

#include "stack/core/connect.h"

namespace roce::test {

SimHost::SimHost(sim::SimNetwork& net, uint8_t id, const HostOptions& o) : id_(id) {
  port_ = net.add_port(Mac{0x02, 0, 0, 0, 0, id}, o.max_frame);
  EngineConfig cfg;
  cfg.mac = port_->mac();
  cfg.gids = {ipv6_gid(id), ipv4_gid(10, 0, 0, id)};
  cfg.max_mtu = o.max_mtu;
  cfg.seed = 1000 + id;
  cfg.max_inflight_psns = o.max_inflight_psns;
  cfg.port_inflight_psns = o.port_inflight_psns;
  engine_ = std::make_unique<Engine>(cfg, port_, &net.clock());
  mem_.resize(o.mem_bytes);
  pd_ = engine_->alloc_pd();
  const uint32_t acc =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  engine_->reg_mr(pd_, mem_.data(), mem_.size(), reinterpret_cast<uint64_t>(mem_.data()), acc,
                  &key_);
  int err = 0;
  cq_ = engine_->create_cq(65536, &err);
}

Qp* SimHost::create_rc(uint32_t depth, uint32_t sges, CompletionQueue* cq,
                       SharedReceiveQueue* srq) {
  QpInitAttr init;
  init.type = QpType::kRc;
  init.pd = pd_;
  init.send_cq = cq ? cq : cq_;
  init.recv_cq = cq ? cq : cq_;
  init.srq = srq;
  init.cap.max_send_wr = depth;
  init.cap.max_recv_wr = depth;
  init.cap.max_send_sge = sges;
  init.cap.max_recv_sge = sges;
  init.cap.max_inline_data = 256;
  int err = 0;
  return engine_->create_qp(init, &err);
}

int SimHost::poll(std::vector<Cqe>& out, CompletionQueue* cq) {
  Cqe buf[64];
  int total = 0;
  for (;;) {
    int n = (cq ? cq : cq_)->poll(buf, 64);
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
    total += n;
  }
  return total;
}

static bool fail(std::string* err, const std::string& what, int rc) {
  if (err) *err = what + " failed: errno " + std::to_string(rc);
  return false;
}

int connect_qp(Engine& e, Qp* q, const Gid& dgid, uint32_t dest_qpn, uint32_t sq_psn,
               uint32_t rq_psn, const ConnectOptions& o) {
  ConnectParams p;
  p.access = o.access;
  p.ah.is_global = true;
  p.ah.dgid = dgid;
  p.ah.sgid_index = static_cast<uint8_t>(o.gid_index);
  p.ah.hop_limit = 64;
  p.mtu = o.mtu;
  p.dest_qpn = dest_qpn;
  p.rq_psn = rq_psn;
  p.max_dest_rd_atomic = o.max_rd_atomic;
  p.min_rnr_timer = o.min_rnr_timer;
  p.sq_psn = sq_psn;
  p.timeout = o.timeout;
  p.retry_cnt = o.retry_cnt;
  p.rnr_retry = o.rnr_retry;
  p.max_rd_atomic = o.max_rd_atomic;
  return roce::connect_qp(e, q, p);
}

static int bring_up(SimHost& self, Qp* q, SimHost& peer, Qp* pq, uint32_t my_psn, uint32_t peer_psn,
                    const ConnectOptions& o) {
  Engine& e = self.engine();
  // Static neighbour entries, as a configured testbed would have; none for the port's own
  // addresses (two QPs of one port: loopback).
  if (&self != &peer) {
    e.neighbors().add_static(peer.gid(0), peer.port().mac());
    e.neighbors().add_static(peer.gid(1), peer.port().mac());
  }
  return connect_qp(e, q, peer.gid(o.gid_index), pq->qpn(), my_psn, peer_psn, o);
}

bool connect_rc(SimHost& a, Qp* qa, SimHost& b, Qp* qb, const ConnectOptions& o, std::string* err) {
  if (!qa || !qb) return fail(err, "create_qp", ENOMEM);
  if (int rc = bring_up(a, qa, b, qb, o.psn_a, o.psn_b, o)) return fail(err, "host a modify", rc);
  if (int rc = bring_up(b, qb, a, qa, o.psn_b, o.psn_a, o)) return fail(err, "host b modify", rc);
  return true;
}

void add_engines(sim::SimNetwork& net, std::vector<SimHost*> hosts) {
  for (SimHost* h : hosts) {
    Engine* e = &h->engine();
    net.add_actor({[e] { return e->poll(); }, [e] { return e->next_timer_ns(); },
                   [e] { return e->has_pending_output(); }});
  }
}

}  // namespace roce::test
