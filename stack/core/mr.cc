#include "stack/core/mr.h"

namespace roce {

MrTable::MrTable(uint64_t seed) : rng_(seed) {
  regions_.resize(1);
  stride_ = (static_cast<uint32_t>(rng_.next()) | 1) & 0xFFFF;
}

uint32_t MrTable::add(uint8_t* host, uint64_t iova, uint64_t length, uint32_t access, uint32_t pd) {
  uint32_t idx;
  if (!free_.empty()) {
    idx = free_.front();
    free_.pop_front();
  } else {
    if (regions_.size() > kMaxRegions) return 0;
    idx = static_cast<uint32_t>(regions_.size());
    regions_.emplace_back();
  }
  MemoryRegion& r = regions_[idx];
  // A fresh slot starts at a random generation (index 0 is never used, so no key is 0).
  uint32_t gen = r.last_gen;
  if (!r.used_before) {
    gen = static_cast<uint32_t>(rng_.next()) & 0xFFFF;
  } else {
    gen = (gen + stride_) & 0xFFFF;
  }
  r = MemoryRegion{host, iova, length, gen << 16 | idx, access, pd, gen, true};
  ++live_;
  return r.key;
}

bool MrTable::update(uint32_t key, uint8_t* host, uint64_t iova, uint64_t length, uint32_t access,
                     uint32_t pd) {
  if (!find(key)) return false;
  MemoryRegion& r = regions_[key & kMaxRegions];
  r.host = host;
  r.iova = iova;
  r.length = length;
  r.access = access;
  r.pd = pd;
  return true;
}

bool MrTable::remove(uint32_t key) {
  const MemoryRegion* r = find(key);
  if (!r) return false;
  const uint32_t idx = key & kMaxRegions;
  regions_[idx] = MemoryRegion{.last_gen = key >> 16, .used_before = true};
  free_.push_back(idx);
  --live_;
  return true;
}

}  // namespace roce
