// ECMP in the simulator: the 5-tuple a switch hashes, read from frames the stack's own builder
// writes (IPv4 and IPv6, with and without a VLAN tag) and from hand-made odd ones; the path
// choice (deterministic, seeded, spread evenly over the paths by the UDP source port alone);
// and the two-leaf fabric of SimNetwork, which sends each frame over the path of its tuple.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "stack/sim/ecmp_hash.h"
#include "stack/sim/sim_network.h"
#include "stack/wire/builder.h"

namespace {
using namespace roce;
using namespace roce::sim;

std::array<uint8_t, 16> v4_gid(uint8_t host) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, host};
}
std::array<uint8_t, 16> v6_gid(uint8_t host) {
  return {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, host};
}

wire::PathSpec spec(wire::IpFamily family, bool vlan, uint16_t sport) {
  wire::PathSpec p;
  p.src_mac = {0x02, 0, 0, 0, 0, 1};
  p.dst_mac = {0x02, 0, 0, 0, 0, 3};
  p.family = family;
  p.has_vlan = vlan;
  p.vlan_tci = 0x6005;
  const bool v6 = family == wire::IpFamily::kIpv6;
  p.src_gid = v6 ? v6_gid(1) : v4_gid(1);
  p.dst_gid = v6 ? v6_gid(3) : v4_gid(3);
  p.udp_sport = sport;
  return p;
}

// A RoCEv2 frame's headers and a 16-byte BTH + ICRC, as the stack writes them.
std::vector<uint8_t> frame(const wire::PathSpec& p) {
  std::vector<uint8_t> f(wire::l2l4_header_len(p) + 16, 0);
  wire::write_l2l4(f.data(), p, 16);
  return f;
}

TEST(EcmpHash, ReadsTheFiveTupleOfIpv4AndIpv6FramesWithOrWithoutVlan) {
  for (auto family : {wire::IpFamily::kIpv4, wire::IpFamily::kIpv6}) {
    for (bool vlan : {false, true}) {
      const wire::PathSpec p = spec(family, vlan, 0xC123);
      const auto f = frame(p);
      FiveTuple t;
      ASSERT_TRUE(parse_five_tuple(f.data(), static_cast<uint32_t>(f.size()), &t));
      EXPECT_EQ(t.src, p.src_gid);
      EXPECT_EQ(t.dst, p.dst_gid);
      EXPECT_EQ(t.proto, 17);
      EXPECT_EQ(t.sport, 0xC123);
      EXPECT_EQ(t.dport, 4791);
    }
  }
}

TEST(EcmpHash, NonIpOrTruncatedFramesGoToPathZeroWithoutReadingPastTheEnd) {
  for (auto family : {wire::IpFamily::kIpv4, wire::IpFamily::kIpv6}) {
    const auto whole = frame(spec(family, true, 0xC001));
    const uint32_t l3_end = 18 + (family == wire::IpFamily::kIpv6 ? 40 : 20);
    for (uint32_t len = 0; len < l3_end; ++len) {
      // Exactly `len` bytes on the heap: a read beyond shows under the sanitizers.
      std::vector<uint8_t> cut(whole.begin(), whole.begin() + len);
      FiveTuple t;
      EXPECT_FALSE(parse_five_tuple(cut.data(), len, &t)) << len;
      for (uint64_t seed = 0; seed < 4; ++seed) EXPECT_EQ(ecmp_path(cut.data(), len, 8, seed), 0u);
    }
  }
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  FiveTuple t;
  EXPECT_FALSE(parse_five_tuple(arp.data(), 60, &t));
  // An IPv4 EtherType whose header says version 6 is not IPv4.
  auto bad = frame(spec(wire::IpFamily::kIpv4, false, 0xC001));
  bad[14] = 0x65;
  EXPECT_FALSE(parse_five_tuple(bad.data(), static_cast<uint32_t>(bad.size()), &t));
}

TEST(EcmpHash, FragmentsAndOtherProtocolsHashOnAddressesAndProtocolOnly) {
  auto f = frame(spec(wire::IpFamily::kIpv4, false, 0xC777));
  f[14 + 6] = 0x20;  // MF: the first fragment; later ones carry no UDP header at all
  FiveTuple t;
  ASSERT_TRUE(parse_five_tuple(f.data(), static_cast<uint32_t>(f.size()), &t));
  EXPECT_EQ(t.sport, 0);
  EXPECT_EQ(t.dport, 0);
  auto icmp = frame(spec(wire::IpFamily::kIpv6, false, 0xC777));
  icmp[14 + 6] = 58;
  ASSERT_TRUE(parse_five_tuple(icmp.data(), static_cast<uint32_t>(icmp.size()), &t));
  EXPECT_EQ(t.proto, 58);
  EXPECT_EQ(t.sport, 0);
}

