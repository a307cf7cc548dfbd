// TscClock: the engine's clock on the TSC means what CLOCK_MONOTONIC means, never goes back,
// and reanchor() takes up an error in EAL's frequency estimate.
#include "dpdk/tsc_clock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include "tests/dpdk/eal_environment.h"

namespace roce::dpdk {
namespace {

[[maybe_unused]] const ::testing::Environment* const kEal =
    ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment());

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Our clock minus CLOCK_MONOTONIC, read back to back.
int64_t offset(const TscClock& c) {
  const int64_t a = monotonic_ns();
  const auto ours = static_cast<int64_t>(c.now_ns());
  const int64_t b = monotonic_ns();
  return ours - (a + b) / 2;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(TscClock, KeepsToTheMonotonicClockAndNeverGoesBack) {
  auto c = TscClock::create();
  if (!c) GTEST_SKIP() << "no invariant TSC on this CPU (the device uses CLOCK_MONOTONIC)";
  EXPECT_GT(c->hz(), 1'000'000u);
  EXPECT_LT(std::abs(offset(*c)), 100'000);  // 0.1 ms at the start
  uint64_t last = c->now_ns();
  for (int i = 0; i < 20; ++i) {
    sleep_ms(15);
    c->reanchor();
    for (int k = 0; k < 1000; ++k) {
      const uint64_t t = c->now_ns();
      ASSERT_GE(t, last);
      last = t;
    }
  }
  // 300 ms later: still within 0.1 ms (EAL's estimate plus the corrections).
  EXPECT_LT(std::abs(offset(*c)), 100'000);
}

TEST(TscClock, ReanchoringCorrectsAWrongFrequency) {
  auto probe = TscClock::create();
  if (!probe) GTEST_SKIP() << "no invariant TSC on this CPU (the device uses CLOCK_MONOTONIC)";
  // A frequency estimate 0.5 % high: the clock runs 0.5 % slow until corrected.
  auto c = TscClock::create_with_hz(probe->hz() + probe->hz() / 200);
  ASSERT_NE(c, nullptr);
  sleep_ms(100);
  const int64_t before = offset(*c);
  EXPECT_LT(before, -300'000) << "0.5 % of 100 ms behind";
  uint64_t last = c->now_ns();
  for (int i = 0; i < 10; ++i) {
    c->reanchor();
    sleep_ms(20);
    const uint64_t t = c->now_ns();
    ASSERT_GE(t, last);  // no jump back when the rate changes
    last = t;
  }
  c->reanchor();
  EXPECT_LT(std::abs(offset(*c)), std::abs(before) / 10) << "before: " << before << " ns";
  // Calls closer than 10 ms apart change nothing.
  const int64_t settled = offset(*c);
  c->reanchor();
  c->reanchor();
  EXPECT_LT(std::abs(offset(*c) - settled), 50'000);
}

// A large error is taken up a little at a time: a reanchor moves the clock towards
// CLOCK_MONOTONIC by at most 1 % of the interval it measured over, so the engine's timers never
// see time run much faster or slower than it does.
TEST(TscClock, ALargeErrorIsTakenUpAtMostOnePercentPerInterval) {
  auto probe = TscClock::create();
  if (!probe) GTEST_SKIP() << "no invariant TSC on this CPU (the device uses CLOCK_MONOTONIC)";
  // A frequency estimate 5 % high: after 100 ms the clock is ~4.8 ms behind.
  auto c = TscClock::create_with_hz(probe->hz() + probe->hz() / 20);
  ASSERT_NE(c, nullptr);
  sleep_ms(100);
  const int64_t before = offset(*c);
  EXPECT_LT(before, -4'000'000);
  c->reanchor();
  const int64_t start = monotonic_ns();
  sleep_ms(100);
  // The rate is right now, plus at most 1 % of the interval measured over (the error to take
  // up is ~5 % of it): over the next interval the clock gains at most ~1 % of that interval,
  // not all it is behind. Judged on the time that really passed (a loaded machine sleeps long).
  const int64_t after = offset(*c);
  const int64_t elapsed = monotonic_ns() - start;
  EXPECT_GT(after, before) << "still falling behind";
  EXPECT_LT(after - before, elapsed / 50) << "before: " << before << " ns, " << elapsed << " ns";
}

// Calls closer together than 10 ms measure nothing: however many, they leave the rate alone.
TEST(TscClock, ReanchorsInQuickSuccessionLeaveTheRateAlone) {
  auto c = TscClock::create();
  if (!c) GTEST_SKIP() << "no invariant TSC on this CPU (the device uses CLOCK_MONOTONIC)";
  for (int i = 0; i < 10; ++i) {  // settled first, as above
    sleep_ms(20);
    c->reanchor();
  }
  const int64_t settled = offset(*c);
  for (int i = 0; i < 100'000; ++i) c->reanchor();
  sleep_ms(50);
  EXPECT_LT(std::abs(offset(*c) - settled), 50'000);
}

TEST(TscClock, RefusesAnImplausibleFrequency) {
  EXPECT_EQ(TscClock::create_with_hz(1000), nullptr);
  EXPECT_EQ(TscClock::create_with_hz(999'999), nullptr);
  EXPECT_NE(TscClock::create_with_hz(1'000'000), nullptr);  // 1 MHz: the lowest taken
}

// A CPU whose TSC the kernel calls invariant (the "nonstop_tsc" flag: CPUID.80000007H:EDX[8])
// gets a TSC clock; the tests above skip without one, so this one says when they should not.
TEST(TscClock, IsThereWhenTheKernelSeesAnInvariantTsc) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool invariant = false;
  while (std::getline(cpuinfo, line)) {
    if (line.starts_with("flags") && line.find(" nonstop_tsc") != std::string::npos) {
      invariant = true;
      break;
    }
  }
  if (!invariant) GTEST_SKIP() << "no nonstop_tsc flag in /proc/cpuinfo";
  EXPECT_NE(TscClock::create(), nullptr);
}

}  // namespace
}  // namespace roce::dpdk
