// 24-bit Packet Sequence Number arithmetic (IBA 9.7.1). PSNs wrap at 2^24; two PSNs are
// compared by the sign of their 24-bit difference, which is correct while they lie within
// 2^23 of each other (the spec bounds outstanding PSNs far below that).
#pragma once

#include <cstdint>

namespace roce::wire {

inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline constexpr uint32_t kPsnModulus = 1u << 24;

constexpr uint32_t psn_add(uint32_t psn, int64_t n) {
  return static_cast<uint32_t>(static_cast<int64_t>(psn) + n) & kPsnMask;
}
constexpr uint32_t psn_next(uint32_t psn) { return (psn + 1) & kPsnMask; }

// Signed distance a - b in [-2^23, 2^23): PSNs exactly 2^23 apart read as -2^23 either way.
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}
constexpr bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }
constexpr bool psn_le(uint32_t a, uint32_t b) { return psn_diff(a, b) <= 0; }
constexpr bool psn_gt(uint32_t a, uint32_t b) { return psn_diff(a, b) > 0; }
constexpr bool psn_ge(uint32_t a, uint32_t b) { return psn_diff(a, b) >= 0; }

static_assert(psn_diff(0, 0xFFFFFF) == 1);
static_assert(psn_diff(0xFFFFFF, 0) == -1);
static_assert(psn_lt(0xFFFFF0, 0x000010));
static_assert(psn_add(0xFFFFFE, 3) == 1);
static_assert(psn_add(1, -3) == 0xFFFFFE);

}  // namespace roce::wire
