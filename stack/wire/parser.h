// Frame parser: Ethernet [802.1Q] / IPv4 or IPv6 / UDP 4791 / BTH / extension headers /
// payload / pad / ICRC. It never trusts the frame: every length is checked against the bytes that
// are actually there, and any violation comes back as a typed error, never a crash.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "stack/wire/checksum.h"
#include "stack/wire/headers.h"
#include "stack/wire/opcode.h"

namespace roce::wire {

enum class ParseError : uint8_t {
  kOk = 0,
  kTruncatedL2,          // shorter than Ethernet (+ VLAN) header
  kNotIp,                // EtherType is neither IPv4 nor IPv6 (ARP lands here: see ethertype)
  kTruncatedIp,          // shorter than the IP header
  kBadIpVersion,         // version nibble disagrees with the EtherType
  kIpv4Options,          // IHL != 5
  kIpv4Fragment,         // MF set or fragment offset != 0
  kIpv4BadChecksum,      // IPv4 header checksum wrong
  kBadIpLength,          // IP total/payload length disagrees with the frame
  kIpv6ExtensionHeader,  // next header is an IPv6 extension header
  kNotUdp,               // IP protocol is not UDP (ICMP/ICMPv6 land here: see ip_proto)
  kTruncatedUdp,
  kBadUdpLength,   // UDP length disagrees with the IP payload length
  kWrongUdpPort,   // destination port is not 4791
  kTruncatedBth,   // no room for BTH + ICRC
  kBadTver,        // BTH transport header version != 0
  kUnknownOpcode,  // not in the opcode table
  kTruncatedExtHeader,
  kBadPadCount,        // pad count impossible for this opcode or length
  kUnexpectedPayload,  // payload on an opcode that carries none
  kBadIcrc,
  kCount
};

std::string_view to_string(ParseError e);

enum class IpFamily : uint8_t { kIpv4 = 4, kIpv6 = 6 };

// The parsed view of one frame: offsets into the caller's buffer plus the decoded BTH fields
// the datapath needs on every packet. Fits in one cache line.
struct PacketInfo {
  const uint8_t* frame = nullptr;
  const OpcodeInfo* op = nullptr;  // valid once the BTH has been read
  uint32_t frame_len = 0;
  uint32_t payload_len = 0;
  uint32_t dest_qp = 0;
  uint32_t psn = 0;
  uint32_t icrc = 0;  // as read from the wire
  uint16_t ethertype = 0;
  uint16_t l3_off = 0;
  uint16_t l4_off = 0;
  uint16_t bth_off = 0;
  uint16_t payload_off = 0;
  uint16_t udp_sport = 0;
  uint16_t pkey = 0;
  uint16_t vlan_tci = 0;
  IpFamily family = IpFamily::kIpv4;
  uint8_t ip_proto = 0;
  uint8_t traffic_class = 0;  // IPv4 TOS or IPv6 traffic class, ECN in the low two bits
  uint8_t opcode = 0;
  uint8_t pad = 0;
  bool has_vlan = false;
  bool ack_req = false;
  bool solicited = false;
  bool becn = false;
  bool fecn = false;
  bool cnp_short = false;  // a CNP without its 16 reserved bytes (tolerated)

  Ecn ecn() const { return static_cast<Ecn>(traffic_class & 0x3); }
  uint8_t pcp() const { return static_cast<uint8_t>(vlan_tci >> 13); }
  const uint8_t* payload() const { return frame + payload_off; }
  const Bth& bth() const { return *reinterpret_cast<const Bth*>(frame + bth_off); }
  // Extension header `e`; only valid when op->has_ext(e) (and, for a CNP, !cnp_short).
  template <typename H>
  const H& ext(Ext e) const {
    return *reinterpret_cast<const H*>(frame + bth_off + sizeof(Bth) + op->off(e));
  }
  const Ipv4Hdr& ipv4() const { return *reinterpret_cast<const Ipv4Hdr*>(frame + l3_off); }
  const Ipv6Hdr& ipv6() const { return *reinterpret_cast<const Ipv6Hdr*>(frame + l3_off); }
  const EthHdr& eth() const { return *reinterpret_cast<const EthHdr*>(frame); }
  // Source / destination IP as a 16-byte GID (IPv4-mapped for IPv4).
  void src_gid(uint8_t out[16]) const;
  void dst_gid(uint8_t out[16]) const;
};

struct ParseOptions {
  bool verify_icrc = true;
  bool verify_ipv4_checksum = true;
  uint16_t udp_port = kRoceUdpPort;
};

// Parses `len` bytes at `frame`. On kOk every field of `info` is set. On an error, the fields
// of the layers already read are set (e.g. ethertype and l3_off for kNotIp, ip_proto for
// kNotUdp), so the caller can hand ARP / ICMP frames to the neighbour code without re-parsing.
ParseError parse_frame(const uint8_t* frame, uint32_t len, PacketInfo& info,
                       const ParseOptions& opts = {});

// Whether an IPv6 next-header value names an extension header (RFC 8200 and IANA registry).
constexpr bool is_ipv6_extension_header(uint8_t nh) {
  switch (nh) {
    case 0:
    case 43:
    case 44:
    case 50:
    case 51:
    case 60:
    case 135:
    case 139:
    case 140:
    case 253:
    case 254:
      return true;
    default:
      return false;
  }
}

// Sets CE on an ECN-capable (ECT) IPv4 or IPv6 frame, as a congested switch does, fixing the
// IPv4 header checksum (the ICRC does not cover these bits). Returns true if it marked.
bool mark_ce(uint8_t* frame, uint32_t len);

// GID helpers: IPv4-mapped form is ::ffff:a.b.c.d.
inline void ipv4_to_gid(const uint8_t v4[4], uint8_t gid[16]) {
  std::memset(gid, 0, 10);
  gid[10] = 0xFF;
  gid[11] = 0xFF;
  std::memcpy(gid + 12, v4, 4);
}
inline bool gid_is_ipv4_mapped(const uint8_t gid[16]) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(gid, kPrefix, 12) == 0;
}

}  // namespace roce::wire
