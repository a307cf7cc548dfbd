// NeighborAgent: ARP, IPv6 neighbour discovery and ICMP / ICMPv6 echo, byte for byte against what
// a real Linux kernel sends, plus resolution timing, table rules, validation and robustness.
//
// The golden vectors below were recorded once at development time: scapy (python3-scapy) sent
// the *_req frames on one end of a veth pair, and Linux 6.18 answered on the other end, which
// had MAC 02:00:00:00:00:01 and addresses 10.0.0.1/24, 192.168.7.1/24, fd00::1/64, fe80::1/64
// (nodad). Linux's own ARP requests and neighbour solicitations were recorded the same way, by
// pinging absent neighbours. Nothing here runs python or needs the kernel.
#include "stack/net/neighbor_agent.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/inet_frames.h"

namespace roce {
namespace {

using namespace roce::test;

Bytes hex(const char* s) {
  Bytes out;
  auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (; s[0] && s[1]; s += 2) out.push_back(static_cast<uint8_t>(nib(s[0]) << 4 | nib(s[1])));
  return out;
}
std::string to_hex(const Bytes& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s += d[x >> 4];
    s += d[x & 15];
  }
  return s;
}
// --- golden vectors (Linux 6.18) ------------------------------------------------------------
// ARP request 10.0.0.2 (02:..:02) -> who has 10.0.0.1; Linux's unicast reply (42 bytes as captured
// at the sender: the NIC pads it to 60 on the wire).
const char* const kArpReq =
    "ffffffffffff020000000002080600010800060400010200000000020a0000020000000000000a000001";
const char* const kArpReqReply =
    "020000000002020000000001080600010800060400020200000000010a0000010200000000020a000002";
// RFC 5227 probe (sender 0.0.0.0) for 10.0.0.1 and Linux's defence.
const char* const kArpProbe =
    "ffffffffffff02000000000208060001080006040001020000000002000000000000000000000a000001";
const char* const kArpProbeReply =
    "020000000002020000000001080600010800060400020200000000010a00000102000000000200000000";
// Echo request with TOS 0xb9 and DF, 16 bytes of data; Linux's reply: TOS reflected, DF clear,
// TTL 64, its own IP ID (0xde2f) and therefore header checksum.
const char* const kEchoReq =
    "020000000001020000000002080045b9002c12344000400113e20a0000020a0000010800951b00770003616263"
    "64656667683132333435363738";
const char* const kEchoReply =
    "020000000002020000000001080045b9002cde2f0000400187e60a0000010a00000200009d1b00770003616263"
    "64656667683132333435363738";
// Linux 6.18 answering `ping -R`, `ping -T tsonly`, `-T tsandaddr` and `-T tsprespec 10.77.0.1
// 10.77.0.2` from 10.77.0.2 to 10.77.0.1 (captured on a veth): request, then reply, each. Its
// replies carry the record route and timestamp options back, updated as the request was
// delivered and again as the reply left (RFC 1122 3.2.2.6).
const char* const kPingRR =
    "9ad8a27dadaf3e76bedd70fd08004f00007c448f40004001a4f70a4d00020a4d0001010727080a4d00020000"
    "00000000000000000000000000000000000000000000000000000000000008000d3568300001a034096b0000"
    "00001427060000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031"
    "323334353637";
const char* const kPingRRReply =
    "3e76bedd70fd9ad8a27dadaf08004f00007ccd22000040018c7c0a4d00010a4d00020727100a4d00020a4d00"
    "010a4d0001000000000000000000000000000000000000000000000000000000153568300001a034096b0000"
    "00001427060000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031"
    "323334353637";
const char* const kPingTsOnly =
    "9ad8a27dadaf3e76bedd70fd08004f00007c44904000400135ee0a4d00020a4d00014428090001a852960000"
    "0000000000000000000000000000000000000000000000000000000000000800fd2468320001a034096b0000"
    "00002435060000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031"
    "323334353637";
const char* const kPingTsOnlyReply =
    "3e76bedd70fd9ad8a27dadaf08004f00007ccd23000040013cde0a4d00010a4d00024428110001a8529601a8"
    "529601a852960000000000000000000000000000000000000000000000000000052568320001a034096b0000"
    "00002435060000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031"
    "323334353637";
const char* const kPingTsAddr =
    "9ad8a27dadaf3e76bedd70fd08004e00007844914000400128a10a4d00020a4d000144240d010a4d000201a8"
    "529a0000000000000000000000000000000000000000000000000800701668340001a034096b00000000b141"
    "060000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435"
    "3637";
const char* const kPingTsAddrReply =
    "3e76bedd70fd9ad8a27dadaf08004e000078cd240000400112ed0a4d00010a4d000244241d010a4d000201a8"
    "529a0a4d000101a8529a0a4d000101a8529a00000000000000000000781668340001a034096b00000000b141"
    "060000000000101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435"
    "3637";
const char* const kPingTsPrespec =
    "9ad8a27dadaf3e76bedd70fd08004a0000684492400040017eb20a4d00020a4d0001441405030a4d00010000"
    "00000a4d0002000000000800a70768360001a034096b000000007a4e06000000000010111213141516171819"
    "1a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637";
const char* const kPingTsPrespecReply =
    "3e76bedd70fd9ad8a27dadaf08004a000068cd2500004001d9d90a4d00010a4d000244140d030a4d000101a8"
    "529d0a4d0002000000000000af0768360001a034096b000000007a4e06000000000010111213141516171819"
    "1a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637";
// NS from fd00::2 to ff02::1:ff00:1 for fd00::1 with SLLA; Linux's NA (S|O, TLLA).
const char* const kNs =
    "3333ff00000102000000000286dd6000000000203afffd000000000000000000000000000002ff020000000000"
    "0000000001ff00000187007d9700000000fd0000000000000000000000000000010101020000000002";
const char* const kNsReply =
    "02000000000202000000000186dd6000000000203afffd000000000000000000000000000001fd000000000000"
    "00000000000000000288001c9c60000000fd0000000000000000000000000000010201020000000001";
// DAD NS (source ::) for fd00::1; Linux defends with an NA to ff02::1 (O only).
const char* const kNsDad =
    "3333ff00000102000000000286dd6000000000183aff00000000000000000000000000000000ff020000000000"
    "0000000001ff00000187007da500000000fd000000000000000000000000000001";
const char* const kNsDadReply =
    "33330000000102000000000186dd6000000000203afffd000000000000000000000000000001ff020000000000"
    "00000000000000000188005a9b20000000fd0000000000000000000000000000010201020000000001";
// NS from fe80::2 for fe80::1 and Linux's NA.
const char* const kNsLl =
    "3333ff00000102000000000286dd6000000000203afffe800000000000000000000000000002ff020000000000"
    "0000000001ff00000187007a9700000000fe8000000000000000000000000000010101020000000002";
const char* const kNsLlReply =
    "02000000000202000000000186dd6000000000203afffe800000000000000000000000000001fe800000000000"
    "0000000000000000028800181c60000000fe8000000000000000000000000000010201020000000001";
// ICMPv6 echo with traffic class 0xb9 and flow label 0x12345; Linux's reply reflects the traffic
// class, hop limit 64, and carries its own hashed flow label (0x66d5d).
const char* const kEcho6Req =
    "02000000000102000000000286dd6b91234500103a40fd000000000000000000000000000002fd000000000000"
    "0000000000000000018000f3a0007700036162636465666768";
const char* const kEcho6Reply =
    "02000000000202000000000186dd6b966d5d00103a40fd000000000000000000000000000001fd000000000000"
    "0000000000000000028100f2a0007700036162636465666768";
// Linux's own solicitations: broadcast ARP for 10.0.0.9 and 192.168.7.9 (sender on the same
// subnet), the unicast ARP reachability probe for 10.0.0.2, multicast NS for fd00::9 and fe80::9,
// and the unicast NS probe for fe80::2.
const char* const kLinuxArpFor9 =
    "ffffffffffff020000000001080600010800060400010200000000010a0000010000000000000a000009";
const char* const kLinuxArpFor192 =
    "ffffffffffff02000000000108060001080006040001020000000001c0a80701000000000000c0a80709";
const char* const kLinuxArpProbe2 =
    "020000000002020000000001080600010800060400010200000000010a0000010000000000000a000002";
const char* const kLinuxNsFor9 =
    "3333ff00000902000000000186dd6000000000203afffd000000000000000000000000000001ff020000000000"
    "0000000001ff00000987007d8900000000fd0000000000000000000000000000090101020000000001";
const char* const kLinuxNsForLl9 =
    "3333ff00000902000000000186dd6000000000203afffe800000000000000000000000000001ff020000000000"
    "0000000001ff00000987007a8900000000fe8000000000000000000000000000090101020000000001";
const char* const kLinuxNsProbeLl2 =
    "02000000000202000000000186dd6000000000203afffe800000000000000000000000000001fe800000000000"
    "00000000000000000287007a1b00000000fe8000000000000000000000000000020101020000000001";
// Peer frames generated with scapy, to check the builders below.
const char* const kScapyArpReplyFromPeer =
    "020000000001020000000002080600010800060400020200000000020a0000020200000000010a000001";
const char* const kScapyNaFromPeer =
    "02000000000102000000000286dd6000000000203afffd000000000000000000000000000002fd000000000000"
    "00000000000000000188001c9a60000000fd0000000000000000000000000000020201020000000002";
const char* const kScapyEchoOdd =
    "020000000001020000000002080045000069000700003d01698b0a0000020a0000010800e60a42420009000102"
    "030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
    "303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c";
const char* const kScapyEchoOddReplyId0 =
    "02000000000202000000000108004500006900000000400166920a0000010a0000020000ee0a42420009000102"
    "030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
    "303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c";

// --- addresses ---------------------------------------------------------------------------------
const Mac kUs{0x02, 0, 0, 0, 0, 0x01};
const Mac kPeer{0x02, 0, 0, 0, 0, 0x02};
const Mac kOther{0x02, 0, 0, 0, 0, 0x03};
const Mac kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

const Gid kOurV4 = v4(10, 0, 0, 1);
const Gid kPeerV4 = v4(10, 0, 0, 2);
const Gid kOurV6 = v6(0xfd00, 1);
const Gid kPeerV6 = v6(0xfd00, 2);
const Gid kOurLl = v6(0xfe80, 1);
const Gid kPeerLl = v6(0xfe80, 2);

// --- frame builders (Ethernet, ARP, checksums: tests/support/inet_frames.h)
// --------------------------------
Bytes echo4(const Mac& dst_mac, const Gid& src, const Gid& dst, const Bytes& data) {
  Bytes b = eth(dst_mac, kPeer, 0x0800);
  const uint16_t total = static_cast<uint16_t>(28 + data.size());
  for (uint8_t x : {0x45, 0}) b.push_back(x);
  put16(b, total);
  for (uint8_t x : {0, 7, 0, 0, 61, 1, 0, 0}) b.push_back(x);
  put(b, src.data() + 12, 4);
  put(b, dst.data() + 12, 4);
  for (uint8_t x : {8, 0, 0, 0, 0x42, 0x42, 0, 9}) b.push_back(x);
  put(b, data.data(), data.size());
  fix_ipv4(b, 14);
  return b;
}
// An IPv6 / ICMPv6 frame around `body` (whose checksum is filled in).
Bytes icmp6(const Mac& dst_mac, const Mac& src_mac, const Gid& src, const Gid& dst,
            uint8_t hop_limit, const Bytes& body) {
  Bytes b = eth(dst_mac, src_mac, 0x86dd);
  for (uint8_t x : {0x60, 0, 0, 0}) b.push_back(x);
  put16(b, static_cast<uint16_t>(body.size()));
  b.push_back(58);
  b.push_back(hop_limit);
  put(b, src.data(), 16);
  put(b, dst.data(), 16);
  put(b, body.data(), body.size());
  fix_icmp6(b, 14);
  return b;
}
Bytes nd_body(uint8_t type, uint8_t flags, const Gid& target, int opt_type, const Mac& lla) {
  Bytes b{type, 0, 0, 0, flags, 0, 0, 0};
  put(b, target.data(), 16);
  if (opt_type) {
    b.push_back(static_cast<uint8_t>(opt_type));
    b.push_back(1);
    put(b, lla.data(), 6);
  }
  return b;
}
Gid solicited(const Gid& t) {
  Gid g{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, t[13], t[14], t[15]};
  return g;
}
Mac mcast_mac(const Gid& g) { return Mac{0x33, 0x33, g[12], g[13], g[14], g[15]}; }
Bytes ns(const Gid& src, const Gid& target, bool slla = true, uint8_t hop = 255) {
  const Gid dst = solicited(target);
  return icmp6(mcast_mac(dst), kPeer, src, dst, hop, nd_body(135, 0, target, slla ? 1 : 0, kPeer));
}
Bytes na(const Mac& mac, const Gid& target, uint8_t flags, const Gid& dst = kOurV6,
         bool tlla = true) {
  const Mac dst_mac = dst[0] == 0xff ? mcast_mac(dst) : kUs;
  return icmp6(dst_mac, kPeer, target, dst, 255, nd_body(136, flags, target, tlla ? 2 : 0, mac));
}
Bytes vlan_tagged(Bytes f, uint16_t tci) {
  const uint8_t tag[4] = {0x81, 0x00, static_cast<uint8_t>(tci >> 8), static_cast<uint8_t>(tci)};
  f.insert(f.begin() + 12, tag, tag + 4);
  return f;
}
constexpr uint8_t kS = 0x40, kO = 0x20;

// --- the fixture ---------------------------------------------------------------------------------
struct Sink {
  std::vector<Bytes> sent;
  std::vector<Gid> resolved;
  std::vector<Gid> failed;
  bool refuse = false;
  static bool send(void* ctx, const uint8_t* f, uint32_t n) {
    auto* s = static_cast<Sink*>(ctx);
    if (s->refuse) return false;
    s->sent.emplace_back(f, f + n);
    return true;
  }
  static void on_resolved(void* ctx, const Gid& ip) {
    static_cast<Sink*>(ctx)->resolved.push_back(ip);
  }
  static void on_failed(void* ctx, const Gid& ip) { static_cast<Sink*>(ctx)->failed.push_back(ip); }
};

constexpr uint64_t kSec = 1'000'000'000;

class NeighborAgentTest : public ::testing::Test {
 protected:
  void make(bool vlan = false, uint16_t tci = 0, NeighborConfig cfg = {},
            std::vector<Gid> addrs = {kOurV4, v4(192, 168, 7, 1), kOurV6, kOurLl}) {
    table_ = std::make_unique<NeighborTable>();
    agent_ =
        std::make_unique<NeighborAgent>(*table_, kUs, std::move(addrs), vlan, tci, cfg, &Sink::send,
                                        &Sink::on_resolved, &sink_, &Sink::on_failed);
  }
  void SetUp() override { make(); }

