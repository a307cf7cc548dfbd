// DpdkPort over a net_ring pair in one process: the PacketIo contract on a real DPDK driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "dpdk/ring_pair.h"
#include "dpdk/testing.h"
#include "stack/core/engine.h"
#include "stack/util/clock.h"
#include "tests/dpdk/eal_environment.h"
#include "tests/dpdk/test_frames.h"
#include "tests/support/sim_host.h"

namespace roce::dpdk {
namespace {

using testing::make_frame;
using testing::receive;
using namespace std::chrono_literals;

[[maybe_unused]] const ::testing::Environment* const kEal =
    ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment());

std::unique_ptr<RingPair> make_pair(const PortConfig& config = {}) {
  // Ring and port names must be unique while alive; one pair per test at a time here.
  static int n = 0;
  std::string error;
  auto pair = RingPair::create("t" + std::to_string(n++), config, &error);
  EXPECT_NE(pair, nullptr) << error;
  return pair;
}

// Sends `frames` from `tx` in one burst; all must be taken.
void send_all(DpdkPort& tx, const std::vector<std::vector<uint8_t>>& frames) {
  std::vector<PktBuf> bufs(frames.size());
  const auto n = static_cast<uint16_t>(frames.size());
  ASSERT_EQ(tx.alloc(bufs.data(), n), n);
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_LE(frames[i].size(), bufs[i].cap);
    std::memcpy(bufs[i].data, frames[i].data(), frames[i].size());
    bufs[i].len = static_cast<uint32_t>(frames[i].size());
  }
  ASSERT_EQ(tx.tx_burst(bufs.data(), n), n);
}

TEST(RingPair, PortsReportFrameLimitAndMac) {
  PortConfig config;
  config.mtu = 4200;
  auto pair = make_pair(config);
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pair->a().max_frame_len(), 4214u);
  EXPECT_GE(pair->a().buffer_capacity(), 4214u);
  EXPECT_EQ(pair->a().driver(), "net_ring");
  EXPECT_NE(pair->a().port_id(), pair->b().port_id());
  EXPECT_EQ(pair->a().mac_string().size(), 17u);
  EXPECT_NE(pair->a().mac_string(), pair->b().mac_string());
  EXPECT_NE(pair->a().mac_string(), "00:00:00:00:00:00");
  EXPECT_EQ(pair->a().mac()[0], 0x02);  // locally administered, unicast
  EXPECT_TRUE(pair->a().link_up());
}

