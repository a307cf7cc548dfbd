// Test support: hosts (engine + simulated port + registered memory) on a SimNetwork, and the
// connection of two RC QPs as an out-of-band exchange (QPN, PSN, GID) would do it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stack/core/engine.h"
#include "stack/sim/sim_network.h"

namespace roce::test {

inline Gid ipv4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d};
}
inline Gid ipv6_gid(uint8_t host) {
  return Gid{0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, host};
}

struct HostOptions {
  Mtu max_mtu = Mtu::k4096;
  uint32_t max_frame = 4352;
  uint64_t mem_bytes = 4u << 20;
  uint32_t max_inflight_psns = 256;
  uint32_t port_inflight_psns = EngineConfig{}.port_inflight_psns;
};

// One host: its port, its engine, a PD, one big MR (local + remote access) and a CQ.
class SimHost {
 public:
  SimHost(sim::SimNetwork& net, uint8_t id, const HostOptions& o = {});
  Engine& engine() { return *engine_; }
  sim::SimPort& port() { return *port_; }
  uint8_t id() const { return id_; }
  uint32_t pd() const { return pd_; }
  uint8_t* mem() { return mem_.data(); }
  uint64_t mem_size() const { return mem_.size(); }
  uint32_t key() const { return key_; }
  uint64_t addr(uint64_t off = 0) { return reinterpret_cast<uint64_t>(mem_.data()) + off; }
  CompletionQueue* cq() { return cq_; }
  const Gid& gid(int index) const { return engine_->config().gids[static_cast<size_t>(index)]; }
  Qp* create_rc(uint32_t depth = 256, uint32_t sges = 4, CompletionQueue* cq = nullptr,
                SharedReceiveQueue* srq = nullptr);
  // Polls this host's CQ into `out`; returns count.
  int poll(std::vector<Cqe>& out, CompletionQueue* cq = nullptr);

 private:
  uint8_t id_;
  sim::SimPort* port_;
  std::unique_ptr<Engine> engine_;
  std::vector<uint8_t> mem_;
  uint32_t pd_ = 0;
  uint32_t key_ = 0;
  CompletionQueue* cq_ = nullptr;
};

struct ConnectOptions {
  Mtu mtu = Mtu::k1024;
  uint32_t psn_a = 0x100;
  uint32_t psn_b = 0x200;
  int gid_index = 1;  // 0: IPv6, 1: IPv4-mapped
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 0.01 ms
  uint8_t max_rd_atomic = 16;
  uint32_t access = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
};

// RESET -> INIT -> RTR -> RTS on both sides; returns false (with a message) on any failure.
bool connect_rc(SimHost& a, Qp* qa, SimHost& b, Qp* qb, const ConnectOptions& o,
                std::string* err = nullptr);

// RESET -> INIT -> RTR -> RTS for one side, any engine: QP `q` of `e` towards QP `dest_qpn` at
// `dgid` (GID index o.gid_index on both sides), sending from PSN `sq_psn` and expecting
// `rq_psn`. 0 or the failing modify's error.
int connect_qp(Engine& e, Qp* q, const Gid& dgid, uint32_t dest_qpn, uint32_t sq_psn,
               uint32_t rq_psn, const ConnectOptions& o);

// Registers both hosts' engines as actors of the network.
void add_engines(sim::SimNetwork& net, std::vector<SimHost*> hosts);

}  // namespace roce::test
