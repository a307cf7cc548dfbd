#include "stack/sim/workload.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>

#include "stack/core/connect.h"
#include "stack/core/engine.h"

namespace roce::sim {

namespace {

bool is_atomic(WrOpcode o) {
  return o == WrOpcode::kAtomicCmpAndSwp || o == WrOpcode::kAtomicFetchAndAdd;
}
bool uses_recv(WrOpcode o) {
  return o == WrOpcode::kSend || o == WrOpcode::kSendWithImm || o == WrOpcode::kRdmaWriteWithImm;
}
const char* op_name(WrOpcode o) {
  switch (o) {
    case WrOpcode::kSend:
      return "SEND";
    case WrOpcode::kSendWithImm:
      return "SEND_IMM";
    case WrOpcode::kRdmaWrite:
      return "WRITE";
    case WrOpcode::kRdmaWriteWithImm:
      return "WRITE_IMM";
    case WrOpcode::kRdmaRead:
      return "READ";
    case WrOpcode::kAtomicCmpAndSwp:
      return "CMP_SWAP";
    case WrOpcode::kAtomicFetchAndAdd:
      return "FETCH_ADD";
    default:
      return "?";
  }
}
// Written out on purpose rather than calling wc_opcode() (types.h): the oracle must not share
// the engine's mapping, or a wrong mapping would check itself.
WcOpcode expected_wc(WrOpcode o) {
  switch (o) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return WcOpcode::kFetchAdd;
    default:
      return WcOpcode::kSend;
  }
}

uint8_t canary(uint64_t i, uint32_t host) {
  return static_cast<uint8_t>((i * 2654435761u) >> 13 ^ host * 0x5B);
}

struct Host {
  uint32_t id = 0;
  SimPort* port = nullptr;
  std::unique_ptr<Engine> engine;
  std::vector<uint8_t> mem;
  std::vector<uint8_t> shadow;  // what mem must hold at the end
  uint64_t used = 0;            // bump allocator
  uint32_t pd = 0;
  uint32_t key = 0;
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  uint64_t read_src = 0;  // read-only pattern area, never written
  uint64_t addr(uint64_t off) const { return reinterpret_cast<uint64_t>(mem.data()) + off; }
};

struct Op {
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t size = 0;
  uint64_t local_off = 0;   // SEND/WRITE source, READ destination, atomic result
  uint64_t remote_off = 0;  // WRITE target, READ source, atomic counter
  uint64_t recv_off = 0;    // responder receive buffer (SEND)
  uint32_t recv_len = 0;
  uint32_t imm = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint64_t expect_orig = 0;
  bool signaled = false;
};

// One direction of a QP pair: `req` issues ops that `resp` serves.
struct Flow {
  uint32_t id = 0;
  Host* req = nullptr;
  Host* resp = nullptr;
  Qp* qp = nullptr;    // requester's QP
  Qp* peer = nullptr;  // responder's QP
  std::vector<Op> ops;
  std::vector<uint32_t> recv_ops;  // ops consuming a receive WQE, in order
  std::vector<uint32_t> signaled;  // signalled ops, in order
  uint32_t next_post = 0;
  uint32_t next_sig = 0;
  uint32_t next_recv_post = 0;
  uint32_t next_recv_comp = 0;
};

class Runner {
 public:
  Runner(uint64_t seed, const WorkloadConfig& cfg)
      : seed_(seed), cfg_(cfg), net_(seed), rng_(seed) {}
  WorkloadResult run();

 private:
  bool setup(std::string* err);
  uint64_t alloc(Host& h, uint64_t len, uint64_t align = 64);
  void plan_flow(Flow& f);
  void fill_payload(Flow& f, uint32_t op_index, uint8_t* dst, uint32_t len);
  bool pump();  // posts and polls; returns true if it did anything
  bool check_send_cqe(Flow& f, const Cqe& c);
  bool check_recv_cqe(Flow& f, const Cqe& c);
  bool verify_memory();
  bool fail(const std::string& msg) {
    if (error_.empty()) error_ = msg;
    return false;
  }
  bool done() const {
    if (!error_.empty()) return true;
    for (const auto& f : flows_) {
      if (f.next_sig < f.signaled.size() || f.next_recv_comp < f.recv_ops.size()) return false;
    }
    return true;
  }

