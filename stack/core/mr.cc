#include "stack/core/mr.h"

namespace roce {

MrTable::MrTable(uint64_t seed) : rng_(seed) { regions_.resize(1); }

uint32_t MrTable::add(uint8_t* host, uint64_t iova, uint64_t length, uint32_t access, uint32_t pd) {
  uint32_t idx;
  if (!free_.empty()) {
    idx = free_.back();
    free_.pop_back();
  } else {
    if (regions_.size() > kMaxRegions) return 0;
    idx = static_cast<uint32_t>(regions_.size());
    regions_.emplace_back();
  }
  MemoryRegion& r = regions_[idx];
  uint32_t gen;
  do {
    gen = static_cast<uint32_t>(rng_.next()) & 0xFFFF0000u;
  } while (gen == 0 || gen == r.last_gen);
  r = MemoryRegion{host, iova, length, gen | idx, access, pd, gen};
  ++live_;
  return r.key;
}

bool MrTable::remove(uint32_t key) {
  const MemoryRegion* r = find(key);
  if (!r) return false;
  const uint32_t idx = key & kMaxRegions;
  regions_[idx] = MemoryRegion{.last_gen = key & 0xFFFF0000u};
  free_.push_back(idx);
  --live_;
  return true;
}

}  // namespace roce