  // Feeds a frame from an exactly sized heap copy, so ASan sees any read past its end.
  void feed(const Bytes& f, uint64_t now = 0) {
    auto copy = std::make_unique<uint8_t[]>(f.size() ? f.size() : 1);
    std::copy(f.begin(), f.end(), copy.get());
    agent_->on_frame(copy.get(), static_cast<uint32_t>(f.size()), now);
  }
  // Feeds a frame and returns the single frame sent in answer (fails if not exactly one).
  Bytes answer(const Bytes& f, uint64_t now = 0) {
    sink_.sent.clear();
    feed(f, now);
    EXPECT_EQ(sink_.sent.size(), 1u) << "request " << to_hex(f);
    return sink_.sent.empty() ? Bytes{} : sink_.sent[0];
  }
  // Between t=0 and `due`, the agent's ticks send nothing; at `due` they send Linux's unicast
  // probes of the peer: an ARP request for 10.0.0.2, then an NS for fe80::2.
  void expect_peer_probes_at(uint64_t due) {
    sink_.sent.clear();
    EXPECT_EQ(agent_->tick(kSec), due);
    EXPECT_TRUE(sink_.sent.empty());
    EXPECT_EQ(agent_->tick(due), due + kSec);
    ASSERT_EQ(sink_.sent.size(), 2u);
    EXPECT_EQ(to_hex(sink_.sent[0]), to_hex(padded(hex(kLinuxArpProbe2))));
    EXPECT_EQ(to_hex(sink_.sent[1]), kLinuxNsProbeLl2);
  }
  void expect_silent(const Bytes& f) {
    sink_.sent.clear();
    feed(f);
    EXPECT_TRUE(sink_.sent.empty()) << "answered " << to_hex(f);
  }
  const NeighborCounters& ctr() const { return agent_->counters(); }
  uint64_t rx_total() const {
    const auto& c = ctr();
    return c.arp_requests_rx + c.arp_replies_rx + c.ns_rx + c.na_rx + c.echo_requests_rx +
           c.echo6_requests_rx + c.ignored + c.malformed;
  }
  NeighborTable::Entry* entry(const Gid& ip) { return table_->find(ip); }
  // The source address of the one NS a tick sends to resolve `target` (zeros if none is sent).
  Gid ns_source_for(const Gid& target) {
    table_->want(target);
    sink_.sent.clear();
    agent_->tick(0);
    Gid src{};
    EXPECT_EQ(sink_.sent.size(), 1u);
    if (sink_.sent.size() == 1 && sink_.sent[0].size() >= 14 + 24) {
      std::copy_n(sink_.sent[0].begin() + 14 + 8, 16, src.begin());
    }
    return src;
  }

  Sink sink_;
  std::unique_ptr<NeighborTable> table_;
  std::unique_ptr<NeighborAgent> agent_;
};

// --- answers, byte for byte against Linux -----------------------------------------------------

// --- the table's index ---------------------------------------------------------------------------

// The hash index finds exactly what a scan of the entries would, keeps the entries in the order
// they were added, and survives growing past its reserve (every rehash), for IPv4 and IPv6
// addresses alike, whatever the table's random seed.
TEST(NeighborTable, IndexAgreesWithAScanOfTheEntries) {
  for (int round = 0; round < 3; ++round) {
    NeighborTable t;
    t.reserve(8);
    std::mt19937 rng(777 + round);
    std::vector<Gid> order;  // every address, in the order it was added
    auto scan = [&](const Gid& ip) -> const NeighborTable::Entry* {
      for (const auto& e : t.entries()) {
        if (e.ip == ip) return &e;
      }
      return nullptr;
    };
    auto random_ip = [&] {
      // Few distinct values, so that addresses repeat and nearby ones share index slots.
      if (rng() % 2) return v4(10, static_cast<uint8_t>(rng() % 4), 0, static_cast<uint8_t>(rng()));
      return v6(static_cast<uint16_t>(0xfd00 + rng() % 2), static_cast<uint16_t>(rng() % 2000));
    };
    for (int i = 0; i < 4000; ++i) {
      const Gid ip = random_ip();
      const bool known = scan(ip) != nullptr;
      const Mac mac{2,
                    0,
                    0,
                    static_cast<uint8_t>(i >> 16),
                    static_cast<uint8_t>(i >> 8),
                    static_cast<uint8_t>(i)};
      switch (rng() % 3) {
        case 0:
          t.want(ip);
          break;
        case 1:
          t.learn(ip, mac);
          break;
        default:
          t.add_static(ip, mac);
          break;
      }
      if (!known) order.push_back(ip);
      ASSERT_EQ(t.entries().size(), order.size());
      ASSERT_EQ(t.find(ip), scan(ip));
    }
    ASSERT_GT(order.size(), 1000u);  // grown far past the reserve of 8
    for (size_t k = 0; k < order.size(); ++k) {
      ASSERT_EQ(t.entries()[k].ip, order[k]);
      ASSERT_EQ(t.find(order[k]), &t.entries()[k]);
      const auto& e = t.entries()[k];
      const bool usable = e.state == NeighborTable::State::kReachable ||
                          e.state == NeighborTable::State::kStale ||
                          e.state == NeighborTable::State::kStatic;
      ASSERT_EQ(t.lookup(order[k]).has_value(), usable);
      if (usable) {
        ASSERT_EQ(*t.lookup(order[k]), e.mac);
      }
    }
    for (int i = 0; i < 2000; ++i) {  // absent addresses: another subnet and another prefix
      EXPECT_EQ(t.find(v4(10, 9, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i))), nullptr);
      EXPECT_EQ(t.find(v6(0xfd09, static_cast<uint16_t>(i))), nullptr);
    }
  }
}

// What the wire teaches never replaces a configured entry.
TEST(NeighborTable, LearningNeverOverridesAStaticEntry) {
  NeighborTable t;
  const Gid ip = v4(10, 0, 0, 2);
  t.add_static(ip, kOther);
  EXPECT_FALSE(t.learn(ip, kPeer));
  ASSERT_TRUE(t.lookup(ip));
  EXPECT_EQ(*t.lookup(ip), kOther);
  EXPECT_EQ(t.find(ip)->state, NeighborTable::State::kStatic);
}

TEST_F(NeighborAgentTest, BuildersMatchScapy) {
  EXPECT_EQ(to_hex(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4)), kScapyArpReplyFromPeer);
  EXPECT_EQ(to_hex(na(kPeer, kPeerV6, kS | kO)), kScapyNaFromPeer);
  Bytes data;
  for (int i = 0; i < 77; ++i) data.push_back(static_cast<uint8_t>(i));
  EXPECT_EQ(to_hex(echo4(kUs, kPeerV4, kOurV4, data)), kScapyEchoOdd);
  EXPECT_EQ(to_hex(ns(kPeerV6, kOurV6)), kNs);
}

TEST_F(NeighborAgentTest, ArpRequestGetsLinuxReplyAndLearnsSender) {
  EXPECT_EQ(to_hex(answer(hex(kArpReq))), to_hex(padded(hex(kArpReqReply))));
  EXPECT_EQ(ctr().arp_requests_rx, 1u);
  EXPECT_EQ(ctr().arp_replies_tx, 1u);
  // RFC 826: a request for us creates the sender's entry.
  ASSERT_TRUE(table_->lookup(kPeerV4));
  EXPECT_EQ(*table_->lookup(kPeerV4), kPeer);
  EXPECT_EQ(sink_.resolved, std::vector<Gid>{kPeerV4});
}

TEST_F(NeighborAgentTest, PaddedArpRequestIsAnswered) {
  EXPECT_EQ(to_hex(answer(padded(hex(kArpReq)))), to_hex(padded(hex(kArpReqReply))));
}

TEST_F(NeighborAgentTest, ArpProbeIsDefendedNotLearned) {
  EXPECT_EQ(to_hex(answer(hex(kArpProbe))), to_hex(padded(hex(kArpProbeReply))));
  EXPECT_TRUE(table_->entries().empty());
}

TEST_F(NeighborAgentTest, ArpRequestForSecondAddress) {
  const Gid ours2 = v4(192, 168, 7, 1), peer2 = v4(192, 168, 7, 2);
  const Bytes r = answer(arp(1, kBroadcast, kPeer, peer2, Mac{}, ours2));
  EXPECT_EQ(to_hex(r), to_hex(padded(arp(2, kPeer, kUs, ours2, kPeer, peer2))));
}

