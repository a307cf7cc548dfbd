// The parser rejects every malformed frame with the specific error, and never reads outside the
// bytes it was given (run under ASan: each truncated copy is its own heap allocation).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "frame_factory.h"
#include "stack/wire/icrc.h"
#include "stack/wire/parser.h"

namespace {
using namespace roce::wire;
using roce::test::make_frame;
using roce::test::make_path;

ParseError parse(const std::vector<uint8_t>& f, bool icrc = true) {
  // Exactly-sized copy, so that an over-read is a heap overflow under ASan.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[f.size() ? f.size() : 1]);
  if (!f.empty()) std::memcpy(copy.get(), f.data(), f.size());
  PacketInfo info;
  return parse_frame(copy.get(), static_cast<uint32_t>(f.size()), info, {.verify_icrc = icrc});
}

// Recomputes IPv4 checksum and ICRC after a test edits header fields.
void refresh(std::vector<uint8_t>& f) {
  PacketInfo info;
  parse_frame(f.data(), static_cast<uint32_t>(f.size()), info, {false, false});
  if (info.family == IpFamily::kIpv4) {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + info.l3_off);
    ip->checksum.set(0);
    ip->checksum.set(static_cast<uint16_t>(~ipv4_header_checksum(f.data() + info.l3_off)));
  }
  const uint32_t icrc_off = static_cast<uint32_t>(f.size()) - 4;
  icrc_write(f.data() + icrc_off, icrc_compute(f.data() + info.l3_off, icrc_off - info.l3_off,
                                               info.family == IpFamily::kIpv6));
}

// Inserts (delta > 0, zero bytes) or erases (delta < 0) bytes just before the ICRC and fixes the
// IP and UDP lengths to match; the caller refreshes the checksums.
void resize_before_icrc(std::vector<uint8_t>& f, int delta) {
  PacketInfo info;
  parse_frame(f.data(), static_cast<uint32_t>(f.size()), info, {false, false});
  if (delta > 0) {
    f.insert(f.end() - 4, static_cast<size_t>(delta), 0);
  } else {
    f.erase(f.end() - 4 + delta, f.end() - 4);
  }
  if (info.family == IpFamily::kIpv6) {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(f.data() + info.l3_off);
    ip->payload_length.set(static_cast<uint16_t>(ip->payload_length.get() + delta));
  } else {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + info.l3_off);
    ip->total_length.set(static_cast<uint16_t>(ip->total_length.get() + delta));
  }
  auto* udp = reinterpret_cast<UdpHdr*>(f.data() + info.l4_off);
  udp->length.set(static_cast<uint16_t>(udp->length.get() + delta));
}

class Negative : public ::testing::TestWithParam<IpFamily> {
 protected:
  bool v6() const { return GetParam() == IpFamily::kIpv6; }
  uint32_t l3() const { return 14; }
  uint32_t l4() const { return 14 + (v6() ? 40 : 20); }
  uint32_t bth() const { return l4() + 8; }
  std::vector<uint8_t> frame(uint8_t opc = op::kRcWriteFirst, uint32_t len = 256) {
    return make_frame(make_path(GetParam()), opc, len);
  }
};

TEST_P(Negative, ValidFrameParses) { EXPECT_EQ(parse(frame()), ParseError::kOk); }

TEST_P(Negative, TruncationAtEveryByte) {
  for (uint8_t opc : {op::kRcWriteFirst, op::kRcAck, op::kRcCmpSwap, op::kCnp, op::kRcSendOnly}) {
    auto f = frame(opc, 64);
    for (size_t cut = 0; cut < f.size(); ++cut) {
      std::vector<uint8_t> t(f.begin(), f.begin() + static_cast<long>(cut));
      ParseError e = parse(t);
      ParseError want = cut < 14     ? ParseError::kTruncatedL2
                        : cut < l4() ? ParseError::kTruncatedIp
                                     : ParseError::kBadIpLength;
      ASSERT_EQ(e, want) << "opcode " << int(opc) << " cut at " << cut;
    }
  }
}

