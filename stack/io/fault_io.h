// Fault injection at the port: a PacketIo that wraps another and drops a seeded fraction of the
// frames received and of those sent, as a lossy link would, and can mark a fraction of the
// ECN-capable frames it sends CE, as a congested switch on the path would. The stack's own loss
// and congestion tests on real devices (veth, rxe peers).
#pragma once

#include <cstdint>

#include "stack/io/packet_io.h"
#include "stack/util/rng.h"
#include "stack/wire/parser.h"

namespace roce {

struct FaultCounters {
  uint64_t rx_dropped = 0;
  uint64_t tx_dropped = 0;
  uint64_t tx_ce_marked = 0;
};

class FaultIo final : public PacketIo {
 public:
  FaultIo(PacketIo* inner, double rx_drop, double tx_drop, uint64_t seed, double tx_ce = 0)
      : inner_(inner), rx_drop_(rx_drop), tx_drop_(tx_drop), tx_ce_(tx_ce), rng_(seed) {}

  uint16_t rx_burst(PktBuf* bufs, uint16_t n) override {
    const uint16_t got = inner_->rx_burst(bufs, n);
    uint16_t keep = 0;
    for (uint16_t i = 0; i < got; ++i) {
      if (rng_.chance(rx_drop_)) {
        ++ctr_.rx_dropped;
        inner_->free(&bufs[i], 1);
      } else {
        bufs[keep++] = bufs[i];
      }
    }
    return keep;
  }
  // A dropped frame counts as sent: the engine hands it over and forgets it, as a NIC would.
  // Each frame gets one decision, in order; the kept frames between two drops go to the port in
  // one burst.
  uint16_t tx_burst(PktBuf* bufs, uint16_t n) override {
    if (tx_ce_ > 0) {
      for (uint16_t k = 0; k < n; ++k) {
        if (rng_.chance(tx_ce_) && wire::mark_ce(bufs[k].data, bufs[k].len)) ++ctr_.tx_ce_marked;
      }
    }
    uint16_t i = 0;
    while (i < n) {
      if (take_drop()) {
        ++ctr_.tx_dropped;
        inner_->free(&bufs[i], 1);
        ++i;
        continue;
      }
      // Send the run of kept frames up to the next one to drop.
      uint16_t j = i + 1;
      while (j < n && !peek_drop()) {
        peeked_ = false;  // frame j is kept: its decision is spent
        ++j;
      }
      const uint16_t k = inner_->tx_burst(bufs + i, static_cast<uint16_t>(j - i));
      i = static_cast<uint16_t>(i + k);
      if (i < j) return i;  // the port is full: the rest stays with the caller
    }
    return n;
  }
  uint16_t alloc(PktBuf* bufs, uint16_t n) override { return inner_->alloc(bufs, n); }
  void free(PktBuf* bufs, uint16_t n) override { inner_->free(bufs, n); }
  uint32_t max_frame_len() const override { return inner_->max_frame_len(); }
  uint32_t rx_ring_frames() const override { return inner_->rx_ring_frames(); }
  const FaultCounters& counters() const { return ctr_; }

 private:
  // Decides (and remembers, until take_drop spends it) whether the next frame is dropped, so
  // runs of kept frames can be sent in bulk.
  bool peek_drop() {
    if (!peeked_) {
      next_drop_ = rng_.chance(tx_drop_);
      peeked_ = true;
    }
    return next_drop_;
  }
  bool take_drop() {
    const bool drop = peek_drop();
    peeked_ = false;
    return drop;
  }
  PacketIo* inner_;
  double rx_drop_;
  double tx_drop_;
  double tx_ce_;
  Rng rng_;
  FaultCounters ctr_;
  bool peeked_ = false;
  bool next_drop_ = false;
};

}  // namespace roce