TEST_F(NeighborAgentTest, EchoReplyMatchesLinuxButForIpId) {
  const Bytes r = answer(hex(kEchoReq));
  Bytes want = padded(hex(kEchoReply));
  ASSERT_EQ(r.size(), want.size());
  EXPECT_TRUE(ipv4_header_ok(r, 14));
  EXPECT_TRUE(icmp4_ok(r, 14));
  // Everything but the IP ID (Linux: random) and so the header checksum.
  for (size_t i : {18, 19, 24, 25}) want[i] = r[i];
  EXPECT_EQ(to_hex(r), to_hex(want));
  EXPECT_EQ(r[20] & 0x40, 0) << "DF stays clear, as Linux's ICMP replies";
  EXPECT_EQ(ctr().echo_requests_rx, 1u);
  EXPECT_EQ(ctr().echo_replies_tx, 1u);
  // IP IDs advance per reply.
  const Bytes r2 = answer(hex(kEchoReq));
  EXPECT_NE(r2[18] << 8 | r2[19], r[18] << 8 | r[19]);
  EXPECT_TRUE(table_->entries().empty()) << "IP traffic teaches nothing";
}

TEST_F(NeighborAgentTest, EchoWithOddLengthPayload) {
  Bytes data;
  for (int i = 0; i < 77; ++i) data.push_back(static_cast<uint8_t>(i));
  const Bytes r = answer(hex(kScapyEchoOdd));
  Bytes want = hex(kScapyEchoOddReplyId0);
  ASSERT_EQ(r.size(), want.size());
  EXPECT_TRUE(ipv4_header_ok(r, 14));
  EXPECT_TRUE(icmp4_ok(r, 14));
  for (size_t i : {18, 19, 24, 25}) want[i] = r[i];
  EXPECT_EQ(to_hex(r), to_hex(want));
}

TEST_F(NeighborAgentTest, LargeEcho) {
  Bytes data(8000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31);
  const Bytes r = answer(echo4(kUs, kPeerV4, kOurV4, data));
  ASSERT_EQ(r.size(), 14 + 28 + data.size());
  EXPECT_TRUE(ipv4_header_ok(r, 14));
  EXPECT_TRUE(icmp4_ok(r, 14));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), r.begin() + 42));
}

// An echo whose reply words sum to 0x1ffff: the end-around carry of RFC 1071 must be folded
// twice (0x1ffff -> 0x10000 -> 0x0001), or the reply carries checksum 0xffff instead of 0xfffe.
TEST_F(NeighborAgentTest, EchoWhoseChecksumFoldsTwiceIsAnsweredRight) {
  // Identifier 0x4242 and sequence 9 (echo4) plus 0xffff and 0xbdb5: 0x1ffff.
  const Bytes r = answer(echo4(kUs, kPeerV4, kOurV4, {0xff, 0xff, 0xbd, 0xb5}));
  ASSERT_EQ(r.size(), 60u);
  EXPECT_TRUE(icmp4_ok(r, 14));
  EXPECT_EQ(r[36] << 8 | r[37], 0xfffe);
}

// A frame may carry bytes behind its IP packet (Ethernet padding, a trailer added on the way):
// an odd-length ICMP message's checksum stops at its last byte, whatever follows.
TEST_F(NeighborAgentTest, OddLengthEchoWithATrailerIsAnswered) {
  Bytes f = hex(kScapyEchoOdd);
  f.insert(f.end(), {0xaa, 0xbb, 0xcc, 0xdd});
  const Bytes r = answer(f);
  ASSERT_EQ(r.size(), hex(kScapyEchoOddReplyId0).size());
  EXPECT_TRUE(icmp4_ok(r, 14));
}

// RFC 792: an echo reply has code 0, whatever code the request carried (Linux copies it).
TEST_F(NeighborAgentTest, EchoReplyCodeIsZero) {
  Bytes f = echo4(kUs, kPeerV4, kOurV4, Bytes(8, 1));
  f[35] = 5;
  fix_ipv4(f, 14);
  const Bytes r = answer(f);
  ASSERT_EQ(r.size(), 60u);
  EXPECT_EQ(r[34], 0);
  EXPECT_EQ(r[35], 0);
  EXPECT_TRUE(icmp4_ok(r, 14));
}

// Two stations' agents do not number their IPv4 replies alike: the first IP ID comes from the
// MAC, so that stacks started together on one segment do not all begin at 0.
TEST_F(NeighborAgentTest, StationsStartTheirIpIdsApart) {
  const Mac other_us{0x02, 0, 0, 0, 0x12, 0x34};
  NeighborTable table;
  Sink sink;
  NeighborAgent other(table, other_us, {kOurV4}, false, 0, {}, &Sink::send, nullptr, &sink);
  Bytes f = echo4(other_us, kPeerV4, kOurV4, Bytes(8));
  other.on_frame(f.data(), static_cast<uint32_t>(f.size()), 0);
  const Bytes ours = answer(echo4(kUs, kPeerV4, kOurV4, Bytes(8)));
  ASSERT_EQ(sink.sent.size(), 1u);
  ASSERT_EQ(ours.size(), 60u);
  EXPECT_NE(sink.sent[0][18] << 8 | sink.sent[0][19], ours[18] << 8 | ours[19]);
}

TEST_F(NeighborAgentTest, NsGetsLinuxNaAndLearnsSource) {
  EXPECT_EQ(to_hex(answer(hex(kNs))), kNsReply);
  EXPECT_EQ(ctr().ns_rx, 1u);
  EXPECT_EQ(ctr().na_tx, 1u);
  ASSERT_TRUE(table_->lookup(kPeerV6));
  EXPECT_EQ(*table_->lookup(kPeerV6), kPeer);
  EXPECT_EQ(sink_.resolved, std::vector<Gid>{kPeerV6});
}

TEST_F(NeighborAgentTest, DadNsGetsAllNodesNaWithoutSolicitedFlag) {
  EXPECT_EQ(to_hex(answer(hex(kNsDad))), kNsDadReply);
  EXPECT_TRUE(table_->entries().empty());
}

TEST_F(NeighborAgentTest, LinkLocalNs) { EXPECT_EQ(to_hex(answer(hex(kNsLl))), kNsLlReply); }

TEST_F(NeighborAgentTest, UnicastNsWithoutOptionIsAnsweredToTheFrameSource) {
  // A reachability probe (RFC 4861 7.2.2): unicast, no source link-layer address option.
  const Bytes probe = icmp6(kUs, kPeer, kPeerV6, kOurV6, 255, nd_body(135, 0, kOurV6, 0, kPeer));
  EXPECT_EQ(to_hex(answer(probe)), kNsReply);
  EXPECT_TRUE(table_->entries().empty()) << "nothing to learn without the option";
}

// A unicast solicitation without the source link-layer address option, from a neighbour in the
// table, is answered to the MAC the table holds (RFC 4861 7.2.4), whichever station's frame
// carried it.
TEST_F(NeighborAgentTest, UnicastNsWithoutOptionGoesToTheKnownNeighbour) {
  answer(hex(kNs));  // learns kPeerV6 at kPeer
  ASSERT_TRUE(table_->lookup(kPeerV6));
  const Bytes probe = icmp6(kUs, kOther, kPeerV6, kOurV6, 255, nd_body(135, 0, kOurV6, 0, kPeer));
  EXPECT_EQ(to_hex(answer(probe)), kNsReply);
}

// An ARP sender or ND link-layer address option naming our own MAC in another station's frame
// (a request of ours looped back through a bridge, a misconfigured peer) is never answered nor
// learned: such an entry would send the neighbour's traffic to ourselves.
TEST_F(NeighborAgentTest, NeighbourMessagesNamingOurOwnMacAreNeverLearned) {
  table_->want(kPeerV6);  // being resolved: an advertisement would complete it
  Bytes req = arp(1, kBroadcast, kUs, kPeerV4, Mac{}, kOurV4);
  std::copy(kPeer.begin(), kPeer.end(), req.begin() + 6);  // the frame is the peer's
  expect_silent(req);
  const Gid group = solicited(kOurV6);
  expect_silent(
      icmp6(mcast_mac(group), kPeer, kPeerV6, group, 255, nd_body(135, 0, kOurV6, 1, kUs)));
  expect_silent(na(kUs, kPeerV6, kS | kO));
  EXPECT_FALSE(table_->lookup(kPeerV4));
  EXPECT_FALSE(table_->lookup(kPeerV6));
  EXPECT_TRUE(sink_.resolved.empty());
}

// An NS from fd00::2 for our fd00::1, in a frame from `src_mac`, with `options` as its options.
Bytes ns_with_options(const Mac& src_mac, const Bytes& options) {
  Bytes body = nd_body(135, 0, kOurV6, 0, kPeer);
  body.insert(body.end(), options.begin(), options.end());
  const Gid group = solicited(kOurV6);
  return icmp6(mcast_mac(group), src_mac, kPeerV6, group, 255, body);
}

// Of two source link-layer address options, the first counts (Linux ignores later duplicates).
// Other options (a nonce, RFC 7527 / 3971 type 14) are skipped. A known neighbour whose NS names
// a new MAC has moved (RFC 4861 7.2.3: the cached address is replaced).
TEST_F(NeighborAgentTest, NsSourceAddressOptionIsTheFirstOfItsTypeAndUpdatesTheEntry) {
  const Bytes two = {1, 1, 2, 0, 0, 0, 0, 2, 1, 1, 2, 0, 0, 0, 0, 3};  // kPeer, then kOther
  const Bytes nonce_then_other = {14, 1, 1, 2, 3, 4, 5, 6, 1, 1, 2, 0, 0, 0, 0, 3};
  const struct {
    Bytes options;
    Mac want;
  } cases[] = {{two, kPeer}, {nonce_then_other, kOther}};
  for (const auto& c : cases) {
    const Bytes r = answer(ns_with_options(c.want, c.options));
    ASSERT_GE(r.size(), 6u);
    EXPECT_TRUE(std::equal(c.want.begin(), c.want.end(), r.begin())) << to_hex(c.options);
    ASSERT_TRUE(table_->lookup(kPeerV6));
    EXPECT_EQ(*table_->lookup(kPeerV6), c.want) << to_hex(c.options);
  }
}

TEST_F(NeighborAgentTest, Echo6ReplyMatchesLinuxButForFlowLabel) {
  const Bytes r = answer(hex(kEcho6Req));
  Bytes want = hex(kEcho6Reply);
  ASSERT_EQ(r.size(), want.size());
  EXPECT_TRUE(icmp6_ok(r, 14));
  // Linux puts a hashed flow label; we send 0 (RFC 6437: unlabelled). The rest is identical,
  // the checksum included (the flow label is not in the pseudo-header).
  want[15] &= 0xf0;
  want[16] = want[17] = 0;
  EXPECT_EQ(to_hex(r), to_hex(want));
  EXPECT_EQ(ctr().echo6_requests_rx, 1u);
  EXPECT_EQ(ctr().echo6_replies_tx, 1u);
}

