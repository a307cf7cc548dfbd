// How the threads that drive an engine back off: the engine thread's sleeps while the engine
// awaits a peer's answer (IdlePolicy::awaiting_sleeps), and inline mode's standby driver
// (EngineRunner::standby, kick_standby, nap), which the verbs shim's event pump runs while a CQ
// is armed on a completion channel, standing in for the engine thread while the application may
// be blocked on the channel. Against one engine and a scripted port whose clock stands still (no
// timer fires); what is checked is counted (sleeps, wake-ups, polls), not timed.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "../support/scripted_port.h"
#include "stack/core/runner.h"
#include "stack/wire/psn.h"

namespace {
using namespace roce;
using namespace roce::test;

constexpr uint64_t kLongSleepNs = 30'000'000'000ull;

// An inline runner whose standby driver sleeps 30 s after a single idle poll.
IdlePolicy long_sleeps() {
  IdlePolicy idle;
  idle.spin_polls = 1;
  idle.min_sleep_ns = idle.max_sleep_ns = kLongSleepNs;
  return idle;
}

// Waits (up to 10 s) until cond() holds.
bool eventually(const std::function<bool()>& cond) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Threaded mode: received packets cannot wake a sleeping engine thread. While a SEND awaits its
// ACK the thread's sleeps stay at the shortest, awaiting_sleeps of them, and double again after:
// 1 ms sleeps over 150 ms, against 1, 2, 4, ... 128 ms (8 sleeps) with nothing awaited.
TEST(EngineRunnerBackoff, SleepsStayShortWhileAPacketAwaitsItsAck) {
  for (const bool awaiting : {false, true}) {
    ProtocolHarness h;
    IdlePolicy idle;
    idle.spin_polls = 1;
    idle.min_sleep_ns = 1'000'000;
    idle.max_sleep_ns = 1'000'000'000;
    idle.awaiting_sleeps = 1'000;
    EngineRunner runner(h.engine(), /*threaded=*/true, idle);
    if (awaiting) {
      ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 64), 0);
    }
    runner.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const uint64_t sleeps = runner.stats().sleeps;
    runner.stop();
    if (awaiting) {
      EXPECT_GE(sleeps, 30u) << "the engine thread's sleeps grew while a SEND awaited its ACK";
      EXPECT_EQ(h.port().take_sent().size(), 1u);
    } else {
      EXPECT_LE(sleeps, 10u) << "an idle engine thread's sleeps did not grow";
    }
  }
}

// ... and only awaiting_sleeps of them: a peer that never answers costs no core.
TEST(EngineRunnerBackoff, ShortSleepsWhileAwaitingAreBounded) {
  ProtocolHarness h;
  IdlePolicy idle;
  idle.spin_polls = 1;
  idle.min_sleep_ns = 1'000'000;
  idle.max_sleep_ns = 1'000'000'000;
  idle.awaiting_sleeps = 5;
  EngineRunner runner(h.engine(), /*threaded=*/true, idle);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 64), 0);
  runner.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const uint64_t sleeps = runner.stats().sleeps;
  runner.stop();
  EXPECT_LE(sleeps, 5u + 10u);  // 5 short ones, then 1, 2, 4, ... ms
}

// A post rings a doorbell; while the standby driver sleeps with no application thread polling,
// the doorbell wakes it (as it wakes the engine thread), and the SEND leaves at once rather than
// at the end of the sleep.
TEST(EngineRunnerStandby, APostWakesItsSleep) {
  ProtocolHarness h;
  EngineRunner runner(h.engine(), /*threaded=*/false, long_sleeps());
  std::thread helper([&runner] { runner.standby(400'000'000); });
  ASSERT_TRUE(eventually([&runner] { return runner.stats().standby_sleeps == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // into its futex wait
  const uint64_t busy = runner.stats().standby_busy_polls;
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 64), 0);
  EXPECT_TRUE(eventually([&] { return runner.stats().standby_busy_polls > busy; }))
      << "the post did not wake the standby driver";
  helper.join();
  EXPECT_EQ(runner.stats().standby_wakeups, 1u);
  EXPECT_EQ(h.port().take_sent().size(), 1u);
}

// kick_standby() (a CQ armed on a channel, a thread about to block on one) wakes a sleeping
// standby driver, and the pump's nap() between standby periods.
TEST(EngineRunnerStandby, AKickWakesItsSleepAndNap) {
  ProtocolHarness h;
  EngineRunner runner(h.engine(), /*threaded=*/false, long_sleeps());
  std::thread helper([&runner] { runner.standby(400'000'000); });
  ASSERT_TRUE(eventually([&runner] { return runner.stats().standby_sleeps == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const uint64_t polls = runner.stats().standby_polls;
  runner.kick_standby();
  EXPECT_TRUE(eventually([&] { return runner.stats().standby_polls > polls; }))
      << "the kick did not wake the standby driver";
  helper.join();
  EXPECT_EQ(runner.stats().standby_wakeups, 1u);

  const auto t0 = std::chrono::steady_clock::now();
  std::thread napper([&runner] { runner.nap(kLongSleepNs); });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  runner.kick_standby();
  napper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

// While the application polls the engine itself, the standby driver does not (a poll of its own
// between the application's would take packets from under it) and takes no doorbells; once the
// application stops, it polls.
TEST(EngineRunnerStandby, LeavesTheEngineToAnApplicationThatPolls) {
  namespace op = wire::op;
  ProtocolHarness h;
  IdlePolicy idle;
  idle.spin_polls = 1;
  idle.min_sleep_ns = idle.max_sleep_ns = 5'000'000;
  EngineRunner runner(h.engine(), /*threaded=*/false, idle);
  h.post_recv(1, 0, 256);
  runner.poll();  // the application drives the engine
  h.port().inject(h.peer_frame(op::kRcSendOnly, ProtocolHarness::kPeerPsn, {}, 8));
  runner.standby(2'000'000);  // shorter than one sleep: one look, attended
  EXPECT_EQ(runner.stats().standby_polls, 0u)
      << "the standby driver polled while the application did";
  EXPECT_EQ(h.completions().size(), 0u);
  runner.standby(2'000'000);  // no application poll since
  EXPECT_GE(runner.stats().standby_polls, 1u);
  EXPECT_EQ(h.completions().size(), 1u);
}

}  // namespace
