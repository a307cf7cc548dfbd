// Time for the engine: read once per poll iteration. DPDK devices use the TSC where it is
// invariant (dpdk/tsc_clock.h, kept to CLOCK_MONOTONIC), else CLOCK_MONOTONIC (SteadyClock);
// simulations use a virtual clock that only moves when the simulator moves it.
#pragma once

#include <chrono>
#include <cstdint>

namespace roce {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t now_ns() const = 0;
};

// Monotonic wall time (CLOCK_MONOTONIC through the vDSO: no syscall, ~20 ns).
class SteadyClock final : public Clock {
 public:
  uint64_t now_ns() const override {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
};

class VirtualClock final : public Clock {
 public:
  uint64_t now_ns() const override { return now_; }
  void set(uint64_t t) { now_ = t; }
  void advance(uint64_t dt) { now_ += dt; }

 private:
  uint64_t now_ = 0;
};

}  // namespace roce