// An echo to a group we are in (all-nodes, our solicited-node groups) is answered, as RFC 4443
// 4.2 says it SHOULD be and as Linux does (`ping -6 ff02::1%dev` lists the hosts on the link),
// from the unicast address of ours a reply to the requester would come from: link-local for a
// link-local requester, else the one sharing its prefix. A group is never the reply's source.
TEST_F(NeighborAgentTest, Echo6ToAGroupOfOursIsAnsweredFromAUnicastAddress) {
  struct Case {
    Gid group;
    Mac dst_mac;
    Gid from, want_src;
  };
  const Gid all_nodes = v6(0xff02, 1);
  const Case cases[] = {
      {all_nodes, mcast_mac(all_nodes), kPeerLl, kOurLl},
      {all_nodes, mcast_mac(all_nodes), kPeerV6, kOurV6},
      {all_nodes, kUs, kPeerV6, kOurV6},  // a group in a frame to our MAC
      {solicited(kOurV6), mcast_mac(solicited(kOurV6)), kPeerLl, kOurLl},
  };
  uint64_t n = 0;
  for (const Case& c : cases) {
    const Bytes body = {128, 0, 0, 0, 0x12, 0x34, 0, 7, 'p', 'i', 'n', 'g', '!'};
    const Bytes r = answer(icmp6(c.dst_mac, kPeer, c.from, c.group, 64, body));
    ASSERT_EQ(r.size(), 14u + 40u + body.size()) << to_hex(r);
    EXPECT_TRUE(std::equal(kPeer.begin(), kPeer.end(), r.begin()));  // back to the sender
    EXPECT_TRUE(std::equal(kUs.begin(), kUs.end(), r.begin() + 6));
    EXPECT_TRUE(std::equal(c.want_src.begin(), c.want_src.end(), r.begin() + 14 + 8)) << to_hex(r);
    EXPECT_TRUE(std::equal(c.from.begin(), c.from.end(), r.begin() + 14 + 24)) << to_hex(r);
    EXPECT_EQ(r[14 + 40], 129);  // echo reply, code 0, the identifier, sequence and data kept
    EXPECT_EQ(r[14 + 41], 0);
    EXPECT_TRUE(std::equal(body.begin() + 4, body.end(), r.begin() + 14 + 44));
    EXPECT_TRUE(icmp6_ok(r, 14)) << to_hex(r);
    EXPECT_EQ(ctr().echo6_requests_rx, ++n);
    EXPECT_EQ(ctr().echo6_replies_tx, n);
  }
}

// IPv4 options: answered without them, except source routes (dropped as Linux does by default).
TEST_F(NeighborAgentTest, EchoWithIpOptions) {
  auto with_options = [](std::initializer_list<uint8_t> opts) {
    Bytes f = hex(kEchoReq);
    f.insert(f.begin() + 34, opts);
    f[14] = static_cast<uint8_t>(0x40 | (20 + opts.size()) / 4);
    f[17] = static_cast<uint8_t>(f[17] + opts.size());
    fix_ipv4(f, 14);
    return f;
  };
  const Bytes r = answer(with_options({1, 1, 1, 0}));  // NOPs and end of list
  Bytes want = padded(hex(kEchoReply));
  ASSERT_EQ(r.size(), want.size());
  for (size_t i : {18, 19, 24, 25}) want[i] = r[i];
  EXPECT_EQ(to_hex(r), to_hex(want));
  EXPECT_TRUE(ipv4_header_ok(r, 14));
  const uint64_t ignored = ctr().ignored, malformed = ctr().malformed;
  expect_silent(with_options({131, 7, 4, 10, 0, 0, 3, 0}));  // loose source route
  expect_silent(with_options({137, 7, 4, 10, 0, 0, 3, 0}));  // strict source route
  EXPECT_EQ(ctr().ignored, ignored + 2);
  expect_silent(with_options({1, 68, 12, 0}));  // a timestamp option longer than the header
  EXPECT_EQ(ctr().malformed, malformed + 1);
}

uint32_t g_stamp = 0;  // the agent's clock in the tests below
uint32_t test_clock() { return g_stamp; }

// `ping -R` and `ping -T ...` against Linux's own replies (kPingRR ...): the same record route
// and timestamps, byte for byte, but for the reply's IP ID and so its header checksum.
TEST_F(NeighborAgentTest, EchoOptionsAreUpdatedAndEchoedAsLinuxDoes) {
  NeighborConfig cfg;
  cfg.wall_clock_ms = &test_clock;
  make(false, 0, cfg, {v4(10, 77, 0, 1)});
  struct Case {
    const char* req;
    const char* reply;
    uint32_t stamp;  // Linux's, in its reply
  };
  const Case cases[] = {{kPingRR, kPingRRReply, 0},
                        {kPingTsOnly, kPingTsOnlyReply, 0x01a85296},
                        {kPingTsAddr, kPingTsAddrReply, 0x01a8529a},
                        {kPingTsPrespec, kPingTsPrespecReply, 0x01a8529d}};
  for (const Case& c : cases) {
    g_stamp = c.stamp;
    Bytes req = hex(c.req);
    std::copy(kUs.begin(), kUs.end(), req.begin());  // to our MAC
    Bytes want = hex(c.reply);
    std::copy(kUs.begin(), kUs.end(), want.begin() + 6);  // from our MAC
    const Bytes r = answer(req);
    ASSERT_EQ(r.size(), want.size()) << to_hex(r);
    EXPECT_TRUE(ipv4_header_ok(r, 14) && icmp4_ok(r, 14)) << to_hex(r);
    for (size_t i : {18, 19, 24, 25}) want[i] = r[i];  // IP ID and header checksum
    EXPECT_EQ(to_hex(r), to_hex(want));
  }
  EXPECT_EQ(ctr().echo_replies_tx, 4u);
}

// The options' edges, as Linux treats them: a full record route or a prespecified address not
// ours is left alone, a full timestamp counts an overflow (a 16th is malformed), a slot that
// fits for the delivery but only partly for the reply gets no reply, a second record route or
// a pointer below the first slot is malformed, and options other than these two are not echoed.
TEST_F(NeighborAgentTest, EchoOptionEdges) {
  NeighborConfig cfg;
  cfg.wall_clock_ms = &test_clock;
  make(false, 0, cfg);
  g_stamp = 0x0A0B0C0D;
  auto with_options = [](Bytes opts) {
    Bytes f = echo4(kUs, kPeerV4, kOurV4, Bytes(8, 0x5a));
    while (opts.size() % 4) opts.push_back(0);
    f.insert(f.begin() + 34, opts.begin(), opts.end());
    f[14] = static_cast<uint8_t>(0x40 | (20 + opts.size()) / 4);
    const size_t total = (f[16] << 8 | f[17]) + opts.size();
    f[16] = static_cast<uint8_t>(total >> 8);
    f[17] = static_cast<uint8_t>(total);
    fix_ipv4(f, 14);
    return f;
  };
  auto reply_options = [&](const Bytes& opts) {
    const Bytes r = answer(with_options(opts));
    if (r.size() < 34) return Bytes{};
    EXPECT_TRUE(ipv4_header_ok(r, 14) && icmp4_ok(r, 14)) << to_hex(r);
    return Bytes(r.begin() + 34, r.begin() + 14 + (r[14] & 15) * 4);
  };
  const Bytes a = {10, 0, 0, 2}, us = {10, 0, 0, 1}, t = {0x0A, 0x0B, 0x0C, 0x0D};
  auto cat = [](std::initializer_list<Bytes> parts) {
    Bytes b;
    for (const Bytes& p : parts) b.insert(b.end(), p.begin(), p.end());
    return b;
  };
  // Record route, two slots: one filled on arrival, the last by the delivery; none left for the
  // reply. Full on arrival: unchanged.
  EXPECT_EQ(to_hex(reply_options(cat({{7, 11, 8}, a, {0, 0, 0, 0}}))),
            to_hex(cat({{7, 11, 12}, a, us, {0}})));
  EXPECT_EQ(to_hex(reply_options(cat({{7, 7, 8}, a}))), to_hex(cat({{7, 7, 8}, a, {0}})));
  // Other options (a NOP, router alert) are not echoed; a record route after them is.
  EXPECT_EQ(to_hex(reply_options(cat({{1, 148, 4, 0, 0}, {7, 7, 4}, {0, 0, 0, 0}}))),
            to_hex(cat({{7, 7, 8}, us, {0}})));
  // Timestamps only: room for one, filled by the delivery. Full: the overflow count goes up.
  EXPECT_EQ(to_hex(reply_options(cat({{68, 8, 5, 0}, {0, 0, 0, 0}}))),
            to_hex(cat({{68, 8, 9, 0}, t})));
  EXPECT_EQ(to_hex(reply_options(cat({{68, 8, 9, 0x20}, a}))), to_hex(cat({{68, 8, 9, 0x30}, a})));
  // Address and timestamp, room for one pair.
  EXPECT_EQ(to_hex(reply_options(cat({{68, 12, 5, 1}, Bytes(8, 0)}))),
            to_hex(cat({{68, 12, 13, 1}, us, t})));
  // Prespecified: the next address not ours, nothing stamped; ours, stamped; full, no overflow.
  EXPECT_EQ(to_hex(reply_options(cat({{68, 12, 5, 3}, a, {0, 0, 0, 0}}))),
            to_hex(cat({{68, 12, 5, 3}, a, {0, 0, 0, 0}})));
  EXPECT_EQ(to_hex(reply_options(cat({{68, 20, 5, 3}, us, {0, 0, 0, 0}, us, {0, 0, 0, 0}}))),
            to_hex(cat({{68, 20, 21, 3}, us, t, us, t})));
  EXPECT_EQ(to_hex(reply_options(cat({{68, 12, 13, 3}, us, t}))),
            to_hex(cat({{68, 12, 13, 3}, us, t})));
  // Our other address counts as ours (Linux: any local address).
  const Bytes other = {192, 168, 7, 1};
  EXPECT_EQ(to_hex(reply_options(cat({{68, 12, 5, 3}, other, {0, 0, 0, 0}}))),
            to_hex(cat({{68, 12, 13, 3}, other, t})));
  // A flag value RFC 791 does not define: left as it came.
  EXPECT_EQ(to_hex(reply_options(cat({{68, 8, 5, 2}, {0, 0, 0, 0}}))),
            to_hex(cat({{68, 8, 5, 2}, {0, 0, 0, 0}})));
  // Both, record route first whatever the request's order.
  EXPECT_EQ(to_hex(reply_options(cat({{68, 8, 5, 0}, {0, 0, 0, 0}, {7, 7, 4}, {0, 0, 0, 0}}))),
            to_hex(cat({{7, 7, 8}, us, {68, 8, 9, 0}, t, {0}})));
  EXPECT_EQ(ctr().echo_replies_tx, 12u);

  const uint64_t malformed = ctr().malformed;
  const std::vector<Bytes> bad = {
      cat({{68, 8, 9, 0xF0}, a}),                               // a 16th overflow
      cat({{68, 10, 5, 0}, {0, 0, 0, 0, 0, 0}}),                // a partial second slot: no reply
      cat({{7, 7, 4}, {0, 0, 0, 0}, {7, 7, 4}, {0, 0, 0, 0}}),  // two record routes
      cat({{7, 7, 3}, {0, 0, 0, 0}}),                           // pointer below the first slot
      cat({{7, 9, 4}, {0, 0, 0, 0, 0, 0}}),                     // a slot that does not fit
      cat({{68, 11, 5, 1}, {0, 0, 0, 0, 0, 0, 0}}),  // half an address-and-timestamp pair
  };
  for (const Bytes& o : bad) expect_silent(with_options(o));
  EXPECT_EQ(ctr().malformed, malformed + bad.size());
  EXPECT_EQ(ctr().echo_replies_tx, 12u);
}

TEST_F(NeighborAgentTest, FragmentsAreNotAnswered) {
  Bytes f = hex(kEchoReq);
  f[14 + 6] |= 0x20;  // MF
  fix_ipv4(f, 14);
  expect_silent(f);
  EXPECT_EQ(ctr().ignored, 1u);
}

TEST_F(NeighborAgentTest, EchoWhoseReplyWouldNotFitIsDropped) {
  make(true, 100);
  // Untagged request; the tagged reply would be one byte over kMaxFrame.
  const size_t data = NeighborAgent::kMaxFrame - 4 - 14 - 28 + 1;
  expect_silent(echo4(kUs, kPeerV4, kOurV4, Bytes(data, 0x5a)));
  EXPECT_EQ(ctr().too_big, 1u);
  EXPECT_EQ(ctr().echo_requests_rx, 1u);
  const Bytes r = answer(echo4(kUs, kPeerV4, kOurV4, Bytes(data - 1, 0x5a)));
  EXPECT_EQ(r.size(), NeighborAgent::kMaxFrame);
  EXPECT_TRUE(icmp4_ok(r, 18));
}

