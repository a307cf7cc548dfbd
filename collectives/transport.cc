#include "collectives/transport.h"

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace roce::coll {

// What a rank publishes at "rank/<r>": its path, control region, the settings both ends of a
// QP must share, and its QPs toward each peer (data QPs, then the control QP if it has one).
struct RankInfo {
  uint32_t size = 0, slots = 0, chunk = 0, window = 0, qps = 0, spread = 0, own_control = 0;
  ibv_gid gid{};
  uint8_t active_mtu = 0;
  uint64_t control_addr = 0;
  uint32_t control_rkey = 0;
  std::vector<uint32_t> qpn, psn;  // [peer * per_peer() + i]: the QPs that face that peer
  uint32_t per_peer() const { return qps + own_control; }
};

namespace {

template <typename T>
void put(Bytes& b, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof v);
}
template <typename T>
bool take(const Bytes& b, size_t& at, T& v) {
  if (b.size() - at < sizeof v) return false;
  std::memcpy(&v, b.data() + at, sizeof v);
  at += sizeof v;
  return true;
}

Bytes encode(const RankInfo& info) {
  Bytes b;
  put(b, info.size), put(b, info.slots), put(b, info.chunk), put(b, info.window);
  put(b, info.qps), put(b, info.spread), put(b, info.own_control), put(b, info.gid);
  put(b, info.active_mtu), put(b, info.control_addr), put(b, info.control_rkey);
  for (size_t i = 0; i < info.qpn.size(); ++i) put(b, info.qpn[i]), put(b, info.psn[i]);
  return b;
}

bool decode(const Bytes& b, RankInfo& info) {
  size_t at = 0;
  if (!take(b, at, info.size) || !take(b, at, info.slots) || !take(b, at, info.chunk) ||
      !take(b, at, info.window) || !take(b, at, info.qps) || !take(b, at, info.spread) ||
      !take(b, at, info.own_control) || !take(b, at, info.gid) || !take(b, at, info.active_mtu) ||
      !take(b, at, info.control_addr) || !take(b, at, info.control_rkey) ||
      info.size > (1u << 20) || info.qps > 16 || info.own_control > 1) {
    return false;
  }
  const size_t n = size_t{info.size} * info.per_peer();
  info.qpn.resize(n), info.psn.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!take(b, at, info.qpn[i]) || !take(b, at, info.psn[i])) return false;
  }
  return at == b.size();
}

std::string rank_list(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k.substr(k.find('/') + 1);
  return s;
}

// Every rank's "<what>/<r>"; throws naming those that did not arrive in time.
void wait_for_all(Store& store, const char* what, int size, std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(std::string(what) + "/" + std::to_string(r));
  auto missing = store.wait(keys, timeout);
  if (!missing.empty()) {
    throw Error(ErrorKind::kTimeout,
                "rendezvous: rank" + std::string(missing.size() > 1 ? "s " : " ") +
                    rank_list(missing) + " of " + std::to_string(size) + " never arrived (" + what +
                    ") within " + std::to_string(timeout.count()) +
                    " ms (ROCE_COLL_RENDEZVOUS_TIMEOUT_MS)");
  }
}

}  // namespace

struct Transport::Scratch {
  uint8_t* mem = nullptr;
  ibv_mr* mr = nullptr;
  ~Scratch() {
    if (mr) ibv_dereg_mr(mr);
    std::free(mem);
  }
};

Transport::Transport(Store& store, int rank, int size, const CommOptions& options)
    : rank_(rank), size_(size), options_(options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(ErrorKind::kInvalidArgument,
                "rank " + std::to_string(rank) + " is not in a world of " + std::to_string(size));
  }
  device_ = std::make_unique<Device>(options_);
  mrs_ = std::make_unique<MrCache>(device_->pd(), options_.cache_registrations);
  scratch_.resize(size);
  peers_.resize(size);
  try {
    bring_up(store);
  } catch (...) {
    teardown();
    throw;
  }
}