TEST(RingPair, FramesArriveByteIdenticalInBurstsOf32) {
  auto pair = make_pair();
  ASSERT_NE(pair, nullptr);
  uint32_t seq = 0;
  uint64_t bytes = 0;
  for (DpdkPort* from : {&pair->a(), &pair->b()}) {
    DpdkPort& to = from == &pair->a() ? pair->b() : pair->a();
    for (uint32_t len : {60u, 1500u, 4200u}) {
      std::vector<std::vector<uint8_t>> sent;
      for (int i = 0; i < 32; ++i) sent.push_back(make_frame(len, seq++));
      send_all(*from, sent);
      const auto got = receive(to, sent.size(), 2s);
      ASSERT_EQ(got.size(), sent.size()) << "len " << len;
      for (size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(got[i], sent[i]) << "len " << len;
      bytes += 32ull * len;
    }
  }
  for (DpdkPort* p : {&pair->a(), &pair->b()}) {
    const PortCounters c = p->counters();
    EXPECT_EQ(c.tx_packets, 96u);
    EXPECT_EQ(c.rx_packets, 96u);
    EXPECT_EQ(c.tx_bytes, bytes / 2);
    EXPECT_EQ(c.rx_bytes, bytes / 2);
    EXPECT_EQ(c.tx_rejected + c.rx_linearized + c.rx_dropped_chained + c.rx_dropped_oversize, 0u);
    // The driver's own count agrees with ours.
    EthStats s;
    std::string error;
    ASSERT_TRUE(p->eth_stats(&s, &error)) << error;
    EXPECT_EQ(s.opackets, 96u);
    EXPECT_EQ(s.ipackets, 96u);
    EXPECT_EQ(s.oerrors, 0u);
    // Every mbuf came back: the receiver freed the sender's buffers into the sender's pool.
    EXPECT_EQ(p->buffers_in_use(), 0u);
  }
}

TEST(RingPair, TxBurstReturnsWhatWasTakenAndTheRestCanBeFreed) {
  auto pair = make_pair();
  ASSERT_NE(pair, nullptr);
  DpdkPort& a = pair->a();
  // Fill the a->b ring without receiving: it holds RingPair::kRingSize - 1 mbufs.
  uint32_t taken = 0;
  uint32_t refused = 0;
  PktBuf bufs[32];
  for (int round = 0; round < 40; ++round) {
    ASSERT_EQ(a.alloc(bufs, 32), 32);
    for (PktBuf& b : bufs) {
      const auto f = make_frame(64, taken);
      std::memcpy(b.data, f.data(), f.size());
      b.len = static_cast<uint32_t>(f.size());
    }
    const uint16_t k = a.tx_burst(bufs, 32);
    ASSERT_LE(k, 32);
    taken += k;
    refused += 32 - k;
    // The caller still owns bufs[k..31]: give them back.
    a.free(bufs + k, static_cast<uint16_t>(32 - k));
  }
  EXPECT_EQ(taken, RingPair::kRingSize - 1);
  EXPECT_EQ(refused, 40u * 32u - taken);
  EXPECT_EQ(a.counters().tx_packets, taken);
  EXPECT_EQ(a.counters().tx_bytes, uint64_t{taken} * 64);  // refused frames are not counted
  EXPECT_EQ(a.counters().tx_rejected, refused);
  EthStats s;
  std::string error;
  ASSERT_TRUE(a.eth_stats(&s, &error)) << error;
  // net_ring counts refused frames internally but does not report them in oerrors (22.11);
  // our own tx_rejected is the number to watch.
  EXPECT_EQ(s.opackets, taken);

  // Only the queued frames are out of the pool; receiving them returns every buffer.
  EXPECT_EQ(a.buffers_in_use(), taken);
  const auto got = receive(pair->b(), taken, 5s);
  EXPECT_EQ(got.size(), taken);
  EXPECT_EQ(a.buffers_in_use(), 0u);
}

TEST(RingPair, AllocHandsOutWhatThePoolHasLeft) {
  PortConfig config;
  config.num_mbufs = 127;
  auto pair = make_pair(config);
  ASSERT_NE(pair, nullptr);
  DpdkPort& a = pair->a();
  std::vector<PktBuf> bufs(200);
  for (PktBuf& b : bufs) b.len = 12345;  // what a caller's reused array may hold
  const uint16_t n = a.alloc(bufs.data(), 200);
  EXPECT_EQ(n, 127);
  PktBuf extra;
  EXPECT_EQ(a.alloc(&extra, 1), 0);
  for (uint16_t i = 0; i < n; ++i) {
    EXPECT_EQ(bufs[i].cap, a.buffer_capacity());
    EXPECT_EQ(bufs[i].len, 0u);
  }
  a.free(bufs.data(), n);
  EXPECT_EQ(a.buffers_in_use(), 0u);
}

TEST(RingPair, TxHonoursAMovedDataPointer) {
  auto pair = make_pair();
  ASSERT_NE(pair, nullptr);
  PktBuf bufs[2];
  ASSERT_EQ(pair->a().alloc(bufs, 2), 2);
  const auto f0 = make_frame(100, 1);
  const auto f1 = make_frame(200, 2);
  // Frame 0 starts 8 bytes into the headroom (a header prepended), frame 1 40 bytes later.
  bufs[0].data -= 8;
  bufs[1].data += 40;
  std::memcpy(bufs[0].data, f0.data(), f0.size());
  std::memcpy(bufs[1].data, f1.data(), f1.size());
  bufs[0].len = static_cast<uint32_t>(f0.size());
  bufs[1].len = static_cast<uint32_t>(f1.size());
  ASSERT_EQ(pair->a().tx_burst(bufs, 2), 2);
  const auto got = receive(pair->b(), 2, 2s);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], f0);
  EXPECT_EQ(got[1], f1);
}