  uint64_t seed_;
  WorkloadConfig cfg_;
  SimNetwork net_;
  Rng rng_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::vector<Flow> flows_;
  std::map<std::pair<uint32_t, uint32_t>, Flow*> by_req_;   // (host, qpn) -> flow it requests
  std::map<std::pair<uint32_t, uint32_t>, Flow*> by_resp_;  // (host, qpn) -> flow it serves
  std::string error_;
  uint64_t atomics_issued_ = 0;
  uint64_t bytes_ = 0;
};

uint64_t Runner::alloc(Host& h, uint64_t len, uint64_t align) {
  uint64_t off = (h.used + align - 1) & ~(align - 1);
  h.used = off + len + 16;  // 16 guard bytes between regions: overruns show up as damage
  return off;
}

void Runner::fill_payload(Flow& f, uint32_t op_index, uint8_t* dst, uint32_t len) {
  Rng r(seed_ * 0x9E3779B97F4A7C15ull ^ (uint64_t{f.id} << 32) ^ op_index);
  uint32_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const uint64_t v = r.next();
    std::memcpy(dst + i, &v, 8);
  }
  if (i < len) {
    const uint64_t v = r.next();
    std::memcpy(dst + i, &v, len - i);
  }
}

// Plans every op of a flow, writes its source data, and records its effect in the shadows.
void Runner::plan_flow(Flow& f) {
  static const WrOpcode kAll[] = {WrOpcode::kSend,
                                  WrOpcode::kSendWithImm,
                                  WrOpcode::kRdmaWrite,
                                  WrOpcode::kRdmaWriteWithImm,
                                  WrOpcode::kRdmaRead,
                                  WrOpcode::kAtomicCmpAndSwp,
                                  WrOpcode::kAtomicFetchAndAdd};
  std::vector<WrOpcode> menu = cfg_.ops;
  if (menu.empty()) menu.assign(std::begin(kAll), std::end(kAll));
  Host& q = *f.req;
  Host& p = *f.resp;
  // The flow's atomic counter on the responder.
  const uint64_t counter_off = alloc(p, 8, 8);
  uint64_t counter = rng_.next() & 0xFFFF;
  std::memcpy(p.mem.data() + counter_off, &counter, 8);
  std::memcpy(p.shadow.data() + counter_off, &counter, 8);

  for (uint32_t i = 0; i < cfg_.ops_per_qp; ++i) {
    Op op;
    op.opcode = menu[rng_.below(menu.size())];
    if (is_atomic(op.opcode)) {
      op.size = 8;
    } else if (!cfg_.sizes.empty()) {
      op.size = cfg_.sizes[rng_.below(cfg_.sizes.size())];
    } else {
      const uint32_t small = 2 * mtu_bytes(cfg_.mtu);
      op.size =
          static_cast<uint32_t>(rng_.chance(0.5) ? rng_.below(std::min(small, cfg_.max_size) + 1)
                                                 : rng_.below(cfg_.max_size + 1));
    }
    const uint32_t sig_every = cfg_.signal_every ? cfg_.signal_every : 1 + rng_.below(4);
    op.signaled = (i + 1) % sig_every == 0 || i + 1 == cfg_.ops_per_qp;
    op.imm = static_cast<uint32_t>(rng_.next());
    switch (op.opcode) {
      case WrOpcode::kSend:
      case WrOpcode::kSendWithImm: {
        op.local_off = alloc(q, op.size);
        fill_payload(f, i, q.mem.data() + op.local_off, op.size);
        std::memcpy(q.shadow.data() + op.local_off, q.mem.data() + op.local_off, op.size);
        op.recv_len = op.size + static_cast<uint32_t>(rng_.below(3)) * 32;  // sometimes roomier
        op.recv_off = alloc(p, op.recv_len);
        std::memcpy(p.shadow.data() + op.recv_off, q.mem.data() + op.local_off, op.size);
        break;
      }
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaWriteWithImm: {
        op.local_off = alloc(q, op.size);
        fill_payload(f, i, q.mem.data() + op.local_off, op.size);
        std::memcpy(q.shadow.data() + op.local_off, q.mem.data() + op.local_off, op.size);
        op.remote_off = alloc(p, op.size);
        std::memcpy(p.shadow.data() + op.remote_off, q.mem.data() + op.local_off, op.size);
        break;
      }
      case WrOpcode::kRdmaRead: {
        op.remote_off =
            p.read_src + rng_.below(cfg_.max_size - std::min(op.size, cfg_.max_size) + 1);
        op.local_off = alloc(q, op.size);
        std::memcpy(q.shadow.data() + op.local_off, p.mem.data() + op.remote_off, op.size);
        break;
      }
      case WrOpcode::kAtomicCmpAndSwp:
      case WrOpcode::kAtomicFetchAndAdd: {
        op.remote_off = counter_off;
        op.local_off = alloc(q, 8, 8);
        op.expect_orig = counter;
        if (op.opcode == WrOpcode::kAtomicFetchAndAdd) {
          op.compare_add = 1 + (rng_.next() & 0xFFFF);
          counter += op.compare_add;
        } else {
          // Three compares in four match (the swap must happen exactly once); the fourth
          // misses, so nothing may be swapped, and the original comes back all the same.
          const bool miss = rng_.below(4) == 0;
          op.compare_add = miss ? counter ^ (1 + (rng_.next() & 0xFF)) : counter;
          op.swap = rng_.next();
          if (!miss) counter = op.swap;
        }
        std::memcpy(q.shadow.data() + op.local_off, &op.expect_orig, 8);
        ++atomics_issued_;
        break;
      }
      default:
        break;
    }
    if (uses_recv(op.opcode)) {
      if (op.opcode == WrOpcode::kRdmaWriteWithImm) {
        op.recv_len = 0;
        op.recv_off = 0;
      }
      f.recv_ops.push_back(i);
    }
    if (op.signaled) f.signaled.push_back(i);
    bytes_ += op.size;
    f.ops.push_back(op);
  }
  std::memcpy(p.shadow.data() + counter_off, &counter, 8);
}

