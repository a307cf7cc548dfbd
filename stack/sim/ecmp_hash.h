// ECMP path choice as a switch makes it: the 5-tuple (source and destination IP, IP protocol,
// source and destination port) of each frame, hashed with a seed, picks one of P equal-cost
// paths. Every frame of a flow takes the same path, so RoCEv2, whose destination port is always
// 4791, spreads across paths only by its UDP source port, which the stack derives from the QP
// numbers (Engine::build_path, as Linux does): a QP is one flow.
#pragma once

#include <array>
#include <cstdint>

namespace roce::sim {

struct FiveTuple {
  std::array<uint8_t, 16> src{};  // IPv6, or IPv4 as an IPv4-mapped address
  std::array<uint8_t, 16> dst{};
  uint8_t proto = 0;
  uint16_t sport = 0;  // 0 unless UDP or TCP, and not an IPv4 fragment
  uint16_t dport = 0;
};

// Reads the 5-tuple of an Ethernet [802.1Q] / IPv4 or IPv6 frame. False for a frame that is
// not IP or too short for its IP header. An IPv4 fragment, or a protocol other than UDP and TCP,
// hashes on its addresses and protocol alone (ports 0), as switches do; so does an IPv6 packet
// whose next header is an extension header (the walk is not worth it here: the stack sends
// none).
bool parse_five_tuple(const uint8_t* frame, uint32_t len, FiveTuple* out);

// A deterministic 32-bit hash of the tuple under `seed`. Switch ASICs typically use CRCs with a
// configurable seed; a CRC's seed only XORs a constant into the CRC of a fixed-length key, so
// with 2^n paths every seed would give the same collisions, permuted. A multiplicative mix
// (splitmix64's finaliser, per 64-bit word) makes each seed a different draw, which is what
// comparing runs across seeds needs.
uint32_t ecmp_hash(const FiveTuple& t, uint64_t seed);

// The path (0 .. paths-1) of a frame; 0 for anything parse_five_tuple refuses, and when
// paths <= 1.
uint32_t ecmp_path(const uint8_t* frame, uint32_t len, uint32_t paths, uint64_t seed);

}  // namespace roce::sim
