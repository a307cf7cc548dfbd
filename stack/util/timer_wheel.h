// A hashed timing wheel on an injected clock: O(1) arm / cancel, intrusive nodes (no allocation),
// one slot per tick of 2^kTickShift ns (~1 us). A timer further out than one revolution stays in
// its slot and is skipped until its round comes. Time only moves when advance() is called with
// a later time: the engine calls it once per poll iteration, the simulator with virtual time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace roce {

struct TimerNode {
  TimerNode* next = nullptr;
  TimerNode* prev = nullptr;
  uint64_t expiry_tick = 0;
  uint32_t owner = 0;  // e.g. a QP number
  uint8_t kind = 0;    // what to do on expiry (the owner's enum)
  bool armed = false;
};

class TimerWheel {
 public:
  static constexpr unsigned kTickShift = 10;  // 1.024 us
  static constexpr unsigned kSlotsLog2 = 12;  // 4096 slots: one revolution ~4.2 ms
  static constexpr uint64_t kSlots = uint64_t{1} << kSlotsLog2;

  explicit TimerWheel(uint64_t now_ns = 0) { reset(now_ns); }

  void reset(uint64_t now_ns) {
    for (auto& s : slots_) s = nullptr;
    for (auto& w : occupied_) w = 0;
    cur_tick_ = now_ns >> kTickShift;
    armed_ = 0;
    min_valid_ = false;
  }

  static uint64_t tick_of(uint64_t ns) { return ns >> kTickShift; }

  // (Re-)arms `n` to fire at the first advance() at or after `deadline_ns`.
  void arm(TimerNode& n, uint64_t deadline_ns) {
    if (n.armed) unlink(n);
    uint64_t tick = (deadline_ns + (uint64_t{1} << kTickShift) - 1) >> kTickShift;
    if (tick <= cur_tick_) tick = cur_tick_ + 1;
    n.expiry_tick = tick;
    link(n);
  }

  void cancel(TimerNode& n) {
    if (n.armed) unlink(n);
  }

  size_t armed() const { return armed_; }

  // Fires (calls fire(node)) every timer whose deadline is at or before now_ns. A fired node is
  // disarmed before the call, so the callback may re-arm it.
  template <typename F>
  void advance(uint64_t now_ns, F&& fire) {
    const uint64_t target = now_ns >> kTickShift;
    if (target <= cur_tick_) return;
    if (armed_ == 0) {
      cur_tick_ = target;
      return;
    }
    // Past one revolution every slot is visited once; expiry ticks decide what fires.
    uint64_t first = cur_tick_ + 1;
    if (target - cur_tick_ > kSlots) first = target - kSlots + 1;
    cur_tick_ = target;
    if (min_valid_ && min_tick_ <= target) min_valid_ = false;
    for (uint64_t t = first; t <= target && armed_ > 0; ++t) {
      const uint64_t slot = t & (kSlots - 1);
      // Pop nodes one at a time, each properly unlinked before its callback runs: a callback
      // may arm or cancel any timer, including others still in this slot. Nodes due in a
      // later revolution are set aside and linked back afterwards.
      TimerNode* later = nullptr;
      while (TimerNode* n = slots_[slot]) {
        unlink(*n);
        if (n->expiry_tick <= target) {
          fire(*n);
        } else {
          n->next = later;
          later = n;
        }
      }
      while (later) {
        TimerNode* n = later;
        later = n->next;
        link(*n);
      }
    }
  }

  // Earliest deadline among armed timers (ns), or UINT64_MAX if none. For the simulator's
  // "skip idle time" and idle sleeps, not for the datapath: it walks the occupied slots in time
  // order from the current tick (a bitmap makes empty stretches cheap) and stops at the first
  // slot holding a timer due within this revolution.
  uint64_t next_deadline_ns() const {
    if (armed_ == 0) return std::numeric_limits<uint64_t>::max();
    if (min_valid_) return min_tick_ << kTickShift;
    uint64_t best = std::numeric_limits<uint64_t>::max();
    const uint64_t start = cur_tick_ + 1;
    uint64_t t = start;
    while (t <= cur_tick_ + kSlots) {
      const uint64_t slot = t & (kSlots - 1);
      const uint64_t word = occupied_[slot / 64] >> (slot % 64);
      if (word == 0) {
        t += 64 - slot % 64;  // nothing more in this word
        continue;
      }
      t += static_cast<uint64_t>(__builtin_ctzll(word));
      if (t > cur_tick_ + kSlots) break;
      for (TimerNode* n = slots_[t & (kSlots - 1)]; n; n = n->next) {
        if (n->expiry_tick < best) best = n->expiry_tick;
      }
      if (best <= t) break;  // due in this revolution: nothing later can be earlier
      ++t;
    }
    min_tick_ = best;
    min_valid_ = true;
    return best << kTickShift;
  }

 private:
  void link(TimerNode& n) {
    if (min_valid_ && n.expiry_tick < min_tick_) min_tick_ = n.expiry_tick;
    const uint64_t slot = n.expiry_tick & (kSlots - 1);
    occupied_[slot / 64] |= uint64_t{1} << (slot % 64);
    TimerNode*& head = slots_[slot];
    n.prev = nullptr;
    n.next = head;
    if (head) head->prev = &n;
    head = &n;
    n.armed = true;
    ++armed_;
  }
  void unlink(TimerNode& n) {
    if (min_valid_ && n.expiry_tick == min_tick_) min_valid_ = false;
    if (n.prev) {
      n.prev->next = n.next;
    } else {
      const uint64_t slot = n.expiry_tick & (kSlots - 1);
      slots_[slot] = n.next;
      if (!n.next) occupied_[slot / 64] &= ~(uint64_t{1} << (slot % 64));
    }
    if (n.next) n.next->prev = n.prev;
    n.next = n.prev = nullptr;
    n.armed = false;
    --armed_;
  }

  TimerNode* slots_[kSlots];
  uint64_t occupied_[kSlots / 64];  // bit set: the slot holds at least one timer
  uint64_t cur_tick_ = 0;
  size_t armed_ = 0;
  // Cache of the earliest expiry for next_deadline_ns(): kept exact on arm, dropped when the
  // earliest node may have gone (cancel, fire).
  mutable uint64_t min_tick_ = 0;
  mutable bool min_valid_ = false;
};

}  // namespace roce