bool Runner::setup(std::string* err) {
  if (cfg_.hosts < 2 || cfg_.hosts > 250) {
    *err = "hosts must be 2..250";
    return false;
  }
  if (cfg_.qps_per_pair == 0 || cfg_.sq_depth == 0) {
    *err = "qps_per_pair and sq_depth must be positive";
    return false;
  }
  for (uint32_t s : cfg_.sizes) cfg_.max_size = std::max(cfg_.max_size, s);
  // Memory per host: enough for every region this run plans (estimated, then checked).
  const uint64_t per_op =
      std::max<uint64_t>(cfg_.sizes.empty()
                             ? cfg_.max_size
                             : *std::max_element(cfg_.sizes.begin(), cfg_.sizes.end()),
                         8) +
      200;
  const uint64_t flows_per_host =
      2ull * (cfg_.hosts - 1) * cfg_.qps_per_pair + 2ull * cfg_.loopback_pairs;
  const uint64_t mem = cfg_.max_size + 4096 + flows_per_host * cfg_.ops_per_qp * per_op * 2;
  if (mem > (3ull << 30)) {
    *err = "workload needs too much memory per host (" + std::to_string(mem >> 20) + " MiB)";
    return false;
  }
  for (uint32_t h = 0; h < cfg_.hosts; ++h) {
    auto host = std::make_unique<Host>();
    host->id = h + 1;
    host->port = net_.add_port(
        Mac{0x02, 0, 0, 0, static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h + 1)});
    host->port->uplink() = cfg_.link;
    EngineConfig ec;
    ec.mac = host->port->mac();
    const uint8_t lo = static_cast<uint8_t>(h + 1), hi = static_cast<uint8_t>((h + 1) >> 8);
    ec.gids = {Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, hi, lo},
               Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, hi, lo}};
    ec.seed = seed_ + h + 1;
    ec.max_inflight_psns = cfg_.max_inflight_psns;
    host->engine = std::make_unique<Engine>(ec, host->port, &net_.clock());
    host->mem.resize(mem);
    host->shadow.resize(mem);
    for (uint64_t i = 0; i < mem; ++i) host->mem[i] = canary(i, host->id);
    host->shadow = host->mem;
    host->pd = host->engine->alloc_pd();
    if (int rc = host->engine->reg_mr(
            host->pd, host->mem.data(), mem, host->addr(0),
            kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
            &host->key)) {
      *err = "reg_mr: errno " + std::to_string(rc);
      return false;
    }
    int e = 0;
    // Room for every WQE of every QP on this host: a CQ can never overflow.
    const uint32_t cq_depth =
        static_cast<uint32_t>(flows_per_host / 2 * std::bit_ceil(cfg_.sq_depth) + 64);
    host->send_cq = host->engine->create_cq(cq_depth, &e);
    host->recv_cq = host->engine->create_cq(cq_depth, &e);
    host->read_src = alloc(*host, cfg_.max_size + 8);
    Engine* eng = host->engine.get();
    net_.add_actor({[eng] { return eng->poll(); }, [eng] { return eng->next_timer_ns(); },
                    [eng] { return eng->has_pending_output(); }});
    hosts_.push_back(std::move(host));
  }
  for (auto& a : hosts_) {
    for (auto& b : hosts_) {
      if (a == b) continue;
      for (const Gid& g : b->engine->config().gids)
        a->engine->neighbors().add_static(g, b->port->mac());
    }
  }

  // QP pairs: every two hosts, qps_per_pair of them, and loopback_pairs within each host; each
  // pair carries a flow each way.
  uint32_t flow_id = 0;
  for (uint32_t i = 0; i < cfg_.hosts; ++i) {
    for (uint32_t j = i; j < cfg_.hosts; ++j) {
      for (uint32_t k = 0; k < (i == j ? cfg_.loopback_pairs : cfg_.qps_per_pair); ++k) {
        Host& a = *hosts_[i];
        Host& b = *hosts_[j];
        Qp* qa = nullptr;
        Qp* qb = nullptr;
        for (int side = 0; side < 2; ++side) {
          Host* h = side ? &b : &a;
          QpInitAttr init;
          init.pd = h->pd;
          init.send_cq = h->send_cq;
          init.recv_cq = h->recv_cq;
          init.cap.max_send_wr = cfg_.sq_depth;
          init.cap.max_recv_wr = cfg_.sq_depth;
          init.cap.max_send_sge = 2;
          init.cap.max_recv_sge = 2;
          int e = 0;
          Qp* q = h->engine->create_qp(init, &e);
          if (!q) {
            *err = "create_qp: errno " + std::to_string(e);
            return false;
          }
          (side ? qb : qa) = q;
        }
        const int gid = cfg_.gid_index >= 0 ? cfg_.gid_index : static_cast<int>(rng_.below(2));
        auto psn = [&] {
          return cfg_.start_psn >= 0 ? static_cast<uint32_t>(cfg_.start_psn) & 0xFFFFFF
                                     : static_cast<uint32_t>(0xFFFFFF - rng_.below(64));
        };
        const uint32_t psn_a = psn(), psn_b = psn();
        for (int side = 0; side < 2; ++side) {
          Host& self = side ? b : a;
          Host& peer = side ? a : b;
          Qp* q = side ? qb : qa;
          Qp* pq = side ? qa : qb;
          ConnectParams p;
          p.access = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
          p.ah.dgid = peer.engine->config().gids[static_cast<size_t>(gid)];
          p.ah.sgid_index = static_cast<uint8_t>(gid);
          p.mtu = cfg_.mtu;
          p.dest_qpn = pq->qpn();
          p.rq_psn = side ? psn_a : psn_b;
          p.max_dest_rd_atomic = static_cast<uint8_t>(cfg_.max_rd_atomic);
          p.min_rnr_timer = 1;
          p.sq_psn = side ? psn_b : psn_a;
          p.timeout = cfg_.timeout;
          p.retry_cnt = cfg_.retry_cnt;
          p.rnr_retry = cfg_.rnr_retry;
          p.max_rd_atomic = static_cast<uint8_t>(cfg_.max_rd_atomic);
          p.rate_limit_kbps = cfg_.rate_limit_kbps;
          if (int rc = connect_qp(*self.engine, q, p)) {
            *err = "modify_qp: errno " + std::to_string(rc);
            return false;
          }
        }
        for (int dir = 0; dir < 2; ++dir) {
          Flow f;
          f.id = flow_id++;
          f.req = dir ? &b : &a;
          f.resp = dir ? &a : &b;
          f.qp = dir ? qb : qa;
          f.peer = dir ? qa : qb;
          flows_.push_back(std::move(f));
        }
      }
    }
  }
  for (auto& f : flows_) {
    plan_flow(f);
    if (f.req->used > f.req->mem.size() || f.resp->used > f.resp->mem.size()) {
      *err = "workload memory estimate too small";
      return false;
    }
  }
  for (auto& f : flows_) {
    by_req_[{f.req->id, f.qp->qpn()}] = &f;
    by_resp_[{f.resp->id, f.peer->qpn()}] = &f;
  }
  return true;
}

