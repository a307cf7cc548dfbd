#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "frame_factory.h"
#include "stack/wire/icrc.h"
#include "stack/wire/parser.h"

namespace {
using namespace roce::wire;

// Every implementation this CPU runs (crc_impl() picks one of them); the others are named.
std::vector<CrcImpl> impls_here() {
  std::vector<CrcImpl> v;
  for (CrcImpl i : {CrcImpl::kIsal, CrcImpl::kAvx2Clmul, CrcImpl::kAvx512Clmul}) {
    if (crc_impl_supported(i)) {
      v.push_back(i);
    } else {
      std::printf("CRC path %s: not on this CPU, not tested here\n", crc_impl_name(i));
    }
  }
  return v;
}

TEST(Crc32, MatchesZlibOnEveryLengthAndSeed) {
  std::printf("crc32_ieee / crc32_copy on this CPU: %s\n", crc_impl_name(crc_impl()));
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(9000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<uint32_t> lens = {0u,    1u,    3u,    4u,    7u,    15u,   16u,   63u,   64u,
                                255u,  256u,  511u,  512u,  513u,  767u,  768u,  1024u, 1279u,
                                2048u, 4095u, 4096u, 4100u, 4224u, 8191u, 8192u, 8999u};
  for (CrcImpl impl : impls_here()) {
    for (uint32_t len : lens) {
      for (uint32_t off : {0u, 1u, 3u}) {
        if (off + len > buf.size()) continue;
        const auto z = static_cast<uint32_t>(crc32(0, buf.data() + off, len));
        EXPECT_EQ(crc32_ieee_with(impl, 0, buf.data() + off, len), z)
            << crc_impl_name(impl) << " " << len << " " << off;
        // Chained over two pieces, and from a non-zero seed.
        const uint32_t half = len / 2;
        uint32_t c = crc32_ieee_with(impl, 0, buf.data() + off, half);
        c = crc32_ieee_with(impl, c, buf.data() + off + half, len - half);
        EXPECT_EQ(c, z) << crc_impl_name(impl) << " " << len;
        const uint32_t seed = static_cast<uint32_t>(rng());
        EXPECT_EQ(crc32_ieee_with(impl, seed, buf.data() + off, len),
                  static_cast<uint32_t>(crc32(seed, buf.data() + off, len)))
            << crc_impl_name(impl) << " " << len;
      }
    }
  }
  EXPECT_EQ(crc32_ieee(0, buf.data(), 4096), static_cast<uint32_t>(crc32(0, buf.data(), 4096)));
}

// crc32_copy: the copy is exact and the CRC is zlib's, chained from any value, at lengths on
// both sides of its 256-byte steps (one-pass path and memcpy + ISA-L tail) and any alignment,
// through every implementation this CPU runs.
TEST(Crc32, CopyCopiesAndMatchesZlibAtEveryLength) {
  std::printf("crc32_copy one-pass path on this CPU: %s\n",
              crc_impl() != CrcImpl::kIsal ? "yes" : "no");
  std::mt19937 rng(3);
  std::vector<uint8_t> src(9000 + 64), dst(9000 + 64);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  std::vector<uint32_t> lens;
  for (uint32_t l = 0; l <= 1100; ++l) lens.push_back(l);
  for (uint32_t l : {2047u, 2048u, 2049u, 4095u, 4096u, 4097u, 4224u, 8191u, 8192u, 9000u}) {
    lens.push_back(l);
  }
  for (CrcImpl impl : impls_here()) {
    for (uint32_t len : lens) {
      const uint32_t so = len % 5, dof = len % 3;
      const uint32_t seed = static_cast<uint32_t>(rng());
      std::fill(dst.begin(), dst.end(), 0xA5);
      const uint32_t got = crc32_copy_with(impl, seed, dst.data() + dof, src.data() + so, len);
      ASSERT_EQ(got, static_cast<uint32_t>(crc32(seed, src.data() + so, len)))
          << crc_impl_name(impl) << " " << len;
      ASSERT_EQ(std::memcmp(dst.data() + dof, src.data() + so, len), 0)
          << crc_impl_name(impl) << " " << len;
      // Nothing written outside [dst, dst + len).
      for (uint32_t i = 0; i < dof; ++i) ASSERT_EQ(dst[i], 0xA5) << len;
      for (size_t i = dof + len; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5) << len;
    }
  }
  std::fill(dst.begin(), dst.end(), 0);
  EXPECT_EQ(crc32_copy(7, dst.data(), src.data(), 4096),
            static_cast<uint32_t>(crc32(7, src.data(), 4096)));
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 4096), 0);
}

// icrc_begin chained over the rest of the packet equals icrc_compute over all of it.
TEST(Icrc, BeginChainedOverTheRestEqualsTheWhole) {
  std::mt19937 rng(11);
  std::vector<uint8_t> frame(5000), scratch(5000);
  for (bool v6 : {false, true}) {
    const uint32_t hdr_len = (v6 ? 40 : 20) + 8 + 12;
    for (uint32_t covered :
         {hdr_len, hdr_len + 1, hdr_len + 16, hdr_len + 300, hdr_len + 4096, hdr_len + 4100}) {
      for (auto& b : frame) b = static_cast<uint8_t>(rng());
      const uint32_t whole = icrc_compute(frame.data(), covered, v6);
      const uint32_t rest = covered - hdr_len;
      uint32_t c = icrc_begin(frame.data(), v6);
      EXPECT_EQ(crc32_ieee(c, frame.data() + hdr_len, rest), whole) << covered;
      c = crc32_copy(c, scratch.data(), frame.data() + hdr_len, rest);
      EXPECT_EQ(c, whole) << covered;
    }
  }
}

// icrc_compute against zlib over the bytes the spec names (8 x 0xFF, the masked headers, the rest)
// at every length across the short-frame fold (up to 256 bytes), ISA-L's padded path and its
// chained path (over 512 bytes), and at every alignment of the IP header; icrc_prefix likewise.
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
      // icrc_prefix over all of it (folded up to 252 bytes, ISA-L above), and over a prefix
      // chained with the rest.
      ASSERT_EQ(icrc_prefix(l3, covered, v6), want) << (v6 ? "IPv6" : "IPv4") << " " << covered;
      const uint32_t p = std::min(covered, hdr_len + covered % 61);
      ASSERT_EQ(crc32_ieee(icrc_prefix(l3, p, v6), l3 + p, covered - p), want)
          << covered << " " << p;
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