// A received buffer may be written up to its cap (the engine builds replies in place): the data
// room from where the frame starts to the end of the buffer, no more.
TEST(RingPair, ReceivedBuffersOfferTheRoomFromTheFrameToTheEndOfTheBuffer) {
  auto pair = make_pair();
  ASSERT_NE(pair, nullptr);
  PktBuf bufs[2];
  ASSERT_EQ(pair->a().alloc(bufs, 2), 2);
  const auto f = make_frame(100, 1);
  bufs[1].data -= 8;  // a header prepended: 8 bytes more room behind the frame's start
  for (PktBuf& b : bufs) {
    std::memcpy(b.data, f.data(), f.size());
    b.len = static_cast<uint32_t>(f.size());
  }
  ASSERT_EQ(pair->a().tx_burst(bufs, 2), 2);
  PktBuf got[2];
  uint16_t n = 0;
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (n < 2 && std::chrono::steady_clock::now() < deadline) {
    n = static_cast<uint16_t>(n + pair->b().rx_burst(got + n, static_cast<uint16_t>(2 - n)));
  }
  ASSERT_EQ(n, 2);
  EXPECT_EQ(got[0].cap, pair->a().buffer_capacity());
  EXPECT_EQ(got[1].cap, pair->a().buffer_capacity() + 8);
  pair->b().free(got, n);
}

TEST(RingPair, DropsFramesLongerThanTheMtu) {
  PortConfig config;
  config.mtu = 1500;
  auto pair = make_pair(config);
  ASSERT_NE(pair, nullptr);
  ASSERT_GT(pair->a().buffer_capacity(), 1514u + 8);  // room to write a too-long frame
  send_all(pair->a(), {make_frame(1514 + 8, 1), make_frame(1514, 2)});
  const auto got = receive(pair->b(), 2, 300ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], make_frame(1514, 2));
  EXPECT_EQ(pair->b().counters().rx_dropped_oversize, 1u);
  EXPECT_EQ(pair->a().buffers_in_use(), 0u);
}

// With `vlan` the MTU still counts the IP datagram: frames are up to mtu + 18.
TEST(RingPair, AVlanPortTakesTheTagOnTopOfTheMtu) {
  PortConfig config;
  config.mtu = 1500;
  config.vlan = true;
  auto pair = make_pair(config);
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pair->a().max_frame_len(), 1518u);
  ASSERT_GT(pair->a().buffer_capacity(), 1519u);
  send_all(pair->a(), {make_frame(1519, 1), make_frame(1518, 2)});
  const auto got = receive(pair->b(), 2, 300ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], make_frame(1518, 2));
  EXPECT_EQ(pair->b().counters().rx_dropped_oversize, 1u);
}

// A chained frame is what net_pcap delivers for frames bigger than its mbufs, and what a peer
// may send; the engine must only ever see one contiguous frame.
TEST(RingPair, ChainedFramesAreLinearizedOrDropped) {
  PortConfig config;
  config.mtu = 1500;  // 1536-byte buffers
  auto pair = make_pair(config);
  ASSERT_NE(pair, nullptr);
  std::string error;
  auto sender = ChainedFrameSender::create(/*segment_size=*/512, /*count=*/63, &error);
  ASSERT_NE(sender, nullptr) << error;

  const auto fits = make_frame(1500, 7);     // 3 segments, fits one 1536-byte buffer
  const auto too_big = make_frame(3000, 8);  // 6 segments, fits no buffer
  ASSERT_TRUE(sender->send(pair->a(), fits));
  ASSERT_TRUE(sender->send(pair->a(), too_big));
  ASSERT_TRUE(sender->send(pair->a(), make_frame(60, 9)));  // one segment: passes as it is

  const auto got = receive(pair->b(), 3, 300ms);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], fits);
  EXPECT_EQ(got[1], make_frame(60, 9));
  const PortCounters c = pair->b().counters();
  EXPECT_EQ(c.rx_linearized, 1u);
  EXPECT_EQ(c.rx_dropped_chained, 1u);
  EXPECT_EQ(c.rx_packets, 2u);
  // The chains went back to the sender's pool; the linearized copy back to b's.
  EXPECT_EQ(sender->in_use(), 0u);
  EXPECT_EQ(pair->b().buffers_in_use(), 0u);
}