bool Runner::pump() {
  bool any = false;
  for (auto& f : flows_) {
    Host& q = *f.req;
    Host& p = *f.resp;
    // Receives first, in the order the messages will arrive.
    while (f.next_recv_post < f.recv_ops.size()) {
      const Op& op = f.ops[f.recv_ops[f.next_recv_post]];
      Sge sge{p.addr(op.recv_off), op.recv_len, p.key};
      RecvWr wr{.wr_id = f.next_recv_post, .sg_list = &sge, .num_sge = op.recv_len ? 1u : 0u};
      if (f.peer->post_recv(wr) != 0) break;
      ++f.next_recv_post;
      any = true;
    }
    while (f.next_post < f.ops.size()) {
      const Op& op = f.ops[f.next_post];
      Sge sge{q.addr(op.local_off), op.size, q.key};
      SendWr wr;
      wr.wr_id = f.next_post;
      wr.sg_list = &sge;
      wr.num_sge = op.size || is_atomic(op.opcode) ? 1 : 0;
      wr.opcode = op.opcode;
      wr.send_flags = op.signaled ? kSendSignaled : 0;
      wr.imm_data = op.imm;
      wr.remote_addr = p.addr(op.remote_off);
      wr.rkey = p.key;
      wr.compare_add = op.compare_add;
      wr.swap = op.swap;
      const int rc = f.qp->post_send(wr);
      if (rc == ENOMEM) break;
      if (rc)
        return fail("post_send of op " + std::to_string(f.next_post) + " failed: errno " +
                    std::to_string(rc));
      ++f.next_post;
      any = true;
    }
  }
  Cqe cqes[64];
  for (auto& h : hosts_) {
    int n;
    while ((n = h->send_cq->poll(cqes, 64)) > 0) {
      any = true;
      for (int i = 0; i < n; ++i) {
        auto it = by_req_.find({h->id, cqes[i].qp_num});
        if (it == by_req_.end()) return fail("send completion for unknown QP");
        if (!check_send_cqe(*it->second, cqes[i])) return false;
      }
    }
    while ((n = h->recv_cq->poll(cqes, 64)) > 0) {
      any = true;
      for (int i = 0; i < n; ++i) {
        auto it = by_resp_.find({h->id, cqes[i].qp_num});
        if (it == by_resp_.end()) return fail("receive completion for unknown QP");
        if (!check_recv_cqe(*it->second, cqes[i])) return false;
      }
    }
  }
  return any;
}

