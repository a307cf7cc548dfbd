// A communicator's settings: what a user may tune, each with a default that suits the common
// case, and each overridable by one environment variable with the prefix ROCE_COLL_ (the table
// in collectives/README.md). A bad value is refused with one line naming the variable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "collectives/launch_env.h"

namespace roce::coll {

enum class AllReduceAlgo { kAuto, kRing, kRecursiveDoubling };
// How a peer's messages use its QPs (ROCE_COLL_QP_SPREAD): whole messages round robin, or each
// message split evenly across them (pieces of at least kMinPiece bytes).
enum class QpSpread { kRoundRobin, kSplit };

struct CommOptions {
  // Device and path, chosen as NCCL does (device.h).
  std::string device;  // ROCE_COLL_DEVICE: ibv device name; "" = first with an ACTIVE port
  int port = 0;        // ROCE_COLL_PORT: 0 = the device's first ACTIVE port
  int gid_index = -1;  // ROCE_COLL_GID_INDEX: -1 = RoCEv2, IPv4-mapped, else global IPv6
  bool allow_link_local = false;  // ROCE_COLL_ALLOW_LINK_LOCAL: fe80:: GIDs only when asked
  int mtu = 0;                    // ROCE_COLL_MTU: cap on the path MTU (256..4096), 0 = none
  int hop_limit = 64;             // ROCE_COLL_HOP_LIMIT
  int traffic_class = 0;          // ROCE_COLL_TC: IPv6 traffic class / IPv4 TOS (DSCP << 2)
  // ROCE_COLL_GRANT_TC: the traffic class of grants (and probes and abort notices), on a QP of
  // their own per peer; -1 = ROCE_COLL_TC, on the first data QP.
  int grant_traffic_class = -1;
  int ib_timeout = 17;  // ROCE_COLL_IB_TIMEOUT: local ACK timeout 4.096 us x 2^n
  // ROCE_COLL_RETRY_CNT. Not 7 (NCCL's): Linux rxe, and this project's stack after it, retry
  // for ever at 7, and a dead peer must end in an error: 0.54 s x (1 + 6) ~ 3.8 s.
  int retry_count = 6;
  // Data movement.
  uint32_t chunk_bytes = 256 * 1024;  // ROCE_COLL_CHUNK: bytes a grant covers at most
  uint32_t slots = 4;                 // ROCE_COLL_SLOTS: landing slots (grant ring) per peer
  // ROCE_COLL_GRANTS: grants in flight per peer, 1..slots (0 = slots). A sender also keeps no
  // more than this many messages unacknowledged, so a peer never has more than grants x chunk
  // bytes in flight toward a receiver.
  uint32_t grants = 0;
  uint32_t qps_per_peer = 1;                   // ROCE_COLL_QPS: data QPs per peer, 1..16
  QpSpread qp_spread = QpSpread::kRoundRobin;  // ROCE_COLL_QP_SPREAD: rr | split
  // ROCE_COLL_RECV_BYTES: the most a rank has granted and not yet received, from all peers
  // together (receiver-driven admission: an incast cannot overrun the receiver's port).
  uint64_t recv_budget = 1 << 20;
  AllReduceAlgo all_reduce_algo = AllReduceAlgo::kAuto;  // ROCE_COLL_ALGO: auto | ring | rd
  uint64_t small_bytes = 64 * 1024;  // ROCE_COLL_SMALL_BYTES: auto picks rd at or below this
  bool cache_registrations = false;  // ROCE_COLL_REG_CACHE: keep implicit registrations
  // Failures.
  std::chrono::milliseconds timeout{30000};              // ROCE_COLL_TIMEOUT_MS
  std::chrono::milliseconds rendezvous_timeout{120000};  // ROCE_COLL_RENDEZVOUS_TIMEOUT_MS
  std::chrono::milliseconds probe_interval{1000};        // ROCE_COLL_PROBE_MS

  // The defaults with every ROCE_COLL_* variable that is set applied; throws
  // Error(kInvalidArgument) naming the first bad one.
  static CommOptions from_env(const EnvLookup& env = process_env());

  uint32_t window() const { return grants ? grants : slots; }
  bool own_control_qp() const {
    return grant_traffic_class >= 0 && grant_traffic_class != traffic_class;
  }
};

// ibv_mtu for a byte count (256..4096, a power of two), 0 if none.
int ibv_mtu_of_bytes(int bytes);

}  // namespace roce::coll