// A frame that ends inside its 802.1Q tag is a truncated L2 header: the tag is not read.
TEST_P(Negative, TruncationInsideTheVlanTag) {
  auto f = make_frame(make_path(GetParam(), /*vlan=*/true), op::kRcSendOnly, 0);
  for (size_t cut = 14; cut < 18; ++cut) {
    EXPECT_EQ(parse({f.begin(), f.begin() + static_cast<long>(cut)}), ParseError::kTruncatedL2)
        << cut;
  }
  EXPECT_EQ(parse({f.begin(), f.begin() + 18}), ParseError::kTruncatedIp);
}

TEST_P(Negative, IpLengthLongerOrShorterThanFrame) {
  for (int delta : {-1, 1, -8, 100}) {
    auto f = frame();
    if (v6()) {
      auto* ip = reinterpret_cast<Ipv6Hdr*>(f.data() + l3());
      ip->payload_length.set(static_cast<uint16_t>(ip->payload_length.get() + delta));
    } else {
      auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + l3());
      ip->total_length.set(static_cast<uint16_t>(ip->total_length.get() + delta));
    }
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kBadIpLength) << delta;
  }
  // Extra bytes after the datagram in a frame above the Ethernet minimum.
  auto f = frame();
  f.push_back(0);
  EXPECT_EQ(parse(f), ParseError::kBadIpLength);
}

TEST_P(Negative, UdpLengthDisagrees) {
  for (int delta : {-1, 1, -4, 4}) {
    auto f = frame();
    auto* udp = reinterpret_cast<UdpHdr*>(f.data() + l4());
    udp->length.set(static_cast<uint16_t>(udp->length.get() + delta));
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kBadUdpLength) << delta;
  }
}

TEST_P(Negative, WrongUdpPort) {
  auto f = frame();
  reinterpret_cast<UdpHdr*>(f.data() + l4())->dst_port.set(4790);
  refresh(f);
  EXPECT_EQ(parse(f), ParseError::kWrongUdpPort);
}

TEST_P(Negative, NotUdpAndNotIp) {
  auto f = frame();
  if (v6()) {
    f[l3() + 6] = kIpProtoIcmpv6;
  } else {
    f[l3() + 9] = kIpProtoIcmp;
  }
  refresh(f);
  PacketInfo info;
  EXPECT_EQ(parse_frame(f.data(), static_cast<uint32_t>(f.size()), info), ParseError::kNotUdp);
  EXPECT_EQ(info.ip_proto, v6() ? kIpProtoIcmpv6 : kIpProtoIcmp);
  auto g = frame();
  g[12] = 0x08;
  g[13] = 0x06;  // ARP
  EXPECT_EQ(parse_frame(g.data(), static_cast<uint32_t>(g.size()), info), ParseError::kNotIp);
  EXPECT_EQ(info.ethertype, kEtherTypeArp);
}

TEST_P(Negative, IpVersionDisagreesWithEtherType) {
  auto f = frame();
  f[l3()] = static_cast<uint8_t>((f[l3()] & 0x0F) | (v6() ? 0x40 : 0x60));
  EXPECT_EQ(parse(f), ParseError::kBadIpVersion);
}

TEST_P(Negative, UnknownOpcode) {
  for (uint8_t opc : {0x15, 0x18, 0x1F, 0x40, 0x80, 0xFF}) {
    auto f = frame(op::kRcSendOnly, 64);
    f[bth()] = opc;
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kUnknownOpcode) << int(opc);
  }
}

TEST_P(Negative, NonZeroTver) {
  // Any of the four TVer bits, the highest too.
  for (uint8_t tver : {0x01, 0x08, 0x0F}) {
    auto f = frame();
    f[bth() + 1] |= tver;
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kBadTver) << int(tver);
  }
}