// A chained frame exactly as long as a buffer's data room still fits one: it is linearized.
TEST(RingPair, AChainedFrameThatFillsABufferExactlyIsLinearized) {
  PortConfig config;
  config.mtu = 1500;
  config.mbuf_data_size = 1514;  // the largest frame, and not a byte more
  auto pair = make_pair(config);
  ASSERT_NE(pair, nullptr);
  ASSERT_EQ(pair->b().buffer_capacity(), 1514u);
  std::string error;
  auto sender = ChainedFrameSender::create(/*segment_size=*/512, /*count=*/15, &error);
  ASSERT_NE(sender, nullptr) << error;
  const auto frame = make_frame(1514, 3);
  ASSERT_TRUE(sender->send(pair->a(), frame));
  const auto got = receive(pair->b(), 1, 2s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], frame);
  EXPECT_EQ(pair->b().counters().rx_linearized, 1u);
  EXPECT_EQ(pair->b().counters().rx_dropped_chained, 0u);
  EXPECT_EQ(sender->in_use(), 0u);
}

// Every port of every pair has a MAC of its own: two pairs in a process are two links whose
// devices must not share an address.
TEST(RingPair, EveryPortOfEveryPairHasItsOwnMac) {
  auto one = make_pair();
  auto two = make_pair();
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  const std::set<std::string> macs{one->a().mac_string(), one->b().mac_string(),
                                   two->a().mac_string(), two->b().mac_string()};
  EXPECT_EQ(macs.size(), 4u);
}

// Frames still queued in the rings when a pair closes go back to their pools, and the pools are
// freed rather than leaked (a port closing with mbufs out says so on stderr).
TEST(RingPair, ClosingWithFramesQueuedLeaksNoPool) {
  ::testing::internal::CaptureStderr();
  {
    auto pair = make_pair();
    ASSERT_NE(pair, nullptr);
    send_all(pair->a(), {make_frame(60, 1), make_frame(60, 2)});
    send_all(pair->b(), {make_frame(60, 3)});
    EXPECT_EQ(pair->a().buffers_in_use(), 2u);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("pool leaked"), std::string::npos) << err;
}

TEST(RingPair, ClosesAndReopensUnderTheSameName) {
  std::string error;
  for (int i = 0; i < 2; ++i) {
    auto pair = RingPair::create("reopen", PortConfig{}, &error);
    ASSERT_NE(pair, nullptr) << "round " << i << ": " << error;
    // Leave frames queued in both rings: closing must return them to their pools.
    send_all(pair->a(), {make_frame(60, 1)});
    send_all(pair->b(), {make_frame(60, 2)});
  }
}

