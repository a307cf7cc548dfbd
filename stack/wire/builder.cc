#include "stack/wire/builder.h"

#include <cstring>
#include <type_traits>

#include "stack/wire/checksum.h"
#include "stack/wire/icrc.h"

namespace roce::wire {

namespace {
// The IPv4 header checksum of the header write_l2l4 writes for `path` and `total_length`
// (RFC 791: the one's complement of the one's-complement sum of its 16-bit words).
uint16_t ipv4_checksum_of(const PathSpec& path, uint16_t total_length) {
  const uint64_t sum =
      (0x45u << 8 | path.traffic_class) + total_length + path.ipv4_id +
      (path.ipv4_df ? kIpv4FlagDf : 0u) + (uint32_t{path.hop_limit} << 8 | kIpProtoUdp) +
      inet_sum(path.src_gid.data() + 12, 4) + inet_sum(path.dst_gid.data() + 12, 4);
  return static_cast<uint16_t>(~inet_fold(sum));
}
}  // namespace

uint8_t* write_l2l4(uint8_t* frame, const PathSpec& path, uint32_t udp_payload_len) {
  auto* eth = reinterpret_cast<EthHdr*>(frame);
  eth->dst = path.dst_mac;
  eth->src = path.src_mac;
  uint8_t* p = frame + sizeof(EthHdr);
  const uint16_t l3_type = path.family == IpFamily::kIpv6 ? kEtherTypeIpv6 : kEtherTypeIpv4;
  if (path.has_vlan) {
    eth->ethertype.set(kEtherTypeVlan);
    auto* tag = reinterpret_cast<VlanTag*>(p);
    tag->tci.set(path.vlan_tci);
    tag->ethertype.set(l3_type);
    p += sizeof(VlanTag);
  } else {
    eth->ethertype.set(l3_type);
  }

  const uint32_t udp_len = sizeof(UdpHdr) + udp_payload_len;
  if (path.family == IpFamily::kIpv6) {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(p);
    ip->ver_tc_flow.set(6u << 28 | static_cast<uint32_t>(path.traffic_class) << 20 |
                        (path.flow_label & 0xFFFFF));
    ip->payload_length.set(static_cast<uint16_t>(udp_len));
    ip->next_header = kIpProtoUdp;
    ip->hop_limit = path.hop_limit;
    std::memcpy(ip->src.data(), path.src_gid.data(), 16);
    std::memcpy(ip->dst.data(), path.dst_gid.data(), 16);
    p += sizeof(Ipv6Hdr);
  } else {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(p);
    ip->version_ihl = 0x45;
    ip->tos = path.traffic_class;
    ip->total_length.set(static_cast<uint16_t>(sizeof(Ipv4Hdr) + udp_len));
    ip->id.set(path.ipv4_id);
    ip->flags_frag.set(path.ipv4_df ? kIpv4FlagDf : 0);
    ip->ttl = path.hop_limit;
    ip->protocol = kIpProtoUdp;
    std::memcpy(ip->src.data(), path.src_gid.data() + 12, 4);
    std::memcpy(ip->dst.data(), path.dst_gid.data() + 12, 4);
    // Summed from the fields, not read back: a wide load over the narrow stores just made
    // cannot be forwarded from them and waits for them to reach the cache.
    ip->checksum.set(ipv4_checksum_of(path, static_cast<uint16_t>(sizeof(Ipv4Hdr) + udp_len)));
    p += sizeof(Ipv4Hdr);
  }

  auto* udp = reinterpret_cast<UdpHdr*>(p);
  udp->src_port.set(path.udp_sport);
  udp->dst_port.set(path.udp_dport);
  udp->length.set(static_cast<uint16_t>(udp_len));
  udp->checksum.set(path.udp_checksum);
  return p + sizeof(UdpHdr);
}

L2L4Template make_l2l4_template(const PathSpec& path) {
  L2L4Template t;
  t.len = static_cast<uint8_t>(l2l4_header_len(path));
  t.l3_off = static_cast<uint8_t>(sizeof(EthHdr) + (path.has_vlan ? sizeof(VlanTag) : 0));
  t.ipv6 = path.family == IpFamily::kIpv6;
  PathSpec fixed = path;
  fixed.traffic_class = 0;
  fixed.ipv4_id = 0;
  write_l2l4(t.bytes.data(), fixed, 0);
  if (!t.ipv6) {
    // Total length and checksum are patched per frame; TOS and ID are zero here.
    uint8_t* ip = t.bytes.data() + t.l3_off;
    std::memset(ip + 2, 0, 2);
    std::memset(ip + 10, 0, 2);
    t.ipv4_sum = static_cast<uint32_t>(inet_sum(ip, sizeof(Ipv4Hdr)));
  }
  return t;
}

uint8_t* write_l2l4(uint8_t* frame, const L2L4Template& t, uint8_t traffic_class, uint16_t ipv4_id,
                    uint32_t udp_payload_len) {
  // Two or three fixed-size copies cover the t.len bytes (42 to 66) without going past them.
  const uint8_t* src = t.bytes.data();
  std::memcpy(frame, src, 32);
  if (t.len > 64) std::memcpy(frame + 32, src + 32, 32);
  std::memcpy(frame + t.len - 32, src + t.len - 32, 32);
  uint8_t* ip = frame + t.l3_off;
  const uint32_t udp_len = sizeof(UdpHdr) + udp_payload_len;
  const auto put16 = [](uint8_t* p, uint32_t v) {
    const uint16_t be = __builtin_bswap16(static_cast<uint16_t>(v));
    std::memcpy(p, &be, 2);
  };
  uint8_t* udp;
  if (t.ipv6) {
    ip[0] = static_cast<uint8_t>(0x60 | traffic_class >> 4);
    ip[1] = static_cast<uint8_t>(traffic_class << 4 | (t.bytes[t.l3_off + 1u] & 0x0F));
    put16(ip + 4, udp_len);
    udp = ip + sizeof(Ipv6Hdr);
  } else {
    const uint32_t total = sizeof(Ipv4Hdr) + udp_len;
    ip[1] = traffic_class;
    put16(ip + 2, total);
    put16(ip + 4, ipv4_id);
    const uint32_t sum = t.ipv4_sum + traffic_class + total + ipv4_id;
    put16(ip + 10, static_cast<uint16_t>(~inet_fold(sum)));
    udp = ip + sizeof(Ipv4Hdr);
  }
  put16(udp + 4, udp_len);
  return udp + sizeof(UdpHdr);
}

namespace {
void write_bth(uint8_t* p, const BthFields& f, uint8_t pad) {
  auto* bth = reinterpret_cast<Bth*>(p);
  bth->opcode = f.opcode;
  bth->se_m_pad_tver = static_cast<uint8_t>((f.solicited ? kBthSe : 0) |
                                            (f.mig_req ? kBthMigReq : 0) | (pad & 3) << 4);
  bth->pkey.set(f.pkey);
  bth->fecn_becn = static_cast<uint8_t>((f.fecn ? kBthFecn : 0) | (f.becn ? kBthBecn : 0));
  bth->dest_qp.set(f.dest_qp & 0xFFFFFF);
  bth->ackreq = f.ack_req ? kBthAckReq : 0;
  bth->psn.set(f.psn & 0xFFFFFF);
}

// One fixed-size copy per header the opcode has (a loop over a table of sizes made every copy a
// memcpy call).
void write_ext(uint8_t* p, const OpcodeInfo& op, const ExtHeaders& ext) {
  const auto put = [&](Ext e, const auto& h) {
    static_assert(std::is_trivially_copyable_v<std::remove_cvref_t<decltype(h)>>);
    if (op.has_ext(e)) std::memcpy(p + op.off(e), &h, sizeof h);
  };
  put(Ext::kDeth, ext.deth);
  put(Ext::kReth, ext.reth);
  put(Ext::kAtomicEth, ext.atomic);
  put(Ext::kAeth, ext.aeth);
  put(Ext::kAtomicAckEth, ext.atomic_ack);
  put(Ext::kImmDt, ext.imm);
  put(Ext::kIeth, ext.ieth);
  put(Ext::kCnp, ext.cnp);
}
}  // namespace

namespace {
// The L2-L4 headers from a PathSpec, field by field, or from a template: what the builders
// below need of either.
struct SpecL2L4 {
  const PathSpec& path;
  uint32_t len() const { return l2l4_header_len(path); }
  uint32_t l3_off() const {
    return static_cast<uint32_t>(sizeof(EthHdr) + (path.has_vlan ? sizeof(VlanTag) : 0));
  }
  bool ipv6() const { return path.family == IpFamily::kIpv6; }
  uint8_t* write(uint8_t* frame, uint32_t udp_payload_len) const {
    return write_l2l4(frame, path, udp_payload_len);
  }
};
struct TemplateL2L4 {
  const L2L4Template& t;
  uint8_t traffic_class;
  uint16_t ipv4_id;
  uint32_t len() const { return t.len; }
  uint32_t l3_off() const { return t.l3_off; }
  bool ipv6() const { return t.ipv6; }
  uint8_t* write(uint8_t* frame, uint32_t udp_payload_len) const {
    return write_l2l4(frame, t, traffic_class, ipv4_id, udp_payload_len);
  }
};

// Everything before `payload`: L2-L4, BTH and extension headers. Returns the frame start.
template <typename L2L4>
uint8_t* write_headers(uint8_t* payload, uint32_t payload_len, const L2L4& l2l4,
                       const BthFields& bth, const ExtHeaders& ext, uint8_t pad) {
  const OpcodeInfo& op = opcode_info(bth.opcode);
  const uint32_t transport = op.transport_hdr_len();
  uint8_t* frame = payload - l2l4.len() - transport;
  uint8_t* bth_p = l2l4.write(frame, transport + payload_len + pad + kIcrcSize);
  write_bth(bth_p, bth, pad);
  write_ext(bth_p + sizeof(Bth), op, ext);
  return frame;
}

uint8_t pad_of(const BthFields& bth, uint32_t payload_len) {
  return opcode_info(bth.opcode).has(kOpPayload) ? pad_for(payload_len) : 0;
}

template <typename L2L4>
uint8_t* build_around(uint8_t* payload, uint32_t payload_len, const L2L4& l2l4,
                      const BthFields& bth, const ExtHeaders& ext, uint32_t* frame_len) {
  const uint8_t pad = pad_of(bth, payload_len);
  uint8_t* frame = write_headers(payload, payload_len, l2l4, bth, ext, pad);
  std::memset(payload + payload_len, 0, pad);
  const uint32_t l3_off = l2l4.l3_off();
  const auto icrc_off = static_cast<uint32_t>(payload + payload_len + pad - frame);
  icrc_write(frame + icrc_off, icrc_compute(frame + l3_off, icrc_off - l3_off, l2l4.ipv6()));
  *frame_len = icrc_off + kIcrcSize;
  return frame;
}

template <typename L2L4>
uint8_t* build_hdrs(uint8_t* payload, uint32_t payload_len, const L2L4& l2l4, const BthFields& bth,
                    const ExtHeaders& ext, uint32_t* crc) {
  uint8_t* frame = write_headers(payload, payload_len, l2l4, bth, ext, pad_of(bth, payload_len));
  // The ICRC through the BTH, then the extension headers (unmasked) up to the payload.
  const uint8_t* l3 = frame + l2l4.l3_off();
  *crc = icrc_prefix(l3, static_cast<uint32_t>(payload - l3), l2l4.ipv6());
  return frame;
}
}  // namespace

uint8_t* build_around_payload(uint8_t* payload, uint32_t payload_len, const PathSpec& path,
                              const BthFields& bth, const ExtHeaders& ext, uint32_t* frame_len) {
  return build_around(payload, payload_len, SpecL2L4{path}, bth, ext, frame_len);
}

uint8_t* build_headers(uint8_t* payload, uint32_t payload_len, const PathSpec& path,
                       const BthFields& bth, const ExtHeaders& ext, uint32_t* crc) {
  return build_hdrs(payload, payload_len, SpecL2L4{path}, bth, ext, crc);
}

uint8_t* build_around_payload(uint8_t* payload, uint32_t payload_len, const L2L4Template& t,
                              uint8_t traffic_class, uint16_t ipv4_id, const BthFields& bth,
                              const ExtHeaders& ext, uint32_t* frame_len) {
  return build_around(payload, payload_len, TemplateL2L4{t, traffic_class, ipv4_id}, bth, ext,
                      frame_len);
}

uint8_t* build_headers(uint8_t* payload, uint32_t payload_len, const L2L4Template& t,
                       uint8_t traffic_class, uint16_t ipv4_id, const BthFields& bth,
                       const ExtHeaders& ext, uint32_t* crc) {
  return build_hdrs(payload, payload_len, TemplateL2L4{t, traffic_class, ipv4_id}, bth, ext, crc);
}

uint32_t finish_icrc(const uint8_t* frame, uint8_t* payload, uint32_t payload_len, uint32_t crc) {
  const uint8_t pad = pad_for(payload_len);
  uint8_t* end = payload + payload_len;
  if (pad) {
    std::memset(end, 0, pad);
    crc = crc32_ieee(crc, end, pad);
    end += pad;
  }
  icrc_write(end, crc);
  return static_cast<uint32_t>(end - frame) + kIcrcSize;
}

uint32_t build_frame(uint8_t* buf, uint32_t cap, const PathSpec& path, const BthFields& bth,
                     const ExtHeaders& ext, const uint8_t* payload, uint32_t payload_len) {
  const uint32_t hdr = headers_len(path, bth.opcode);
  if (static_cast<uint64_t>(hdr) + payload_len + kTrailerRoom > cap) return 0;
  if (payload_len) std::memmove(buf + hdr, payload, payload_len);
  uint32_t len = 0;
  build_around_payload(buf + hdr, payload_len, path, bth, ext, &len);
  return len;
}

void extract_spec(const PacketInfo& info, PathSpec& path, BthFields& bth, ExtHeaders& ext) {
  path = PathSpec{};
  const EthHdr& eth = info.eth();
  path.dst_mac = eth.dst;
  path.src_mac = eth.src;
  path.has_vlan = info.has_vlan;
  path.vlan_tci = info.vlan_tci;
  path.family = info.family;
  path.traffic_class = info.traffic_class;
  if (info.family == IpFamily::kIpv6) {
    const Ipv6Hdr& ip = info.ipv6();
    path.hop_limit = ip.hop_limit;
    path.flow_label = ip.flow_label();
    std::memcpy(path.src_gid.data(), ip.src.data(), 16);
    std::memcpy(path.dst_gid.data(), ip.dst.data(), 16);
  } else {
    const Ipv4Hdr& ip = info.ipv4();
    path.hop_limit = ip.ttl;
    path.ipv4_df = ip.flags_frag.get() & kIpv4FlagDf;
    path.ipv4_id = ip.id.get();
    ipv4_to_gid(ip.src.data(), path.src_gid.data());
    ipv4_to_gid(ip.dst.data(), path.dst_gid.data());
  }
  const auto* udp = reinterpret_cast<const UdpHdr*>(info.frame + info.l4_off);
  path.udp_sport = udp->src_port.get();
  path.udp_dport = udp->dst_port.get();
  path.udp_checksum = udp->checksum.get();

  const Bth& b = info.bth();
  bth = BthFields{};
  bth.opcode = b.opcode;
  bth.solicited = b.solicited();
  bth.mig_req = b.mig_req();
  bth.pkey = b.pkey.get();
  bth.fecn = b.fecn();
  bth.becn = b.becn();
  bth.dest_qp = b.dest_qp.get();
  bth.ack_req = b.ack_req();
  bth.psn = b.psn.get();

  ext = ExtHeaders{};
  const OpcodeInfo& op = *info.op;
  void* dst[kExtCount] = {&ext.deth,       &ext.reth, &ext.atomic, &ext.aeth,
                          &ext.atomic_ack, &ext.imm,  &ext.ieth,   &ext.cnp};
  const uint8_t* p = info.frame + info.bth_off + sizeof(Bth);
  for (unsigned e = 0; e < kExtCount; ++e) {
    if (op.ext_off[e] != 0xFF && !(info.cnp_short && e == static_cast<unsigned>(Ext::kCnp))) {
      std::memcpy(dst[e], p + op.ext_off[e], kExtSize[e]);
    }
  }
}

}  // namespace roce::wire