TEST_P(Negative, BadPadCount) {
  // Pad on an opcode without payload.
  auto ack = frame(op::kRcAck, 0);
  ack[bth() + 1] |= 0x20;
  refresh(ack);
  EXPECT_EQ(parse(ack), ParseError::kBadPadCount);
  // Pad larger than the padded payload.
  auto empty = frame(op::kRcSendOnly, 0);
  empty[bth() + 1] |= 0x30;
  refresh(empty);
  EXPECT_EQ(parse(empty), ParseError::kBadPadCount);
  // Payload + pad not a multiple of four: one byte too many before the ICRC.
  auto odd = frame(op::kRcSendOnly, 8);
  odd.insert(odd.end() - 4, 0xAA);
  if (v6()) {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(odd.data() + l3());
    ip->payload_length.set(static_cast<uint16_t>(ip->payload_length.get() + 1));
  } else {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(odd.data() + l3());
    ip->total_length.set(static_cast<uint16_t>(ip->total_length.get() + 1));
  }
  auto* udp = reinterpret_cast<UdpHdr*>(odd.data() + l4());
  udp->length.set(static_cast<uint16_t>(udp->length.get() + 1));
  refresh(odd);
  EXPECT_EQ(parse(odd), ParseError::kBadPadCount);
}

TEST_P(Negative, PayloadOnOpcodeWithoutPayload) {
  auto f = frame(op::kRcReadRequest, 0);
  f.insert(f.end() - 4, 4, 0);
  if (v6()) {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(f.data() + l3());
    ip->payload_length.set(static_cast<uint16_t>(ip->payload_length.get() + 4));
  } else {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + l3());
    ip->total_length.set(static_cast<uint16_t>(ip->total_length.get() + 4));
  }
  auto* udp = reinterpret_cast<UdpHdr*>(f.data() + l4());
  udp->length.set(static_cast<uint16_t>(udp->length.get() + 4));
  refresh(f);
  EXPECT_EQ(parse(f), ParseError::kUnexpectedPayload);
}

TEST_P(Negative, TruncatedExtensionHeader) {
  // A WRITE_FIRST whose datagram ends inside the RETH (lengths consistent, RETH cut).
  auto f = frame(op::kRcWriteFirst, 0);
  const int cut = 8;
  f.erase(f.end() - 4 - cut, f.end() - 4);
  if (v6()) {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(f.data() + l3());
    ip->payload_length.set(static_cast<uint16_t>(ip->payload_length.get() - cut));
  } else {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + l3());
    ip->total_length.set(static_cast<uint16_t>(ip->total_length.get() - cut));
  }
  auto* udp = reinterpret_cast<UdpHdr*>(f.data() + l4());
  udp->length.set(static_cast<uint16_t>(udp->length.get() - cut));
  refresh(f);
  EXPECT_EQ(parse(f), ParseError::kTruncatedExtHeader);
}

// Only a CNP may stop right after its BTH (the short form some senders emit): any other opcode
// whose extension headers are missing entirely is truncated, though its lengths agree.
TEST_P(Negative, ExtensionHeadersMissingEntirely) {
  for (uint8_t opc : {op::kRcWriteFirst, op::kRcWriteOnlyImm, op::kRcReadRequest,
                      op::kRcReadRespFirst, op::kRcAck, op::kRcAtomicAck, op::kRcCmpSwap,
                      op::kRcSendOnlyImm, op::kRcSendOnlyInv, op::kUdSendOnly}) {
    auto f = frame(opc, 0);
    resize_before_icrc(f, -static_cast<int>(opcode_info(opc).ext_len));
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kTruncatedExtHeader) << opcode_info(opc).name;
  }
}

TEST_P(Negative, BadIcrcOnAnyCoveredByte) {
  auto f = frame(op::kRcSendOnly, 40);
  for (size_t i = bth(); i < f.size(); ++i) {
    if (i == bth() + 1 || i == bth() + 4) continue;  // TVer/pad, and the masked byte
    auto g = f;
    g[i] ^= 0x80;
    ParseError e = parse(g);
    EXPECT_TRUE(e == ParseError::kBadIcrc || e == ParseError::kUnknownOpcode) << i;
  }
}

