// Build -> parse round trip for every opcode in the table, both IP families (with and without
// a VLAN tag), payloads 0..4096 bytes: every pad count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "frame_factory.h"
#include "stack/wire/builder.h"
#include "stack/wire/icrc.h"
#include "stack/wire/parser.h"

namespace {
using namespace roce::wire;
using roce::test::make_ext;
using roce::test::make_path;

struct Case {
  IpFamily family;
  bool vlan;
};

class RoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(RoundTrip, EveryOpcodeEveryPayloadLength) {
  const PathSpec path = make_path(GetParam().family, GetParam().vlan);
  const ExtHeaders ext = make_ext();
  std::vector<uint8_t> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i ^ (i >> 8));
  std::vector<uint8_t> buf(4096 + kMaxHeadersLen + kTrailerRoom);
  std::vector<uint8_t> buf2(buf.size());
  int pad_seen[4] = {};
  uint64_t frames = 0;
  for (int opc = 0; opc < 256; ++opc) {
    const OpcodeInfo& oi = opcode_info(static_cast<uint8_t>(opc));
    if (!oi.valid()) continue;
    const uint32_t max_len = oi.has(kOpPayload) ? 4096 : 0;
    for (uint32_t len = 0; len <= max_len; ++len) {
      BthFields bth;
      bth.opcode = static_cast<uint8_t>(opc);
      bth.solicited = len & 1;
      bth.pkey = 0x8001;
      bth.becn = opc == op::kCnp;
      bth.dest_qp = 0xABCDEF;
      bth.ack_req = len & 2;
      bth.psn = 0xFFFFFF - len;
      uint32_t n = build_frame(buf.data(), static_cast<uint32_t>(buf.size()), path, bth, ext,
                               payload.data(), len);
      ASSERT_GT(n, 0u);
      PacketInfo info;
      ASSERT_EQ(parse_frame(buf.data(), n, info), ParseError::kOk) << oi.name << " len " << len;
      ASSERT_EQ(info.opcode, opc);
      ASSERT_EQ(info.payload_len, len);
      ASSERT_EQ(info.pad, pad_for(len) * oi.has(kOpPayload));
      ASSERT_EQ((info.payload_len + info.pad) % 4, 0u);
      ASSERT_EQ(info.dest_qp, 0xABCDEFu);
      ASSERT_EQ(info.psn, (0xFFFFFFu - len) & 0xFFFFFF);
      ASSERT_EQ(info.pkey, 0x8001);
      ASSERT_EQ(info.solicited, bool(len & 1));
      ASSERT_EQ(info.ack_req, bool(len & 2));
      ASSERT_EQ(info.becn, opc == op::kCnp);
      ASSERT_EQ(info.udp_sport, path.udp_sport);
      ASSERT_EQ(info.family, path.family);
      ASSERT_EQ(info.has_vlan, path.has_vlan);
      if (path.has_vlan) {
        ASSERT_EQ(info.pcp(), 3);
      }
      ASSERT_EQ(std::memcmp(info.payload(), payload.data(), len), 0);
      // The two-step build (headers, then the payload copied and CRCed in one pass) makes the
      // same bytes.
      {
        std::fill(buf2.begin(), buf2.end(), 0x5A);
        const uint32_t hdr = headers_len(path, bth.opcode);
        uint32_t crc = 0;
        uint8_t* frame2 = build_headers(buf2.data() + hdr, len, path, bth, ext, &crc);
        ASSERT_EQ(frame2, buf2.data());
        crc = crc32_copy(crc, buf2.data() + hdr, payload.data(), len);
        ASSERT_EQ(finish_icrc(frame2, buf2.data() + hdr, len, crc), n) << oi.name << " " << len;
        ASSERT_EQ(std::memcmp(buf2.data(), buf.data(), n), 0) << oi.name << " len " << len;
      }
      uint8_t gid[16];
      info.src_gid(gid);
      ASSERT_EQ(std::memcmp(gid, path.src_gid.data(), 16), 0);
      info.dst_gid(gid);
      ASSERT_EQ(std::memcmp(gid, path.dst_gid.data(), 16), 0);
      if (oi.has_ext(Ext::kReth)) {
        ASSERT_EQ(info.ext<Reth>(Ext::kReth).rkey.get(), ext.reth.rkey.get());
        ASSERT_EQ(info.ext<Reth>(Ext::kReth).va.get(), ext.reth.va.get());
      }
      if (oi.has_ext(Ext::kAeth)) {
        ASSERT_EQ(info.ext<Aeth>(Ext::kAeth).msn.get(), 0x123456u);
      }
      if (oi.has_ext(Ext::kImmDt)) {
        ASSERT_EQ(info.ext<ImmDt>(Ext::kImmDt).data, ext.imm.data);
      }
      if (oi.has_ext(Ext::kIeth)) {
        ASSERT_EQ(info.ext<Ieth>(Ext::kIeth).rkey.get(), 0x55667788u);
      }
      if (oi.has_ext(Ext::kDeth)) {
        ASSERT_EQ(info.ext<Deth>(Ext::kDeth).src_qp.get(), 0xabcu);
      }
      if (oi.has_ext(Ext::kAtomicEth)) {
        ASSERT_EQ(info.ext<AtomicEth>(Ext::kAtomicEth).swap_add.get(), 7u);
        ASSERT_EQ(info.ext<AtomicEth>(Ext::kAtomicEth).compare.get(), 9u);
      }
      if (oi.has_ext(Ext::kAtomicAckEth)) {
        ASSERT_EQ(info.ext<AtomicAckEth>(Ext::kAtomicAckEth).orig.get(), 0x0102030405060708ull);
      }
      ++pad_seen[info.pad];
      ++frames;
    }
  }
  for (int p = 0; p < 4; ++p) EXPECT_GT(pad_seen[p], 0) << "pad " << p;
  EXPECT_GT(frames, 30u * 4096u);
}