bool Runner::check_send_cqe(Flow& f, const Cqe& c) {
  std::ostringstream where;
  where << "flow " << f.id << " (host " << f.req->id << " QPN 0x" << std::hex << f.qp->qpn()
        << std::dec << ")";
  if (f.next_sig >= f.signaled.size()) return fail(where.str() + ": unexpected send completion");
  const uint32_t idx = f.signaled[f.next_sig];
  const Op& op = f.ops[idx];
  if (c.status != WcStatus::kSuccess) {
    return fail(where.str() + ": op " + std::to_string(c.wr_id) + " completed with " +
                to_string(c.status));
  }
  if (c.wr_id != idx) {
    return fail(where.str() + ": completion out of order: got wr_id " + std::to_string(c.wr_id) +
                ", expected " + std::to_string(idx));
  }
  if (c.opcode != expected_wc(op.opcode)) {
    return fail(where.str() + ": op " + std::to_string(idx) + " (" + op_name(op.opcode) +
                ") completed with wrong opcode");
  }
  ++f.next_sig;
  return true;
}

bool Runner::check_recv_cqe(Flow& f, const Cqe& c) {
  std::ostringstream where;
  where << "flow " << f.id << " (receiver host " << f.resp->id << " QPN 0x" << std::hex
        << f.peer->qpn() << std::dec << ")";
  if (f.next_recv_comp >= f.recv_ops.size()) return fail(where.str() + ": unexpected receive");
  const uint32_t idx = f.recv_ops[f.next_recv_comp];
  const Op& op = f.ops[idx];
  const std::string what = where.str() + ": receive for op " + std::to_string(idx) + " (" +
                           op_name(op.opcode) + ", " + std::to_string(op.size) + " B)";
  if (c.status != WcStatus::kSuccess) return fail(what + " completed with " + to_string(c.status));
  if (c.wr_id != f.next_recv_comp) return fail(what + ": out of order");
  const bool write_imm = op.opcode == WrOpcode::kRdmaWriteWithImm;
  if (c.opcode != (write_imm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv)) {
    return fail(what + ": wrong opcode");
  }
  if (c.byte_len != op.size) {
    return fail(what + ": byte_len " + std::to_string(c.byte_len));
  }
  const bool has_imm = op.opcode != WrOpcode::kSend;
  if (bool(c.wc_flags & kWcWithImm) != has_imm || (has_imm && c.imm_data != op.imm)) {
    return fail(what + ": immediate data wrong");
  }
  ++f.next_recv_comp;
  return true;
}