TEST_P(Negative, TruncatedBthAndUdp) {
  // A datagram that ends inside the UDP header or the BTH, lengths consistent.
  for (uint32_t keep : {4u, 8u, 8u + 12u, 8u + 15u}) {
    auto f = frame(op::kRcSendOnly, 0);
    f.resize(l4() + keep);
    if (v6()) {
      reinterpret_cast<Ipv6Hdr*>(f.data() + l3())->payload_length.set(static_cast<uint16_t>(keep));
    } else {
      reinterpret_cast<Ipv4Hdr*>(f.data() + l3())
          ->total_length.set(static_cast<uint16_t>(20 + keep));
    }
    if (keep >= 8)
      reinterpret_cast<UdpHdr*>(f.data() + l4())->length.set(static_cast<uint16_t>(keep));
    if (!v6()) {
      auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + l3());
      ip->checksum.set(0);
      ip->checksum.set(static_cast<uint16_t>(~ipv4_header_checksum(f.data() + l3())));
    }
    while (f.size() < 60) f.push_back(0);  // Ethernet minimum: padding allowed
    EXPECT_EQ(parse(f), keep < 8 ? ParseError::kTruncatedUdp : ParseError::kTruncatedBth) << keep;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Negative, ::testing::Values(IpFamily::kIpv4, IpFamily::kIpv6),
                         [](const auto& i) {
                           return i.param == IpFamily::kIpv6 ? "Ipv6" : "Ipv4";
                         });

TEST(NegativeIpv4, OptionsFragmentsChecksum) {
  auto base = make_frame(make_path(IpFamily::kIpv4), op::kRcSendOnly, 64);
  auto opt = base;
  opt[14] = 0x46;
  EXPECT_EQ(parse(opt), ParseError::kIpv4Options);
  auto mf = base;
  reinterpret_cast<Ipv4Hdr*>(mf.data() + 14)->flags_frag.set(kIpv4FlagMf);
  refresh(mf);
  EXPECT_EQ(parse(mf), ParseError::kIpv4Fragment);
  auto offs = base;
  reinterpret_cast<Ipv4Hdr*>(offs.data() + 14)->flags_frag.set(kIpv4FlagDf | 5);
  refresh(offs);
  EXPECT_EQ(parse(offs), ParseError::kIpv4Fragment);
  auto cs = base;
  cs[14 + 8] ^= 1;  // TTL changes: ICRC does not cover it, the IP checksum does
  EXPECT_EQ(parse(cs), ParseError::kIpv4BadChecksum);
}

// IHL counts 32-bit words: anything but 5 (no options) is refused, below 5 too (no room for
// the header it describes).
TEST(NegativeIpv4, HeaderLengthOtherThanFiveWords) {
  for (uint8_t ihl : {0, 1, 4, 6, 15}) {
    auto f = make_frame(make_path(IpFamily::kIpv4), op::kRcSendOnly, 64);
    f[14] = static_cast<uint8_t>(0x40 | ihl);
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kIpv4Options) << int(ihl);
  }
}

// The fragment offset is 13 bits: its highest bit makes a fragment as its lowest does.
TEST(NegativeIpv4, EveryFragmentOffsetBitCounts) {
  for (uint16_t offset : {0x0001, 0x0800, 0x1000, 0x1FFF}) {
    auto f = make_frame(make_path(IpFamily::kIpv4), op::kRcSendOnly, 64);
    reinterpret_cast<Ipv4Hdr*>(f.data() + 14)->flags_frag.set(kIpv4FlagDf | offset);
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kIpv4Fragment) << offset;
  }
}

