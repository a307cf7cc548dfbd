#include "dpdk/ring_pair.h"

#include "dpdk/eal.h"

#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <atomic>

namespace roce::dpdk {

std::unique_ptr<RingPair> RingPair::create(const std::string& name, const PortConfig& config,
                                           std::string* error) {
  if (!Eal::running()) {
    *error = "ring pair '" + name + "': EAL is not running (call Eal::init first)";
    return nullptr;
  }
  std::unique_ptr<RingPair> pair(new RingPair());
  // One producer (the sender's tx queue) and one consumer (the receiver's rx queue) per ring.
  const unsigned flags = RING_F_SP_ENQ | RING_F_SC_DEQ;
  const std::string ab = "roce_" + name + "_ab";
  const std::string ba = "roce_" + name + "_ba";
  pair->a_to_b_ = rte_ring_create(ab.c_str(), kRingSize, SOCKET_ID_ANY, flags);
  pair->b_to_a_ = rte_ring_create(ba.c_str(), kRingSize, SOCKET_ID_ANY, flags);
  if (pair->a_to_b_ == nullptr || pair->b_to_a_ == nullptr) {
    *error = "ring pair '" + name + "': rte_ring_create: " + rte_strerror(rte_errno) +
             " (name in use, or EAL not running?)";
    return nullptr;
  }

  struct Side {
    const char* suffix;
    rte_ring* rx;
    rte_ring* tx;
    std::unique_ptr<DpdkPort>* port;
  };
  const Side sides[] = {{"_a", pair->b_to_a_, pair->a_to_b_, &pair->a_},
                        {"_b", pair->a_to_b_, pair->b_to_a_, &pair->b_}};
  // net_ring ports have an all-zero MAC; give each a distinct locally administered one,
  // 02:00:00:<pair number>:<side>, unless the caller chose one.
  static std::atomic<uint32_t> pairs{0};
  const uint32_t number = pairs.fetch_add(1);
  uint8_t side = 0;
  for (const Side& s : sides) {
    PortConfig port_config = config;
    if (port_config.mac == std::array<uint8_t, 6>{}) {
      port_config.mac = {
          0x02, 0x00, 0x00, static_cast<uint8_t>(number >> 8), static_cast<uint8_t>(number), side};
    }
    ++side;
    const std::string port_name = name + s.suffix;
    // The vdev is named "net_ring_<port_name>"; the returned id is its ethdev port.
    const int id = rte_eth_from_rings(port_name.c_str(), &s.rx, 1, &s.tx, 1, SOCKET_ID_ANY);
    if (id < 0) {
      *error = "ring pair '" + name + "': rte_eth_from_rings(" + port_name +
               "): " + rte_strerror(rte_errno);
      return nullptr;
    }
    *s.port = DpdkPort::open_port_id(static_cast<uint16_t>(id), port_config, error,
                                     DpdkPort::OnClose::kRemoveDevice);
    if (*s.port == nullptr) return nullptr;
  }
  return pair;
}

void RingPair::drain() {
  rte_mbuf* mbufs[64];
  for (rte_ring* r : {a_to_b_, b_to_a_}) {
    if (r == nullptr) continue;
    unsigned n;
    while ((n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(mbufs), 64, nullptr)) > 0) {
      rte_pktmbuf_free_bulk(mbufs, n);
    }
  }
}

RingPair::~RingPair() {
  if (a_) a_->stop();
  if (b_) b_->stop();
  drain();
  a_.reset();
  b_.reset();
  rte_ring_free(a_to_b_);
  rte_ring_free(b_to_a_);
}

}  // namespace roce::dpdk
