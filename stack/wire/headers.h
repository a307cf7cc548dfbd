// RoCEv2 wire headers (IBA vol. 1 ch. 9.2-9.5, annex A17). Every struct is exactly its wire
// size with alignment 1; multi-byte fields are big-endian (byte_order.h).
#pragma once

#include <array>
#include <cstdint>

#include "stack/wire/byte_order.h"

namespace roce::wire {

inline constexpr uint16_t kRoceUdpPort = 4791;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
inline constexpr uint32_t kIcrcSize = 4;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

using MacAddr = std::array<uint8_t, 6>;

struct EthHdr {
  MacAddr dst;
  MacAddr src;
  Be16 ethertype;
};

// 802.1Q tag, between the source MAC and the real EtherType. PCP selects the RoCE priority.
struct VlanTag {
  Be16 tci;  // PCP(3) DEI(1) VID(12)
  Be16 ethertype;

  uint8_t pcp() const { return static_cast<uint8_t>(tci.get() >> 13); }
  uint16_t vid() const { return tci.get() & 0x0FFF; }
};

struct Ipv4Hdr {
  uint8_t version_ihl;  // 0x45: no options
  uint8_t tos;          // DSCP(6) ECN(2)
  Be16 total_length;
  Be16 id;
  Be16 flags_frag;  // reserved(1) DF(1) MF(1) offset(13)
  uint8_t ttl;
  uint8_t protocol;
  Be16 checksum;
  std::array<uint8_t, 4> src;
  std::array<uint8_t, 4> dst;
};
inline constexpr uint16_t kIpv4FlagDf = 0x4000;
inline constexpr uint16_t kIpv4FlagMf = 0x2000;
inline constexpr uint16_t kIpv4FragOffsetMask = 0x1FFF;

struct Ipv6Hdr {
  Be32 ver_tc_flow;  // version(4) traffic class(8) flow label(20)
  Be16 payload_length;
  uint8_t next_header;
  uint8_t hop_limit;
  std::array<uint8_t, 16> src;
  std::array<uint8_t, 16> dst;

  uint8_t traffic_class() const { return static_cast<uint8_t>(ver_tc_flow.get() >> 20); }
  uint32_t flow_label() const { return ver_tc_flow.get() & 0xFFFFF; }
};

struct UdpHdr {
  Be16 src_port;
  Be16 dst_port;
  Be16 length;
  Be16 checksum;
};

// Base Transport Header, 12 bytes.
struct Bth {
  uint8_t opcode;
  uint8_t se_m_pad_tver;  // SE(1) MigReq(1) PadCnt(2) TVer(4)
  Be16 pkey;
  uint8_t fecn_becn;  // FECN(1) BECN(1) reserved(6); masked in the ICRC
  Be24 dest_qp;
  uint8_t ackreq;  // AckReq(1) reserved(7)
  Be24 psn;

  bool solicited() const { return se_m_pad_tver & 0x80; }
  bool mig_req() const { return se_m_pad_tver & 0x40; }
  uint8_t pad_count() const { return (se_m_pad_tver >> 4) & 0x3; }
  uint8_t tver() const { return se_m_pad_tver & 0x0F; }
  bool fecn() const { return fecn_becn & 0x80; }
  bool becn() const { return fecn_becn & 0x40; }
  bool ack_req() const { return ackreq & 0x80; }
};
inline constexpr uint8_t kBthSe = 0x80;
inline constexpr uint8_t kBthMigReq = 0x40;
inline constexpr uint8_t kBthFecn = 0x80;
inline constexpr uint8_t kBthBecn = 0x40;
inline constexpr uint8_t kBthAckReq = 0x80;

// RDMA Extended Transport Header (WRITE first/only, READ request).
struct Reth {
  Be64 va;
  Be32 rkey;
  Be32 dma_length;
};

// ACK Extended Transport Header.
struct Aeth {
  uint8_t syndrome;
  Be24 msn;
};

// Datagram Extended Transport Header (UD).
struct Deth {
  Be32 qkey;
  uint8_t reserved;
  Be24 src_qp;
};

// Immediate data: opaque, passed through byte for byte (verbs hands it over as __be32).
struct ImmDt {
  std::array<uint8_t, 4> data;
};

// Invalidate Extended Transport Header.
struct Ieth {
  Be32 rkey;
};

struct AtomicEth {
  Be64 va;
  Be32 rkey;
  Be64 swap_add;
  Be64 compare;
};

struct AtomicAckEth {
  Be64 orig;
};

// The 16 reserved bytes that follow the BTH of a RoCEv2 CNP (annex A17.9.2).
struct CnpPayload {
  std::array<uint8_t, 16> reserved;
};

static_assert(sizeof(EthHdr) == 14);
static_assert(sizeof(VlanTag) == 4);
static_assert(sizeof(Ipv4Hdr) == 20);
static_assert(sizeof(Ipv6Hdr) == 40);
static_assert(sizeof(UdpHdr) == 8);
static_assert(sizeof(Bth) == 12);
static_assert(sizeof(Reth) == 16);
static_assert(sizeof(Aeth) == 4);
static_assert(sizeof(Deth) == 8);
static_assert(sizeof(ImmDt) == 4);
static_assert(sizeof(Ieth) == 4);
static_assert(sizeof(AtomicEth) == 28);
static_assert(sizeof(AtomicAckEth) == 8);
static_assert(sizeof(CnpPayload) == 16);
static_assert(alignof(Bth) == 1 && alignof(Ipv6Hdr) == 1 && alignof(AtomicEth) == 1);

// --- AETH syndromes (IBA 9.7.5.1) ----------------------------------------------------------
enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
inline constexpr AethType aeth_type(uint8_t syndrome) {
  return static_cast<AethType>((syndrome >> 5) & 0x3);
}
inline constexpr uint8_t kAethAckUnlimitedCredits = 0x1F;  // ACK, credit field "invalid"
inline constexpr uint8_t kAethRnrNak = 0x20;               // | timer code
enum class NakCode : uint8_t {
  kPsnSeqError = 0x60,
  kInvalidRequest = 0x61,
  kRemoteAccessError = 0x62,
  kRemoteOperationalError = 0x63,
  kInvalidRdRequest = 0x64,
};

// ECN codepoints in the low two bits of IPv4 TOS / IPv6 traffic class (RFC 3168).
enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

}  // namespace roce::wire