// A minimum-size frame may carry padding behind its datagram, but a total length shorter than
// the 20-byte IPv4 header is no datagram: kBadIpLength, not a truncated UDP header.
TEST(NegativeIpv4, TotalLengthShorterThanItsHeader) {
  for (uint16_t total : {0, 8, 19, 20}) {
    auto f = make_frame(make_path(IpFamily::kIpv4), op::kRcSendOnly, 0);
    ASSERT_LE(f.size(), 60u);
    f.resize(60, 0);
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + 14);
    ip->total_length.set(total);
    ip->checksum.set(0);
    ip->checksum.set(static_cast<uint16_t>(~ipv4_header_checksum(f.data() + 14)));
    // 20 bytes is a datagram of just the header: it is the UDP header that is missing.
    EXPECT_EQ(parse(f), total < 20 ? ParseError::kBadIpLength : ParseError::kTruncatedUdp) << total;
  }
}

// An Ethernet frame is at least 64 bytes with its FCS, and a bridge that adds an 802.1Q tag to a
// padded minimum frame makes it 68: a tagged frame of up to 64 bytes (without FCS) may carry
// padding behind a short datagram, as an untagged one of up to 60 does. A ping with a few bytes
// of data over a VLAN arrives so; it must still reach the neighbour agent as kNotUdp.
TEST(NegativeIpv4, TaggedMinimumFrameMayCarryPadding) {
  auto icmp_frame = [](bool tagged, size_t frame_len) {
    std::vector<uint8_t> f = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
    if (tagged) f.insert(f.end(), {0x81, 0x00, 0x00, 100});
    f.insert(f.end(), {0x08, 0x00});
    const size_t l3 = f.size();
    // IPv4 + an 8-byte ICMP echo request without data: a 28-byte datagram.
    f.insert(f.end(), {0x45, 0, 0,  28, 0, 1, 0, 0, 64,   kIpProtoIcmp, 0, 0, 10, 0,
                       0,    2, 10, 0,  0, 1, 8, 0, 0xf7, 0xfe,         0, 1, 0,  0});
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + l3);
    ip->checksum.set(static_cast<uint16_t>(~ipv4_header_checksum(f.data() + l3)));
    f.resize(frame_len, 0);
    return f;
  };
  EXPECT_EQ(parse(icmp_frame(false, 60)), ParseError::kNotUdp);
  EXPECT_EQ(parse(icmp_frame(true, 60)), ParseError::kNotUdp);
  EXPECT_EQ(parse(icmp_frame(true, 64)), ParseError::kNotUdp);
  // Beyond the minimum, bytes behind the datagram are still refused.
  EXPECT_EQ(parse(icmp_frame(false, 61)), ParseError::kBadIpLength);
  EXPECT_EQ(parse(icmp_frame(true, 65)), ParseError::kBadIpLength);
}

TEST(NegativeIpv6, ExtensionHeaders) {
  for (uint8_t nh : {0, 43, 44, 60, 51, 50, 135}) {
    auto f = make_frame(make_path(IpFamily::kIpv6), op::kRcSendOnly, 64);
    f[14 + 6] = nh;
    refresh(f);
    EXPECT_EQ(parse(f), ParseError::kIpv6ExtensionHeader) << int(nh);
  }
}

TEST(NegativeRandom, ArbitraryBytesNeverCrash) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    auto f = make_frame(make_path(i & 1 ? IpFamily::kIpv6 : IpFamily::kIpv4),
                        static_cast<uint8_t>(rng() % 24), rng() % 300);
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) f[rng() % f.size()] = static_cast<uint8_t>(rng());
    if (rng() % 3 == 0) f.resize(rng() % (f.size() + 1));
    PacketInfo info;
    ParseError e = parse(f);
    if (e == ParseError::kOk) {
      // Whatever parses must describe bytes inside the frame.
      parse_frame(f.data(), static_cast<uint32_t>(f.size()), info);
      ASSERT_LE(info.payload_off + info.payload_len + info.pad + 4u, f.size());
    }
  }
}
}  // namespace
