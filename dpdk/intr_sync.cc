// run_on_eal_interrupt_thread (dpdk/intr_sync.h). The one file of dpdk/ that uses
// experimental DPDK API (22.11): rte_intr_instance_alloc, rte_intr_fd_set and
// rte_intr_type_set, the only way to make an interrupt handle of our own.
//
// The handle is registered once, on first use, and never unregistered. EAL's interrupt thread
// rebuilds its epoll set from every registered handle whenever a callback is registered or
// unregistered, and a closed memif server leaves its listener's freed handle among them
// (dpdk/README.md, known issues): a rebuild still running when rte_eal_cleanup unmaps EAL's
// memory dies in rte_intr_fd_get. A handle registered and unregistered per call set one off after
// every call, the last one right before cleanup (roce-raw-pingpong's pong side: 1 SIGSEGV in
// about 400 runs under load). An EAL alarm is no way onto the thread either: its handler stays
// registered until rte_eal_cleanup unregisters it, a rebuild at the worst time.
#define ALLOW_EXPERIMENTAL_API 1

#include <rte_interrupts.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "dpdk/intr_sync.h"

namespace roce::dpdk {
namespace {

struct Request {
  const std::function<void()>* fn = nullptr;
  std::atomic<bool> done{false};
};

// The process's one channel onto the interrupt thread: an eventfd the thread watches for us.
struct Channel {
  std::mutex mu;  // one request at a time; set-up
  bool tried = false;
  bool ready = false;
  int fd = -1;
  // Registered for the life of the process: EAL's list of callbacks holds it, and EAL's
  // clean-up frees that list but not the handle, which stays reachable from here.
  rte_intr_handle* handle = nullptr;
  // The request the callback takes. A caller that gives up takes it back with a CAS; if the
  // callback got there first, fn is running and the caller waits for it.
  std::atomic<Request*> slot{nullptr};
};

Channel& channel() {
  static Channel* c = new Channel;  // never destroyed: the thread may call us until exit
  return *c;
}

// Runs on the interrupt thread. EAL does not read an external handle's fd: we do (the eventfd
// would stay readable and call us again).
void on_channel_event(void* arg) {
  auto* c = static_cast<Channel*>(arg);
  uint64_t v = 0;
  [[maybe_unused]] const ssize_t n = read(c->fd, &v, sizeof v);
  Request* r = c->slot.exchange(nullptr, std::memory_order_acq_rel);
  if (r == nullptr) return;
  (*r->fn)();
  r->done.store(true, std::memory_order_release);
}

// Under c.mu. Registers the handle on first use; false if that failed (then for good).
bool open_channel(Channel& c) {
  if (c.tried) return c.ready;
  c.tried = true;
  c.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c.fd < 0) return false;
  rte_intr_handle* handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  if (handle != nullptr && rte_intr_fd_set(handle, c.fd) == 0 &&
      rte_intr_type_set(handle, RTE_INTR_HANDLE_EXT) == 0 &&
      rte_intr_callback_register(handle, on_channel_event, &c) == 0) {
    c.ready = true;  // the handle stays registered (and allocated) for the life of the process
    c.handle = handle;
    return true;
  }
  if (handle != nullptr) rte_intr_instance_free(handle);
  close(c.fd);
  c.fd = -1;
  return false;
}

// Under c.mu, with the channel open.
bool submit(Channel& c, const std::function<void()>& fn, std::chrono::milliseconds timeout) {
  Request req;
  req.fn = &fn;
  c.slot.store(&req, std::memory_order_release);
  // The thread calls us after the events it is handling, and after any rebuild of its epoll set
  // asked for before this write (its wake-up pipe became readable first, it is always first in a
  // new epoll set, and the thread drops the rest of a batch of events at the pipe to rebuild):
  // so a call also waits for those rebuilds.
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = write(c.fd, &one, sizeof one);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!req.done.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      Request* expected = &req;
      if (c.slot.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) {
        return false;  // never taken: fn will not run
      }
      // Taken: fn is running on the thread. Wait for it (req lives on this stack).
      while (!req.done.load(std::memory_order_acquire)) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}
}  // namespace

bool run_on_eal_interrupt_thread(const std::function<void()>& fn,
                                 std::chrono::milliseconds timeout) {
  if (rte_thread_is_intr() != 0) {
    fn();
    return true;
  }
  Channel& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  return open_channel(c) && submit(c, fn, timeout);
}

bool settle_eal_interrupt_thread(std::chrono::milliseconds timeout) {
  if (rte_thread_is_intr() != 0) return true;
  Channel& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.ready) return true;  // never opened: opening now would itself ask for a rebuild
  static const std::function<void()> nothing = [] {};
  return submit(c, nothing, timeout);
}

}  // namespace roce::dpdk
