// Protection domains and memory regions. A key (lkey == rkey) is 16 bits of table index and 16
// generation bits. A slot's first generation is random and each re-registration advances it by
// a secret random odd stride, so a peer cannot derive a valid rkey from another slot's, and a
// slot's keys do not repeat for 65536 registrations: a stale rkey never opens a newer region.
// Freed slots are reused oldest first. Every access, local or remote, is checked: key, PD,
// access flags and bounds, with overflow-safe arithmetic (IBA 10.6.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "stack/core/types.h"
#include "stack/util/rng.h"

namespace roce {

struct MemoryRegion {
  uint8_t* host = nullptr;  // host address of the first byte
  uint64_t iova = 0;        // address the region is known by (remote VA / SGE addr)
  uint64_t length = 0;
  uint32_t key = 0;  // lkey == rkey; 0 = slot free
  uint32_t access = 0;
  uint32_t pd = 0;
  uint32_t last_gen = 0;  // generation of the slot's last key
  bool used_before = false;
};

enum class MrCheck : uint8_t {
  kOk,
  kBadKey,    // no region with this key
  kBadPd,     // region belongs to another PD
  kNoAccess,  // access flag missing
  kOutOfBounds,
};

class MrTable {
 public:
  static constexpr uint32_t kIndexBits = 16;
  static constexpr uint32_t kMaxRegions = (1u << kIndexBits) - 1;  // index 0 is never used

  explicit MrTable(uint64_t seed);

  // Returns the key, or 0 if the table is full. `access` must already be validated.
  uint32_t add(uint8_t* host, uint64_t iova, uint64_t length, uint32_t access, uint32_t pd);
  bool remove(uint32_t key);
  // Gives the live region `key` new contents under the same key; false if there is none.
  bool update(uint32_t key, uint8_t* host, uint64_t iova, uint64_t length, uint32_t access,
              uint32_t pd);
  const MemoryRegion* find(uint32_t key) const {
    const uint32_t idx = key & kMaxRegions;
    if (idx == 0 || idx >= regions_.size()) return nullptr;
    const MemoryRegion& r = regions_[idx];
    return r.key == key && key != 0 ? &r : nullptr;
  }
  size_t count() const { return live_; }

  // Checks [va, va + len) against the region named by key for `pd` and `need` access flags;
  // on success *host points at va's byte. (Callers skip the check for zero-length RDMA
  // READ/WRITE: IBA C9-88, the R_Key of a zero-length transfer is not checked; and for a
  // zero-length SGE, whose L_Key rxe and mlx5 never look at either.)
  MrCheck check(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t need,
                uint8_t** host) const;

 private:
  std::vector<MemoryRegion> regions_;
  std::deque<uint32_t> free_;
  Rng rng_;
  uint32_t stride_;
  size_t live_ = 0;
};

inline MrCheck MrTable::check(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t need,
                              uint8_t** host) const {
  const MemoryRegion* r = find(key);
  if (!r) return MrCheck::kBadKey;
  if (r->pd != pd) return MrCheck::kBadPd;
  if ((r->access & need) != need) return MrCheck::kNoAccess;
  // va >= iova and va + len <= iova + length, without overflow.
  if (va < r->iova) return MrCheck::kOutOfBounds;
  const uint64_t off = va - r->iova;
  if (off > r->length || len > r->length - off) return MrCheck::kOutOfBounds;
  *host = r->host + off;
  return MrCheck::kOk;
}

}  // namespace roce
