#include "dpdk/tsc_clock.h"

#include <cpuid.h>
#include <rte_cycles.h>

#include <algorithm>

namespace roce::dpdk {
namespace {
__extension__ using u128 = unsigned __int128;

uint64_t monotonic_ns() { return SteadyClock().now_ns(); }

bool invariant_tsc() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  // (GCC's cpuid.h returns unsigned, clang's int: the highest leaf's bits either way.)
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d >> 8) & 1u;  // CPUID.80000007H:EDX[8], "invariant TSC"
}
}  // namespace

std::unique_ptr<TscClock> TscClock::create() {
  if (!invariant_tsc()) return nullptr;
  return create_with_hz(rte_get_tsc_hz());
}

std::unique_ptr<TscClock> TscClock::create_with_hz(uint64_t hz) {
  if (hz < 1'000'000) return nullptr;
  std::unique_ptr<TscClock> c(new TscClock());
  c->hz_ = hz;
  c->mult_ = static_cast<uint64_t>((static_cast<u128>(1'000'000'000u) << 32) / hz);
  c->anchor_tsc_ = rte_rdtsc();
  c->anchor_ns_ = c->anchor_mono_ = monotonic_ns();
  return c;
}

uint64_t TscClock::ns_at(uint64_t tsc) const {
  return anchor_ns_ + static_cast<uint64_t>((static_cast<u128>(tsc - anchor_tsc_) * mult_) >> 32);
}

uint64_t TscClock::now_ns() const { return ns_at(rte_rdtsc()); }

void TscClock::reanchor() {
  // The monotonic reading between two TSC reads: if this thread was descheduled in between,
  // the pair would skew the rate; skip it (the next call measures over a longer interval).
  const uint64_t t0 = rte_rdtsc();
  const uint64_t mono = monotonic_ns();
  const uint64_t t1 = rte_rdtsc();
  if (t1 - t0 > hz_ / 50'000) return;  // more than 20 us
  const uint64_t tsc = t0 + (t1 - t0) / 2;
  const uint64_t elapsed = mono - anchor_mono_;
  if (elapsed < 10'000'000) return;  // too short to measure the rate on
  const uint64_t ticks = tsc - anchor_tsc_;
  const uint64_t ours = ns_at(tsc);
  // The measured rate (elapsed / ticks), plus the distance we are behind CLOCK_MONOTONIC (or
  // minus the distance ahead) spread over an interval like this one, at most 1 % of it.
  const auto cap = static_cast<int64_t>(elapsed / 100);
  const int64_t behind = std::clamp(static_cast<int64_t>(mono - ours), -cap, cap);
  const auto target = static_cast<uint64_t>(static_cast<int64_t>(elapsed) + behind);
  if (ticks) mult_ = static_cast<uint64_t>((static_cast<u128>(target) << 32) / ticks);
  anchor_tsc_ = tsc;
  anchor_ns_ = ours;  // continuous: no jump, never backwards
  anchor_mono_ = mono;
}

}  // namespace roce::dpdk
