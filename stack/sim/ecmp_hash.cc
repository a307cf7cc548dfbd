#include "stack/sim/ecmp_hash.h"

#include <cstring>

namespace roce::sim {

namespace {

constexpr uint16_t kEtherTypeVlan = 0x8100;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Ports of a UDP or TCP header at `l4`, if the frame holds them.
void read_ports(const uint8_t* frame, uint32_t len, uint32_t l4, FiveTuple* t) {
  if ((t->proto != kProtoUdp && t->proto != kProtoTcp) || len < l4 + 4) return;
  t->sport = be16(frame + l4);
  t->dport = be16(frame + l4 + 2);
}

}  // namespace

bool parse_five_tuple(const uint8_t* frame, uint32_t len, FiveTuple* out) {
  if (len < 14) return false;
  uint32_t l3 = 14;
  uint16_t type = be16(frame + 12);
  if (type == kEtherTypeVlan) {
    if (len < 18) return false;
    type = be16(frame + 16);
    l3 = 18;
  }
  FiveTuple t;
  if (type == kEtherTypeIpv4) {
    if (len < l3 + 20 || frame[l3] >> 4 != 4) return false;
    const uint32_t ihl = (frame[l3] & 0xFu) * 4;
    if (ihl < 20 || len < l3 + ihl) return false;
    t.proto = frame[l3 + 9];
    t.src[10] = t.src[11] = t.dst[10] = t.dst[11] = 0xFF;
    std::memcpy(&t.src[12], frame + l3 + 12, 4);
    std::memcpy(&t.dst[12], frame + l3 + 16, 4);
    const bool fragment = (be16(frame + l3 + 6) & 0x3FFF) != 0;  // MF or an offset
    if (!fragment) read_ports(frame, len, l3 + ihl, &t);
  } else if (type == kEtherTypeIpv6) {
    if (len < l3 + 40 || frame[l3] >> 4 != 6) return false;
    t.proto = frame[l3 + 6];
    std::memcpy(t.src.data(), frame + l3 + 8, 16);
    std::memcpy(t.dst.data(), frame + l3 + 24, 16);
    read_ports(frame, len, l3 + 40, &t);
  } else {
    return false;
  }
  *out = t;
  return true;
}

// The addresses are taken as 64-bit words in the host's byte order: the same run draws the
// same paths on every little-endian machine (the ones this stack runs on), other ones differently.
uint32_t ecmp_hash(const FiveTuple& t, uint64_t seed) {
  uint64_t w[5];
  std::memcpy(w, t.src.data(), 16);
  std::memcpy(w + 2, t.dst.data(), 16);
  w[4] = uint64_t{t.proto} << 32 | uint64_t{t.sport} << 16 | t.dport;
  uint64_t h = mix(seed + 0x9E3779B97F4A7C15ull);
  for (uint64_t v : w) h = mix(h ^ v);
  return static_cast<uint32_t>(h >> 32);
}

uint32_t ecmp_path(const uint8_t* frame, uint32_t len, uint32_t paths, uint64_t seed) {
  FiveTuple t;
  if (paths <= 1 || !parse_five_tuple(frame, len, &t)) return 0;
  return ecmp_hash(t, seed) % paths;
}

}  // namespace roce::sim