TEST_F(NeighborAgentTest, ArpOfOtherMediaOrProtocolsIsNotOurs) {
  Bytes other_hw = hex(kArpReq);
  other_hw[15] = 6;  // IEEE 802 hardware type
  Bytes rarp = hex(kArpReq);
  rarp[21] = 3;  // RARP request opcode
  Bytes op0 = hex(kArpReq);
  op0[21] = 0;  // reserved opcode
  Bytes long_hw = hex(kArpReq);
  long_hw[18] = 8;  // Ethernet with 8-byte hardware addresses
  Bytes long_proto = hex(kArpReq);
  long_proto[19] = 16;  // IPv4 with 16-byte protocol addresses
  expect_silent(other_hw);
  expect_silent(rarp);
  expect_silent(op0);
  EXPECT_EQ(ctr().ignored, 3u);
  expect_silent(long_hw);
  expect_silent(long_proto);
  EXPECT_EQ(ctr().malformed, 2u);
}

// --- VLAN ----------------------------------------------------------------------------------------

TEST_F(NeighborAgentTest, VlanRepliesAreTaggedWhateverTheRequest) {
  const uint16_t tci = 3 << 13 | 100;
  make(true, tci);
  const Bytes want_arp = padded(vlan_tagged(hex(kArpReqReply), tci));
  EXPECT_EQ(to_hex(answer(vlan_tagged(hex(kArpReq), tci))), to_hex(want_arp));
  EXPECT_EQ(to_hex(answer(hex(kArpReq))), to_hex(want_arp)) << "untagged request";
  EXPECT_EQ(to_hex(answer(vlan_tagged(hex(kArpReq), 5 << 13))), to_hex(want_arp))
      << "priority-tagged request";
  EXPECT_EQ(to_hex(answer(vlan_tagged(hex(kNs), 100))), to_hex(vlan_tagged(hex(kNsReply), tci)));
  const Bytes r = answer(vlan_tagged(hex(kEcho6Req), 100));
  ASSERT_EQ(r.size(), hex(kEcho6Reply).size() + 4);
  EXPECT_EQ(r[12] << 8 | r[13], 0x8100);
  EXPECT_EQ(r[14] << 8 | r[15], tci);
  EXPECT_TRUE(icmp6_ok(r, 18));
  const Bytes e = answer(vlan_tagged(hex(kEchoReq), 100));
  EXPECT_TRUE(ipv4_header_ok(e, 18));
  EXPECT_TRUE(icmp4_ok(e, 18));
  // Another VLAN is another network.
  const uint64_t ignored = ctr().ignored;
  expect_silent(vlan_tagged(hex(kArpReq), 200));
  EXPECT_EQ(ctr().ignored, ignored + 1);
}

TEST_F(NeighborAgentTest, UntaggedAgentAcceptsPriorityTagsOnly) {
  EXPECT_EQ(to_hex(answer(vlan_tagged(hex(kArpReq), 0))), to_hex(padded(hex(kArpReqReply))));
  expect_silent(vlan_tagged(hex(kArpReq), 100));
  make(false, 100);  // a TCI without the VLAN on: frames of VLAN 100 are still another network's
  expect_silent(vlan_tagged(hex(kArpReq), 100));
}

// --- resolution ----------------------------------------------------------------------------------

TEST_F(NeighborAgentTest, ArpResolutionProbesThenFails) {
  const Gid target = v4(10, 0, 0, 9);
  table_->want(target);
  EXPECT_EQ(agent_->tick(0), 1 * kSec);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(to_hex(sink_.sent[0]), to_hex(padded(hex(kLinuxArpFor9))));
  EXPECT_EQ(agent_->tick(kSec / 2), 1 * kSec) << "nothing due yet";
  EXPECT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(agent_->tick(1 * kSec), 2 * kSec);
  EXPECT_EQ(agent_->tick(2 * kSec), 3 * kSec);
  EXPECT_EQ(sink_.sent.size(), 3u);
  EXPECT_EQ(sink_.sent[2], sink_.sent[0]);
  EXPECT_EQ(ctr().arp_requests_tx, 3u);
  EXPECT_EQ(entry(target)->state, NeighborTable::State::kIncomplete);
  EXPECT_TRUE(sink_.failed.empty());
  EXPECT_EQ(agent_->tick(3 * kSec), UINT64_MAX);
  EXPECT_EQ(sink_.sent.size(), 3u);
  EXPECT_EQ(entry(target)->state, NeighborTable::State::kFailed);
  EXPECT_EQ(ctr().failed, 1u);
  EXPECT_TRUE(sink_.resolved.empty());
  // Whoever waits for the address is told (the engine fails what it holds for it), once.
  ASSERT_EQ(sink_.failed.size(), 1u);
  EXPECT_EQ(sink_.failed[0], target);
  EXPECT_EQ(agent_->tick(10 * kSec), UINT64_MAX);
  EXPECT_EQ(sink_.sent.size(), 3u);
  EXPECT_EQ(sink_.failed.size(), 1u);
}

TEST_F(NeighborAgentTest, ArpRequestUsesAddressOnTargetSubnet) {
  table_->want(v4(192, 168, 7, 9));
  agent_->tick(0);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(to_hex(sink_.sent[0]), to_hex(padded(hex(kLinuxArpFor192))));
}

// Two addresses as close to the target as each other: the request asks from the first one (the
// primary address, as Linux does).
TEST_F(NeighborAgentTest, ArpRequestTakesTheFirstOfEquallyCloseAddresses) {
  make(false, 0, {}, {v4(10, 0, 0, 1), v4(10, 0, 0, 2)});
  table_->want(v4(10, 0, 0, 9));
  agent_->tick(0);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(to_hex(sink_.sent[0]),
            to_hex(padded(arp(1, kBroadcast, kUs, v4(10, 0, 0, 1), Mac{}, v4(10, 0, 0, 9)))));
}

// A new user of a failed address asks again (NeighborTable::want): the entry is incomplete with a
// fresh count of probes, so it is solicited max_probes times more before it fails again.
TEST_F(NeighborAgentTest, AFailedAddressWantedAgainIsProbedAfresh) {
  const Gid target = v4(10, 0, 0, 9);
  table_->want(target);
  for (uint64_t s = 0; s <= 3; ++s) agent_->tick(s * kSec);
  ASSERT_EQ(entry(target)->state, NeighborTable::State::kFailed);
  ASSERT_EQ(sink_.sent.size(), 3u);
  table_->want(target);
  EXPECT_EQ(entry(target)->state, NeighborTable::State::kIncomplete);
  EXPECT_EQ(agent_->tick(10 * kSec), 11 * kSec);
  EXPECT_EQ(sink_.sent.size(), 4u);
  EXPECT_EQ(sink_.failed.size(), 1u);
}

// An NS for a global target never comes from a link-local address (RFC 6724 rule 2), even when
// the link-local address comes first and neither shares a prefix with the target.
TEST_F(NeighborAgentTest, NsForAGlobalTargetNeverUsesALinkLocalSource) {
  make(false, 0, {}, {kOurLl, kOurV6});
  EXPECT_EQ(ns_source_for(v6(0x2001, 9)), kOurV6);
}

// Link-local is fe80::/10 (RFC 4291 2.5.6), not just fe80::/16: a target in febf:: is asked from
// the link-local address too.
TEST_F(NeighborAgentTest, NsForATargetAnywhereInFe80Slash10UsesTheLinkLocalSource) {
  EXPECT_EQ(ns_source_for(v6(0xfebf, 9)), kOurLl);
}

// The ARP request asks from the address sharing the most leading bits with the target (the
// stand-in for "on its subnet"): 10.0.0.130 for 10.0.0.129, not the first address 10.0.0.1.
TEST_F(NeighborAgentTest, ArpRequestAsksFromTheAddressSharingTheLongestPrefix) {
  make(false, 0, {}, {v4(10, 0, 0, 1), v4(10, 0, 0, 130)});
  table_->want(v4(10, 0, 0, 129));
  agent_->tick(0);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(to_hex(sink_.sent[0]),
            to_hex(padded(arp(1, kBroadcast, kUs, v4(10, 0, 0, 130), Mac{}, v4(10, 0, 0, 129)))));
}

// A neighbour that says again what the table holds (a periodic ARP request, say) is no new
// resolution: nothing is counted and whoever waits on addresses is not told again.
TEST_F(NeighborAgentTest, ARefreshWithTheSameMacIsNotANewResolution) {
  answer(hex(kArpReq));
  answer(hex(kArpReq));
  EXPECT_EQ(sink_.resolved.size(), 1u);
  EXPECT_EQ(ctr().learned, 1u);
  EXPECT_EQ(ctr().resolved, 1u);
}

TEST_F(NeighborAgentTest, ArpResolutionSucceeds) {
  table_->want(kPeerV4);
  agent_->tick(0);
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4), kSec / 10);
  EXPECT_EQ(ctr().arp_replies_rx, 1u);
  ASSERT_TRUE(table_->lookup(kPeerV4));
  EXPECT_EQ(*table_->lookup(kPeerV4), kPeer);
  EXPECT_EQ(sink_.resolved, std::vector<Gid>{kPeerV4});
  EXPECT_EQ(ctr().resolved, 1u);
  // Next: when its reachable time (30 s) runs out.
  EXPECT_EQ(agent_->tick(kSec / 5), kSec / 10 + 30 * kSec);
  EXPECT_EQ(sink_.sent.size(), 1u);
}

TEST_F(NeighborAgentTest, NdResolutionProbesThenFails) {
  const Gid target = v6(0xfd00, 9);
  table_->want(target);
  EXPECT_EQ(agent_->tick(5), 5 + kSec);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(to_hex(sink_.sent[0]), kLinuxNsFor9);
  EXPECT_TRUE(icmp6_ok(sink_.sent[0], 14));
  agent_->tick(5 + kSec);
  agent_->tick(5 + 2 * kSec);
  EXPECT_EQ(ctr().ns_tx, 3u);
  EXPECT_EQ(agent_->tick(5 + 3 * kSec), UINT64_MAX);
  EXPECT_EQ(entry(target)->state, NeighborTable::State::kFailed);
  EXPECT_EQ(sink_.sent.size(), 3u);
}

TEST_F(NeighborAgentTest, NsForLinkLocalTargetUsesLinkLocalSource) {
  table_->want(v6(0xfe80, 9));
  agent_->tick(0);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(to_hex(sink_.sent[0]), kLinuxNsForLl9);
}

TEST_F(NeighborAgentTest, NdResolutionSucceeds) {
  table_->want(kPeerV6);
  agent_->tick(0);
  feed(na(kPeer, kPeerV6, kS | kO), 1000);
  EXPECT_EQ(ctr().na_rx, 1u);
  ASSERT_TRUE(table_->lookup(kPeerV6));
  EXPECT_EQ(*table_->lookup(kPeerV6), kPeer);
  EXPECT_EQ(sink_.resolved, std::vector<Gid>{kPeerV6});
}

TEST_F(NeighborAgentTest, NaWithoutTargetAddressDoesNotResolve) {
  table_->want(kPeerV6);
  agent_->tick(0);
  feed(na(kPeer, kPeerV6, kS | kO, kOurV6, /*tlla=*/false));
  EXPECT_EQ(ctr().na_rx, 1u);
  EXPECT_EQ(entry(kPeerV6)->state, NeighborTable::State::kIncomplete);
}