INSTANTIATE_TEST_SUITE_P(Families, RoundTrip,
                         ::testing::Values(Case{IpFamily::kIpv4, false},
                                           Case{IpFamily::kIpv6, false},
                                           Case{IpFamily::kIpv4, true},
                                           Case{IpFamily::kIpv6, true}),
                         [](const auto& i) {
                           return std::string(i.param.family == IpFamily::kIpv6 ? "Ipv6" : "Ipv4") +
                                  (i.param.vlan ? "Vlan" : "");
                         });

TEST(RoundTrip, EcnBitsAndTrafficClassSurvive) {
  for (auto fam : {IpFamily::kIpv4, IpFamily::kIpv6}) {
    PathSpec p = make_path(fam);
    p.traffic_class = static_cast<uint8_t>(26 << 2 | static_cast<uint8_t>(Ecn::kCe));
    auto f = roce::test::make_frame(p, op::kRcWriteOnly, 100);
    PacketInfo info;
    ASSERT_EQ(parse_frame(f.data(), static_cast<uint32_t>(f.size()), info), ParseError::kOk);
    EXPECT_EQ(info.ecn(), Ecn::kCe);
    EXPECT_EQ(info.traffic_class >> 2, 26);
  }
}

// extract_spec gives back every field the builder writes, non-default values included (the rxe
// captures all have TTL 64, DF, no FECN or MigReq, a zero UDP checksum and short flow labels).
TEST(RoundTrip, ExtractSpecRecoversEveryField) {
  for (auto fam : {IpFamily::kIpv4, IpFamily::kIpv6}) {
    for (bool vlan : {false, true}) {
      for (uint32_t len : {4u, 5u, 6u, 7u}) {  // every pad count, so pad bits sit beside MigReq
        const bool odd = len & 1;
        PathSpec p = make_path(fam, vlan);
        p.src_mac = {0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f};
        p.dst_mac = {0x06, 0x17, 0x28, 0x39, 0x4a, 0x5b};
        p.vlan_tci = vlan ? 0xA123 : 0;  // PCP 5, VID 0x123
        p.traffic_class = 0x6A;          // DSCP 26, ECT(0)
        p.hop_limit = 17;
        if (fam == IpFamily::kIpv4) {
          p.ipv4_df = odd;
          p.ipv4_id = 0xBEEF;
        } else {
          p.flow_label = 0xABCDE;
        }
        p.udp_sport = 0xD00D;
        p.udp_checksum = 0x1234;
        BthFields b;
        b.opcode = op::kRcSendOnly;
        b.solicited = odd;
        b.mig_req = !odd;
        b.pkey = 0x7FFF;
        b.fecn = odd;
        b.becn = !odd;
        b.dest_qp = 0x123456;
        b.ack_req = !odd;
        b.psn = 0xABCDEF;
        std::vector<uint8_t> f(headers_len(p, b.opcode) + len + kTrailerRoom);
        const std::vector<uint8_t> payload(len, 0x5C);
        const uint32_t n = build_frame(f.data(), static_cast<uint32_t>(f.size()), p, b, make_ext(),
                                       payload.data(), len);
        ASSERT_GT(n, 0u);
        PacketInfo info;
        // The ICRC masks the UDP checksum and FECN / BECN: the frame verifies.
        ASSERT_EQ(parse_frame(f.data(), n, info), ParseError::kOk);
        EXPECT_EQ(info.fecn, b.fecn);
        EXPECT_EQ(info.becn, b.becn);
        EXPECT_EQ(info.traffic_class, 0x6A);
        if (vlan) {
          EXPECT_EQ(info.pcp(), 5);
        }
        PathSpec q;
        BthFields c;
        ExtHeaders e;
        extract_spec(info, q, c, e);
        SCOPED_TRACE(::testing::Message() << (fam == IpFamily::kIpv6 ? "IPv6" : "IPv4")
                                          << (vlan ? " VLAN" : "") << " len " << len);
        EXPECT_EQ(q.src_mac, p.src_mac);
        EXPECT_EQ(q.dst_mac, p.dst_mac);
        EXPECT_EQ(q.has_vlan, p.has_vlan);
        EXPECT_EQ(q.vlan_tci, p.vlan_tci);
        EXPECT_EQ(q.family, p.family);
        EXPECT_EQ(q.src_gid, p.src_gid);
        EXPECT_EQ(q.dst_gid, p.dst_gid);
        EXPECT_EQ(q.traffic_class, p.traffic_class);
        EXPECT_EQ(q.hop_limit, p.hop_limit);
        EXPECT_EQ(q.ipv4_df, p.ipv4_df);
        EXPECT_EQ(q.ipv4_id, p.ipv4_id);
        EXPECT_EQ(q.flow_label, p.flow_label);
        EXPECT_EQ(q.udp_sport, p.udp_sport);
        EXPECT_EQ(q.udp_dport, p.udp_dport);
        EXPECT_EQ(q.udp_checksum, p.udp_checksum);
        EXPECT_EQ(c.opcode, b.opcode);
        EXPECT_EQ(c.solicited, b.solicited);
        EXPECT_EQ(c.mig_req, b.mig_req);
        EXPECT_EQ(c.pkey, b.pkey);
        EXPECT_EQ(c.fecn, b.fecn);
        EXPECT_EQ(c.becn, b.becn);
        EXPECT_EQ(c.dest_qp, b.dest_qp);
        EXPECT_EQ(c.ack_req, b.ack_req);
        EXPECT_EQ(c.psn, b.psn);
      }
    }
  }
}

