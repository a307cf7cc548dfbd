#include "stack/core/runner.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "stack/util/clock.h"

namespace roce {

namespace {
long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}
}  // namespace

EngineRunner::EngineRunner(Engine& engine, bool threaded, const IdlePolicy& idle)
    : engine_(engine),
      threaded_(threaded),
      idle_(idle),
      pacer_(idle.spin_polls / 2),
      standby_backoff_(idle) {
  if (!threaded_) {
    // The standby driver's sleeps take doorbells (standby()); nothing else sets `sleeping`.
    DoorbellSet& db = engine_.doorbells();
    db.waker = &EngineRunner::wake;
    db.waker_ctx = this;
  }
}

EngineRunner::~EngineRunner() { stop(); }

void EngineRunner::start(int cpu, std::function<void()> thread_init,
                         std::function<void()> thread_exit) {
  if (!threaded_ || running_.load()) return;
  stop_.store(false);
  DoorbellSet& db = engine_.doorbells();
  db.waker = &EngineRunner::wake;
  db.waker_ctx = this;
  thread_ = std::thread([this, cpu, thread_init, thread_exit] {
    thread_id_ = std::this_thread::get_id();
    if (thread_init) thread_init();
    if (cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    // Short sleeps must stay short: the default 50 us timer slack would stretch them.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pthread_setname_np(pthread_self(), "roce-engine");
    loop();
    if (thread_exit) thread_exit();
  });
  running_.store(true, std::memory_order_release);
}

void EngineRunner::stop() {
  if (!running_.load()) return;
  stop_.store(true);
  wake(this);
  thread_.join();
  running_.store(false);
  thread_id_ = {};
  DoorbellSet& db = engine_.doorbells();
  db.waker = nullptr;
  db.sleeping.store(false);
  run_commands();  // anything submitted while stopping runs here, on this thread
}

void EngineRunner::wake(void* self) {
  auto* r = static_cast<EngineRunner*>(self);
  r->futex_word_.fetch_add(1, std::memory_order_release);
  futex(&r->futex_word_, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

void EngineRunner::submit(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(cmd_mu_);
  cmds_.push_back(std::move(fn));
  const uint64_t ticket = completed_ + cmds_.size();
  pending_.fetch_add(1, std::memory_order_release);
  wake(this);
  cmd_done_.wait(lock, [&] { return completed_ >= ticket || !running_.load(); });
}

void EngineRunner::run_commands() {
  std::unique_lock<std::mutex> lock(cmd_mu_);
  while (!cmds_.empty()) {
    std::function<void()> fn = std::move(cmds_.front());
    cmds_.pop_front();
    lock.unlock();
    {
      std::lock_guard<SpinLock> elock(engine_mu_);
      fn();
    }
    lock.lock();
    ++completed_;
    pending_.fetch_sub(1, std::memory_order_release);
  }
  cmd_done_.notify_all();
}

void EngineRunner::loop() {
  DoorbellSet& db = engine_.doorbells();
  IdleBackoff backoff(idle_);
  while (!stop_.load(std::memory_order_relaxed)) {
    if (pending_.load(std::memory_order_acquire)) run_commands();
    bool work;
    bool awaiting;
    {
      std::lock_guard<SpinLock> lock(engine_mu_);
      work = engine_.poll();
      awaiting = engine_.port_inflight() != 0;
    }
    polls_.fetch_add(1, std::memory_order_relaxed);
    if (pacer_.maybe_starved() && pacer_.starved_or_not(work, SteadyClock().now_ns())) {
      starved_yields_.fetch_add(1, std::memory_order_relaxed);
    }
    if (work) {
      busy_polls_.fetch_add(1, std::memory_order_relaxed);
      backoff.busy();
      continue;
    }
    if (backoff.spin()) {
      if (backoff.idle_polls() % pacer_.every() != 0) {
        __builtin_ia32_pause();
        continue;
      }
      if (!pacer_.contended(SteadyClock().now_ns())) {
        idle_yield();
        continue;
      }
      // A thread that does not yield back shares this core: a yield would give it the core
      // until the scheduler's next tick. Sleep now instead; the timed wake-up takes it back.
    }
    // Sleep, unless a doorbell or a command arrived after the last poll.
    const uint32_t seen = futex_word_.load(std::memory_order_acquire);
    db.sleeping.store(true, std::memory_order_seq_cst);
    if (!db.any() && !pending_.load(std::memory_order_acquire) && !stop_.load()) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      const bool woken = sleep_on(seen, backoff.sleep_ns());
      if (woken) wakeups_.fetch_add(1, std::memory_order_relaxed);
      backoff.slept(woken, awaiting);
    }
    db.sleeping.store(false, std::memory_order_relaxed);
  }
}

bool EngineRunner::sleep_on(uint32_t seen, uint64_t ns) {
  // tv_nsec must stay below a second (futex fails at once with EINVAL otherwise: with
  // idle_sleep_us=1000000 the thread never slept).
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000u),
                    static_cast<long>(ns % 1'000'000'000u)};
  futex(&futex_word_, FUTEX_WAIT_PRIVATE, seen, &ts);
  return futex_word_.load(std::memory_order_acquire) != seen;
}

// A yield that took about as long as the fastest one seen found nothing else to run: the
// interval doubles. One that took longer ran another thread, and the interval goes back to
// kMinEvery. On this project's VM a yield with nothing else to run takes 1.2-1.3 us, one that
// runs a thread doing a little work and yielding back at least 3.5 us.
bool YieldPacer::record(uint64_t took_ns, uint64_t assisted_ago_ns) {
  maybe_starved_ = took_ns >= kHogNs && assisted_ago_ns >= kAssistedNs;
  fastest_ns_ = std::min(fastest_ns_, took_ns);
  if (took_ns > fastest_ns_ + kOtherRanNs) {
    every_ = kMinEvery;
    return true;
  }
  every_ = std::min(every_ * 2, max_every_);
  return false;
}

bool YieldPacer::starved_or_not(bool work, uint64_t now_ns) {
  maybe_starved_ = false;
  if (work) contended_until_ns_ = now_ns + kContendedNs;
  return work;
}

void EngineRunner::idle_yield() {
  const SteadyClock clock;
  const uint64_t t0 = clock.now_ns();
  yields_.fetch_add(1, std::memory_order_relaxed);
  sched_yield();
  const uint64_t t1 = clock.now_ns();
  if (t1 - t0 >= YieldPacer::kHogNs) long_yields_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t assisted_ago = t1 - std::min(t1, last_assist_ns_.load(std::memory_order_relaxed));
  pacer_.record(t1 - t0, assisted_ago);
}

bool EngineRunner::try_poll(bool* awaiting) {
  std::unique_lock<SpinLock> lock(engine_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  const bool work = engine_.poll();
  if (awaiting) *awaiting = engine_.port_inflight() != 0;
  return work;
}

bool EngineRunner::poll() {
  if (threaded_ && running_.load(std::memory_order_relaxed)) return false;
  if (!app_polled_.load(std::memory_order_relaxed)) {
    app_polled_.store(true, std::memory_order_relaxed);
  }
  return try_poll();
}

bool EngineRunner::assist() {
  if (!threaded_ || !running_.load(std::memory_order_relaxed)) return false;
  // An application thread calling in counts as polling the engine even when the engine thread
  // holds it right now (YieldPacer: such a thread is not a spinner that starves the engine).
  last_assist_ns_.store(SteadyClock().now_ns(), std::memory_order_relaxed);
  return try_poll();
}

void EngineRunner::poll_if_unattended(int max) {
  if (threaded_ && running_.load(std::memory_order_relaxed)) return;
  if (app_polled_.exchange(false, std::memory_order_relaxed)) return;
  for (int i = 0; i < max; ++i) {
    if (!try_poll()) return;
  }
}

void EngineRunner::standby(uint64_t for_ns) {
  if (threaded_) return;
  DoorbellSet& db = engine_.doorbells();
  IdleBackoff& b = standby_backoff_;
  const SteadyClock clock;
  const uint64_t end = clock.now_ns() + for_ns;
  bool awaiting = false;  // as of the driver's last poll
  for (uint64_t now = clock.now_ns(); now < end; now = clock.now_ns()) {
    if (kicked_.exchange(false, std::memory_order_acquire)) b.busy();
    // An application thread that polled since the last look drives the engine itself: no poll
    // (it would take packets between the application's polls and its answers), no spinning.
    const bool attended = app_polled_.exchange(false, std::memory_order_relaxed);
    if (!attended) {
      const bool work = try_poll(&awaiting);
      standby_polls_.fetch_add(1, std::memory_order_relaxed);
      if (work) {
        standby_busy_polls_.fetch_add(1, std::memory_order_relaxed);
        b.busy();
      } else if (b.spin()) {
        // Spinning as the engine thread does, yielding now and then: the application this
        // stands in for may share the core.
        if (b.idle_polls() % YieldPacer::kMinEvery == 0) {
          sched_yield();
        } else {
          __builtin_ia32_pause();
        }
      }
      if (work || b.idle_polls() < idle_.spin_polls) continue;
    }
    // Sleep, unless a kick or (unattended) a doorbell came since the last look.
    const uint32_t seen = futex_word_.load(std::memory_order_acquire);
    standby_sleeping_.store(true, std::memory_order_seq_cst);
    if (!attended) db.sleeping.store(true, std::memory_order_seq_cst);
    if (!kicked_.load(std::memory_order_seq_cst) && (attended || !db.any())) {
      standby_sleeps_.fetch_add(1, std::memory_order_relaxed);
      const bool woken = sleep_on(seen, std::min(b.sleep_ns(), end - now));
      if (woken) standby_wakeups_.fetch_add(1, std::memory_order_relaxed);
      b.slept(woken, awaiting);
    }
    db.sleeping.store(false, std::memory_order_relaxed);
    standby_sleeping_.store(false, std::memory_order_relaxed);
  }
}

void EngineRunner::kick_standby() {
  if (threaded_) return;
  kicked_.store(true, std::memory_order_seq_cst);
  futex_word_.fetch_add(1, std::memory_order_seq_cst);
  if (standby_sleeping_.load(std::memory_order_seq_cst)) {
    futex(&futex_word_, FUTEX_WAKE_PRIVATE, 1, nullptr);
  }
}

void EngineRunner::nap(uint64_t ns) {
  const uint32_t seen = futex_word_.load(std::memory_order_acquire);
  standby_sleeping_.store(true, std::memory_order_seq_cst);
  if (!kicked_.load(std::memory_order_seq_cst)) sleep_on(seen, ns);
  standby_sleeping_.store(false, std::memory_order_relaxed);
}

RunnerStats EngineRunner::stats() const {
  RunnerStats s;
  s.polls = polls_.load();
  s.busy_polls = busy_polls_.load();
  s.sleeps = sleeps_.load();
  s.wakeups = wakeups_.load();
  s.yields = yields_.load();
  s.long_yields = long_yields_.load();
  s.starved_yields = starved_yields_.load();
  s.standby_polls = standby_polls_.load();
  s.standby_busy_polls = standby_busy_polls_.load();
  s.standby_sleeps = standby_sleeps_.load();
  s.standby_wakeups = standby_wakeups_.load();
  return s;
}

}  // namespace roce