TEST_F(NeighborAgentTest, NaOverrideRules) {
  feed(hex(kNs));  // learns fd00::2 -> kPeer
  sink_.resolved.clear();
  // RFC 4861 7.2.5: without Override a known address stays.
  feed(na(kOther, kPeerV6, kS));
  EXPECT_EQ(*table_->lookup(kPeerV6), kPeer);
  feed(na(kOther, kPeerV6, kS | kO));
  EXPECT_EQ(*table_->lookup(kPeerV6), kOther);
  // An unsolicited (multicast) advertisement with Override updates too.
  feed(na(kPeer, kPeerV6, kO, v6(0xff02, 1)));
  EXPECT_EQ(*table_->lookup(kPeerV6), kPeer);
  EXPECT_EQ(sink_.resolved.size(), 2u);
  // Unknown targets are not created.
  feed(na(kPeer, v6(0xfd00, 7), kO, v6(0xff02, 1)));
  EXPECT_EQ(entry(v6(0xfd00, 7)), nullptr);
}

// RFC 4861 7.2.5: an advertisement for an INCOMPLETE entry records its link-layer address
// whatever its Override flag (the flag only guards an address already known).
TEST_F(NeighborAgentTest, AnAdvertisementWithoutOverrideCompletesAnIncompleteEntry) {
  table_->want(kPeerV6);
  agent_->tick(0);
  feed(na(kPeer, kPeerV6, kS), 1000);
  ASSERT_TRUE(table_->lookup(kPeerV6));
  EXPECT_EQ(*table_->lookup(kPeerV6), kPeer);
  EXPECT_EQ(sink_.resolved, std::vector<Gid>{kPeerV6});
}

TEST_F(NeighborAgentTest, NoAddressOfTheFamilyFailsAtOnce) {
  make(false, 0, {}, {kOurV4});
  table_->want(kPeerV6);
  EXPECT_EQ(agent_->tick(0), UINT64_MAX);
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(entry(kPeerV6)->state, NeighborTable::State::kFailed);
}

TEST_F(NeighborAgentTest, ReachableEntryIsReprobedByUnicastThenFails) {
  feed(hex(kArpReq), 0);  // learns 10.0.0.2 at t=0 (stale)
  feed(hex(kNsLl), 0);    // learns fe80::2 at t=0 (stale)
  // Both confirmed at t=0: a reply to our MAC, a solicited advertisement.
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4), 0);
  feed(na(kPeer, kPeerLl, kS, kOurLl), 0);
  ASSERT_EQ(entry(kPeerV4)->state, NeighborTable::State::kReachable);
  ASSERT_EQ(entry(kPeerLl)->state, NeighborTable::State::kReachable);
  expect_peer_probes_at(30 * kSec);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(table_->lookup(kPeerV4)) << "usable while it is probed";
  // The peer answers the ARP probe only: the IPv4 entry stays, the IPv6 one fails.
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4), 30 * kSec + 1);
  agent_->tick(31 * kSec);
  agent_->tick(32 * kSec);
  EXPECT_EQ(agent_->tick(33 * kSec), 60 * kSec + 1);
  EXPECT_EQ(entry(kPeerLl)->state, NeighborTable::State::kFailed);
  EXPECT_EQ(entry(kPeerV4)->state, NeighborTable::State::kReachable);
  EXPECT_EQ(ctr().failed, 1u);
  EXPECT_EQ(sink_.sent.size(), 4u);  // the first pair plus two more NS probes
}

// RFC 4861 7.2.3 / 7.2.5 (and Linux's ARP): only a confirmation (a solicited advertisement, an
// ARP reply to our MAC) makes an entry REACHABLE. Anything else the wire says of a neighbour (an
// NS's source address, an unsolicited advertisement, an ARP request or a gratuitous reply) makes
// a new or changed entry STALE: usable at once (whoever waits is told), and probed by unicast
// after the first-probe delay (5 s) instead of the reachable time (30 s). A non-override
// advertisement of another address leaves the address but makes a reachable entry stale; an
// unconfirmed message that changes nothing leaves the entry as it is.
TEST_F(NeighborAgentTest, UnconfirmedNewsMakesEntriesStaleAndOnlyConfirmationReachable) {
  using State = NeighborTable::State;
  const Mac other{0x02, 0, 0, 0, 0, 0x33};
  // An unsolicited advertisement answers a resolution: usable, stale.
  table_->want(kPeerV6);
  agent_->tick(0);
  feed(na(kPeer, kPeerV6, kO, v6(0xff02, 1)), 10);
  EXPECT_EQ(entry(kPeerV6)->state, State::kStale);
  ASSERT_TRUE(table_->lookup(kPeerV6));
  EXPECT_EQ(sink_.resolved, std::vector<Gid>{kPeerV6});
  // Confirmed: reachable, nobody told again (nothing changed for the paths).
  feed(na(kPeer, kPeerV6, kS), 20);
  EXPECT_EQ(entry(kPeerV6)->state, State::kReachable);
  EXPECT_EQ(sink_.resolved.size(), 1u);
  // Another address without Override: the address stays, the entry goes stale.
  feed(na(other, kPeerV6, kS), 30);
  EXPECT_EQ(entry(kPeerV6)->state, State::kStale);
  EXPECT_EQ(*table_->lookup(kPeerV6), kPeer);
  // ... and a solicited answer without the option confirms the address it has.
  feed(na(kPeer, kPeerV6, kS, kOurV6, /*tlla=*/false), 40);
  EXPECT_EQ(entry(kPeerV6)->state, State::kReachable);
  // An unsolicited override to another address: taken, stale, the paths told.
  feed(na(other, kPeerV6, kO, v6(0xff02, 1)), 50);
  EXPECT_EQ(entry(kPeerV6)->state, State::kStale);
  EXPECT_EQ(*table_->lookup(kPeerV6), other);
  EXPECT_EQ(sink_.resolved, (std::vector<Gid>{kPeerV6, kPeerV6}));
  // An NS from a new neighbour: stale. Again with the same address: still stale, no news.
  feed(hex(kNsLl), 60);
  EXPECT_EQ(entry(kPeerLl)->state, State::kStale);
  const uint64_t learned = ctr().learned;
  feed(hex(kNsLl), 70);
  EXPECT_EQ(entry(kPeerLl)->state, State::kStale);
  EXPECT_EQ(ctr().learned, learned);

  // ARP: a request to us, stale; a gratuitous (broadcast) reply, still unconfirmed; a reply to
  // our MAC, reachable; a request from it again changes nothing.
  feed(hex(kArpReq), 100);
  EXPECT_EQ(entry(kPeerV4)->state, State::kStale);
  feed(arp(2, kBroadcast, kPeer, kPeerV4, kBroadcast, kPeerV4), 110);
  EXPECT_EQ(entry(kPeerV4)->state, State::kStale);
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4), 120);
  EXPECT_EQ(entry(kPeerV4)->state, State::kReachable);
  feed(hex(kArpReq), 130);
  EXPECT_EQ(entry(kPeerV4)->state, State::kReachable);
  // A gratuitous ARP from another MAC: taken (ARP has no override flag), stale, the paths told.
  feed(arp(2, kBroadcast, other, kPeerV4, kBroadcast, kPeerV4), 140);
  EXPECT_EQ(entry(kPeerV4)->state, State::kStale);
  EXPECT_EQ(*table_->lookup(kPeerV4), other);
}

// A stale entry is probed by unicast once the first-probe delay has passed, stays usable while
// it is, and a confirmation makes it reachable for the reachable time. With re-probing off
// (reachable_ns 0) a stale entry is never probed.
TEST_F(NeighborAgentTest, StaleEntryIsProbedAfterTheDelay) {
  feed(hex(kArpReq), 0);  // 10.0.0.2, stale at t=0
  feed(hex(kNsLl), 0);    // fe80::2, stale at t=0
  expect_peer_probes_at(5 * kSec);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(table_->lookup(kPeerV4) && table_->lookup(kPeerLl)) << "usable while probed";
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4), 5 * kSec + 1);
  feed(na(kPeer, kPeerLl, kS, kOurLl, /*tlla=*/false), 5 * kSec + 2);
  EXPECT_EQ(entry(kPeerV4)->state, NeighborTable::State::kReachable);
  EXPECT_EQ(entry(kPeerLl)->state, NeighborTable::State::kReachable);
  sink_.sent.clear();
  EXPECT_EQ(agent_->tick(6 * kSec), 35 * kSec + 1);
  EXPECT_TRUE(sink_.sent.empty());

  NeighborConfig no_reprobe;
  no_reprobe.reachable_ns = 0;
  make(false, 0, no_reprobe);
  feed(hex(kArpReq), 0);
  sink_.sent.clear();
  EXPECT_EQ(agent_->tick(3600 * kSec), UINT64_MAX);
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(entry(kPeerV4)->state, NeighborTable::State::kStale);
}

// A neighbour that failed its reprobes keeps its old MAC in the table; wanted again and answering
// from that same MAC, it is a new resolution: whoever waits for it is told.
TEST_F(NeighborAgentTest, AFailedNeighbourAnsweringFromItsOldMacIsResolvedAgain) {
  feed(hex(kArpReq), 0);  // learns 10.0.0.2 -> kPeer
  for (uint64_t s = 30; s <= 33; ++s) agent_->tick(s * kSec);
  ASSERT_EQ(entry(kPeerV4)->state, NeighborTable::State::kFailed);
  table_->want(kPeerV4);
  agent_->tick(40 * kSec);
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4), 40 * kSec + 1);
  EXPECT_EQ(entry(kPeerV4)->state, NeighborTable::State::kReachable);
  EXPECT_EQ(sink_.resolved, (std::vector<Gid>{kPeerV4, kPeerV4}));
  EXPECT_EQ(ctr().resolved, 2u);
}

// An answered reprobe restores the full count: the next time the entry runs out, it gets
// max_probes unicast probes again before it fails.
TEST_F(NeighborAgentTest, AnAnsweredReprobeRestoresTheFullNumberOfProbes) {
  feed(hex(kArpReq), 0);
  agent_->tick(30 * kSec);  // the first probe
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4), 30 * kSec + kSec / 2);
  for (uint64_t t = 60 * kSec + kSec / 2; t <= 62 * kSec + kSec / 2; t += kSec) agent_->tick(t);
  EXPECT_EQ(entry(kPeerV4)->state, NeighborTable::State::kReachable);
  EXPECT_EQ(ctr().arp_requests_tx, 4u);
  EXPECT_TRUE(sink_.failed.empty());
  agent_->tick(63 * kSec + kSec / 2);
  EXPECT_EQ(entry(kPeerV4)->state, NeighborTable::State::kFailed);
}

TEST_F(NeighborAgentTest, ZeroReachableTimeNeverReprobes) {
  NeighborConfig cfg;
  cfg.reachable_ns = 0;
  make(false, 0, cfg);
  feed(hex(kArpReq));
  sink_.sent.clear();
  EXPECT_EQ(agent_->tick(1000 * kSec), UINT64_MAX);
  EXPECT_TRUE(sink_.sent.empty());
}

TEST_F(NeighborAgentTest, RefusedSendIsRetriedLikeALostFrame) {
  table_->want(kPeerV4);
  sink_.refuse = true;
  EXPECT_EQ(agent_->tick(0), kSec);
  EXPECT_EQ(ctr().tx_dropped, 1u);
  EXPECT_EQ(ctr().arp_requests_tx, 0u);
  sink_.refuse = false;
  agent_->tick(kSec);
  EXPECT_EQ(sink_.sent.size(), 1u);
}

// An answer the port refuses is counted as dropped, not as sent.
TEST_F(NeighborAgentTest, RefusedAnswersAreCountedAsDroppedNotSent) {
  sink_.refuse = true;
  for (const char* f : {kArpReq, kNs, kEchoReq, kEcho6Req}) feed(hex(f));
  EXPECT_EQ(ctr().arp_requests_rx + ctr().ns_rx + ctr().echo_requests_rx + ctr().echo6_requests_rx,
            4u);
  EXPECT_EQ(ctr().tx_dropped, 4u);
  EXPECT_EQ(ctr().arp_replies_tx, 0u);
  EXPECT_EQ(ctr().na_tx, 0u);
  EXPECT_EQ(ctr().echo_replies_tx, 0u);
  EXPECT_EQ(ctr().echo6_replies_tx, 0u);
}