// A flow label wider than its 20 bits is cut to them: it never spills into the traffic class or
// the version.
TEST(RoundTrip, Ipv6FlowLabelKeepsToItsTwentyBits) {
  PathSpec p = make_path(IpFamily::kIpv6);
  p.traffic_class = 0x02;
  p.flow_label = 0xFFF54321;
  auto f = roce::test::make_frame(p, op::kRcSendOnly, 8);
  PacketInfo info;
  ASSERT_EQ(parse_frame(f.data(), static_cast<uint32_t>(f.size()), info), ParseError::kOk);
  EXPECT_EQ(info.traffic_class, 0x02);
  EXPECT_EQ(info.ipv6().flow_label(), 0x54321u);
}

// build_frame builds into exactly the room it asks for (headers, payload, three pad bytes and the
// ICRC) and writes nothing beyond `cap`; one byte less and it refuses.
TEST(Builder, BuildFrameFitsItsCapacityExactly) {
  for (auto fam : {IpFamily::kIpv4, IpFamily::kIpv6}) {
    const PathSpec p = make_path(fam, true);
    BthFields b;
    b.opcode = op::kRcWriteOnlyImm;
    for (uint32_t len : {1u, 5u, 4093u}) {  // three pad bytes: the frame fills the room
      const std::vector<uint8_t> payload(len, 0x77);
      const uint32_t need = headers_len(p, b.opcode) + len + kTrailerRoom;
      std::vector<uint8_t> buf(need + 16, 0xEE);
      EXPECT_EQ(build_frame(buf.data(), need - 1, p, b, make_ext(), payload.data(), len), 0u)
          << len;
      std::fill(buf.begin(), buf.end(), 0xEE);
      const uint32_t n = build_frame(buf.data(), need, p, b, make_ext(), payload.data(), len);
      EXPECT_EQ(n, need) << len;
      for (size_t i = need; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xEE) << len << " " << i;
      PacketInfo info;
      EXPECT_EQ(parse_frame(buf.data(), n, info), ParseError::kOk) << len;
    }
  }
}