// Two devices configured with the same vdev name (net_af_packet0 twice, for two interfaces) both
// name one port: the second open must fail in one line naming it, and leave the first working.
TEST(DpdkPort, OpeningAPortAnotherDpdkPortHoldsFailsAndLeavesItWorking) {
  auto pair = make_pair();
  ASSERT_NE(pair, nullptr);
  const std::string name = pair->a().name();
  std::string error;
  EXPECT_EQ(DpdkPort::open(name, PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("'" + name + "' is already open"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_EQ(DpdkPort::open_port_id(pair->a().port_id(), PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("is already open"), std::string::npos) << error;
  send_all(pair->a(), {make_frame(60, 1)});
  EXPECT_EQ(receive(pair->b(), 1, 2s).size(), 1u);
  send_all(pair->b(), {make_frame(60, 2)});
  EXPECT_EQ(receive(pair->a(), 1, 2s).size(), 1u);
}

// The mtu limits are part of the range: 68 (RFC 791) and 9000 open and carry their largest
// frame; one byte outside either is refused.
TEST(DpdkPort, TheMtuLimitsAreInclusive) {
  std::string error;
  for (const uint32_t mtu : {68u, 9000u}) {
    PortConfig config;
    config.mtu = mtu;
    config.num_mbufs = 255;
    auto pair = RingPair::create("mtu" + std::to_string(mtu), config, &error);
    ASSERT_NE(pair, nullptr) << "mtu " << mtu << ": " << error;
    EXPECT_EQ(pair->a().max_frame_len(), mtu + 14);
    const auto frame = make_frame(mtu + 14, mtu);
    send_all(pair->a(), {frame});
    const auto got = receive(pair->b(), 1, 2s);
    ASSERT_EQ(got.size(), 1u) << "mtu " << mtu;
    EXPECT_EQ(got[0], frame);
  }
  for (const uint32_t mtu : {67u, 9001u}) {
    PortConfig config;
    config.mtu = mtu;
    EXPECT_EQ(RingPair::create("mtu" + std::to_string(mtu), config, &error), nullptr);
    EXPECT_NE(error.find("mtu " + std::to_string(mtu) + " outside [68, 9000]"), std::string::npos)
        << error;
  }
}

// An mbuf's data room and headroom together are a 16-bit length: 65535 bytes is the most.
TEST(DpdkPort, TheLargestDataRoomIsTheOneThatFits16Bits) {
  PortConfig config;
  config.mtu = 1500;
  config.num_mbufs = 63;
  config.mbuf_data_size = 65535 - 128;  // RTE_PKTMBUF_HEADROOM: 128
  std::string error;
  auto pair = RingPair::create("room", config, &error);
  ASSERT_NE(pair, nullptr) << error;
  EXPECT_EQ(pair->a().buffer_capacity(), 65535u - 128);
  pair.reset();
  config.mbuf_data_size = 65535 - 127;
  EXPECT_EQ(RingPair::create("room", config, &error), nullptr);
  EXPECT_NE(error.find("mbuf data room 65408 too large"), std::string::npos) << error;
}

TEST(DpdkPort, OpenReportsProbeFailuresInOneLine) {
  std::string error;
  EXPECT_EQ(DpdkPort::open("net_nosuchdriver0", PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("probe 'net_nosuchdriver0' failed"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  EXPECT_EQ(DpdkPort::open_port_id(4000, PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("no such ethdev port"), std::string::npos) << error;
  PortConfig bad;
  bad.mtu = 9001;
  auto pair = RingPair::create("badmtu", bad, &error);
  EXPECT_EQ(pair, nullptr);
  EXPECT_NE(error.find("mtu 9001 outside"), std::string::npos) << error;
}

// A device that probes but is no network device (crypto_null0) is refused in one line. The
// device open probed is removed again rather than left on the bus under that name; one that
// was there before (given to EAL for another use) is left alone.
TEST(DpdkPort, OpeningADeviceThatIsNoEthdevRemovesOnlyWhatItProbed) {
  std::string error;
  EXPECT_EQ(DpdkPort::open("crypto_null0", PortConfig{}, &error), nullptr);
  if (error.find("failed") != std::string::npos) {
    GTEST_SKIP() << "this DPDK has no crypto_null driver: " << error;
  }
  EXPECT_NE(error.find("created no ethdev port named 'crypto_null0'"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_FALSE(Eal::device_listed("crypto_null0"));

  ASSERT_EQ(probe_device("crypto_null1"), 0);
  ASSERT_TRUE(Eal::device_listed("crypto_null1"));
  EXPECT_EQ(DpdkPort::open("crypto_null1", PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("created no ethdev port named 'crypto_null1'"), std::string::npos) << error;
  EXPECT_TRUE(Eal::device_listed("crypto_null1"));
  EXPECT_TRUE(remove_device("crypto_null1"));
  EXPECT_FALSE(Eal::device_listed("crypto_null1"));
}

// --- engines over a pair whose pools run dry ---

// Two engines over a net_ring pair whose pools (255 mbufs each) hold fewer frames than a ring
// (1,024): what A sends sits in B's ring, holding A's mbufs, until B polls. QP 1 empties A's pool
// with a 1 MiB WRITE while B is not polled; QP 2's SEND, posted then, finds no buffer. When B
// polls again, A's mbufs come back and B's ACKs wake QP 1, but QP 2 has nothing in flight and
// no ACK due: the engine must carry it on by itself (it waited for the next post before).
TEST(RingPair, EnginesCarryOnWhenADryPoolFillsAgain) {
  PortConfig config;
  config.num_mbufs = 255;
  auto pair = make_pair(config);
  ASSERT_NE(pair, nullptr);
  VirtualClock clock;  // no loss, no timer: time does not matter
  EngineConfig ca, cb;
  std::memcpy(ca.mac.data(), pair->a().mac(), 6);
  std::memcpy(cb.mac.data(), pair->b().mac(), 6);
  ca.gids = {Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 7, 0, 1}};
  cb.gids = {Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 7, 0, 2}};
  Engine a(ca, &pair->a(), &clock), b(cb, &pair->b(), &clock);
  a.neighbors().add_static(cb.gids[0], cb.mac);
  b.neighbors().add_static(ca.gids[0], ca.mac);
  constexpr uint32_t kMem = 2 << 20;
  std::vector<uint8_t> ma(kMem), mb(kMem, 0);
  for (uint32_t i = 0; i < kMem; ++i) ma[i] = static_cast<uint8_t>(i * 13 + i / 4099);
  const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite;
  const uint32_t pda = a.alloc_pd(), pdb = b.alloc_pd();
  uint32_t ka = 0, kb = 0;
  ASSERT_EQ(a.reg_mr(pda, ma.data(), kMem, reinterpret_cast<uint64_t>(ma.data()), acc, &ka), 0);
  ASSERT_EQ(b.reg_mr(pdb, mb.data(), kMem, reinterpret_cast<uint64_t>(mb.data()), acc, &kb), 0);
  int err = 0;
  CompletionQueue* cqa = a.create_cq(64, &err);
  CompletionQueue* cqb = b.create_cq(64, &err);
  ASSERT_TRUE(cqa && cqb);
  auto make_qp = [&](Engine& e, uint32_t pd, CompletionQueue* cq) {
    QpInitAttr ia;
    ia.pd = pd;
    ia.send_cq = ia.recv_cq = cq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    return e.create_qp(ia, &err);
  };
  Qp* a1 = make_qp(a, pda, cqa);
  Qp* a2 = make_qp(a, pda, cqa);
  Qp* b1 = make_qp(b, pdb, cqb);
  Qp* b2 = make_qp(b, pdb, cqb);
  ASSERT_TRUE(a1 && a2 && b1 && b2);
  test::ConnectOptions co;
  co.gid_index = 0;  // each engine has one GID
  for (auto [qa, qb] : {std::pair{a1, b1}, std::pair{a2, b2}}) {
    ASSERT_EQ(test::connect_qp(a, qa, cb.gids[0], qb->qpn(), co.psn_a, co.psn_b, co), 0);
    ASSERT_EQ(test::connect_qp(b, qb, ca.gids[0], qa->qpn(), co.psn_b, co.psn_a, co), 0);
  }

  auto write = [&](Qp* q, uint64_t wr_id, uint32_t off, uint32_t len) {
    Sge s{reinterpret_cast<uint64_t>(ma.data() + off), len, ka};
    SendWr w{.wr_id = wr_id,
             .sg_list = &s,
             .num_sge = 1,
             .opcode = WrOpcode::kRdmaWrite,
             .send_flags = kSendSignaled};
    w.remote_addr = reinterpret_cast<uint64_t>(mb.data() + off);
    w.rkey = kb;
    return q->post_send(w);
  };
  ASSERT_EQ(write(a1, 1, 0, 1 << 20), 0);
  for (int i = 0; i < 100; ++i) a.poll();  // B does not poll: A's frames hold its mbufs
  ASSERT_GT(a.counters().tx_no_buffer, 0u) << "the pool did not run dry";
  ASSERT_EQ(write(a2, 2, 1 << 20, 64), 0);
  for (int i = 0; i < 100; ++i) a.poll();  // QP 2 finds no buffer either
  std::vector<uint64_t> done;
  for (int i = 0; i < 200000 && done.size() < 2; ++i) {
    a.poll();
    b.poll();
    Cqe c[8];
    const int n = cqa->poll(c, 8);
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(c[k].status, WcStatus::kSuccess);
      done.push_back(c[k].wr_id);
    }
  }
  std::sort(done.begin(), done.end());
  EXPECT_EQ(done, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(std::memcmp(ma.data(), mb.data(), (1 << 20) + 64), 0);
  for (Qp* q : {a1, a2}) EXPECT_EQ(a.destroy_qp(q), 0);
  for (Qp* q : {b1, b2}) EXPECT_EQ(b.destroy_qp(q), 0);
  // Every frame handed back: the pair's destructor checks its pools.
  while (a.poll() || b.poll()) {
  }
}

}  // namespace
}  // namespace roce::dpdk