// --- table rules ---------------------------------------------------------------------------------

TEST_F(NeighborAgentTest, StaticEntriesAreNeverOverwritten) {
  table_->add_static(kPeerV4, kOther);
  table_->add_static(kPeerV6, kOther);
  EXPECT_EQ(to_hex(answer(hex(kArpReq))), to_hex(padded(hex(kArpReqReply))));
  feed(arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4));
  feed(arp(1, kBroadcast, kPeer, kPeerV4, Mac{}, kPeerV4));  // gratuitous
  EXPECT_EQ(to_hex(answer(hex(kNs))), kNsReply);
  feed(na(kPeer, kPeerV6, kS | kO));
  EXPECT_EQ(entry(kPeerV4)->state, NeighborTable::State::kStatic);
  EXPECT_EQ(entry(kPeerV6)->state, NeighborTable::State::kStatic);
  EXPECT_EQ(*table_->lookup(kPeerV4), kOther);
  EXPECT_EQ(*table_->lookup(kPeerV6), kOther);
  EXPECT_TRUE(sink_.resolved.empty());
  EXPECT_EQ(agent_->tick(100 * kSec), UINT64_MAX) << "static entries are not probed";
}

TEST_F(NeighborAgentTest, GratuitousArpUpdatesExistingEntriesOnly) {
  const Gid a = v4(10, 0, 0, 5), b = v4(10, 0, 0, 6);
  feed(arp(1, kBroadcast, kPeer, a, Mac{}, a));       // request form
  feed(arp(2, kBroadcast, kPeer, a, kBroadcast, a));  // reply form
  EXPECT_TRUE(table_->entries().empty());
  EXPECT_TRUE(sink_.sent.empty());
  table_->want(b);
  feed(arp(1, kBroadcast, kOther, b, Mac{}, b));
  ASSERT_TRUE(table_->lookup(b));
  EXPECT_EQ(*table_->lookup(b), kOther);
  EXPECT_EQ(sink_.resolved, std::vector<Gid>{b});
  feed(arp(2, kBroadcast, kPeer, b, kBroadcast, b));  // the station moved
  EXPECT_EQ(*table_->lookup(b), kPeer);
  EXPECT_TRUE(sink_.sent.empty());
}

TEST_F(NeighborAgentTest, ArpNotForUsMergesButNeverCreates) {
  const Bytes req = arp(1, kBroadcast, kPeer, kPeerV4, Mac{}, v4(10, 0, 0, 77));
  const uint64_t ignored = ctr().ignored;
  expect_silent(req);
  EXPECT_EQ(ctr().ignored, ignored + 1);
  EXPECT_TRUE(table_->entries().empty());
  table_->want(kPeerV4);
  expect_silent(req);
  EXPECT_EQ(*table_->lookup(kPeerV4), kPeer);  // RFC 826 merge
  // An unsolicited reply does not plant an entry either (Linux arp_accept = 0).
  expect_silent(arp(2, kUs, kPeer, v4(10, 0, 0, 3), kUs, kOurV4));
  EXPECT_EQ(entry(v4(10, 0, 0, 3)), nullptr);
  EXPECT_EQ(ctr().arp_replies_rx, 1u);
}

TEST_F(NeighborAgentTest, SomeoneElseClaimingOurAddressIsNotLearned) {
  expect_silent(arp(1, kBroadcast, kPeer, kOurV4, Mac{}, kOurV4));
  expect_silent(na(kPeer, kOurV6, kO, v6(0xff02, 1)));
  expect_silent(ns(kOurV6, kOurLl));  // a solicitation from our address
  EXPECT_EQ(ctr().conflicts, 3u);
  EXPECT_TRUE(table_->entries().empty());
}

// IPv4 neighbours are kept under their IPv4-mapped GID (::ffff:a.b.c.d), so an IPv6 packet
// carrying such an address (never valid on the wire, RFC 4291 2.5.5.2; Linux drops these
// sources) must not reach the table: an NS from ::ffff:10.0.0.2 or an NA for that target would
// otherwise rewrite, or plant, the IPv4 neighbour's MAC without any ARP.
TEST_F(NeighborAgentTest, Ipv4MappedAddressesInNdNeverTouchIpv4Entries) {
  feed(hex(kArpReq));  // learns 10.0.0.2 -> kPeer
  sink_.resolved.clear();
  const Gid mapped = kPeerV4;
  const Gid planted = v4(10, 0, 0, 44);
  const std::vector<Bytes> cases = {
      // NS from the mapped address, for our address, with kOther as its link-layer address.
      icmp6(mcast_mac(solicited(kOurV6)), kOther, mapped, solicited(kOurV6), 255,
            nd_body(135, 0, kOurV6, 1, kOther)),
      icmp6(mcast_mac(solicited(kOurV6)), kOther, planted, solicited(kOurV6), 255,
            nd_body(135, 0, kOurV6, 1, kOther)),
      // NA (Override) for the mapped address, to all-nodes and to us.
      icmp6(mcast_mac(v6(0xff02, 1)), kOther, kPeerV6, v6(0xff02, 1), 255,
            nd_body(136, kO, mapped, 2, kOther)),
      icmp6(kUs, kOther, kPeerV6, kOurV6, 255, nd_body(136, kS | kO, mapped, 2, kOther)),
      // Echo from a mapped source.
      icmp6(kUs, kOther, mapped, kOurV6, 64, {128, 0, 0, 0, 0, 1, 0, 1}),
  };
  for (const Bytes& f : cases) {
    const uint64_t malformed = ctr().malformed;
    expect_silent(f);
    EXPECT_EQ(ctr().malformed, malformed + 1) << to_hex(f);
  }
  ASSERT_TRUE(table_->lookup(kPeerV4));
  EXPECT_EQ(*table_->lookup(kPeerV4), kPeer);
  EXPECT_EQ(entry(planted), nullptr);
  EXPECT_TRUE(sink_.resolved.empty());
  EXPECT_EQ(ctr().learned, 1u);
}

TEST_F(NeighborAgentTest, TableFullStopsLearningButNotAnswering) {
  NeighborConfig cfg;
  cfg.max_entries = 2;
  make(false, 0, cfg);
  for (uint8_t i = 2; i < 6; ++i) {
    Mac m = kPeer;
    m[5] = i;
    answer(arp(1, kBroadcast, m, v4(10, 0, 0, i), Mac{}, kOurV4));
  }
  EXPECT_EQ(table_->entries().size(), 2u);
  EXPECT_EQ(ctr().table_full, 2u);
  EXPECT_EQ(ctr().arp_replies_tx, 4u);
}

// --- what is ignored -----------------------------------------------------------------------------

TEST_F(NeighborAgentTest, FramesNotForUsAreIgnoredAndCounted) {
  Bytes other_station = hex(kEchoReq);
  std::copy(kOther.begin(), kOther.end(), other_station.begin());
  Bytes udp = hex(kEchoReq);  // same datagram, protocol UDP
  udp[14 + 9] = 17;
  fix_ipv4(udp, 14);
  Bytes lldp = eth(Mac{0x01, 0x80, 0xc2, 0, 0, 0x0e}, kPeer, 0x88cc);
  lldp.resize(60);
  Bytes looped = hex(kEchoReq);  // our own frame (source MAC ours) come back
  std::copy(kUs.begin(), kUs.end(), looped.begin() + 6);
  Bytes last_fragment = hex(kEchoReq);  // offset 8, MF clear
  last_fragment[14 + 6] = 0;
  last_fragment[14 + 7] = 1;
  fix_ipv4(last_fragment, 14);
  Bytes timestamp = echo4(kUs, kPeerV4, kOurV4, Bytes(12));  // ICMP timestamp request
  timestamp[34] = 13;
  fix_ipv4(timestamp, 14);
  Bytes udp6 = icmp6(kUs, kPeer, kPeerV6, kOurV6, 64, {128, 0, 0, 0, 0, 1, 0, 1});
  udp6[14 + 6] = 17;              // next header UDP: not ICMPv6, whatever follows
  Gid group = solicited(kOurV6);  // ff02::1:ff77:1, not the group of our fd00::1
  group[13] = 0x77;
  const std::vector<Bytes> cases = {
      arp(1, kBroadcast, kPeer, kPeerV4, Mac{}, v4(10, 0, 0, 77)),  // ARP for another address
      echo4(kUs, kPeerV4, v4(10, 0, 0, 77), Bytes(8)),              // echo to another address
      echo4(kBroadcast, kPeerV4, v4(10, 0, 0, 255), Bytes(8)),      // broadcast echo
      echo4(kBroadcast, kPeerV4, kOurV4, Bytes(8)),                 // to us, L2 broadcast
      icmp6(mcast_mac(v6(0xff02, 1)), kPeer, kPeerV6, kOurV6, 64,
            {128, 0, 0, 0, 0, 1, 0, 1}),  // echo6 to us, L2 multicast
      echo4(Mac{0x01, 0, 0x5e, 0, 0, 1}, kPeerV4, v4(224, 0, 0, 1), Bytes(8)),  // multicast
      icmp6(mcast_mac(v6(0xff02, 2)), kPeer, kPeerV6, v6(0xff02, 2), 64,
            {128, 0, 0, 0, 0, 1, 0, 1}),  // echo6 to all-routers: not a group of ours
      icmp6(mcast_mac(group), kPeer, kPeerV6, group, 64,
            {128, 0, 0, 0, 0, 1, 0, 1}),  // echo6 to a solicited-node group not ours
      icmp6(kUs, kPeer, kPeerV6, v6(0xfd00, 77), 64, {128, 0, 0, 0, 0, 1, 0, 1}),  // not ours
      ns(kPeerV6, v6(0xfd00, 77)),                                          // NS, other target
      icmp6(kUs, kPeer, kPeerV6, kOurV6, 255, {133, 0, 0, 0, 0, 0, 0, 0}),  // router sol.
      other_station,
      udp,
      lldp,
      arp(2, kUs, kPeer, Gid{}, kUs, kOurV4),  // an ARP reply from 0.0.0.0: no probe
      looped,
      last_fragment,
      timestamp,
      udp6,
      // An NS for our address sent to a solicited-node group we have not joined.
      icmp6(mcast_mac(group), kPeer, kPeerV6, group, 255, nd_body(135, 0, kOurV6, 1, kPeer)),
  };
  for (const Bytes& f : cases) {
    const uint64_t ignored = ctr().ignored, malformed = ctr().malformed;
    expect_silent(f);
    EXPECT_EQ(ctr().ignored, ignored + 1) << to_hex(f);
    EXPECT_EQ(ctr().malformed, malformed) << to_hex(f);
  }
  EXPECT_TRUE(table_->entries().empty());
}

// --- validation ----------------------------------------------------------------------------------

