// A virtual-clock (GCRA) shaper at a rate that may change: what DCQCN's reaction point paces
// its QP with at Rc, and what a QP's own rate limit (ibv_modify_qp's IBV_QP_RATE_LIMIT) paces it
// with. Pure and deterministic: no I/O, no clock; every call takes the caller's now.
//
// tat is when the link would be free had every frame so far gone at exactly the rate. A frame
// may start while tat - now <= the burst tolerance; its cost is charged after it, so no frame
// waits for ever and the average rate is exact. The clock is integer ns plus a fraction, so that
// no rounding accumulates however long it runs. Idle time earns at most the burst tolerance.
#pragma once

#include <cstdint>

namespace roce::cc {

class Pacer {
 public:
  // The rate in Gb/s (bits per ns), > 0. Frames already charged at the old rate are owed at the
  // new one: the debt ahead of `now_ns` is rescaled. The burst tolerance is burst_ns, or the time
  // burst_bytes take at the rate if longer, but at most 4 x burst_ns: it absorbs the engine's
  // timer granularity (a QP woken a tick late still finds its credit); a byte allowance alone
  // would turn into milliseconds of burst and debt at low rates.
  void set_rate(double gbps, uint64_t now_ns, uint64_t burst_ns, uint32_t burst_bytes);
  // The same with a burst cap instead of a tolerance (ibv_modify_qp_rate_limit's max_burst_sz):
  // frames of up to pkt_bytes leave at most max_burst_bytes back to back (at least one frame).
  // Strict, so it absorbs no timer lateness: a late wake-up is rate lost.
  void set_rate_burst(double gbps, uint64_t now_ns, uint32_t max_burst_bytes, uint32_t pkt_bytes);
  // Earliest time >= now_ns at which the next frame may start (== now_ns: send now). The test
  // uses tat's integer ns, so a frame may start up to 1 ns before its exact time; the fraction
  // stays in tat, so that never accumulates (rounding the other way would lose up to 1 ns per
  // frame).
  uint64_t tx_time(uint64_t now_ns) const {
    const auto tol = static_cast<uint64_t>(burst_tol_ns_);
    return tat_ns_ <= now_ns + tol ? now_ns : tat_ns_ - tol;
  }
  // The frame went at now_ns: charge it.
  void on_sent(uint32_t frame_bytes, uint64_t now_ns);

 private:
  void rescale(double ns_per_byte, uint64_t now_ns);

  uint64_t tat_ns_ = 0;
  double tat_frac_ = 0;  // in [0, 1)
  double ns_per_byte_ = 0;
  double burst_tol_ns_ = 0;
};

}  // namespace roce::cc
