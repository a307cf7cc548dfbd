// The Internet checksum (stack/wire/checksum.h) against known vectors: the worked example of
// RFC 1071 3, an odd length (RFC 1071 4.1 pads with a zero byte), a real IPv4 header, and the
// ICMPv6 pseudo-header of RFC 8200 8.1 laid out byte by byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "stack/wire/checksum.h"

namespace {
using namespace roce::wire;

// RFC 1071 3: the words 0001 f203 f4f5 f6f7 sum to 2ddf0, which folds to ddf2.
TEST(InetChecksum, Rfc1071Example) {
  const uint8_t b[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(inet_sum(b, sizeof b), 0x2ddf0u);
  EXPECT_EQ(inet_fold(inet_sum(b, sizeof b)), 0xddf2);
  EXPECT_EQ(inet_checksum(b, sizeof b), 0x220d);
}

// An odd last byte is the high half of a word whose low half is zero.
TEST(InetChecksum, OddLengthPadsTheLastByteLow) {
  const uint8_t b[] = {0x00, 0x01, 0xf2};
  EXPECT_EQ(inet_sum(b, 3), 0xf201u);
  EXPECT_EQ(inet_checksum(b, 3), 0x0dfe);
  EXPECT_EQ(inet_checksum(b, 1), 0xffff);  // the byte 00 alone sums to zero
  EXPECT_EQ(inet_checksum(b, 0), 0xffff);
}

// A sum carried over from earlier pieces adds in as if the bytes had been one run.
TEST(InetChecksum, PiecesSumAsOneRun) {
  const uint8_t b[] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc};
  EXPECT_EQ(inet_checksum(b + 2, 4, inet_sum(b, 2)), inet_checksum(b, 6));
}

// The end-around carry folds until 16 bits remain, whatever the size of the sum.
TEST(InetChecksum, FoldAddsEveryCarryBack) {
  EXPECT_EQ(inet_fold(0), 0);
  EXPECT_EQ(inet_fold(0x1ffff), 0x0001);  // 0x1ffff -> 0x10000 -> 0x0001
  EXPECT_EQ(inet_fold(0xffff), 0xffff);
  EXPECT_EQ(inet_fold(UINT64_MAX), 0xffff);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t x = rng() >> (i % 48);
    uint64_t slow = x;
    while (slow >> 16) slow = (slow & 0xffff) + (slow >> 16);
    ASSERT_EQ(inet_fold(x), slow) << x;
  }
}

// 192.168.0.1 -> 192.168.0.199, UDP, total length 115: checksum b861.
TEST(InetChecksum, Ipv4Header) {
  uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                   0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(inet_checksum(h, 20), 0xb861);
  EXPECT_EQ(ipv4_header_checksum(h), 0xffff - 0xb861);
  h[10] = 0xb8;
  h[11] = 0x61;
  EXPECT_EQ(inet_checksum(h, 20), 0);
  EXPECT_EQ(ipv4_header_checksum(h), 0xffff);
}

// The pseudo-header sum is that of the 40 bytes RFC 8200 8.1 draws: source, destination, a
// 32-bit length, three zero bytes and the next header.
TEST(InetChecksum, Ipv6PseudoHeader) {
  std::vector<uint8_t> ph(40, 0);
  for (int i = 0; i < 32; ++i) ph[i] = static_cast<uint8_t>(0xf0 + i * 7);
  const uint32_t len = 0x12345;
  ph[32] = 0x00;
  ph[33] = 0x01;
  ph[34] = 0x23;
  ph[35] = 0x45;
  ph[39] = kIpProtoIcmpv6;
  EXPECT_EQ(inet_fold(ipv6_pseudo_sum(ph.data(), ph.data() + 16, len, kIpProtoIcmpv6)),
            inet_fold(inet_sum(ph.data(), 40)));
  const uint8_t msg[] = {128, 0, 0, 0, 0x12, 0x34, 0x00, 0x01, 0xab};  // echo request, odd
  uint8_t sent[sizeof msg];
  std::copy(msg, msg + sizeof msg, sent);
  const uint16_t c = icmpv6_checksum(ph.data(), ph.data() + 16, sent, sizeof sent);
  sent[2] = static_cast<uint8_t>(c >> 8);
  sent[3] = static_cast<uint8_t>(c);
  EXPECT_EQ(icmpv6_checksum(ph.data(), ph.data() + 16, sent, sizeof sent), 0);
}

}  // namespace
