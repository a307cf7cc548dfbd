// Keeps the bursts of ports that share memory with their peer (net_memif) apart from what EAL's
// interrupt thread does to that memory.
//
// DPDK 22.11's net_memif handles its peer's leaving on the interrupt thread (memif_disconnect:
// unmaps the shared regions, frees their descriptions, clears the ring sizes) with nothing to
// wait for a burst that another thread is inside. A burst that began before the teardown (or
// was preempted by it: the two threads may share a CPU) then reads or writes memory that is
// gone, and the process dies of SIGSEGV (tests/dpdk/memif_leave_test.cc, without the gate:
// within 4 rounds, every run). The driver offers no hook, so the gate sits in front of the thread's
// whole work: burst_gate.cc wraps epoll_wait, and on the interrupt thread, once epoll_wait has
// events for it, closes the gate and waits for the bursts in flight to end before the thread goes
// on to its handlers; its next epoll_wait opens the gate again. A burst that finds the gate closed
// does nothing (no frames received, none taken to send), which the engine already handles as
// an empty ring or backpressure.
//
// The burst's side costs two stores and a load of memory no other thread writes in between
// (an asymmetric barrier, stack/util/asym_barrier.h): the interrupt thread pays with a
// membarrier(2) each time it wakes while a gated port is open. Where membarrier is not
// available, both sides use full fences. Ports that do not share memory with a peer are not
// gated and pay nothing.
#pragma once

#include <atomic>
#include <cstdint>

#include "stack/util/asym_barrier.h"

namespace roce::dpdk::burst_gate {

// Read by every gated burst, written only when the interrupt thread wakes: a cache line of its
// own, so that no other variable's writes take it from the bursting cores.
struct alignas(64) Gate {
  // Set while the interrupt thread handles events (and some gated port is open).
  std::atomic<uint32_t> closed{0};
  // Full fences on the burst's side: membarrier(2) is not available.
  std::atomic<bool> fenced{false};
};
inline Gate g_gate;

// One per gated port, written by the one thread that bursts on it.
struct alignas(64) Slot {
  std::atomic<uint32_t> busy{0};
};

// Before a burst: false if the gate is closed (then skip the burst, and do not call leave()).
inline bool enter(Slot& s) {
  s.busy.store(1, std::memory_order_relaxed);
  // Store-load ordering against the interrupt thread's closing of the gate: either it sees busy
  // set and waits, or this load sees the gate closed.
  if (g_gate.fenced.load(std::memory_order_relaxed)) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    asym_barrier::light();
  }
  if (g_gate.closed.load(std::memory_order_acquire) != 0) {
    s.busy.store(0, std::memory_order_release);
    return false;
  }
  return true;
}

// After a burst that enter() let through.
inline void leave(Slot& s) { s.busy.store(0, std::memory_order_release); }

// Gates a port's slot from now on (the port is open, before its first burst); the slot stays
// valid until remove(). Also makes sure the gate is in force: false, with *error, if it
// cannot be (the slot is then not gated: bursts are not protected, as before, and still work).
bool add(Slot* s, const char** error);
// Stops gating the slot (no burst on it is running or will run).
void remove(Slot* s);

// The interrupt thread's side, for tests: how often it closed the gate, and how often it then
// found a burst in flight and waited for it.
struct Stats {
  uint64_t closes = 0;
  uint64_t waits = 0;
};
Stats stats();

}  // namespace roce::dpdk::burst_gate
