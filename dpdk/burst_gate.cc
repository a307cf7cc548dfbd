// The interrupt thread's side of the burst gate (dpdk/burst_gate.h).
//
// EAL's interrupt thread (DPDK 22.11, eal_intr_thread_main) waits in epoll_wait and, when it
// returns, calls the handlers of the ready handles, net_memif's among them; then it waits again.
// This file defines epoll_wait, so that the thread's calls come here: in programs linked with
// the shared DPDK libraries the executable's definition comes first in the lookup (the linker
// exports it because librte_eal references it), and in the verbs shim, which links DPDK's
// static archives with -Bsymbolic, DPDK's reference binds to it at link time. Every other
// thread's call goes straight on to epoll_pwait (the same call with no signal mask). add()
// checks that the thread really comes through here before it counts a port as gated.
#include "dpdk/burst_gate.h"

#include <rte_interrupts.h>
#include <sys/epoll.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "dpdk/intr_sync.h"

namespace roce::dpdk::burst_gate {
namespace {

struct Registry {
  std::mutex mu;  // the slots; held by the interrupt thread while it waits for them
  std::vector<Slot*> slots;
  std::atomic<uint64_t> closes{0};
  std::atomic<uint64_t> waits{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the thread may call us until exit
  return *r;
}

void wait_until_idle(const Slot& s) {
  // The burst may have been preempted by this very thread (they can share a CPU): spin a
  // little, then let it run.
  for (int i = 0; s.busy.load(std::memory_order_acquire) != 0; ++i) {
    if (i < 64) {
      __builtin_ia32_pause();
    } else if (i < 96) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

// On the interrupt thread, once epoll_wait returned events: no gated burst runs from here on
// until open_gate().
void close_gate() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.slots.empty()) return;
  g_gate.closed.store(1, std::memory_order_relaxed);
  if (g_gate.fenced.load(std::memory_order_relaxed)) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    asym_barrier::heavy();
  }
  r.closes.fetch_add(1, std::memory_order_relaxed);
  for (const Slot* s : r.slots) {
    if (s->busy.load(std::memory_order_acquire) != 0) {
      r.waits.fetch_add(1, std::memory_order_relaxed);
      wait_until_idle(*s);
    }
  }
}

// On the interrupt thread, when it comes back to wait: its handlers are done.
void open_gate() {
  if (g_gate.closed.load(std::memory_order_relaxed) != 0)
    g_gate.closed.store(0, std::memory_order_release);
}

}  // namespace

bool add(Slot* s, const char** error) {
  Registry& r = registry();
  const uint64_t closes_before = r.closes.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(r.mu);
    // Decided once, before the first slot: a burst reads it without the lock.
    if (r.slots.empty()) g_gate.fenced.store(!asym_barrier::available(), std::memory_order_relaxed);
    r.slots.push_back(s);
  }
  // Wake the thread with a call onto it: it comes back from epoll_wait, through here if the
  // wrapper is in force, and closes the gate before it runs the call.
  if (rte_thread_is_intr() != 0) return true;  // (not expected: ports open elsewhere)
  if (!run_on_eal_interrupt_thread([] {}, std::chrono::seconds(5))) {
    *error = "EAL's interrupt thread did not answer";
  } else if (r.closes.load(std::memory_order_relaxed) == closes_before) {
    *error = "EAL's interrupt thread does not wait through this program's epoll_wait";
  } else {
    return true;
  }
  remove(s);
  return false;
}

void remove(Slot* s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::erase(r.slots, s);
}

Stats stats() {
  Registry& r = registry();
  return Stats{r.closes.load(std::memory_order_relaxed), r.waits.load(std::memory_order_relaxed)};
}

}  // namespace roce::dpdk::burst_gate

extern "C" int epoll_wait(int epfd, struct epoll_event* events, int maxevents, int timeout) {
  namespace gate = roce::dpdk::burst_gate;
  if (rte_thread_is_intr() == 0) return epoll_pwait(epfd, events, maxevents, timeout, nullptr);
  gate::open_gate();
  const int n = epoll_pwait(epfd, events, maxevents, timeout, nullptr);
  if (n > 0) gate::close_gate();
  return n;
}