TEST(RoundTrip, ShortCnpIsAccepted) {
  // A CNP without its 16 reserved bytes, as some senders emit it.
  auto f = roce::test::make_frame(make_path(IpFamily::kIpv4), op::kCnp, 0);
  PacketInfo info;
  ASSERT_EQ(parse_frame(f.data(), static_cast<uint32_t>(f.size()), info), ParseError::kOk);
  EXPECT_FALSE(info.cnp_short);
  // Cut the 16 bytes out and fix the lengths and the ICRC.
  std::vector<uint8_t> s(f.begin(), f.begin() + info.bth_off + 12);
  s.insert(s.end(), 4, 0);
  auto* ip = reinterpret_cast<Ipv4Hdr*>(s.data() + info.l3_off);
  ip->total_length.set(static_cast<uint16_t>(s.size() - info.l3_off));
  ip->checksum.set(0);
  ip->checksum.set(static_cast<uint16_t>(~ipv4_header_checksum(s.data() + info.l3_off)));
  reinterpret_cast<UdpHdr*>(s.data() + info.l4_off)->length.set(8 + 12 + 4);
  icrc_write(s.data() + s.size() - 4,
             icrc_compute(s.data() + info.l3_off, static_cast<uint32_t>(s.size()) - 4 - info.l3_off,
                          false));
  // 58 bytes: an Ethernet sender pads it to 60.
  s.resize(60, 0);
  ASSERT_EQ(parse_frame(s.data(), static_cast<uint32_t>(s.size()), info), ParseError::kOk);
  EXPECT_TRUE(info.cnp_short);
  EXPECT_EQ(info.opcode, op::kCnp);
  // extract_spec leaves the reserved bytes it did not get at zero: it reads nothing past the
  // BTH, neither the ICRC nor the Ethernet padding nor what lies behind the frame.
  std::vector<uint8_t> big(s.size() + 32, 0xEE);
  std::copy(s.begin(), s.end(), big.begin());
  ASSERT_EQ(parse_frame(big.data(), static_cast<uint32_t>(s.size()), info), ParseError::kOk);
  PathSpec path;
  BthFields bth;
  ExtHeaders ext;
  ext.cnp.reserved.fill(0x11);
  extract_spec(info, path, bth, ext);
  EXPECT_EQ(ext.cnp.reserved, CnpPayload{}.reserved);
  EXPECT_EQ(bth.opcode, op::kCnp);
}

