// Two DpdkPorts joined back to back inside one process: what A sends, B receives, and the other
// way round. Each direction is an rte_ring of mbuf pointers made into ethdev queues by
// rte_eth_from_rings (net_ring), so frames cross without a copy: the receiver gets the sender's
// mbuf and frees it back into the sender's pool. For tests and in-process benchmarks.
#pragma once

#include <memory>
#include <string>

#include "dpdk/dpdk_port.h"

struct rte_ring;

namespace roce::dpdk {

class RingPair {
 public:
  // `name` must be unique among live pairs (it names the rings and the ports
  // "net_ring_<name>_a" / "_b"). Each port gets its own pool sized by `config`.
  static std::unique_ptr<RingPair> create(const std::string& name, const PortConfig& config,
                                          std::string* error);
  // Stops both ports, returns the mbufs still queued in the rings to their pools, then closes
  // the ports and frees the rings. The two ports hold each other's mbufs, which is why they
  // come and go together.
  ~RingPair();
  RingPair(const RingPair&) = delete;
  RingPair& operator=(const RingPair&) = delete;

  DpdkPort& a() { return *a_; }
  DpdkPort& b() { return *b_; }

  // Ring capacity per direction (mbufs a sender can queue before tx_burst takes fewer).
  static constexpr unsigned kRingSize = 1024;

 private:
  RingPair() = default;
  void drain();

  rte_ring* a_to_b_ = nullptr;
  rte_ring* b_to_a_ = nullptr;
  std::unique_ptr<DpdkPort> a_;
  std::unique_ptr<DpdkPort> b_;
};

}  // namespace roce::dpdk