bool Runner::verify_memory() {
  for (auto& h : hosts_) {
    const auto& m = h->mem;
    const auto& s = h->shadow;
    if (std::memcmp(m.data(), s.data(), m.size()) == 0) continue;
    uint64_t first = 0;
    while (m[first] == s[first]) ++first;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < m.size(); ++i) bad += m[i] != s[i];
    std::ostringstream os;
    os << "host " << h->id << " memory differs from expectation at offset " << first << " (" << bad
       << " bytes differ)";
    for (const auto& f : flows_) {
      for (size_t i = 0; i < f.ops.size(); ++i) {
        const Op& op = f.ops[i];
        auto in = [&](uint64_t off, uint64_t len) {
          return first >= off && first < off + len + 16;
        };
        if ((f.resp == h.get() && (in(op.remote_off, op.size) || in(op.recv_off, op.recv_len))) ||
            (f.req == h.get() && in(op.local_off, op.size))) {
          os << "; near flow " << f.id << " op " << i << " (" << op_name(op.opcode) << ", "
             << op.size << " B)";
          break;
        }
      }
    }
    return fail(os.str());
  }
  return true;
}

WorkloadResult Runner::run() {
  WorkloadResult r;
  std::string err;
  if (!setup(&err)) {
    r.error = "setup: " + err;
    return r;
  }
  net_.add_actor({[this] { return pump(); }, nullptr, nullptr});
  const bool finished = net_.run_until([this] { return done(); }, cfg_.deadline_ns);
  r.virtual_ns = net_.now();
  if (finished && error_.empty()) {
    // The last completion can come before every frame has arrived: a duplicate, or a copy held
    // back by reordering, of a request already answered. Judge only once the wire is empty, so
    // that a late duplicate atomic executed a second time (or a stray completion, which pump()
    // rejects as unexpected) shows. Every frame on the wire lands within its link's delays.
    const LinkConfig& l = cfg_.link;
    const uint64_t slack = l.delay_ns + l.jitter_ns + l.reorder_delay_ns + 1'000'000'000;
    const uint64_t now = net_.now();
    const uint64_t limit = now > UINT64_MAX - slack ? UINT64_MAX : now + slack;
    const bool quiet = net_.run_until(
        [this] {
          if (!error_.empty()) return true;
          if (net_.events_pending() != 0) return false;
          for (const auto& h : hosts_) {
            if (h->engine->has_pending_output()) return false;
          }
          return true;
        },
        limit);
    if (!quiet && error_.empty()) {
      error_ = "frames still on the wire " + std::to_string((net_.now() - now) / 1000000) +
               " ms of virtual time after the last completion";
    }
  }
  r.events_left = net_.events_pending();
  if (error_.empty() && !finished) {
    std::ostringstream os;
    os << "not finished after " << net_.now() / 1000000 << " ms of virtual time:";
    for (const auto& f : flows_) {
      if (f.next_sig < f.signaled.size() || f.next_recv_comp < f.recv_ops.size()) {
        const auto& sn = f.qp->snd_;
        const auto& rc = f.peer->rcv_;
        os << " flow " << f.id << " posted " << f.next_post << "/" << f.ops.size() << " completed "
           << f.next_sig << "/" << f.signaled.size() << " signalled, receives " << f.next_recv_comp
           << "/" << f.recv_ops.size() << " (QP state " << to_string(f.qp->state()) << std::hex
           << "; requester head " << sn.head << " send " << sn.send << " tail " << sn.tail
           << " psn " << sn.psn << " comp_psn " << sn.comp_psn << " max_psn " << sn.max_psn
           << " rd_atomic " << sn.rd_atomic << " timer " << (sn.retransmit.armed ? "armed" : "idle")
           << (sn.rnr_wait ? " rnr_wait" : "") << (sn.active ? " scheduled" : "")
           << "; responder epsn " << rc.epsn << " msn " << rc.msn
           << (rc.nak_sent ? " nak_sent" : "") << " in_msg " << int(rc.in_msg) << " out "
           << (rc.out_tail - rc.out_head) << std::dec << ");";
      }
    }
    error_ = os.str();
  }
  if (error_.empty()) verify_memory();
  uint64_t executed = 0;
  for (auto& h : hosts_) {
    for (const auto& f : flows_) {
      if (f.resp == h.get()) {
        const QpCounters& c = f.peer->counters_;
        executed += c.atomics_executed;
        r.duplicates += c.duplicate_requests;
        r.seq_naks += c.seq_naks_sent;
      }
      if (f.req == h.get()) {
        const QpCounters& c = f.qp->counters_;
        r.retransmitted += c.retransmitted_packets;
        r.timeouts += c.local_ack_timeouts;
      }
    }
    r.frames_sent += h->port->stats().tx_frames;
    r.frames_dropped += h->port->stats().dropped_fault;
  }
  r.atomics_executed = executed;
  r.atomics_issued = atomics_issued_;
  if (error_.empty() && executed != atomics_issued_) {
    error_ = "atomics executed " + std::to_string(executed) + " times for " +
             std::to_string(atomics_issued_) + " issued";
  }
  for (const auto& f : flows_) r.ops += f.ops.size();
  r.bytes = bytes_;
  r.ok = error_.empty();
  r.error = error_;
  return r;
}

}  // namespace

