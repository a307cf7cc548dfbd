// Running code on EAL's interrupt thread (dpdk/intr_sync.cc). net_memif handles its peer's
// connect and disconnect there (maps and unmaps the shared regions, frees the control channel),
// with nothing in the driver to keep the port's own stop and close, on another thread, from
// overlapping them (dpdk/README.md, known issues). Code that must not overlap them runs here.
// Uses no other part of dpdk/, so that the raw DPDK tools (dpdk/tools/) can link it alone.
#pragma once

#include <chrono>
#include <functional>

namespace roce::dpdk {

// Runs fn() on EAL's interrupt thread, after what the thread is handling now, and waits for it
// (a callback of ours on an eventfd). EAL must be running. True when fn ran; false when the
// thread did not get to it within `timeout` (fn then never runs). Called on the interrupt thread
// itself, fn runs at once.
bool run_on_eal_interrupt_thread(const std::function<void()>& fn,
                                 std::chrono::milliseconds timeout);

// Call right before rte_eal_cleanup, once every port is closed: waits until the interrupt thread
// has done what it was asked before the call, rebuilds of its epoll set included (a close
// may ask for one, and a rebuild still running when cleanup unmaps EAL's memory crashes on a
// closed memif server's freed handle). Returns at once if run_on_eal_interrupt_thread was never
// called: then nothing of ours asked for one. False if the thread did not answer in `timeout`.
bool settle_eal_interrupt_thread(std::chrono::milliseconds timeout);

}  // namespace roce::dpdk
