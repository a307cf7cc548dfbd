// Drives an engine, in one of two ways:
//
// - threaded (default): a thread of its own polls the engine. When idle it backs off -- a few
//   thousand polls (yielding its core now and then if that runs another thread), then sleeps up to
//   IdlePolicy::max_sleep_ns -- so an idle stack does not hold a core; a doorbell (a post) wakes
//   it at once through a futex. Frames waiting for a port that takes none (a link that is down)
//   are no work: such an engine backs off too, and its timers still fire on each wake-up. While a
//   thread that never yields shares its core (YieldPacer), it sleeps instead of spinning. Received
//   packets cannot wake it: the sleep bound is the extra latency an idle engine adds to the first
//   packet (the shortest sleep while a peer's answer is due: IdlePolicy::awaiting_sleeps), unless
//   an application thread that waits for a completion polls the engine itself meanwhile
//   (assist()).
// - inline: the application's threads drive it by calling poll() (run-to-completion, for
//   latency), one at a time under a try-lock. While the application may be blocked waiting for
//   a completion event instead of polling, a helper thread stands in for the engine thread
//   (standby(): the same back-off, woken by doorbells and kick_standby()).
//
// Control operations (creating and modifying objects) must run with exclusive access to the
// engine: run() executes a function on the engine thread and waits for it (threaded), or under
// the engine lock (inline), as a driver submits commands to a NIC.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>

#include "stack/core/engine.h"
#include "stack/util/spin_lock.h"

namespace roce {

struct IdlePolicy {
  uint32_t spin_polls = 4096;       // idle polls before the first sleep
  uint64_t min_sleep_ns = 10'000;   // first sleep
  uint64_t max_sleep_ns = 200'000;  // sleeps double up to this
  // While the engine awaits a peer's answer (unacknowledged RC packets, READ responses: its
  // port_inflight()), this many sleeps after the last work stay at min_sleep_ns: the answer,
  // which cannot wake the thread, is likely due (a peer's reply to a ping-pong, its ACKs) and
  // waits less. About 4 ms at the defaults, then the sleeps double as when idle, so a peer
  // that never answers costs no core.
  uint32_t awaiting_sleeps = 200;
};

// The idle back-off of a thread that drives an engine (the engine thread, an inline engine's
// standby driver): after a poll that found work, spin_polls idle polls, then sleeps of
// min_sleep_ns doubling up to max_sleep_ns (the first awaiting_sleeps of them kept short while
// the engine awaits an answer); work, or a sleep cut short by a wake-up, starts it afresh.
class IdleBackoff {
 public:
  explicit IdleBackoff(const IdlePolicy& p) : p_(p), sleep_ns_(p.min_sleep_ns) {}
  void busy() {
    idle_polls_ = 0;
    short_sleeps_ = 0;
    sleep_ns_ = p_.min_sleep_ns;
  }
  // After an idle poll: true while the spin phase lasts (poll again), false when it is time to
  // sleep for sleep_ns().
  bool spin() {
    if (idle_polls_ < p_.spin_polls) ++idle_polls_;
    return idle_polls_ < p_.spin_polls;
  }
  uint32_t idle_polls() const { return idle_polls_; }
  uint64_t sleep_ns() const { return sleep_ns_; }
  // After a sleep; `awaiting`: the engine awaits a peer's answer.
  void slept(bool woken, bool awaiting = false) {
    if (woken) {
      sleep_ns_ = p_.min_sleep_ns;
    } else if (awaiting && short_sleeps_ < p_.awaiting_sleeps) {
      ++short_sleeps_;
      sleep_ns_ = p_.min_sleep_ns;
    } else {
      sleep_ns_ = std::min(sleep_ns_ * 2, p_.max_sleep_ns);
    }
  }

