// Eal::run_on_interrupt_thread. The one file of dpdk/ that uses
// experimental DPDK API (22.11): rte_intr_instance_alloc / _free, rte_intr_fd_set and
// rte_intr_type_set, the only way to make an interrupt handle of our own. The other way onto the
// interrupt thread, an EAL alarm, is not usable here: the alarm's handler stays registered until
// rte_eal_cleanup, whose unregistering makes the thread rebuild its epoll set from every registered
// handle, and a closed memif server leaves its listener's freed handle among them (dpdk/README.md,
// known issue): with an alarm, two-process memif tests died in rte_intr_fd_get during cleanup in 19
// of 30 runs under load. Our handle is registered and unregistered within the call, before any port
// closes.
#define ALLOW_EXPERIMENTAL_API 1

#include <rte_interrupts.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <thread>

#include "dpdk/eal.h"

namespace roce::dpdk {
namespace {

struct SyncPoint {
  int fd = -1;
  const std::function<void()>* fn = nullptr;
  std::atomic<bool> reached{false};
};

// Runs on the interrupt thread. EAL does not read an external handle's fd: we do (the eventfd
// would stay readable and call us again).
void on_sync_event(void* arg) {
  auto* p = static_cast<SyncPoint*>(arg);
  uint64_t v = 0;
  [[maybe_unused]] const ssize_t n = read(p->fd, &v, sizeof v);
  if (p->reached.load(std::memory_order_relaxed)) return;
  (*p->fn)();
  p->reached.store(true, std::memory_order_release);
}

}  // namespace

bool Eal::run_on_interrupt_thread(const std::function<void()>& fn,
                                  std::chrono::milliseconds timeout) {
  if (!running() || rte_thread_is_intr() != 0) {
    fn();
    return true;
  }
  SyncPoint point;
  point.fn = &fn;
  point.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (point.fd < 0) return false;
  rte_intr_handle* handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  const bool registered = handle != nullptr && rte_intr_fd_set(handle, point.fd) == 0 &&
                          rte_intr_type_set(handle, RTE_INTR_HANDLE_EXT) == 0 &&
                          rte_intr_callback_register(handle, on_sync_event, &point) == 0;
  if (registered) {
    // Readable from now on: the thread calls us once it has added the fd to its epoll set,
    // after the events it is handling (the registration wakes it up through its pipe).
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(point.fd, &one, sizeof one);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!point.reached.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // -EAGAIN while our callback runs; afterwards it can no longer be called.
    while (rte_intr_callback_unregister(handle, on_sync_event, &point) == -EAGAIN) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (handle != nullptr) rte_intr_instance_free(handle);
  close(point.fd);
  return registered && point.reached.load(std::memory_order_acquire);
}

}  // namespace roce::dpdk