// mark_ce does what a congested switch does: CE on a frame that is ECN-capable (either ECT
// codepoint), every other bit untouched but the IPv4 header checksum, which stays valid; the ICRC
// does not cover the ECN bits, so the frame still verifies. Not-ECT and CE frames are left alone.
TEST(MarkCe, MarksEctFramesAndKeepsThemValid) {
  for (auto fam : {IpFamily::kIpv4, IpFamily::kIpv6}) {
    for (bool vlan : {false, true}) {
      for (Ecn ecn : {Ecn::kNotEct, Ecn::kEct1, Ecn::kEct0, Ecn::kCe}) {
        PathSpec p = make_path(fam, vlan);
        p.traffic_class = static_cast<uint8_t>(46 << 2 | static_cast<uint8_t>(ecn));
        auto f = roce::test::make_frame(p, op::kRcWriteOnly, 100);
        const auto before = f;
        const bool ect = ecn == Ecn::kEct0 || ecn == Ecn::kEct1;
        SCOPED_TRACE(::testing::Message()
                     << (fam == IpFamily::kIpv6 ? "IPv6" : "IPv4") << (vlan ? " VLAN" : "")
                     << " ECN " << static_cast<int>(ecn));
        EXPECT_EQ(mark_ce(f.data(), static_cast<uint32_t>(f.size())), ect);
        PacketInfo info;
        ASSERT_EQ(parse_frame(f.data(), static_cast<uint32_t>(f.size()), info), ParseError::kOk);
        EXPECT_EQ(info.ecn(), ect ? Ecn::kCe : ecn);
        EXPECT_EQ(info.traffic_class >> 2, 46);
        if (!ect) {
          EXPECT_EQ(f, before);
          continue;
        }
        // Which bytes may change: IPv4 TOS and checksum; IPv6 byte 1 (the traffic class's low
        // nibble, beside the flow label's high bits, which must survive).
        const uint32_t l3 = info.l3_off;
        for (uint32_t i = 0; i < f.size(); ++i) {
          const bool may =
              fam == IpFamily::kIpv4 ? (i == l3 + 1 || i == l3 + 10 || i == l3 + 11) : i == l3 + 1;
          if (!may) {
            EXPECT_EQ(f[i], before[i]) << "byte " << i;
          }
        }
        if (fam == IpFamily::kIpv6) {
          EXPECT_EQ(info.ipv6().flow_label(), p.flow_label);
        }
      }
    }
  }
}

// A switch marks by the IP header alone: any ECT datagram, RoCE or not, is marked (with a valid
// IPv4 checksum after); what is not IP, or too short to hold its IP header, is not.
TEST(MarkCe, MarksAnyEctIpDatagramButNothingElse) {
  for (auto fam : {IpFamily::kIpv4, IpFamily::kIpv6}) {
    PathSpec p = make_path(fam);
    p.traffic_class = static_cast<uint8_t>(Ecn::kEct0);
    // UDP to another port.
    p.udp_dport = 4790;
    auto other = roce::test::make_frame(p, op::kRcSendOnly, 16);
    EXPECT_TRUE(mark_ce(other.data(), static_cast<uint32_t>(other.size())));
    PacketInfo info;
    EXPECT_EQ(parse_frame(other.data(), static_cast<uint32_t>(other.size()), info),
              ParseError::kWrongUdpPort);  // the IPv4 checksum was verified before
    EXPECT_EQ(info.ecn(), Ecn::kCe);
    // Not UDP at all.
    p.udp_dport = kRoceUdpPort;
    auto icmp = roce::test::make_frame(p, op::kRcSendOnly, 16);
    if (fam == IpFamily::kIpv6) {
      icmp[14 + 6] = kIpProtoIcmpv6;
    } else {
      auto* ip = reinterpret_cast<Ipv4Hdr*>(icmp.data() + 14);
      ip->protocol = kIpProtoIcmp;
      ip->checksum.set(0);
      ip->checksum.set(static_cast<uint16_t>(~ipv4_header_checksum(icmp.data() + 14)));
    }
    EXPECT_TRUE(mark_ce(icmp.data(), static_cast<uint32_t>(icmp.size())));
    EXPECT_EQ(parse_frame(icmp.data(), static_cast<uint32_t>(icmp.size()), info),
              ParseError::kNotUdp);
    EXPECT_EQ(info.ecn(), Ecn::kCe);
    // Not IP, and cut inside the IP header.
    auto arp = roce::test::make_frame(p, op::kRcSendOnly, 16);
    arp[12] = 0x08;
    arp[13] = 0x06;
    const auto arp_before = arp;
    EXPECT_FALSE(mark_ce(arp.data(), static_cast<uint32_t>(arp.size())));
    EXPECT_EQ(arp, arp_before);
    auto cut = roce::test::make_frame(p, op::kRcSendOnly, 16);
    cut.resize(14 + 10);
    const auto cut_before = cut;
    EXPECT_FALSE(mark_ce(cut.data(), static_cast<uint32_t>(cut.size())));
    EXPECT_EQ(cut, cut_before);
  }
}
}  // namespace

