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