 private:
  IdlePolicy p_;
  uint32_t idle_polls_ = 0;
  uint32_t short_sleeps_ = 0;
  uint64_t sleep_ns_;
};

struct RunnerStats {
  uint64_t polls = 0;
  uint64_t busy_polls = 0;
  uint64_t sleeps = 0;
  uint64_t wakeups = 0;         // woken early by a doorbell
  uint64_t yields = 0;          // sched_yield calls while spinning idle
  uint64_t long_yields = 0;     // yields that got the core back only after YieldPacer::kHogNs
  uint64_t starved_yields = 0;  // see YieldPacer
  // Inline mode: the standby driver (EngineRunner::standby).
  uint64_t standby_polls = 0;       // its polls of the engine
  uint64_t standby_busy_polls = 0;  // ... that found work
  uint64_t standby_sleeps = 0;
  uint64_t standby_wakeups = 0;  // sleeps cut short by a doorbell or kick_standby()
};

// How often an idle-spinning engine thread yields its core (every() idle polls). An
// application thread spinning on a CQ on the same core (fewer cores than busy threads) then
// gets it back at once instead of at the scheduler's next tick. A yield that found nothing else
// to run makes the interval longer, up to `max_every` (the runner passes half its spin phase, so
// that it still looks once a phase), so that an engine thread with a core of its own hardly pays
// for the system call.
//
// A starved yield took kHogNs or more, with no application thread polling the engine (assist) in
// the kAssistedNs before it returned, and the engine's next poll found work that had waited: the
// core went to a thread that neither yields back nor drives the engine while packets arrived.
// perftest's write_lat spins on a byte of its buffer without calling the library, and only the
// engine can write that byte; the engine thread got its core back only when the scheduler took it
// from that thread, milliseconds later. For kContendedNs after a starved yield the runner sleeps
// where it would yield: a timed wake-up preempts the spinner, as the engine thread has used far
// less CPU than it. The yield after that while is a probe: starved again, another while.
//
// Sleeping where a yield would do costs an application that polls its CQ or yields itself (each
// post then wakes the engine thread). Measured on this project's two-core VM: RC write_lat's
// t_typical went from ~10 to 90-190 us when a long yield counted whoever ran, and a short send_lat
// run lost 2-4x to a while begun during a peer's start-up, when no work waited.
class YieldPacer {
 public:
  static constexpr uint32_t kMinEvery = 64;
  static constexpr uint64_t kOtherRanNs = 1000;
  static constexpr uint64_t kHogNs = 100'000;
  static constexpr uint64_t kAssistedNs = 10'000'000;
  static constexpr uint64_t kContendedNs = 50'000'000;
  explicit YieldPacer(uint32_t max_every) : max_every_(std::max(max_every, kMinEvery)) {}
  uint32_t every() const { return every_; }
  // How long a yield took, and how long before its return an application thread last polled the
  // engine; true if it ran another thread.
  bool record(uint64_t took_ns, uint64_t assisted_ago_ns = UINT64_MAX);
  // Whether the last yield recorded may be starved (long, unassisted); if so, the runner tells
  // starved_or_not() whether its next poll found work, which returns true if it was starved.
  bool maybe_starved() const { return maybe_starved_; }
  bool starved_or_not(bool work, uint64_t now_ns);
  // True while the runner should sleep instead of yielding (see above).
  bool contended(uint64_t now_ns) const { return now_ns < contended_until_ns_; }

 private:
  uint32_t max_every_;
  uint32_t every_ = kMinEvery;
  uint64_t fastest_ns_ = UINT64_MAX;
  bool maybe_starved_ = false;
  uint64_t contended_until_ns_ = 0;
};

class EngineRunner {
 public:
  EngineRunner(Engine& engine, bool threaded, const IdlePolicy& idle = {});
  ~EngineRunner();
  EngineRunner(const EngineRunner&) = delete;
  EngineRunner& operator=(const EngineRunner&) = delete;

  // Threaded: starts the engine thread (pinned to `cpu` if >= 0), which first calls
  // thread_init (e.g. to register with DPDK). Inline: nothing to start.
  void start(int cpu = -1, std::function<void()> thread_init = {},
             std::function<void()> thread_exit = {});
  void stop();
  bool threaded() const { return threaded_; }
  Engine& engine() { return engine_; }