namespace {
// ipv4_header_checksum against RFC 1071 done the slow way (big-endian 16-bit words), on random
// headers including the all-ones and all-zeros extremes where the folding carries the most.
TEST(Ipv4Checksum, MatchesTheBigEndianWordSum) {
  std::mt19937 rng(3);
  for (int n = 0; n < 20000; ++n) {
    uint8_t h[20];
    for (auto& b : h) b = static_cast<uint8_t>(n == 0 ? 0xFF : n == 1 ? 0 : rng());
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += static_cast<uint32_t>(h[i] << 8 | h[i + 1]);
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    ASSERT_EQ(roce::wire::ipv4_header_checksum(h), sum) << n;
  }
}
}  // namespace

namespace {
// The builder sums the IPv4 checksum from the path's fields instead of reading the header back:
// every header it writes must verify, whatever the TOS, TTL, ID, DF, addresses and length,
// including the extremes where the folding carries the most.
TEST(Ipv4Checksum, EveryBuiltHeaderVerifies) {
  std::mt19937 rng(4);
  std::vector<uint8_t> buf(kMaxHeadersLen + 4096 + kTrailerRoom);
  const std::vector<uint8_t> payload(4096, 0xA5);
  for (int n = 0; n < 20000; ++n) {
    PathSpec path = make_path(IpFamily::kIpv4, n % 3 == 0);
    const bool ones = n == 0, zeros = n == 1;
    path.traffic_class = static_cast<uint8_t>(ones ? 0xFF : zeros ? 0 : rng());
    path.hop_limit = static_cast<uint8_t>(ones ? 0xFF : zeros ? 0 : rng());
    path.ipv4_id = static_cast<uint16_t>(ones ? 0xFFFF : zeros ? 0 : rng());
    path.ipv4_df = ones || (!zeros && rng() % 2);
    for (int i = 12; i < 16; ++i) {
      path.src_gid[i] = static_cast<uint8_t>(ones ? 0xFF : zeros ? 0 : rng());
      path.dst_gid[i] = static_cast<uint8_t>(ones ? 0xFF : zeros ? 0 : rng());
    }
    BthFields bth;
    bth.opcode = op::kRcSendOnly;
    const uint32_t len = ones ? 4096 : zeros ? 0 : static_cast<uint32_t>(rng() % 4097);
    const uint32_t frame_len = build_frame(buf.data(), static_cast<uint32_t>(buf.size()), path, bth,
                                           {}, payload.data(), len);
    ASSERT_GT(frame_len, 0u);
    const uint32_t l3 = n % 3 == 0 ? 18 : 14;
    ASSERT_EQ(ipv4_header_checksum(buf.data() + l3), 0xFFFF) << n;
    PacketInfo info;
    ASSERT_EQ(parse_frame(buf.data(), frame_len, info), ParseError::kOk) << n;
  }
}
}  // namespace

