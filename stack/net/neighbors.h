// The neighbour table: IP (as a GID) -> MAC. Entries are static (configured) or learned (ARP /
// neighbour advertisement replies, stack/net/neighbor_agent.*). Looked up on the control path
// (QP to RTR, AH creation) and when a resolution completes, never per data packet: a QP caches
// its destination MAC in its path headers.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "stack/core/types.h"

namespace roce {

class NeighborTable {
 public:
  enum class State : uint8_t { kIncomplete, kReachable, kStatic, kFailed };
  struct Entry {
    Gid ip{};
    Mac mac{};
    State state = State::kIncomplete;
    uint64_t next_probe_ns = 0;
    uint32_t probes = 0;
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
    for (const auto& e : entries_) {
      if (e.ip == ip && (e.state == State::kReachable || e.state == State::kStatic)) return e.mac;
    }
    return std::nullopt;
  }
  Entry* find(const Gid& ip) {
    for (auto& e : entries_) {
      if (e.ip == ip) return &e;
    }
    return nullptr;
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
    entries_.push_back(Entry{ip, {}, State::kIncomplete, 0, 0});
    return entries_.back();
  }
  std::vector<Entry>& entries() { return entries_; }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  void upsert(const Gid& ip, const Mac& mac, State s) {
    Entry& e = want(ip);
    e.mac = mac;
    e.state = s;
    e.probes = 0;
  }
  std::vector<Entry> entries_;
};

}  // namespace roce