void Transport::bring_up(Store& store) {
  const uint32_t slots = options_.slots;
  const uint32_t sq = 2 * slots + 8, rq = slots + 8;
  RankInfo self{static_cast<uint32_t>(size_),
                slots,
                options_.chunk_bytes,
                options_.window(),
                options_.qps_per_peer,
                static_cast<uint32_t>(options_.qp_spread),
                options_.own_control_qp() ? 1u : 0u};
  const uint32_t per_peer = self.per_peer();
  const int cqe = static_cast<int>((size_ - 1) * per_peer * (sq + rq) + 16);
  cq_ = ibv_create_cq(device_->context(), cqe, nullptr, nullptr, 0);
  if (!cq_) check_post(errno, "ibv_create_cq", -1);

  layout_ = ControlLayout{static_cast<uint32_t>(size_), slots};
  const size_t outbox = size_t(size_) * slots * sizeof(GrantRecord);
  control_bytes_ = (layout_.bytes() + outbox + sizeof(AbortRecord) + 8 + 4095) & ~size_t{4095};
  control_ = static_cast<uint8_t*>(std::aligned_alloc(4096, control_bytes_));
  std::memset(control_, 0, control_bytes_);
  control_mr_ = ibv_reg_mr(device_->pd(), control_, control_bytes_,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!control_mr_) check_post(errno, "ibv_reg_mr(control region)", -1);

  std::mt19937 rng(std::random_device{}());
  self.gid = device_->gid();
  self.active_mtu = device_->active_mtu();
  self.control_addr = reinterpret_cast<uintptr_t>(control_);
  self.control_rkey = control_mr_->rkey;
  self.qpn.resize(size_t(size_) * per_peer), self.psn.resize(size_t(size_) * per_peer);
  auto* outboxes = reinterpret_cast<GrantRecord*>(control_ + layout_.bytes());
  notice_ = reinterpret_cast<AbortRecord*>(control_ + layout_.bytes() + outbox);
  probe_src_ = reinterpret_cast<uint64_t*>(notice_ + 1);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    PeerQps qps;
    uint32_t max_inline = 0;
    for (uint32_t i = 0; i < per_peer; ++i) {
      ibv_qp* qp = device_->create_rc_qp(cq_, sq, &max_inline);
      (i < self.qps ? qps.data.emplace_back(qp) : qps.control) = qp;
      self.qpn[q * per_peer + i] = qp->qp_num;
      self.psn[q * per_peer + i] = rng() & 0xffffff;
    }
    if (!qps.control) qps.control = qps.data[0];
    const auto* ring = reinterpret_cast<const GrantRecord*>(control_ + layout_.ring(q));
    peers_[q] = std::make_unique<Peer>(q, std::move(qps), options_, ring,
                                       outboxes + size_t(q) * slots, control_mr_->lkey);
  }
  store.set("rank/" + std::to_string(rank_), encode(self));
  wait_for_all(store, "rank", size_, options_.rendezvous_timeout);

  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    RankInfo info;
    if (!decode(store.get("rank/" + std::to_string(q), options_.rendezvous_timeout), info) ||
        info.size != static_cast<uint32_t>(size_)) {
      throw Error(ErrorKind::kMismatch, "rendezvous: rank " + std::to_string(q) +
                                            " published a different world size or layout");
    }
    check_same_settings(self, info, q);
    connect_peer(*peers_[q], self, info);
    for (uint32_t i = 0; i < self.qps; ++i) {
      check_post(peers_[q]->post_recvs(i, rq), "ibv_post_recv", q);
    }
  }
  // No rank writes to another before every QP is ready to receive.
  store.set("ready/" + std::to_string(rank_), {1});
  wait_for_all(store, "ready", size_, options_.rendezvous_timeout);
  connected_ = true;
}

