// Wire layouts of the neighbour protocols beside RoCE: ARP (RFC 826), ICMP echo (RFC 792),
// ICMPv6 (RFC 4443) with Neighbor Discovery (RFC 4861), and the IPv4 options an echo carries
// back (RFC 791 3.1). Like headers.h: every struct is exactly its wire size with alignment 1;
// multi-byte fields are big-endian (byte_order.h).
#pragma once

#include <array>
#include <cstdint>

#include "stack/wire/byte_order.h"
#include "stack/wire/headers.h"

namespace roce::wire {

// --- ARP over Ethernet for IPv4 (RFC 826; IANA ARP parameters) -----------------------------
inline constexpr uint16_t kArpHrdEthernet = 1;
inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;

struct ArpPkt {
  Be16 htype;
  Be16 ptype;
  uint8_t hlen;
  uint8_t plen;
  Be16 op;
  MacAddr sha;
  std::array<uint8_t, 4> spa;
  MacAddr tha;
  std::array<uint8_t, 4> tpa;
};

// --- ICMP and ICMPv6 --------------------------------------------------------------------------
// RFC 792 and RFC 4443 / RFC 4861 message types.
inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpEchoRequest = 8;
inline constexpr uint8_t kIcmp6EchoRequest = 128;
inline constexpr uint8_t kIcmp6EchoReply = 129;
inline constexpr uint8_t kNdNeighborSolicit = 135;
inline constexpr uint8_t kNdNeighborAdvert = 136;

struct IcmpHdr {  // ICMP and ICMPv6 share the first four bytes (RFC 792, RFC 4443 2.1)
  uint8_t type;
  uint8_t code;
  Be16 checksum;
};

// --- Neighbor Discovery (RFC 4861) -----------------------------------------------------------
inline constexpr uint8_t kNdOptSourceLla = 1;
inline constexpr uint8_t kNdOptTargetLla = 2;
inline constexpr uint8_t kNaFlagSolicited = 0x40;
inline constexpr uint8_t kNaFlagOverride = 0x20;
inline constexpr uint8_t kNdHopLimit = 255;  // 7.1.1 / 7.1.2: anything else came via a router

struct NdMsg {  // Neighbor Solicitation / Advertisement (4.3, 4.4)
  IcmpHdr icmp;
  uint8_t flags;  // NA: R S O; NS: reserved
  uint8_t reserved[3];
  std::array<uint8_t, 16> target;
};
struct NdLlaOption {  // Source / Target Link-Layer Address on Ethernet (4.6.1, RFC 2464 8)
  uint8_t type;
  uint8_t len;  // in units of 8 bytes
  MacAddr addr;
};

// --- IPv4 options (RFC 791 3.1) --------------------------------------------------------------
inline constexpr uint8_t kIpOptEnd = 0;
inline constexpr uint8_t kIpOptNop = 1;
inline constexpr uint8_t kIpOptRr = 7;      // record route
inline constexpr uint8_t kIpOptTs = 68;     // internet timestamp
inline constexpr uint8_t kIpOptLsrr = 131;  // loose source route
inline constexpr uint8_t kIpOptSsrr = 137;  // strict source route
// The timestamp option's flags: what each entry holds.
inline constexpr uint8_t kTsOnly = 0;
inline constexpr uint8_t kTsAndAddr = 1;
inline constexpr uint8_t kTsPrespec = 3;

static_assert(sizeof(ArpPkt) == 28 && alignof(ArpPkt) == 1);
static_assert(sizeof(IcmpHdr) == 4 && sizeof(NdMsg) == 24 && sizeof(NdLlaOption) == 8);
static_assert(alignof(NdMsg) == 1 && alignof(NdLlaOption) == 1);

}  // namespace roce::wire
