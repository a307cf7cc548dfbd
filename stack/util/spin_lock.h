// A test-and-test-and-set lock for sections held for one poll or one post: the uncontended path
// is one exchange to take it and a plain store to release it (a pthread mutex costs a locked
// instruction both ways, about 15 % of an inline 8-byte ping-pong's samples when it guarded the
// engine). A waiter spins a little, then yields: the holder may share its CPU.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

namespace roce {

class SpinLock {
 public:
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) &&
           !held_.exchange(true, std::memory_order_acquire);
  }
  void lock() noexcept {
    for (uint32_t spins = 0; !try_lock(); ++spins) {
      if (spins < 128) {
        __builtin_ia32_pause();
      } else {
        sched_yield();
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace roce
