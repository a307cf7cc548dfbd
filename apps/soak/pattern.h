// The soak's data patterns: every byte a message carries is a function of a 64-bit key (made of
// the run's seed, the QP, the batch and the operation's index) and the byte's position, so the
// side that checks it needs nothing but the plan both sides derive from the seed. Byte p of
// stream `key` is byte p % 8 (little-endian) of mix64(key + p / 8): a byte left from an earlier
// message, another operation or another QP differs from the expected one with probability
// 255/256, and a "poisoned" range (the inverted stream) differs in every byte, so a range that
// was never written is always caught.
#pragma once

#include <cstdint>
#include <cstring>

#include "stack/util/rng.h"

namespace roce::soak {

inline uint64_t key_of(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

// Calls fn(i, want, n) for the pieces of bytes [pos, pos + len) of stream `key` (inverted: every
// bit flipped) that fall in one 8-byte word each: i is the piece's index from 0, want its n
// expected bytes. Stops early if fn returns false.
template <typename Fn>
inline void for_each_piece(uint64_t len, uint64_t key, uint64_t pos, bool invert, Fn&& fn) {
  for (uint64_t p = pos, end = pos + len; p < end;) {
    const uint64_t v = mix64(key + p / 8);
    const uint64_t word = invert ? ~v : v;
    const uint64_t lo = p % 8;
    const uint64_t n = end - p < 8 - lo ? end - p : 8 - lo;
    if (!fn(p - pos, reinterpret_cast<const uint8_t*>(&word) + lo, n)) return;
    p += n;
  }
}

// Writes bytes [pos, pos + len) of stream `key` to dst.
inline void fill_pattern(uint8_t* dst, uint64_t len, uint64_t key, uint64_t pos = 0,
                         bool invert = false) {
  for_each_piece(len, key, pos, invert, [dst](uint64_t i, const uint8_t* want, uint64_t n) {
    std::memcpy(dst + i, want, n);
    return true;
  });
}

// The index (from 0) of the first byte of src[0, len) that is not byte pos + i of stream `key`,
// or -1 if all are.
inline int64_t check_pattern(const uint8_t* src, uint64_t len, uint64_t key, uint64_t pos = 0,
                             bool invert = false) {
  int64_t bad = -1;
  for_each_piece(len, key, pos, invert, [&](uint64_t i, const uint8_t* want, uint64_t n) {
    if (std::memcmp(src + i, want, n) == 0) return true;
    uint64_t k = 0;
    while (src[i + k] == want[k]) ++k;
    bad = static_cast<int64_t>(i + k);
    return false;
  });
  return bad;
}

}  // namespace roce::soak