// Settings that both ends of a QP must share: one line naming the variables and both values.
void Transport::check_same_settings(const RankInfo& self, const RankInfo& info, int q) const {
  auto differ = [&](const char* vars, uint32_t theirs, uint32_t ours) {
    throw Error(ErrorKind::kMismatch,
                std::string(vars) + " differ between ranks: rank " + std::to_string(q) + " has " +
                    std::to_string(theirs) + ", this rank " + std::to_string(ours),
                q);
  };
  if (info.slots != self.slots) differ("ROCE_COLL_SLOTS", info.slots, self.slots);
  if (info.chunk != self.chunk) differ("ROCE_COLL_CHUNK", info.chunk, self.chunk);
  if (info.window != self.window) differ("ROCE_COLL_GRANTS", info.window, self.window);
  if (info.qps != self.qps) differ("ROCE_COLL_QPS", info.qps, self.qps);
  if (info.spread != self.spread)
    differ("ROCE_COLL_QP_SPREAD (0 rr, 1 split)", info.spread, self.spread);
  if (info.own_control != self.own_control) {
    differ("ROCE_COLL_GRANT_TC (a control QP of its own: 1)", info.own_control, self.own_control);
  }
}

// Data QP i toward the peer meets the peer's data QP i toward us; control QPs meet likewise.
void Transport::connect_peer(Peer& p, const RankInfo& self, const RankInfo& info) {
  const uint32_t per_peer = self.per_peer();
  const size_t mine = size_t(p.rank()) * per_peer, theirs = size_t(rank_) * per_peer;
  for (uint32_t i = 0; i < per_peer; ++i) {
    const bool control = i == self.qps;
    ibv_qp* qp = control ? p.qps().control : p.qps().data[i];
    device_->connect(qp, {self.gid, self.qpn[mine + i], self.psn[mine + i], self.active_mtu},
                     {info.gid, info.qpn[theirs + i], info.psn[theirs + i], info.active_mtu},
                     control ? options_.grant_traffic_class : options_.traffic_class);
  }
  const ControlLayout layout{info.size, info.slots};
  const uint64_t base = info.control_addr;
  p.set_remote({base + layout.ring(rank_), info.control_rkey},
               {base + layout.abort_slot(rank_), info.control_rkey},
               {base + layout.probe_word(rank_), info.control_rkey});
}

Transport::~Transport() { teardown(); }

void Transport::teardown() {
  for (auto& p : peers_) {
    if (!p) continue;
    for (ibv_qp* qp : p->qps().data) ibv_destroy_qp(qp);
    if (p->qps().control != p->qps().data[0]) ibv_destroy_qp(p->qps().control);
    p.reset();
  }
  scratch_.clear();
  mrs_.reset();
  if (control_mr_) ibv_dereg_mr(control_mr_);
  control_mr_ = nullptr;
  std::free(control_);
  control_ = nullptr;
  if (cq_) ibv_destroy_cq(cq_);
  cq_ = nullptr;
  device_.reset();
}

uint8_t* Transport::scratch(int peer, Keys* keys) {
  auto& s = scratch_[peer];
  if (!s) {
    s = std::make_unique<Scratch>();
    const size_t bytes = size_t{options_.slots} * options_.chunk_bytes;
    s->mem = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095}));
    s->mr =
        ibv_reg_mr(device_->pd(), s->mem, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!s->mr) {
      const int err = errno;
      s.reset();
      check_post(err, "ibv_reg_mr(scratch)", -1);
    }
  }
  *keys = {s->mr->lkey, s->mr->rkey};
  return s->mem;
}

void Transport::check_post(int rc, const char* what, int peer) {
  if (rc == 0) return;
  std::string msg = std::string(what) + ": " + std::strerror(rc);
  if (peer >= 0) msg += " (QP to rank " + std::to_string(peer) + ")";
  if (failure_ || !connected_) throw Error(ErrorKind::kSystem, msg, peer);
  fail(Error(ErrorKind::kSystem, msg, peer));
}

}  // namespace roce::coll
