// ECMP scenario: M sender hosts on one leaf, M receivers on the other, P paths of equal rate
// between the leaves (SimNetwork::set_fabric). Sender i moves `peer_bytes` to receiver i in
// WRITEs of cfg.net.message_bytes, dealt round-robin over K RC QPs. Each QP is one 5-tuple (its
// UDP source port comes from its QP numbers), so the fabric sees K flows per peer: with K = 1 two
// peers can hash onto one path and leave another idle, with more QPs the load evens out. The
// paths' queues mark ECN and DCQCN reacts as in the other scenarios.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stack/sim/scenario.h"

namespace roce::sim {

struct EcmpConfig {
  // Links, switch queues (towards every host and on every path), DCQCN, MTU, message size and
  // seed; its kind, flows and durations are not used.
  ScenarioConfig net;
  uint32_t peers = 4;
  uint32_t paths = 4;
  uint32_t qps_per_peer = 1;
  uint64_t peer_bytes = 16u << 20;
  uint64_t hash_seed = 1;
};

struct EcmpPath {
  uint32_t qps = 0;        // sender QPs whose data hashes onto this path
  uint64_t bytes = 0;      // frame bytes it carried from the senders' leaf
  double utilisation = 0;  // wire bytes / (rate x the run's completion time)
  uint64_t drops = 0, ecn_marks = 0, max_queue_bytes = 0;
};

struct EcmpResult {
  std::vector<EcmpPath> paths;    // senders' leaf to receivers' leaf, where the data goes
  std::vector<uint64_t> peer_ns;  // per peer: when its last WRITE completed
  uint64_t completion_ns = 0;     // the last peer's
  // peer_bytes at line rate: every sender at once, the paths together as fast as the senders.
  // Headers are not counted, so even a perfect spread takes a few percent longer.
  uint64_t ideal_ns = 0;
  double imbalance = 0;  // the busiest path's bytes / the paths' mean
  double jain = 0;       // Jain's index of the paths' bytes
  uint64_t drops = 0;    // tail drops anywhere (paths, both directions, and host ports)
  uint64_t ecn_marks = 0;
  uint64_t cnps = 0;  // received by the senders' QPs
  uint64_t retransmitted = 0;
  bool data_ok = false;  // every receiver's memory holds exactly what its sender wrote
  std::string error;     // the run itself failed (setup, a completion in error, too slow)
};

EcmpResult run_ecmp(const EcmpConfig& cfg);

}  // namespace roce::sim
