// --verify's data pattern (verify.cc): message m of a run carries 64-bit words derived from m
// and the word's offset, so that a message that lands in the wrong place, twice, torn, shifted
// or stale is caught, not only a flipped bit. Both sides derive it from the verb and the size.
#pragma once

#include <cstdint>
#include <cstring>

#include "apps/perf/options.h"
#include "stack/util/rng.h"

namespace roce::perf {

struct Pattern {
  uint64_t salt;
  uint64_t base(uint64_t msg) const { return mix64(salt ^ msg); }
  static uint64_t word(uint64_t base, uint64_t i) { return base + i * 0xD6E8FEB86659FD93ull; }

  // Message `msg`'s first `len` bytes.
  void fill(uint8_t* dst, uint64_t msg, uint64_t len) const {
    const uint64_t b = base(msg);
    uint64_t i = 0;
    for (; (i + 1) * 8 <= len; ++i) {
      const uint64_t w = word(b, i);
      std::memcpy(dst + i * 8, &w, 8);
    }
    if (i * 8 < len) {
      const uint64_t w = word(b, i);
      std::memcpy(dst + i * 8, &w, len - i * 8);
    }
  }
  // The first offset of `got` (len bytes) that differs from message `msg`, with the byte
  // expected there in *want_byte; -1 if none does.
  int64_t check(const uint8_t* got, uint64_t msg, uint64_t len, uint8_t* want_byte) const {
    const uint64_t b = base(msg);
    for (uint64_t off = 0; off < len; off += 8) {
      const uint64_t w = word(b, off / 8);
      const uint64_t n = len - off < 8 ? len - off : 8;
      if (std::memcmp(got + off, &w, n) != 0) {
        uint8_t bytes[8];
        std::memcpy(bytes, &w, 8);
        for (uint64_t k = 0; k < n; ++k) {
          if (got[off + k] != bytes[k]) {
            *want_byte = bytes[k];
            return static_cast<int64_t>(off + k);
          }
        }
      }
    }
    return -1;
  }
};

// A run's pattern for one verb and message size: a message of another size or verb (a peer
// that runs other sizes, a stale message from the previous size) does not match it.
inline Pattern pattern_for(Verb v, uint64_t size) {
  return Pattern{mix64(size * 0x100000001B3ull ^ (static_cast<uint64_t>(v) << 56))};
}

}  // namespace roce::perf
