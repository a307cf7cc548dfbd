// Doorbells: any application thread marks "object i has new work" with one atomic OR into a
// two-level bitmap; the engine drains set bits each poll iteration at the cost of a few loads
// when nothing rang. No lost wake-ups: a ringer sets the leaf bit before the summary bit, and the
// engine clears the summary bit before the leaf word.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>

namespace roce {

class DoorbellSet {
 public:
  explicit DoorbellSet(uint32_t n = 0) { init(n); }
  void init(uint32_t n) {
    leaves_n_ = (n + 63) / 64;
    summary_n_ = (leaves_n_ + 63) / 64;
    leaves_ = std::make_unique<std::atomic<uint64_t>[]>(leaves_n_ ? leaves_n_ : 1);
    summary_ = std::make_unique<std::atomic<uint64_t>[]>(summary_n_ ? summary_n_ : 1);
  }

  void ring(uint32_t i) {
    leaves_[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_release);
    summary_[i / 4096].fetch_or(uint64_t{1} << ((i / 64) % 64), std::memory_order_seq_cst);
    // An engine thread that went to sleep is woken (a futex wake: the only syscall a post can
    // cost, and only while the engine idles). seq_cst pairs with the sleeper's store of
    // `sleeping` followed by its any() re-check: one of the two always sees the other.
    if (sleeping.load(std::memory_order_seq_cst) && waker) waker(waker_ctx);
  }

  // True if any doorbell is set (the engine checks before it goes to sleep).
  bool any() const {
    for (uint32_t s = 0; s < summary_n_; ++s) {
      if (summary_[s].load(std::memory_order_seq_cst)) return true;
    }
    return false;
  }

  std::atomic<bool> sleeping{false};
  void (*waker)(void*) = nullptr;
  void* waker_ctx = nullptr;

  // Calls f(i) for every rung index, clearing them.
  template <typename F>
  void drain(F&& f) {
    for (uint32_t s = 0; s < summary_n_; ++s) {
      if (summary_[s].load(std::memory_order_relaxed) == 0) continue;
      uint64_t sw = summary_[s].exchange(0, std::memory_order_acquire);
      while (sw) {
        const uint32_t leaf = s * 64 + static_cast<uint32_t>(std::countr_zero(sw));
        sw &= sw - 1;
        uint64_t lw = leaves_[leaf].exchange(0, std::memory_order_acquire);
        while (lw) {
          f(leaf * 64 + static_cast<uint32_t>(std::countr_zero(lw)));
          lw &= lw - 1;
        }
      }
    }
  }

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> leaves_;
  std::unique_ptr<std::atomic<uint64_t>[]> summary_;
  uint32_t leaves_n_ = 0;
  uint32_t summary_n_ = 0;
};

}  // namespace roce
