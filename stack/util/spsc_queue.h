// Single-producer / single-consumer queue of fixed-size slots, as a NIC's work and completion
// queues are: the producer fills slots and publishes its index with a release store; the
// consumer reads up to that index (acquire) and publishes how far it has consumed. Indices are
// free-running 32-bit counters; the capacity is a power of two. Producer and consumer indices
// live on separate cache lines.
//
// Used for send/receive work queues (application -> engine; the engine retires a slot only
// when the work request completes) and completion queues (engine -> application).
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace roce {

class SpscQueue {
 public:
  SpscQueue() = default;
  SpscQueue(const SpscQueue&) = delete;
  SpscQueue& operator=(const SpscQueue&) = delete;
  ~SpscQueue() { std::free(buf_); }

  // Capacity becomes the next power of two >= depth. Returns false on allocation failure.
  bool init(uint32_t depth, uint32_t slot_bytes) {
    capacity_ = std::bit_ceil(depth < 1 ? 1u : depth);
    mask_ = capacity_ - 1;
    stride_ = (slot_bytes + 15) & ~15u;
    std::free(buf_);
    buf_ = static_cast<uint8_t*>(std::aligned_alloc(64, round_up(capacity_ * stride_)));
    if (!buf_) return false;
    std::memset(buf_, 0, round_up(capacity_ * stride_));
    prod_.store(0, std::memory_order_relaxed);
    cons_.store(0, std::memory_order_relaxed);
    return true;
  }

  uint32_t capacity() const { return capacity_; }
  uint32_t stride() const { return stride_; }
  uint8_t* slot(uint32_t index) const {
    return buf_ + static_cast<size_t>(index & mask_) * stride_;
  }
  template <typename T>
  T* at(uint32_t index) const {
    return reinterpret_cast<T*>(slot(index));
  }

  // --- producer side ---
  uint32_t prod_local() const { return prod_.load(std::memory_order_relaxed); }
  uint32_t free_slots() const {
    return capacity_ -
           (prod_.load(std::memory_order_relaxed) - cons_.load(std::memory_order_acquire));
  }
  void publish(uint32_t new_prod) { prod_.store(new_prod, std::memory_order_release); }

  // --- consumer side ---
  uint32_t prod_acquire() const { return prod_.load(std::memory_order_acquire); }
  uint32_t cons_local() const { return cons_.load(std::memory_order_relaxed); }
  void retire(uint32_t new_cons) { cons_.store(new_cons, std::memory_order_release); }

  // Moves the queued slots, oldest first, into a new buffer for `depth` (rounded up as by
  // init). Only while neither side is active. False, and nothing changed, if they do not fit or
  // the allocation fails.
  bool resize(uint32_t depth) {
    const uint32_t cons = cons_local();
    const uint32_t n = prod_local() - cons;
    const uint32_t cap = std::bit_ceil(depth < 1 ? 1u : depth);
    if (n > cap) return false;
    const size_t bytes = round_up(static_cast<size_t>(cap) * stride_);
    auto* buf = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
    if (!buf) return false;
    std::memset(buf, 0, bytes);
    for (uint32_t i = 0; i < n; ++i) {
      std::memcpy(buf + static_cast<size_t>(i) * stride_, slot(cons + i), stride_);
    }
    std::free(buf_);
    buf_ = buf;
    capacity_ = cap;
    mask_ = cap - 1;
    cons_.store(0, std::memory_order_relaxed);
    prod_.store(n, std::memory_order_relaxed);
    return true;
  }

  // Empties the queue (only while neither side is active: QP reset / destroy).
  void reset() {
    prod_.store(0, std::memory_order_relaxed);
    cons_.store(0, std::memory_order_relaxed);
  }

 private:
  static size_t round_up(size_t n) { return (n + 63) & ~size_t{63}; }
  alignas(64) std::atomic<uint32_t> prod_{0};
  alignas(64) std::atomic<uint32_t> cons_{0};
  alignas(64) uint8_t* buf_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t mask_ = 0;
  uint32_t stride_ = 0;
};

}  // namespace roce