TEST(EcmpHash, IsDeterministicAndEachSeedIsADifferentDraw) {
  FiveTuple t;
  t.src = v4_gid(1);
  t.dst = v4_gid(2);
  t.proto = 17;
  t.dport = 4791;
  uint32_t moved = 0;
  for (uint16_t sport = 0xC000; sport < 0xC000 + 256; ++sport) {
    t.sport = sport;
    EXPECT_EQ(ecmp_hash(t, 5), ecmp_hash(t, 5));
    moved += ecmp_hash(t, 5) % 4 != ecmp_hash(t, 6) % 4;
  }
  // A fresh draw keeps a flow on its path one time in four.
  EXPECT_GT(moved, 256 * 3 / 4 - 40);
  EXPECT_LT(moved, 256 * 3 / 4 + 40);
}

TEST(EcmpHash, SourcePortsAloneSpreadFlowsEvenlyOverThePaths) {
  for (uint32_t paths : {2u, 4u, 8u, 5u}) {
    for (uint64_t seed : {0ull, 1ull, 42ull}) {
      std::vector<uint32_t> count(paths, 0);
      const uint32_t flows = 4096;
      for (uint32_t i = 0; i < flows; ++i) {
        const auto f = frame(spec(wire::IpFamily::kIpv4, false, static_cast<uint16_t>(0xC000 + i)));
        const uint32_t p = ecmp_path(f.data(), static_cast<uint32_t>(f.size()), paths, seed);
        ASSERT_LT(p, paths);
        ++count[p];
      }
      // Binomial: the standard deviation is below sqrt(flows / paths); allow 5 of them.
      const double sd = std::sqrt(static_cast<double>(flows) / paths);
      for (uint32_t c : count) {
        EXPECT_NEAR(c, static_cast<double>(flows) / paths, 5 * sd)
            << paths << " paths, seed " << seed;
      }
    }
  }
}

// Four hosts, two on each leaf, four paths: a frame from one leaf to the other crosses the path
// its tuple hashes to, in its direction; frames within a leaf cross none.
TEST(EcmpFabric, FramesBetweenLeavesCrossThePathTheirTupleHashesTo) {
  SimNetwork net(1);
  std::vector<SimPort*> ports;
  for (uint8_t i = 1; i <= 4; ++i) {
    ports.push_back(net.add_port(Mac{0x02, 0, 0, 0, 0, i}));
    ports.back()->set_leaf(i > 2);
  }
  FabricConfig fc;
  fc.paths = 4;
  fc.hash_seed = 9;
  fc.path.rate_gbps = 25;
  fc.path.delay_ns = 500;
  net.set_fabric(fc);

  std::vector<uint64_t> expect_fwd(4, 0), expect_back(4, 0);
  uint32_t sent_to[5] = {};
  auto send = [&](int from, int to, uint16_t sport) {
    wire::PathSpec p = spec(wire::IpFamily::kIpv4, false, sport);
    p.src_mac = ports[static_cast<size_t>(from)]->mac();
    p.dst_mac = ports[static_cast<size_t>(to)]->mac();
    const auto f = frame(p);
    PktBuf b;
    ASSERT_EQ(ports[static_cast<size_t>(from)]->alloc(&b, 1), 1);
    std::memcpy(b.data, f.data(), f.size());
    b.len = static_cast<uint32_t>(f.size());
    const uint32_t path = ecmp_path(f.data(), b.len, 4, 9);
    if (from < 2 && to >= 2) ++expect_fwd[path];
    if (from >= 2 && to < 2) ++expect_back[path];
    ++sent_to[to];
    ASSERT_EQ(ports[static_cast<size_t>(from)]->tx_burst(&b, 1), 1);
  };
  for (uint16_t s = 0; s < 64; ++s) {
    send(0, 2, static_cast<uint16_t>(0xC000 + s));
    send(3, 1, static_cast<uint16_t>(0xD000 + s));
    send(0, 1, static_cast<uint16_t>(0xE000 + s));  // within leaf 0
  }
  ASSERT_TRUE(net.run_until(
      [&] {
        return ports[2]->stats().rx_frames == sent_to[2] &&
               ports[1]->stats().rx_frames == sent_to[1];
      },
      1'000'000'000));
  uint32_t used = 0;
  for (uint32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(net.path_stats(0, p).frames, expect_fwd[p]) << p;
    EXPECT_EQ(net.path_stats(1, p).frames, expect_back[p]) << p;
    used += expect_fwd[p] > 0;
  }
  EXPECT_EQ(used, 4u);  // 64 flows reach every path
  // Every frame arrived whole, and the path carried the bytes it was charged.
  std::vector<PktBuf> rx(256);
  uint64_t bytes = 0;
  const uint16_t n = ports[2]->rx_burst(rx.data(), 256);
  EXPECT_EQ(n, 64);
  for (uint16_t i = 0; i < n; ++i) bytes += rx[i].len;
  ports[2]->free(rx.data(), n);
  uint64_t path_bytes = 0;
  for (uint32_t p = 0; p < 4; ++p) path_bytes += net.path_stats(0, p).bytes;
  EXPECT_EQ(path_bytes, bytes);
}

}  // namespace
