// What the neighbour agent's protocol files (neighbor_agent.cc, arp.cc, icmp_echo.cc, nd.cc)
// share: frame access through copies, the frame size and TTL a Linux host uses, and the address
// classes the protocols' validity rules name (RFC 1122, RFC 4291, RFC 2464). Private to
// stack/net/.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "stack/core/types.h"

namespace roce::neighbor {

// IEEE 802.3: 60 bytes without the FCS. Linux drivers pad shorter frames with zeros (what a
// peer sees on the wire), so do we; received frames may carry such padding behind the packet.
inline constexpr uint32_t kMinEthFrame = 60;

// What Linux puts in replies it originates: default TTL / hop limit 64 (RFC 1700 value).
inline constexpr uint8_t kDefaultTtl = 64;

// Frames are read through copies: any byte offset is fine and no object is assumed to live in
// the caller's buffer.
template <typename T>
T read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void write(uint8_t* p, const T& v) {
  std::memcpy(p, &v, sizeof v);
}

// The I/G bit (IEEE 802 9.2): a multicast or broadcast address.
inline bool mac_is_group(const uint8_t* m) { return m[0] & 0x01; }
inline bool mac_is_zero(const Mac& m) { return (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0; }

// Addresses that can never be a neighbour's source (RFC 1122 3.2.1.3, RFC 1112): 0/8 (0.0.0.0
// itself only as the ARP probe sender), 127/8, 224/4 multicast, 240/4 including the limited
// broadcast.
inline bool ipv4_is_martian(const uint8_t* a) { return a[0] == 0 || a[0] == 127 || a[0] >= 224; }
inline bool ipv4_is_zero(const uint8_t* a) { return (a[0] | a[1] | a[2] | a[3]) == 0; }

inline bool ipv6_is_multicast(const uint8_t* a) { return a[0] == 0xFF; }
inline bool ipv6_is_unspecified(const uint8_t* a) {
  for (int i = 0; i < 16; ++i) {
    if (a[i]) return false;
  }
  return true;
}
inline bool ipv6_is_loopback(const uint8_t* a) {
  for (int i = 0; i < 15; ++i) {
    if (a[i]) return false;
  }
  return a[15] == 1;
}
inline bool ipv6_is_link_local(const uint8_t* a) { return a[0] == 0xFE && (a[1] & 0xC0) == 0x80; }
// ff02::1:ffXX:XXXX (RFC 4291 2.7.1), with or without a particular target's low 24 bits.
inline bool ipv6_is_solicited_node(const uint8_t* a) {
  static constexpr uint8_t kPrefix[13] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF};
  return std::memcmp(a, kPrefix, sizeof kPrefix) == 0;
}
inline Gid solicited_node(const uint8_t* target) {
  Gid g{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF};
  std::memcpy(g.data() + 13, target + 13, 3);
  return g;
}
// RFC 2464 7: 33:33 followed by the low 32 bits of the IPv6 multicast address.
inline Mac ipv6_multicast_mac(const uint8_t* group) {
  return Mac{0x33, 0x33, group[12], group[13], group[14], group[15]};
}
inline constexpr Gid kAllNodes{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};

// Number of leading bits two addresses share: our stand-in for "on the same subnet", since the
// agent knows addresses but not prefix lengths.
inline int common_prefix_bits(const uint8_t* a, const uint8_t* b, int n) {
  for (int i = 0; i < n; ++i) {
    const uint8_t x = a[i] ^ b[i];
    if (x) return i * 8 + std::countl_zero(x);
  }
  return n * 8;
}

}  // namespace roce::neighbor
