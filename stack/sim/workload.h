// A verified RDMA workload on the simulated network: hosts, RC QP pairs between them, a planned
// random mix of operations in both directions, and a checker that proves every byte landed
// exactly once where it should, completions arrived in order with the right status, opcode,
// length and immediate data, and no atomic executed twice. Used by the simulation tests and
// by `roce-sim`. A run is a pure function of (seed, config).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stack/core/types.h"
#include "stack/sim/sim_network.h"

namespace roce::sim {

struct WorkloadConfig {
  uint32_t hosts = 2;
  uint32_t qps_per_pair = 1;  // QP pairs between every two hosts
  // QP pairs within each host, connected through its own GID (loopback: their frames never
  // reach the wire, so the link's faults do not touch them).
  uint32_t loopback_pairs = 0;
  // Every QP's rate limit (ibv_qp_attr.rate_limit, kb/s; 0: none), set as it moves to RTS.
  uint32_t rate_limit_kbps = 0;
  uint32_t ops_per_qp = 50;  // operations each QP issues
  // Operations to draw from (empty: SEND, SEND_IMM, WRITE, WRITE_IMM, READ, CAS, FETCH_ADD).
  std::vector<WrOpcode> ops;
  // Message sizes to draw from; empty: uniform in [0, max_size].
  std::vector<uint32_t> sizes;
  uint32_t max_size = 20000;
  Mtu mtu = Mtu::k1024;
  // Start PSNs: this value for every QP, or (when -1) random within 64 of 2^24, so sequence
  // numbers wrap during the run.
  int64_t start_psn = -1;
  int gid_index = -1;         // 0 IPv6, 1 IPv4-mapped, -1 random per QP pair
  uint32_t signal_every = 1;  // every n-th WQE signalled (and the last); 0: random 1..4
  uint32_t sq_depth = 64;
  uint32_t max_rd_atomic = 8;
  uint8_t timeout = 8;  // local ACK timeout exponent: 4.096 us * 2^8 ~ 1 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint32_t max_inflight_psns = 256;
  LinkConfig link;                           // faults on every host's uplink
  uint64_t deadline_ns = 60'000'000'000ull;  // virtual time allowed
};

struct WorkloadResult {
  bool ok = false;
  std::string error;  // the first failure, with enough detail to debug
  uint64_t ops = 0;
  uint64_t bytes = 0;
  uint64_t virtual_ns = 0;
  uint64_t frames_sent = 0;
  uint64_t frames_dropped = 0;
  uint64_t retransmitted = 0;
  uint64_t timeouts = 0;
  uint64_t seq_naks = 0;
  uint64_t duplicates = 0;
  uint64_t atomics_executed = 0;
  uint64_t atomics_issued = 0;
  uint64_t events_left = 0;  // network events still pending when judged (0 once drained)
};

WorkloadResult run_workload(uint64_t seed, const WorkloadConfig& cfg);

// Parses "drop=0.01,dup=0.01,reorder=0.02,corrupt=0.01,delay=2000,jitter=500"; false on error.
bool parse_faults(const std::string& spec, LinkConfig* out, std::string* err);

}  // namespace roce::sim
