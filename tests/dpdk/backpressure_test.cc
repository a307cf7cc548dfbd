// A slow receiver on a lossless link: one device's engine is driven inline by this test, two
// polls every 5 ms, while the other (its own engine thread) keeps 64 KiB RDMA WRITEs going to it
// and it keeps 256 KiB RDMA READs from the other outstanding, on two QP pairs at path MTU 1024.
// Nothing is lost on such a link, so nothing may be retransmitted: no local ACK timeout, no NAK, no
// gap.
//
// - net_memif with 64-slot rings and the sender's port budget off (inflight=0): the sender's
//   window (256 PSNs) overfills the ring, its transmit bursts are refused (tx_backpressure),
//   and the frames wait in the engine's queue in order.
// - net_af_packet (a 512-frame kernel ring that drops what does not fit): READ responses and the
//   other side's WRITEs share the slow side's ring. The port's budget is half the ring on each
//   side (PacketIo::rx_ring_frames), so both together fit: with 512 PSNs each the ring
//   overflowed (the kernel's drops, then gaps and timeouts).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "device_pair.h"
#include "dpdk/device.h"

namespace {
using namespace roce;
using roce::dpdk::Device;
using namespace roce::test;
using namespace std::chrono_literals;

constexpr uint32_t kWrite = 64 << 10;
constexpr uint32_t kRead = 256 << 10;

int connect_pair(Side& s, const Side& peer) {
  return s.d->runner().run([&] {
    const ConnectParams p{
        .access = kAccessRemoteWrite | kAccessRemoteRead,
        .ah = {.dgid = peer.d->gids()[1], .sgid_index = 1},
        .mtu = Mtu::k1024,
        .dest_qpn = peer.qp->qpn(),
        .rq_psn = 0x100,
        .max_dest_rd_atomic = 4,
        .sq_psn = 0x100,
        .timeout = 18,  // 1.07 s: a loaded machine's scheduling is not what this test is about
        .retry_cnt = 7,
        .max_rd_atomic = 4,
    };
    return roce::connect_qp(s.d->engine(), s.qp, p);
  });
}

bool post(Side& s, const Side& peer, WrOpcode op, uint32_t len, uint64_t local, uint64_t remote) {
  Sge sge{s.addr(local), len, s.key};
  SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = kSendSignaled;
  wr.remote_addr = const_cast<Side&>(peer).addr(remote);
  wr.rkey = peer.key;
  return s.qp->post_send(wr) == 0;
}

// Drains a CQ; false on any failed completion.
bool reap(Side& s, int* outstanding, uint64_t* done) {
  Cqe c[32];
  const int n = s.cq->poll(c, 32);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(c[i].status, WcStatus::kSuccess) << "qp 0x" << std::hex << c[i].qp_num;
    if (c[i].status != WcStatus::kSuccess) return false;
  }
  *outstanding -= n;
  *done += static_cast<uint64_t>(n);
  return true;
}

