#include "stack/wire/parser.h"

#include <bit>
#include <cstring>
#include <type_traits>

#include "stack/wire/icrc.h"

namespace roce::wire {

std::string_view to_string(ParseError e) {
  switch (e) {
    case ParseError::kOk:
      return "ok";
    case ParseError::kTruncatedL2:
      return "truncated Ethernet header";
    case ParseError::kNotIp:
      return "not IPv4/IPv6";
    case ParseError::kTruncatedIp:
      return "truncated IP header";
    case ParseError::kBadIpVersion:
      return "IP version does not match EtherType";
    case ParseError::kIpv4Options:
      return "IPv4 options present";
    case ParseError::kIpv4Fragment:
      return "IPv4 fragment";
    case ParseError::kIpv4BadChecksum:
      return "bad IPv4 header checksum";
    case ParseError::kBadIpLength:
      return "IP length does not match frame";
    case ParseError::kIpv6ExtensionHeader:
      return "IPv6 extension header";
    case ParseError::kNotUdp:
      return "not UDP";
    case ParseError::kTruncatedUdp:
      return "truncated UDP header";
    case ParseError::kBadUdpLength:
      return "UDP length does not match IP length";
    case ParseError::kWrongUdpPort:
      return "UDP destination port is not RoCEv2";
    case ParseError::kTruncatedBth:
      return "truncated BTH";
    case ParseError::kBadTver:
      return "BTH TVer is not 0";
    case ParseError::kUnknownOpcode:
      return "unknown opcode";
    case ParseError::kTruncatedExtHeader:
      return "truncated extension header";
    case ParseError::kBadPadCount:
      return "bad pad count";
    case ParseError::kUnexpectedPayload:
      return "payload on an opcode without payload";
    case ParseError::kBadIcrc:
      return "bad ICRC";
    case ParseError::kCount:
      break;
  }
  return "?";
}

bool mark_ce(uint8_t* frame, uint32_t len) {
  PacketInfo info;
  const ParseError err =
      parse_frame(frame, len, info, {.verify_icrc = false, .verify_ipv4_checksum = false});
  if (err != ParseError::kOk && err != ParseError::kNotUdp && err != ParseError::kWrongUdpPort) {
    return false;
  }
  if (info.ecn() == Ecn::kNotEct || info.ecn() == Ecn::kCe) return false;
  uint8_t* ip = frame + info.l3_off;
  if (info.family == IpFamily::kIpv4) {
    ip[1] |= 0x03;
    ip[10] = ip[11] = 0;
    const uint16_t c = static_cast<uint16_t>(~ipv4_header_checksum(ip));
    ip[10] = static_cast<uint8_t>(c >> 8);
    ip[11] = static_cast<uint8_t>(c);
  } else {
    ip[1] |= 0x30;  // the traffic class's ECN bits sit in the high nibble of byte 1
  }
  return true;
}

void PacketInfo::src_gid(uint8_t out[16]) const {
  if (family == IpFamily::kIpv6) {
    std::memcpy(out, ipv6().src.data(), 16);
  } else {
    ipv4_to_gid(ipv4().src.data(), out);
  }
}

void PacketInfo::dst_gid(uint8_t out[16]) const {
  if (family == IpFamily::kIpv6) {
    std::memcpy(out, ipv6().dst.data(), 16);
  } else {
    ipv4_to_gid(ipv4().dst.data(), out);
  }
}

namespace {
// Ethernet frames shorter than 60 bytes (without FCS) are padded by the sender: only such
// frames may carry bytes beyond the IP datagram. A bridge that tags a padded frame keeps the
// padding, so a tagged frame may carry it up to 64 bytes (IEEE 802.1Q: 68 with the FCS).
constexpr uint32_t kMinEthFrame = 60;
}  // namespace

ParseError parse_frame(const uint8_t* frame, uint32_t len, PacketInfo& info,
                       const ParseOptions& opts) {
  // Not `info = PacketInfo{}`: GCC builds that in a temporary, a byte store (the family)
  // over vector stores, and copies it out with vector loads that cannot be forwarded from the
  // byte store and wait for it to reach the cache, on every frame.
  static_assert(std::is_trivially_copyable_v<PacketInfo>);
  std::memset(static_cast<void*>(&info), 0, sizeof info);
  info.family = IpFamily::kIpv4;
  info.frame = frame;
  info.frame_len = len;

  // --- L2 ---
  if (len < sizeof(EthHdr)) return ParseError::kTruncatedL2;
  uint32_t off = sizeof(EthHdr);
  uint16_t ethertype = reinterpret_cast<const EthHdr*>(frame)->ethertype.get();
  if (ethertype == kEtherTypeVlan) {
    if (len < off + sizeof(VlanTag)) return ParseError::kTruncatedL2;
    const auto* tag = reinterpret_cast<const VlanTag*>(frame + off);
    info.has_vlan = true;
    info.vlan_tci = tag->tci.get();
    ethertype = tag->ethertype.get();
    off += sizeof(VlanTag);
  }
  info.ethertype = ethertype;
  info.l3_off = static_cast<uint16_t>(off);
  if (ethertype != kEtherTypeIpv4 && ethertype != kEtherTypeIpv6) return ParseError::kNotIp;
  const uint32_t min_frame = kMinEthFrame + (off - static_cast<uint32_t>(sizeof(EthHdr)));

  // --- L3 ---
  uint32_t ip_end;  // end of the IP datagram within the frame
  if (ethertype == kEtherTypeIpv4) {
    info.family = IpFamily::kIpv4;
    if (len < off + sizeof(Ipv4Hdr)) return ParseError::kTruncatedIp;
    const auto* ip = reinterpret_cast<const Ipv4Hdr*>(frame + off);
    if ((ip->version_ihl >> 4) != 4) return ParseError::kBadIpVersion;
    info.ip_proto = ip->protocol;
    info.traffic_class = ip->tos;
    if ((ip->version_ihl & 0x0F) != 5) return ParseError::kIpv4Options;
    const uint16_t frag = ip->flags_frag.get();
    if ((frag & kIpv4FlagMf) || (frag & kIpv4FragOffsetMask)) return ParseError::kIpv4Fragment;
    const uint32_t total = ip->total_length.get();
    if (total < sizeof(Ipv4Hdr) || off + total > len) return ParseError::kBadIpLength;
    ip_end = off + total;
    if (ip_end != len && len > min_frame) return ParseError::kBadIpLength;
    if (opts.verify_ipv4_checksum && ipv4_header_checksum(frame + off) != 0xFFFF) {
      return ParseError::kIpv4BadChecksum;
    }
    off += sizeof(Ipv4Hdr);
  } else {
    info.family = IpFamily::kIpv6;
    if (len < off + sizeof(Ipv6Hdr)) return ParseError::kTruncatedIp;
    const auto* ip = reinterpret_cast<const Ipv6Hdr*>(frame + off);
    if ((ip->ver_tc_flow.get() >> 28) != 6) return ParseError::kBadIpVersion;
    info.ip_proto = ip->next_header;
    info.traffic_class = ip->traffic_class();
    const uint32_t plen = ip->payload_length.get();
    ip_end = off + sizeof(Ipv6Hdr) + plen;
    if (ip_end > len) return ParseError::kBadIpLength;
    if (ip_end != len && len > min_frame) return ParseError::kBadIpLength;
    if (is_ipv6_extension_header(ip->next_header)) return ParseError::kIpv6ExtensionHeader;
    off += sizeof(Ipv6Hdr);
  }
  info.l4_off = static_cast<uint16_t>(off);
  if (info.ip_proto != kIpProtoUdp) return ParseError::kNotUdp;

  // --- UDP ---
  if (ip_end < off + sizeof(UdpHdr)) return ParseError::kTruncatedUdp;
  const auto* udp = reinterpret_cast<const UdpHdr*>(frame + off);
  if (udp->length.get() != ip_end - off) return ParseError::kBadUdpLength;
  info.udp_sport = udp->src_port.get();
  if (udp->dst_port.get() != opts.udp_port) return ParseError::kWrongUdpPort;
  off += sizeof(UdpHdr);

  // --- BTH ---
  if (ip_end < off + sizeof(Bth) + kIcrcSize) return ParseError::kTruncatedBth;
  info.bth_off = static_cast<uint16_t>(off);
  const auto* bth = reinterpret_cast<const Bth*>(frame + off);
  if (bth->tver() != 0) return ParseError::kBadTver;
  info.opcode = bth->opcode;
  const OpcodeInfo& op = opcode_info(bth->opcode);
  if (!op.valid()) return ParseError::kUnknownOpcode;
  info.op = &op;
  info.pkey = bth->pkey.get();
  info.dest_qp = bth->dest_qp.get();
  info.psn = bth->psn.get();
  info.ack_req = bth->ack_req();
  info.solicited = bth->solicited();
  info.becn = bth->becn();
  info.fecn = bth->fecn();
  info.pad = bth->pad_count();
  off += sizeof(Bth);

  // --- extension headers, payload, pad, ICRC ---
  const uint32_t icrc_off = ip_end - kIcrcSize;
  uint32_t ext_len = op.ext_len;
  if (icrc_off < off + ext_len) {
    // A CNP may come without its 16 reserved bytes; accept exactly that short form.
    if (op.has(kOpCnp) && icrc_off == off) {
      info.cnp_short = true;
      ext_len = 0;
    } else {
      return ParseError::kTruncatedExtHeader;
    }
  }
  off += ext_len;
  const uint32_t padded = icrc_off - off;
  if (!op.has(kOpPayload)) {
    if (info.pad != 0) return ParseError::kBadPadCount;
    if (padded != 0) return ParseError::kUnexpectedPayload;
  } else if (padded < info.pad || (padded & 3) != 0) {
    // IBA 9.2.3: the pad makes the payload a multiple of four bytes.
    return ParseError::kBadPadCount;
  }
  info.payload_off = static_cast<uint16_t>(off);
  info.payload_len = padded - info.pad;
  info.icrc = icrc_read(frame + icrc_off);

  if (opts.verify_icrc) {
    const uint32_t covered = icrc_off - info.l3_off;
    if (icrc_compute(frame + info.l3_off, covered, info.family == IpFamily::kIpv6) != info.icrc) {
      return ParseError::kBadIcrc;
    }
  }
  return ParseError::kOk;
}

}  // namespace roce::wire
