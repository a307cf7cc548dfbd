// The Internet checksum (RFC 1071) of IPv4 headers (RFC 791), ICMP (RFC 792) and ICMPv6
// (RFC 4443 2.3): the one's complement of the one's-complement sum of 16-bit words. Sums are
// kept in 64 bits with the carries unfolded, so that pieces (a pseudo-header, a header, a body)
// add up before one fold at the end.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "stack/wire/headers.h"

namespace roce::wire {

// Adds n bytes to `sum` as big-endian 16-bit words; an odd last byte is the high half of a word
// whose low half is zero (RFC 1071 4.1).
constexpr uint64_t inet_sum(const uint8_t* p, uint32_t n, uint64_t sum = 0) {
  uint32_t i = 0;
  for (; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (i < n) sum += static_cast<uint32_t>(p[i] << 8);
  return sum;
}

// Adds the carries back in ("end-around carry", RFC 1071 2(1)) until 16 bits remain. Four fixed
// steps cover any 64-bit sum: 33 bits after the first, then at most 0x2FFFE, 0x10001, 0xFFFF.
constexpr uint16_t inet_fold(uint64_t sum) {
  sum = (sum & 0xFFFFFFFF) + (sum >> 32);
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// The value for a checksum field that was zero while summing: the complement of the folded sum
// of `sum` and n bytes at p. Over data whose checksum field is already right it is 0.
constexpr uint16_t inet_checksum(const uint8_t* p, uint32_t n, uint64_t sum = 0) {
  return static_cast<uint16_t>(~inet_fold(inet_sum(p, n, sum)));
}

// The sum of the IPv6 pseudo-header (RFC 8200 8.1) that an upper-layer checksum covers: source,
// destination, upper-layer packet length and next header.
constexpr uint64_t ipv6_pseudo_sum(const uint8_t* src, const uint8_t* dst, uint32_t len,
                                   uint8_t next_header) {
  return inet_sum(dst, 16, inet_sum(src, 16)) + (len >> 16) + (len & 0xFFFF) + next_header;
}

// The checksum of an ICMPv6 message of `len` bytes from `src` to `dst` (RFC 4443 2.3), its
// checksum field zero while summing; 0 over a message whose checksum is right.
constexpr uint16_t icmpv6_checksum(const uint8_t* src, const uint8_t* dst, const uint8_t* msg,
                                   uint32_t len) {
  return inet_checksum(msg, len, ipv6_pseudo_sum(src, dst, len, kIpProtoIcmpv6));
}

// The folded sum of a 20-byte IPv4 header, checksum field included: 0xFFFF if valid. Inline, so
// that a header assembled in a local is summed in registers.
inline uint16_t ipv4_header_checksum(const uint8_t* hdr) {
  // The one's-complement sum does not depend on byte order (RFC 1071 2(B)): add the header as
  // five native 32-bit words, fold to 16 bits and swap the result into network order.
  uint32_t w[5];
  std::memcpy(w, hdr, sizeof w);
  const uint16_t s16 = inet_fold(uint64_t{w[0]} + w[1] + w[2] + w[3] + w[4]);
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap16(s16);
  return s16;
}

}  // namespace roce::wire