// On each of two QP pairs `fast` (threaded) WRITEs to `slow` (inline) and `slow` READs from
// `fast` for `run`, `slow` polled twice every 5 ms; then everything drains. Two pairs: one QP's
// window (256 PSNs) is half a 512-frame ring, two QPs' windows each way are twice the ring.
// Checks that nothing was lost.
void slow_receiver(Device& fast_dev, Device& slow_dev, std::chrono::milliseconds run) {
  constexpr int kPairs = 2;
  Side fast[kPairs] = {{&fast_dev}, {&fast_dev}}, slow[kPairs] = {{&slow_dev}, {&slow_dev}};
  for (int p = 0; p < kPairs; ++p) {
    ASSERT_TRUE(setup_side(fast[p], 4 << 20));
    ASSERT_TRUE(setup_side(slow[p], 4 << 20));
    ASSERT_EQ(connect_pair(fast[p], slow[p]), 0);
    ASSERT_EQ(connect_pair(slow[p], fast[p]), 0);
  }
  int wout[kPairs] = {}, rout[kPairs] = {};
  uint64_t writes = 0, reads = 0;
  const auto end = std::chrono::steady_clock::now() + run;
  const auto drain_end = end + 20s;
  for (auto now = std::chrono::steady_clock::now(); now < drain_end;
       now = std::chrono::steady_clock::now()) {
    const bool posting = now < end;
    int out = 0;
    for (int p = 0; p < kPairs; ++p) {
      while (posting && wout[p] < 8 &&
             post(fast[p], slow[p], WrOpcode::kRdmaWrite, kWrite, 0, 1 << 20)) {
        ++wout[p];
      }
      while (posting && rout[p] < 4 &&
             post(slow[p], fast[p], WrOpcode::kRdmaRead, kRead, 2 << 20, 0)) {
        ++rout[p];
      }
    }
    for (int i = 0; i < 2; ++i) slow_dev.runner().poll();
    for (int p = 0; p < kPairs; ++p) {
      ASSERT_TRUE(reap(fast[p], &wout[p], &writes));
      ASSERT_TRUE(reap(slow[p], &rout[p], &reads));
      out += wout[p] + rout[p];
    }
    if (!posting && out == 0) break;
    if (posting) std::this_thread::sleep_for(5ms);
  }
  for (int p = 0; p < kPairs; ++p) {
    EXPECT_EQ(wout[p] + rout[p], 0) << "work still outstanding 20 s after the run";
  }
  EXPECT_GT(writes, 8u);
  EXPECT_GT(reads, 4u);
  for (Side* s : {&fast[0], &fast[1], &slow[0], &slow[1]}) {
    const QpCounters& c = s->qp->counters_;
    SCOPED_TRACE(s->d == &fast_dev ? "fast side" : "slow side");
    EXPECT_EQ(c.local_ack_timeouts, 0u);
    EXPECT_EQ(c.seq_naks_sent, 0u);
    EXPECT_EQ(c.seq_naks_received, 0u);
    EXPECT_EQ(c.out_of_sequence, 0u);
    EXPECT_EQ(c.retransmitted_packets, 0u);
    EXPECT_EQ(c.retransmit_events, 0u);
  }
  std::printf(
      "WRITEs %llu, READs %llu; fast side: tx_backpressure %llu; slow side: longest "
      "poll gap %llu us\n",
      static_cast<unsigned long long>(writes), static_cast<unsigned long long>(reads),
      static_cast<unsigned long long>(fast_dev.engine().counters().tx_backpressure),
      static_cast<unsigned long long>(slow_dev.engine().counters().longest_poll_gap_us));
}

// The kernel's drops of an af_packet port ("af_packet ring full N" in its counters).
uint64_t ring_drops(Device& d) {
  std::smatch m;
  const std::string text = d.counters_text();
  return std::regex_search(text, m, std::regex("ring full ([0-9]+)")) ? std::stoull(m[1]) : 0;
}

TEST(Backpressure, MemifRingFullOfASlowReceiverCostsNoRetransmission) {
  const std::string sock = ::testing::TempDir() + "roce-bp-" + std::to_string(getpid());
  std::remove(sock.c_str());
  std::string err;
  auto config = [&](int i, bool slow) {
    DeviceConfig c = memif_device(i, sock, 31, ",rsize=6");
    c.inline_mode = slow;
    c.inflight = slow ? c.inflight : 0;  // the sender's window alone overfills the 64 slots
    return c;
  };
  std::unique_ptr<Device> fast = Device::open(config(0, false), &err);
  ASSERT_TRUE(fast) << err;
  std::unique_ptr<Device> slow = Device::open(config(1, true), &err);
  ASSERT_TRUE(slow) << err;
  ASSERT_TRUE(slow->wait_link_up(10s));
  ASSERT_TRUE(fast->wait_link_up(10s));
  slow_receiver(*fast, *slow, 1500ms);
  EXPECT_GT(fast->engine().counters().tx_backpressure, 0u) << "the ring never filled";
  // Engines stop before either port does (DeviceLink.MemifWaitLinkUp..., the same order).
  fast->runner().stop();
  slow->runner().stop();
  slow.reset();
  fast.reset();
  std::remove(sock.c_str());
}

TEST(Backpressure, AfPacketReadsAtMtu1024IntoASlowReceiverOverrunNothing) {
  const std::string skip = private_veth_pair();
  if (!skip.empty()) GTEST_SKIP() << skip;
  std::string err;
  DeviceConfig slow_cfg = veth_device(1);
  slow_cfg.inline_mode = true;
  std::unique_ptr<Device> fast = Device::open(veth_device(0), &err);
  ASSERT_TRUE(fast) << err;
  std::unique_ptr<Device> slow = Device::open(slow_cfg, &err);
  ASSERT_TRUE(slow) << err;
  slow_receiver(*fast, *slow, 1500ms);
  EXPECT_EQ(ring_drops(*slow), 0u);
  EXPECT_EQ(ring_drops(*fast), 0u);
  fast.reset();
  slow.reset();
}

}  // namespace
