// The neighbour table: IP (as a GID) -> MAC. Entries are static (configured) or learned from ARP
// and neighbour discovery (stack/net/neighbor_agent.*). Looked up on the control path
// (QP to RTR, AH creation) and when a resolution completes, never per data packet: a QP caches
// its destination MAC in its path headers. The neighbour agent also looks up the sender of
// every ARP / ND frame it receives, so lookups go through a hash index (open addressing,
// multiply-shift with a per-table random seed, so that a station on the segment cannot pick
// addresses that collide): a full table costs a broadcast ARP about what an empty one does.
// Entries are never removed; they keep the order they were added in.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "stack/core/types.h"

namespace roce {

class NeighborTable {
 public:
  // RFC 4861 7.3.2's states, as far as the table keeps them: INCOMPLETE (being resolved),
  // REACHABLE (confirmed), STALE (learned without confirmation: usable, to be probed), static
  // (configured), failed (no answer). DELAY and PROBE are a usable entry with probes running.
  enum class State : uint8_t { kIncomplete, kReachable, kStatic, kFailed, kStale };
  struct Entry {
    Gid ip{};
    Mac mac{};
    State state = State::kIncomplete;
    uint64_t next_probe_ns = 0;
    uint32_t probes = 0;
    // Learned and usable: REACHABLE, or STALE (to be probed). Static entries are usable too,
    // but never probed or relearned.
    bool learned_usable() const { return state == State::kReachable || state == State::kStale; }
  };

  // A static entry overrides any learned one.
  void add_static(const Gid& ip, const Mac& mac) { upsert(ip, mac, State::kStatic); }
  // Learned from the wire; never overrides a static entry.
  bool learn(const Gid& ip, const Mac& mac) {
    Entry* e = find(ip);
    if (e && e->state == State::kStatic) return false;
    upsert(ip, mac, State::kReachable);
    return true;
  }
  std::optional<Mac> lookup(const Gid& ip) const {
    const Entry* e = find(ip);
    if (e && (e->learned_usable() || e->state == State::kStatic)) return e->mac;
    return std::nullopt;
  }
  Entry* find(const Gid& ip) {
    const size_t i = index_of(ip);
    return i == kNone ? nullptr : &entries_[i];
  }
  const Entry* find(const Gid& ip) const {
    const size_t i = index_of(ip);
    return i == kNone ? nullptr : &entries_[i];
  }
  // Ensures an entry exists (incomplete if new, or if an earlier resolution failed: a new
  // user of the address asks again); returns it.
  Entry& want(const Gid& ip) {
    if (Entry* e = find(ip)) {
      if (e->state == State::kFailed) {
        e->state = State::kIncomplete;
        e->probes = 0;
        e->next_probe_ns = 0;
      }
      return *e;
    }
    if ((entries_.size() + 1) * 2 > slots_.size()) rehash((entries_.size() + 1) * 2);
    entries_.push_back(Entry{ip, {}, State::kIncomplete, 0, 0});
    place(entries_.size() - 1);
    return entries_.back();
  }
  // Room for `n` entries without allocating (the agent reserves what the wire may create).
  void reserve(size_t n) {
    entries_.reserve(n);
    if (n * 2 > slots_.size()) rehash(n * 2);
  }
  // The entries, in the order they were added: their fields may change, their number not.
  std::span<Entry> entries() { return entries_; }
  std::span<const Entry> entries() const { return entries_; }

 private:
  static constexpr size_t kNone = SIZE_MAX;

  void upsert(const Gid& ip, const Mac& mac, State s) {
    Entry& e = want(ip);
    e.mac = mac;
    e.state = s;
    e.probes = 0;
  }
  size_t slot_of(const Gid& ip) const {
    uint64_t a, b;
    std::memcpy(&a, ip.data(), 8);
    std::memcpy(&b, ip.data() + 8, 8);
    return static_cast<size_t>((a * seed_[0] + b * seed_[1]) >> shift_);
  }
  size_t index_of(const Gid& ip) const {
    if (slots_.empty()) return kNone;
    const size_t mask = slots_.size() - 1;
    for (size_t i = slot_of(ip);; i = (i + 1) & mask) {
      const uint32_t v = slots_[i];
      if (v == 0) return kNone;
      if (entries_[v - 1].ip == ip) return v - 1;
    }
  }
  // Puts entry `k` in the index (which has a free slot: it is kept at most half full).
  void place(size_t k) {
    const size_t mask = slots_.size() - 1;
    size_t i = slot_of(entries_[k].ip);
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = static_cast<uint32_t>(k + 1);
  }
  void rehash(size_t at_least) {
    const size_t n = std::bit_ceil(at_least < 16 ? size_t{16} : at_least);
    slots_.assign(n, 0);
    shift_ = 64 - std::countr_zero(n);
    for (size_t k = 0; k < entries_.size(); ++k) place(k);
  }
  static uint64_t random_odd() {
    std::random_device rd;
    return (uint64_t{rd()} << 32 | rd()) | 1;
  }

  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // entry index + 1, 0 when free; a power of two in size
  int shift_ = 64;
  uint64_t seed_[2] = {random_odd(), random_odd()};
};

}  // namespace roce
