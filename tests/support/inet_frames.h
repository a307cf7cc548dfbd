// Test helpers for Ethernet / ARP / IPv4 / IPv6 / ICMP frames, written independently of the
// stack's code: GIDs from addresses, Ethernet and ARP builders, and the Internet checksum
// (RFC 1071) to check and to recompute the checksums of a frame whose L3 header starts at byte
// `l3`. Shared by the neighbour agent's unit test, fuzzer and benchmark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stack/core/types.h"

namespace roce::test {

using Bytes = std::vector<uint8_t>;

inline Gid v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}
inline Gid v6(uint16_t hi, uint16_t lo) {  // hi::lo
  Gid g{};
  g[0] = static_cast<uint8_t>(hi >> 8);
  g[1] = static_cast<uint8_t>(hi);
  g[14] = static_cast<uint8_t>(lo >> 8);
  g[15] = static_cast<uint8_t>(lo);
  return g;
}

inline void put(Bytes& b, const uint8_t* p, size_t n) { b.insert(b.end(), p, p + n); }
inline void put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
// `b` with zeros up to `n` bytes (Ethernet's minimum frame without FCS by default).
inline Bytes padded(Bytes b, size_t n = 60) {
  if (b.size() < n) b.resize(n, 0);
  return b;
}
inline Bytes eth(const Mac& dst, const Mac& src, uint16_t type) {
  Bytes b;
  put(b, dst.data(), 6);
  put(b, src.data(), 6);
  put16(b, type);
  return b;
}
// An Ethernet / ARP (Ethernet, IPv4) frame of 42 bytes, unpadded; addresses as GIDs.
inline Bytes arp(uint16_t op, const Mac& eth_dst, const Mac& sha, const Gid& spa, const Mac& tha,
                 const Gid& tpa) {
  Bytes b = eth(eth_dst, sha, 0x0806);
  for (uint16_t v : {1, 0x0800}) put16(b, v);
  b.push_back(6);
  b.push_back(4);
  put16(b, op);
  put(b, sha.data(), 6);
  put(b, spa.data() + 12, 4);
  put(b, tha.data(), 6);
  put(b, tpa.data() + 12, 4);
  return b;
}

inline uint32_t sum16(const uint8_t* p, size_t n, uint32_t s = 0) {
  for (size_t i = 0; i < n; ++i) s += (i & 1) ? p[i] : p[i] << 8;
  return s;
}
inline uint16_t fold(uint32_t s) {
  while (s > 0xffff) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(s);
}

// True if the IPv4 header at `l3` (options included: its IHL) checks.
inline bool ipv4_header_ok(const Bytes& f, size_t l3) {
  return fold(sum16(&f[l3], (f[l3] & 15) * 4u)) == 0xffff;
}
// True if the ICMP message after the IPv4 header at `l3` checks.
inline bool icmp4_ok(const Bytes& f, size_t l3) {
  const size_t ihl = (f[l3] & 15) * 4u, total = f[l3 + 2] << 8 | f[l3 + 3];
  return fold(sum16(&f[l3 + ihl], total - ihl)) == 0xffff;
}
inline uint32_t pseudo6(const Bytes& f, size_t l3) {
  const uint32_t plen = f[l3 + 4] << 8 | f[l3 + 5];
  return sum16(&f[l3 + 8], 32) + plen + 58;
}
// True if the ICMPv6 message after the IPv6 header at `l3` checks.
inline bool icmp6_ok(const Bytes& f, size_t l3) {
  const uint32_t plen = f[l3 + 4] << 8 | f[l3 + 5];
  return fold(sum16(&f[l3 + 40], plen, pseudo6(f, l3))) == 0xffff;
}

// Recompute checksums in place; both are no-ops where the lengths do not fit the frame.
inline void fix_icmp6(Bytes& f, size_t l3) {
  if (f.size() < l3 + 44) return;
  const uint32_t plen = f[l3 + 4] << 8 | f[l3 + 5];
  if (plen < 4 || f.size() < l3 + 40 + plen) return;
  f[l3 + 42] = f[l3 + 43] = 0;
  const uint16_t c = static_cast<uint16_t>(~fold(sum16(&f[l3 + 40], plen, pseudo6(f, l3))));
  f[l3 + 42] = static_cast<uint8_t>(c >> 8);
  f[l3 + 43] = static_cast<uint8_t>(c);
}
inline void fix_ipv4(Bytes& f, size_t l3, bool icmp = true) {
  const size_t ihl = f.size() > l3 ? (f[l3] & 15) * 4 : 0;
  if (ihl < 20 || f.size() < l3 + ihl) return;
  f[l3 + 10] = f[l3 + 11] = 0;
  const uint16_t c = static_cast<uint16_t>(~fold(sum16(&f[l3], ihl)));
  f[l3 + 10] = static_cast<uint8_t>(c >> 8);
  f[l3 + 11] = static_cast<uint8_t>(c);
  const size_t total = f[l3 + 2] << 8 | f[l3 + 3];
  if (icmp && f[l3 + 9] == 1 && total >= ihl + 4 && f.size() >= l3 + total) {
    f[l3 + ihl + 2] = f[l3 + ihl + 3] = 0;
    const uint16_t i = static_cast<uint16_t>(~fold(sum16(&f[l3 + ihl], total - ihl)));
    f[l3 + ihl + 2] = static_cast<uint8_t>(i >> 8);
    f[l3 + ihl + 3] = static_cast<uint8_t>(i);
  }
}

}  // namespace roce::test
