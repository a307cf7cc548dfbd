// The engine's clock on the TSC (rte_rdtsc), for ports driven by DPDK. The engine reads its clock
// once per poll, and CLOCK_MONOTONIC through the vDSO costs ~26 ns here (kvm-clock) against
// ~11 ns for the TSC read: send_lat's half round trip over memif took 0.60 us with it against
// 0.63 without (docs/performance.md, "Decisions"). Nanoseconds are (tsc - anchor) scaled by EAL's
// TSC frequency, anchored to CLOCK_MONOTONIC, so they mean the same as SteadyClock's. EAL's
// frequency is an estimate: reanchor() (from the device's 1 ms tick on the engine's thread; it
// acts at most every 10 ms) sets the rate that meets CLOCK_MONOTONIC again by the next call,
// without a jump, so the clock never goes backwards.
#pragma once

#include <cstdint>
#include <memory>

#include "stack/util/clock.h"

namespace roce::dpdk {

class TscClock final : public Clock {
 public:
  // A TSC clock if the CPU's TSC is invariant (constant rate, running in every C-state) and
  // EAL knows its frequency; otherwise nullptr (use SteadyClock). EAL must be running.
  static std::unique_ptr<TscClock> create();
  // The same with a given TSC frequency (tests: a wrong estimate that reanchor() corrects).
  static std::unique_ptr<TscClock> create_with_hz(uint64_t hz);

  uint64_t now_ns() const override;
  // Continues from now_ns() at the rate measured since the last call (CLOCK_MONOTONIC against
  // TSC ticks), adjusted to close the distance to CLOCK_MONOTONIC over an interval like the
  // last one (by at most 1 % of it). Calls less than 10 ms apart change nothing, nor one whose
  // reading of the two clocks was interrupted (more than 20 us between its TSC reads). Same
  // thread as now_ns() (or serialised with it).
  void reanchor();
  uint64_t hz() const { return hz_; }

 private:
  TscClock() = default;
  uint64_t ns_at(uint64_t tsc) const;  // the clock's reading at TSC value `tsc`
  uint64_t hz_ = 0;
  uint64_t mult_ = 0;  // ns per tick, as a 32.32 fixed-point number
  uint64_t anchor_tsc_ = 0;
  uint64_t anchor_ns_ = 0;
  uint64_t anchor_mono_ = 0;  // CLOCK_MONOTONIC at the last (re)anchoring
};

}  // namespace roce::dpdk
