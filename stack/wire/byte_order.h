// Network byte order, handled once: header structs use these field types, and every access goes
// through get()/set(). The types have alignment 1, so a header struct can be laid over any byte of
// a frame without undefined behaviour, and sizeof(header) is exactly its wire size.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace roce::wire {

template <unsigned N>
struct BeUint {
  static_assert(N >= 1 && N <= 8);
  using Value = std::conditional_t<
      (N <= 1), uint8_t,
      std::conditional_t<(N <= 2), uint16_t, std::conditional_t<(N <= 4), uint32_t, uint64_t>>>;
  uint8_t b[N];

  constexpr Value get() const {
    Value v = 0;
    for (unsigned i = 0; i < N; ++i) v = static_cast<Value>((v << 8) | b[i]);
    return v;
  }
  constexpr void set(Value v) {
    for (unsigned i = N; i-- > 0;) {
      b[i] = static_cast<uint8_t>(v & 0xff);
      v = static_cast<Value>(v >> 8);
    }
  }
  friend constexpr bool operator==(const BeUint&, const BeUint&) = default;
};

using Be16 = BeUint<2>;
using Be24 = BeUint<3>;
using Be32 = BeUint<4>;
using Be64 = BeUint<8>;

static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be24) == 3 && alignof(Be24) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);

// Loads and stores of host integers at arbitrary (possibly unaligned) addresses.
template <typename T>
inline T load_unaligned(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
inline void store_unaligned(void* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

}  // namespace roce::wire
