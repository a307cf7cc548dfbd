#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <random>
#include <vector>

#include "frame_factory.h"
#include "stack/wire/icrc.h"
#include "stack/wire/parser.h"

namespace {
using namespace roce::wire;

TEST(Crc32, MatchesZlibOnEveryLengthAndSeed) {
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(9000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (uint32_t len : {0u, 1u, 3u, 4u, 7u, 15u, 16u, 63u, 64u, 255u, 1024u, 4096u, 8999u}) {
    for (uint32_t off : {0u, 1u, 3u}) {
      uLong z = crc32(0, buf.data() + off, len);
      EXPECT_EQ(crc32_ieee(0, buf.data() + off, len), z) << len << " " << off;
      // Chained over two pieces.
      uint32_t half = len / 2;
      uint32_t c = crc32_ieee(0, buf.data() + off, half);
      c = crc32_ieee(c, buf.data() + off + half, len - half);
      EXPECT_EQ(c, z);
    }
  }
}

// icrc_compute against zlib over the bytes the spec names (8 x 0xFF, the masked headers, the rest)
// at every length across the short-frame fold (up to 256 bytes), ISA-L's padded path and its
// chained path (over 512 bytes), and at every alignment of the IP header.
TEST(Icrc, MatchesZlibOverTheMaskedBytesAtEveryLength) {
  std::mt19937 rng(7);
  std::vector<uint8_t> frame(1024 + 16);
  for (bool v6 : {false, true}) {
    const uint32_t ip_len = v6 ? 40 : 20;
    const uint32_t hdr_len = ip_len + 8 + 12;
    for (uint32_t covered = hdr_len; covered <= 700; ++covered) {
      for (auto& b : frame) b = static_cast<uint8_t>(rng());
      const uint32_t off = covered % 7;
      const uint8_t* l3 = frame.data() + off;
      std::vector<uint8_t> ref(8 + covered, 0xFF);
      std::memcpy(ref.data() + 8, l3, covered);
      uint8_t* ip = ref.data() + 8;
      if (v6) {
        ip[0] |= 0x0F;
        ip[1] = ip[2] = ip[3] = 0xFF;
        ip[7] = 0xFF;
      } else {
        ip[1] = ip[8] = ip[10] = ip[11] = 0xFF;
      }
      ip[ip_len + 6] = ip[ip_len + 7] = 0xFF;  // UDP checksum
      ip[ip_len + 8 + 4] = 0xFF;               // BTH byte 4
      const auto want = static_cast<uint32_t>(crc32(0, ref.data(), static_cast<uInt>(ref.size())));
      ASSERT_EQ(icrc_compute(l3, covered, v6), want) << (v6 ? "IPv6" : "IPv4") << " " << covered;
    }
  }
}

// The ICRC does not change when a masked field changes, and does change for any other byte.
TEST(Icrc, MaskedFieldsAreExactlyTheVariantOnes) {
  for (auto fam : {IpFamily::kIpv4, IpFamily::kIpv6}) {
    auto frame = roce::test::make_frame(roce::test::make_path(fam), op::kRcSendOnly, 33);
    PacketInfo info;
    ASSERT_EQ(parse_frame(frame.data(), static_cast<uint32_t>(frame.size()), info),
              ParseError::kOk);
    const uint32_t covered = static_cast<uint32_t>(frame.size()) - kIcrcSize - info.l3_off;
    const bool v6 = fam == IpFamily::kIpv6;
    const uint32_t base = icrc_compute(frame.data() + info.l3_off, covered, v6);
    std::vector<bool> masked(frame.size(), false);
    const uint32_t l3 = info.l3_off;
    if (v6) {
      masked[l3 + 1] = masked[l3 + 2] = masked[l3 + 3] = true;  // TC low nibble, flow label
      masked[l3 + 7] = true;                                    // hop limit
    } else {
      masked[l3 + 1] = masked[l3 + 8] = masked[l3 + 10] = masked[l3 + 11] = true;
    }
    masked[info.l4_off + 6] = masked[info.l4_off + 7] = true;  // UDP checksum
    masked[info.bth_off + 4] = true;                           // FECN/BECN/resv
    for (uint32_t i = l3; i < frame.size() - kIcrcSize; ++i) {
      auto copy = frame;
      copy[i] ^= 0x01;
      // The low bit of byte 0 of the IPv6 header is the TC high nibble: masked too.
      bool m = masked[i] || (v6 && i == l3);
      uint32_t c = icrc_compute(copy.data() + l3, covered, v6);
      if (m) {
        EXPECT_EQ(c, base) << "byte " << i;
      } else {
        EXPECT_NE(c, base) << "byte " << i;
      }
    }
  }
}
}  // namespace