WorkloadResult run_workload(uint64_t seed, const WorkloadConfig& cfg) {
  Runner runner(seed, cfg);
  return runner.run();
}

bool parse_faults(const std::string& spec, LinkConfig* out, std::string* err) {
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      *err = "fault '" + item + "' is not key=value";
      return false;
    }
    const std::string key = item.substr(0, eq);
    const std::string val = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(val.c_str(), &end);
    if (end == val.c_str() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
      *err = "fault '" + key + "' has a bad value '" + val + "'";
      return false;
    }
    auto nanoseconds = [&](uint64_t* dst) {
      if (v > 3.6e12) {
        *err = "fault '" + key + "' is nanoseconds: 0..3600000000000 (an hour), got " + val;
        return false;
      }
      *dst = static_cast<uint64_t>(v);
      return true;
    };
    auto prob = [&](double* dst) {
      if (v > 1) {
        *err = "fault '" + key + "' is a probability: 0..1, got " + val;
        return false;
      }
      *dst = v;
      return true;
    };
    if (key == "drop") {
      if (!prob(&out->drop)) return false;
    } else if (key == "dup") {
      if (!prob(&out->duplicate)) return false;
    } else if (key == "reorder") {
      if (!prob(&out->reorder)) return false;
    } else if (key == "corrupt") {
      if (!prob(&out->corrupt)) return false;
    } else if (key == "delay") {
      if (!nanoseconds(&out->delay_ns)) return false;
    } else if (key == "jitter") {
      if (!nanoseconds(&out->jitter_ns)) return false;
    } else if (key == "reorder_delay") {
      if (!nanoseconds(&out->reorder_delay_ns)) return false;
    } else if (key == "rate") {
      // 0 is no limit. Below 1 Mb/s one frame's serialisation time grows towards what the
      // virtual clock (uint64_t nanoseconds) can hold.
      if (v != 0 && (v < 0.001 || v > 1e6)) {
        *err = "fault 'rate' is Gb/s: 0 (no limit) or 0.001..1000000, got " + val;
        return false;
      }
      out->rate_gbps = v;
    } else {
      *err = "unknown fault '" + key +
             "' (drop, dup, reorder, corrupt, delay, jitter, "
             "reorder_delay, rate)";
      return false;
    }
  }
  return true;
}

}  // namespace roce::sim