  // Runs fn() with exclusive access to the engine and returns its result.
  template <typename F>
  auto run(F&& fn) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    if (!threaded_ || !running_.load(std::memory_order_acquire) ||
        std::this_thread::get_id() == thread_id_) {
      std::lock_guard<SpinLock> lock(engine_mu_);
      return fn();
    }
    if constexpr (std::is_void_v<R>) {
      submit([&] { fn(); });
    } else {
      R result{};
      submit([&] { result = fn(); });
      return result;
    }
  }

  // Inline mode: one poll of the engine from the caller's thread; false if another thread is
  // polling right now (or the engine has its own thread).
  bool poll();
  // Threaded mode: one poll from the caller's thread, if no other thread is polling right now
  // (false otherwise, and in inline mode). For an application that spins on a CQ and shares
  // its core with the engine thread: it gets its completion without waiting for the scheduler
  // to run the engine thread.
  bool assist();
  // Inline mode, for a helper that keeps the engine moving while the application does not
  // poll: polls only if no poll() came since the last call (then up to `max` polls, while they
  // find work). An application driving the engine is not preempted by the helper.
  void poll_if_unattended(int max);
  // Inline mode, for a helper thread while the application may be blocked waiting for a
  // completion event (a CQ armed on a completion channel) rather than polling: stands in for the
  // engine thread for `for_ns` -- polls while that finds work, then the engine thread's idle
  // back-off (IdlePolicy: spin, then sleeps of 10 us doubling to the longest idle sleep), woken
  // at once by a doorbell (a post) or kick_standby(). While application threads poll (a poll()
  // since its last look) it does not poll itself, nor spin, nor take doorbells: it sleeps on,
  // its sleeps doubling, and polls once they stop. Returns after about `for_ns` (one back-off
  // sleep more at most).
  void standby(uint64_t for_ns);
  // Any thread: an application thread is about to wait for an event (it armed a CQ, or blocks
  // on a completion channel). A sleeping standby driver wakes, and its back-off starts afresh.
  void kick_standby();
  // Inline mode, for the same helper between standby() calls: sleeps up to ns, less if
  // kick_standby() comes (or came since the last standby()).
  void nap(uint64_t ns);

  RunnerStats stats() const;

 private:
  void idle_yield();
  // Sleeps on futex_word_ for up to ns, unless it moved since `seen`; true if woken early.
  bool sleep_on(uint32_t seen, uint64_t ns);
  // One poll under the engine lock, unless another thread holds it; *awaiting: whether the
  // engine then awaits a peer's answer (IdlePolicy::awaiting_sleeps).
  bool try_poll(bool* awaiting = nullptr);
  void submit(std::function<void()> fn);
  void loop();
  void run_commands();
  static void wake(void* self);

  Engine& engine_;
  const bool threaded_;
  IdlePolicy idle_;
  YieldPacer pacer_;    // the engine thread's
  SpinLock engine_mu_;  // inline mode, and the engine thread while it polls
  std::thread thread_;
  std::thread::id thread_id_{};
  std::atomic<bool> running_{false};
  std::atomic<bool> app_polled_{false};  // a poll() since the last poll_if_unattended()
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> futex_word_{0};

  std::mutex cmd_mu_;
  std::condition_variable cmd_done_;
  std::deque<std::function<void()>> cmds_;
  std::atomic<uint32_t> pending_{0};
  uint64_t completed_ = 0;

  std::atomic<uint64_t> polls_{0}, busy_polls_{0}, sleeps_{0}, wakeups_{0}, yields_{0},
      long_yields_{0}, starved_yields_{0};
  std::atomic<uint64_t> last_assist_ns_{0};  // when an application thread last polled (assist)

  // Inline mode's standby driver (one helper thread at a time).
  IdleBackoff standby_backoff_;
  std::atomic<bool> kicked_{false};            // kick_standby() since the driver last looked
  std::atomic<bool> standby_sleeping_{false};  // the driver is in (or about to enter) a sleep
  std::atomic<uint64_t> standby_polls_{0}, standby_busy_polls_{0}, standby_sleeps_{0},
      standby_wakeups_{0};
};

}  // namespace roce