namespace {
// A template writes what write_l2l4 writes for its path, whatever the path's fields and the
// per-frame traffic class, IPv4 ID and length, and nothing past its headers.
TEST(L2L4Template, WritesWhatTheFieldByFieldWriterWrites) {
  std::mt19937_64 rng(7);
  const auto byte = [&] { return static_cast<uint8_t>(rng()); };
  for (int i = 0; i < 4000; ++i) {
    PathSpec p;
    for (auto& b : p.src_mac) b = byte();
    for (auto& b : p.dst_mac) b = byte();
    p.has_vlan = rng() & 1;
    p.vlan_tci = static_cast<uint16_t>(rng());
    p.family = rng() & 1 ? IpFamily::kIpv6 : IpFamily::kIpv4;
    for (auto& b : p.src_gid) b = byte();
    for (auto& b : p.dst_gid) b = byte();
    p.hop_limit = byte();
    p.ipv4_df = rng() & 1;
    p.flow_label = static_cast<uint32_t>(rng());
    p.udp_sport = static_cast<uint16_t>(rng());
    p.udp_dport = static_cast<uint16_t>(rng());
    p.udp_checksum = static_cast<uint16_t>(rng());
    // Whatever these hold when the template is made, the frame's come from the writer's call.
    p.traffic_class = byte();
    p.ipv4_id = static_cast<uint16_t>(rng());
    const L2L4Template t = make_l2l4_template(p);
    ASSERT_EQ(t.len, l2l4_header_len(p));
    for (int k = 0; k < 8; ++k) {
      p.traffic_class = byte();
      p.ipv4_id = static_cast<uint16_t>(rng());
      const auto udp_payload = static_cast<uint32_t>(k == 0 ? 0 : k == 1 ? 65507 : rng() % 9100);
      std::array<uint8_t, 128> want{}, got{};
      std::fill(want.begin(), want.end(), 0xA5);
      std::fill(got.begin(), got.end(), 0xA5);
      ASSERT_EQ(write_l2l4(want.data(), p, udp_payload) - want.data(), t.len);
      ASSERT_EQ(write_l2l4(got.data(), t, p.traffic_class, p.ipv4_id, udp_payload) - got.data(),
                t.len);
      ASSERT_EQ(want, got) << "path " << i << " frame " << k;
    }
  }
}

// The template builders make the PathSpec builders' frames, for every opcode and pad count.
TEST(L2L4Template, BuildersMakeThePathSpecBuildersFrames) {
  const ExtHeaders ext = make_ext();
  std::vector<uint8_t> payload(300);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  for (auto fam : {IpFamily::kIpv4, IpFamily::kIpv6}) {
    for (bool vlan : {false, true}) {
      PathSpec path = make_path(fam, vlan);
      const L2L4Template t = make_l2l4_template(path);
      path.traffic_class = 0x6A;
      path.ipv4_id = 0xBEEF;
      for (int opc = 0; opc < 256; ++opc) {
        const OpcodeInfo& oi = opcode_info(static_cast<uint8_t>(opc));
        if (!oi.valid()) continue;
        BthFields bth;
        bth.opcode = static_cast<uint8_t>(opc);
        bth.dest_qp = 0x12;
        bth.psn = 0x345678;
        for (uint32_t len : {0u, 1u, 2u, 3u, 257u, 300u}) {
          if (!oi.has(kOpPayload) && len) continue;
          const uint32_t hdr = headers_len(path, bth.opcode);
          std::vector<uint8_t> a(hdr + len + kTrailerRoom + 8, 0x5A), b = a, c = a, d = a;
          std::memcpy(a.data() + hdr, payload.data(), len);
          std::memcpy(b.data() + hdr, payload.data(), len);
          uint32_t na = 0, nb = 0;
          uint8_t* fa = build_around_payload(a.data() + hdr, len, path, bth, ext, &na);
          uint8_t* fb = build_around_payload(b.data() + hdr, len, t, path.traffic_class,
                                             path.ipv4_id, bth, ext, &nb);
          ASSERT_EQ(fa, a.data());
          ASSERT_EQ(fb, b.data());
          ASSERT_EQ(na, nb);
          ASSERT_EQ(a, b) << oi.name << " " << len;
          // The two-step builder, payload CRCed on its way in.
          uint32_t crc_c = 0, crc_d = 0;
          uint8_t* fc = build_headers(c.data() + hdr, len, path, bth, ext, &crc_c);
          uint8_t* fd = build_headers(d.data() + hdr, len, t, path.traffic_class, path.ipv4_id, bth,
                                      ext, &crc_d);
          ASSERT_EQ(crc_c, crc_d) << oi.name << " " << len;
          crc_d = crc32_copy(crc_d, d.data() + hdr, payload.data(), len);
          ASSERT_EQ(finish_icrc(fd, d.data() + hdr, len, crc_d), na);
          (void)fc;
          ASSERT_EQ(d, a) << oi.name << " " << len;
        }
      }
    }
  }
}
}  // namespace