TEST_F(NeighborAgentTest, MalformedFramesAreCountedAndDropped) {
  std::vector<Bytes> cases;
  {
    Bytes f = hex(kEchoReq);  // bad ICMP checksum
    f.back() ^= 1;
    cases.push_back(f);
  }
  {
    Bytes f = hex(kEchoReq);  // bad IP header checksum
    f[14 + 10] ^= 1;
    cases.push_back(f);
  }
  {
    Bytes f = hex(kEchoReq);  // IP total length past the frame
    f[14 + 3] += 1;
    fix_ipv4(f, 14, /*icmp=*/false);
    cases.push_back(f);
  }
  {
    Bytes f = hex(kEcho6Req);  // bad ICMPv6 checksum
    f.back() ^= 1;
    cases.push_back(f);
  }
  cases.push_back(ns(kPeerV6, kOurV6, true, 64));  // hop limit not 255 (RFC 4861 7.1.1)
  {
    Bytes f = hex(kNs);  // code 1
    f[14 + 41] = 1;
    fix_icmp6(f, 14);
    cases.push_back(f);
  }
  {
    Bytes f = hex(kNs);  // bad checksum
    f[14 + 43] ^= 0x10;
    cases.push_back(f);
  }
  {
    Bytes f = hex(kNs);  // multicast target
    f[14 + 48] = 0xff;
    fix_icmp6(f, 14);
    cases.push_back(f);
  }
  {
    Bytes f = hex(kNs);  // option of length 0
    f[14 + 40 + 25] = 0;
    fix_icmp6(f, 14);
    cases.push_back(f);
  }
  {
    Bytes f = hex(kNs);  // option running past the message
    f[14 + 40 + 25] = 2;
    fix_icmp6(f, 14);
    cases.push_back(f);
  }
  {
    Bytes f = hex(kNs);  // ICMP length below 24
    f.resize(14 + 40 + 20);
    f[14 + 5] = 20;
    fix_icmp6(f, 14);
    cases.push_back(f);
  }
  // DAD NS carrying a source link-layer address option (7.1.1).
  cases.push_back(icmp6(mcast_mac(solicited(kOurV6)), kPeer, Gid{}, solicited(kOurV6), 255,
                        nd_body(135, 0, kOurV6, 1, kPeer)));
  // DAD NS to a unicast destination.
  cases.push_back(icmp6(kUs, kPeer, Gid{}, kOurV6, 255, nd_body(135, 0, kOurV6, 0, kPeer)));
  cases.push_back(na(kPeer, kPeerV6, kS | kO, v6(0xff02, 1)));  // S flag to multicast (7.1.2)
  // ARP: broadcast sender MAC; multicast sender IP; truncated.
  cases.push_back(arp(1, kBroadcast, kBroadcast, kPeerV4, Mac{}, kOurV4));
  cases.push_back(arp(1, kBroadcast, kPeer, v4(224, 0, 0, 5), Mac{}, kOurV4));
  cases.push_back(hex(kArpReq));
  cases.back().pop_back();
  // Frames from the zero MAC: an echo request, and an NS without the source link-layer option
  // (both would be answered to the frame's source address).
  {
    Bytes f = hex(kEchoReq);
    std::fill(f.begin() + 6, f.begin() + 12, 0);
    cases.push_back(f);
    Bytes g = ns(kPeerV6, kOurV6, /*slla=*/false);
    std::fill(g.begin() + 6, g.begin() + 12, 0);
    cases.push_back(g);
  }
  // Echo from a martian source.
  cases.push_back(echo4(kUs, v4(127, 0, 0, 1), kOurV4, Bytes(8)));
  cases.push_back(echo4(kUs, v4(255, 255, 255, 255), kOurV4, Bytes(8)));
  // Echo6 from a multicast source.
  cases.push_back(icmp6(kUs, kPeer, v6(0xff02, 1), kOurV6, 64, {128, 0, 0, 0, 0, 1, 0, 1}));
  {
    Bytes f = hex(kEchoReq);  // IP version 5 behind the IPv4 ethertype
    f[14] = 0x55;
    fix_ipv4(f, 14);
    cases.push_back(f);
    Bytes g = hex(kEcho6Req);  // IP version 4 behind the IPv6 ethertype
    g[14] = static_cast<uint8_t>(0x40 | (g[14] & 0x0f));
    cases.push_back(g);
  }
  // From 0/8 (but 0.0.0.0, an ARP probe's sender): an ARP request and an echo request.
  cases.push_back(arp(1, kBroadcast, kPeer, v4(0, 1, 2, 3), Mac{}, kOurV4));
  cases.push_back(echo4(kUs, v4(0, 0, 0, 5), kOurV4, Bytes(8)));
  {
    Bytes f = echo4(kUs, kPeerV4, kOurV4, {});  // a 4-byte ICMP echo: no identifier, no sequence
    f.resize(14 + 24);
    f[14 + 3] = 24;
    fix_ipv4(f, 14);
    cases.push_back(f);
  }
  // Echo6: from the loopback or the unspecified address; 4 bytes long.
  cases.push_back(icmp6(kUs, kPeer, v6(0, 1), kOurV6, 64, {128, 0, 0, 0, 0, 1, 0, 1}));
  cases.push_back(icmp6(kUs, kPeer, Gid{}, kOurV6, 64, {128, 0, 0, 0, 0, 1, 0, 1}));
  cases.push_back(icmp6(kUs, kPeer, kPeerV6, kOurV6, 64, {128, 0, 0, 0}));
  // NS whose source link-layer address option is 16 bytes.
  cases.push_back(ns_with_options(kPeer, {1, 2, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}));
  // NA (RFC 4861 7.1.2): hop limit not 255, code 1, multicast target, a group MAC as the target's.
  cases.push_back(icmp6(kUs, kPeer, kPeerV6, kOurV6, 64, nd_body(136, kS | kO, kPeerV6, 2, kPeer)));
  {
    Bytes body = nd_body(136, kS | kO, kPeerV6, 2, kPeer);
    body[1] = 1;
    cases.push_back(icmp6(kUs, kPeer, kPeerV6, kOurV6, 255, body));
  }
  cases.push_back(
      icmp6(kUs, kPeer, kPeerV6, kOurV6, 255, nd_body(136, kS | kO, v6(0xff02, 1), 2, kPeer)));
  cases.push_back(na(Mac{0x01, 0, 0x5e, 0, 0, 1}, kPeerV6, kS | kO));
  for (const Bytes& f : cases) {
    const uint64_t malformed = ctr().malformed;
    expect_silent(f);
    EXPECT_EQ(ctr().malformed, malformed + 1) << to_hex(f);
  }
  EXPECT_TRUE(table_->entries().empty());
}

TEST_F(NeighborAgentTest, TruncationAtEveryByteNeverAnswers) {
  const Bytes inputs[] = {
      hex(kArpReq),
      hex(kArpProbe),
      hex(kEchoReq),
      hex(kNs),
      hex(kNsDad),
      hex(kNsLl),
      hex(kEcho6Req),
      vlan_tagged(hex(kArpReq), 0),
      hex(kScapyEchoOdd),
      na(kPeer, kPeerV6, kS | kO),
      arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4),
  };
  for (const Bytes& in : inputs) {
    for (size_t n = 0; n < in.size(); ++n) {
      const uint64_t before = rx_total();
      expect_silent(Bytes(in.begin(), in.begin() + static_cast<long>(n)));
      EXPECT_EQ(rx_total(), before + 1);
    }
  }
  agent_->on_frame(nullptr, 0, 0);
  EXPECT_TRUE(table_->entries().empty());
  EXPECT_TRUE(sink_.resolved.empty());
}

// Random corruption of valid frames: nothing crashes (ASan/UBSan builds check every read), every
// frame lands in exactly one counter, and whatever is sent is a sane frame.
TEST_F(NeighborAgentTest, CorruptedFramesAreSurvived) {
  const Bytes inputs[] = {
      hex(kArpReq),
      hex(kArpProbe),
      hex(kEchoReq),
      hex(kNs),
      hex(kNsDad),
      hex(kNsLl),
      hex(kEcho6Req),
      vlan_tagged(hex(kNs), 0),
      na(kPeer, kPeerV6, kS | kO),
      arp(2, kUs, kPeer, kPeerV4, kUs, kOurV4),
      hex(kScapyEchoOdd),
  };
  std::mt19937 rng(12345);
  uint64_t frames = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    Bytes f = inputs[rng() % std::size(inputs)];
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) f[rng() % f.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (rng() % 4 == 0) f.resize(rng() % (f.size() + 8), static_cast<uint8_t>(rng()));
    if (rng() % 8 == 0 && f.size() > 40) {  // keep the checksums right, so deeper code runs
      if (f[12] == 0x86 && f[13] == 0xdd) fix_icmp6(f, 14);
      if (f[12] == 0x08 && f[13] == 0x00 && (f[14] & 15) == 5) fix_ipv4(f, 14);
    }
    sink_.sent.clear();
    feed(f, static_cast<uint64_t>(iter) * 1000);
    ++frames;
    for (const Bytes& s : sink_.sent) {
      EXPECT_GE(s.size(), 60u);
      EXPECT_LE(s.size(), NeighborAgent::kMaxFrame);
      EXPECT_EQ(0, std::memcmp(s.data() + 6, kUs.data(), 6));
    }
    if (iter % 1000 == 0) agent_->tick(static_cast<uint64_t>(iter) * 1000);
  }
  EXPECT_EQ(rx_total(), frames);
  for (const auto& e : table_->entries()) {
    if (e.state == NeighborTable::State::kReachable || e.state == NeighborTable::State::kStale) {
      EXPECT_EQ(e.mac[0] & 1, 0);
    }
  }
}

// --- tshark
// ---------------------------------------------------------------------------------------

// Classic libpcap file (LINKTYPE_ETHERNET).
void write_pcap(const std::string& path, const std::vector<Bytes>& frames) {
  std::ofstream out(path, std::ios::binary);
  auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  u32(0xa1b2c3d4);
  u16(2);
  u16(4);
  u32(0);
  u32(0);
  u32(65535);
  u32(1);
  uint32_t t = 0;
  for (const Bytes& f : frames) {
    u32(1700000000);
    u32(t++);
    u32(static_cast<uint32_t>(f.size()));
    u32(static_cast<uint32_t>(f.size()));
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
  }
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST_F(NeighborAgentTest, SentFramesDecodeCleanlyInTshark) {
  if (std::system("command -v tshark >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "tshark is not installed; skipping the dissector check of sent frames";
  }
  std::vector<Bytes> frames;
  frames.push_back(answer(hex(kArpReq)));    // ARP reply
  frames.push_back(answer(hex(kNs)));        // solicited NA
  frames.push_back(answer(hex(kNsDad)));     // NA to all-nodes
  frames.push_back(answer(hex(kEchoReq)));   // echo reply
  frames.push_back(answer(hex(kEcho6Req)));  // echo6 reply
  table_->want(v4(10, 0, 0, 9));
  table_->want(v6(0xfd00, 9));
  sink_.sent.clear();
  agent_->tick(0);  // ARP request, NS
  frames.insert(frames.end(), sink_.sent.begin(), sink_.sent.end());
  ASSERT_EQ(frames.size(), 7u);
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/neighbor_agent_tshark.pcap";
  write_pcap(path, frames);
  const std::string out = run("tshark -o ip.check_checksum:TRUE -r '" + path + "' -V 2>/dev/null");
  std::filesystem::remove(path);
  ASSERT_NE(out.find("Frame 7:"), std::string::npos) << out;
  EXPECT_EQ(out.find("Malformed"), std::string::npos) << out;
  EXPECT_EQ(out.find("Expert Info (Error"), std::string::npos) << out;
  EXPECT_EQ(out.find("Expert Info (Warning"), std::string::npos) << out;
  EXPECT_EQ(out.find("incorrect"), std::string::npos) << out;
  // The IPv4 header, ICMP and four ICMPv6 checksums, each verified by the dissector.
  size_t correct = 0;
  for (size_t p = out.find("[correct]"); p != std::string::npos; p = out.find("[correct]", p + 1)) {
    ++correct;
  }
  EXPECT_EQ(correct, 6u) << out;
  EXPECT_NE(out.find("Opcode: reply (2)"), std::string::npos);
  EXPECT_NE(out.find("Opcode: request (1)"), std::string::npos);
  EXPECT_NE(out.find("Neighbor Advertisement (136)"), std::string::npos);
  EXPECT_NE(out.find("Neighbor Solicitation (135)"), std::string::npos);
  EXPECT_NE(out.find("Echo (ping) reply"), std::string::npos);
  EXPECT_NE(out.find("Echo (ping) reply (129)"), std::string::npos);
}

}  // namespace
}  // namespace roce
