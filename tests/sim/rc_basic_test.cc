// Two engines over a clean simulated wire: each operation works end to end.
#include <gtest/gtest.h>

#include <cstring>

#include "../support/sim_host.h"
#include "stack/core/counters_format.h"

namespace {
using namespace roce;
using namespace roce::test;

class RcBasic : public ::testing::Test {
 protected:
  RcBasic() : net_(42), a_(net_, 1), b_(net_, 2) {
    add_engines(net_, {&a_, &b_});
    qa_ = a_.create_rc();
    qb_ = b_.create_rc();
  }
  void connect(const ConnectOptions& o = {}) {
    std::string err;
    ASSERT_TRUE(connect_rc(a_, qa_, b_, qb_, o, &err)) << err;
  }
  // Runs until `n` completions arrived on host h's CQ (collected into out).
  bool wait(SimHost& h, size_t n, std::vector<Cqe>& out, uint64_t ns = 1'000'000'000) {
    return net_.run_until(
        [&] {
          h.poll(out);
          return out.size() >= n;
        },
        net_.now() + ns);
  }
  sim::SimNetwork net_;
  SimHost a_, b_;
  Qp* qa_;
  Qp* qb_;
};

TEST_F(RcBasic, SendOnly) {
  connect();
  std::memcpy(a_.mem(), "hello, rdma", 12);
  Sge rs{b_.addr(100), 64, b_.key()};
  ASSERT_EQ(qb_->post_recv({.wr_id = 7, .sg_list = &rs, .num_sge = 1}), 0);
  Sge s{a_.addr(), 12, a_.key()};
  ASSERT_EQ(qa_->post_send({.wr_id = 9,
                            .sg_list = &s,
                            .num_sge = 1,
                            .opcode = WrOpcode::kSend,
                            .send_flags = kSendSignaled}),
            0);
  std::vector<Cqe> ca, cb;
  ASSERT_TRUE(wait(b_, 1, cb));
  ASSERT_TRUE(wait(a_, 1, ca));
  EXPECT_EQ(cb[0].status, WcStatus::kSuccess);
  EXPECT_EQ(cb[0].wr_id, 7u);
  EXPECT_EQ(cb[0].byte_len, 12u);
  EXPECT_EQ(cb[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(std::memcmp(b_.mem() + 100, "hello, rdma", 12), 0);
  EXPECT_EQ(ca[0].status, WcStatus::kSuccess);
  EXPECT_EQ(ca[0].wr_id, 9u);
}

// A destroyed QP's counters stay in the engine's sum, so a program that closes its QPs before
// the device's counters are written still shows what they did on the wire.
TEST_F(RcBasic, ADestroyedQpsCountersAreKeptSummed) {
  connect();
  Sge s{a_.addr(), 9000, a_.key()};
  ASSERT_EQ(qa_->post_send({.wr_id = 1,
                            .sg_list = &s,
                            .num_sge = 1,
                            .opcode = WrOpcode::kRdmaWrite,
                            .send_flags = kSendSignaled,
                            .remote_addr = b_.addr(),
                            .rkey = b_.key()}),
            0);
  std::vector<Cqe> ca;
  ASSERT_TRUE(wait(a_, 1, ca));
  const QpCounters before = qa_->counters_;
  ASSERT_GT(before.tx_packets, 1u);
  EXPECT_EQ(format_destroyed_qp_counters(a_.engine()), "");
  ASSERT_EQ(a_.engine().destroy_qp(qa_), 0);
  EXPECT_EQ(a_.engine().destroyed_qps(), 1u);
  EXPECT_EQ(a_.engine().destroyed_qp_counters().tx_packets, before.tx_packets);
  EXPECT_EQ(a_.engine().destroyed_qp_counters().tx_bytes, before.tx_bytes);
  const std::string text = format_engine_counters(a_.engine());
  EXPECT_NE(text.find("destroyed qps (1, summed):\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  tx_packets"), std::string::npos) << text;
}

TEST_F(RcBasic, MultiPacketWriteReadAtomic) {
  connect();
  for (uint32_t i = 0; i < 100000; ++i) a_.mem()[i] = static_cast<uint8_t>(i * 13);
  Sge s{a_.addr(), 100000, a_.key()};
  ASSERT_EQ(qa_->post_send({.wr_id = 1,
                            .sg_list = &s,
                            .num_sge = 1,
                            .opcode = WrOpcode::kRdmaWrite,
                            .send_flags = kSendSignaled,
                            .remote_addr = b_.addr(4096),
                            .rkey = b_.key()}),
            0);
  std::vector<Cqe> ca;
  ASSERT_TRUE(wait(a_, 1, ca));
  ASSERT_EQ(ca[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(b_.mem() + 4096, a_.mem(), 100000), 0);

  // Read it back into another place.
  Sge r{a_.addr(200000), 100000, a_.key()};
  ASSERT_EQ(qa_->post_send({.wr_id = 2,
                            .sg_list = &r,
                            .num_sge = 1,
                            .opcode = WrOpcode::kRdmaRead,
                            .send_flags = kSendSignaled,
                            .remote_addr = b_.addr(4096),
                            .rkey = b_.key()}),
            0);
  ca.clear();
  ASSERT_TRUE(wait(a_, 1, ca));
  ASSERT_EQ(ca[0].status, WcStatus::kSuccess);
  EXPECT_EQ(ca[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(std::memcmp(a_.mem() + 200000, a_.mem(), 100000), 0);

  // Fetch-and-add then compare-and-swap on a remote counter.
  uint64_t* counter = reinterpret_cast<uint64_t*>(b_.mem() + 8);
  *counter = 40;
  Sge at{a_.addr(300000), 8, a_.key()};
  ASSERT_EQ(qa_->post_send({.wr_id = 3,
                            .sg_list = &at,
                            .num_sge = 1,
                            .opcode = WrOpcode::kAtomicFetchAndAdd,
                            .send_flags = kSendSignaled,
                            .remote_addr = b_.addr(8),
                            .rkey = b_.key(),
                            .compare_add = 2}),
            0);
  ca.clear();
  ASSERT_TRUE(wait(a_, 1, ca));
  ASSERT_EQ(ca[0].status, WcStatus::kSuccess);
  EXPECT_EQ(*counter, 42u);
  uint64_t orig;
  std::memcpy(&orig, a_.mem() + 300000, 8);
  EXPECT_EQ(orig, 40u);
  ASSERT_EQ(qa_->post_send({.wr_id = 4,
                            .sg_list = &at,
                            .num_sge = 1,
                            .opcode = WrOpcode::kAtomicCmpAndSwp,
                            .send_flags = kSendSignaled,
                            .remote_addr = b_.addr(8),
                            .rkey = b_.key(),
                            .compare_add = 42,
                            .swap = 7}),
            0);
  ca.clear();
  ASSERT_TRUE(wait(a_, 1, ca));
  ASSERT_EQ(ca[0].status, WcStatus::kSuccess);
  EXPECT_EQ(*counter, 7u);
}
// Runs the network until host h's CQ has given n completions (into out) or a virtual second
// passed.
bool wait_completions(sim::SimNetwork& net, SimHost& h, size_t n, std::vector<Cqe>& out) {
  return net.run_until(
      [&] {
        h.poll(out);
        return out.size() >= n;
      },
      net.now() + 1'000'000'000);
}

// Loopback: two RC QPs of one port, connected to each other through the port's own GID, as a
// program connects two QPs of one device (rxe loops such packets back in rxe_loopback; a NIC
// does it inside). WRITE, READ, SEND and an atomic work, in both GID families and with a
// window's worth of frames in flight, and no frame reaches the port. They used to wait for an
// ARP / ND answer for the port's own address, which never came.
TEST(Loopback, TwoQpsOfOnePortTalkWithoutThePort) {
  for (const int gid_index : {1, 0}) {
    SCOPED_TRACE(gid_index == 1 ? "IPv4" : "IPv6");
    sim::SimNetwork net(7);
    HostOptions ho;
    ho.mem_bytes = 16u << 20;
    SimHost h(net, 1, ho);
    add_engines(net, {&h});
    Qp* qa = h.create_rc();
    Qp* qb = h.create_rc();
    ConnectOptions o;
    o.gid_index = gid_index;
    o.mtu = Mtu::k4096;
    std::string err;
    ASSERT_TRUE(connect_rc(h, qa, h, qb, o, &err)) << err;
    const uint32_t n = 3 << 20;  // 768 frames: more than loop_ and the window hold at once
    for (uint32_t i = 0; i < n; ++i) h.mem()[i] = static_cast<uint8_t>(i * 7 + 3);
    Sge s{h.addr(), n, h.key()};
    ASSERT_EQ(qa->post_send({.wr_id = 1,
                             .sg_list = &s,
                             .num_sge = 1,
                             .opcode = WrOpcode::kRdmaWrite,
                             .send_flags = kSendSignaled,
                             .remote_addr = h.addr(n),
                             .rkey = h.key()}),
              0);
    Sge rs{h.addr(3 * n), 4096, h.key()};
    ASSERT_EQ(qa->post_recv({.wr_id = 2, .sg_list = &rs, .num_sge = 1}), 0);
    Sge ss{h.addr(100), 4096, h.key()};
    ASSERT_EQ(qb->post_send({.wr_id = 3,
                             .sg_list = &ss,
                             .num_sge = 1,
                             .opcode = WrOpcode::kSend,
                             .send_flags = kSendSignaled}),
              0);
    Sge r{h.addr(2 * n), n, h.key()};
    ASSERT_EQ(qb->post_send({.wr_id = 4,
                             .sg_list = &r,
                             .num_sge = 1,
                             .opcode = WrOpcode::kRdmaRead,
                             .send_flags = kSendSignaled,
                             .remote_addr = h.addr(n),
                             .rkey = h.key()}),
              0);
    uint64_t* counter = reinterpret_cast<uint64_t*>(h.mem() + 4 * n);
    *counter = 40;
    Sge at{h.addr(4 * n + 64), 8, h.key()};
    ASSERT_EQ(qb->post_send({.wr_id = 5,
                             .sg_list = &at,
                             .num_sge = 1,
                             .opcode = WrOpcode::kAtomicFetchAndAdd,
                             .send_flags = kSendSignaled,
                             .remote_addr = h.addr(4 * n),
                             .rkey = h.key(),
                             .compare_add = 2}),
              0);
    std::vector<Cqe> c;
    ASSERT_TRUE(wait_completions(net, h, 5, c)) << c.size() << " completions";
    for (const Cqe& e : c) EXPECT_EQ(e.status, WcStatus::kSuccess) << "wr " << e.wr_id;
    EXPECT_EQ(std::memcmp(h.mem() + n, h.mem(), n), 0) << "WRITE";
    EXPECT_EQ(std::memcmp(h.mem() + 2 * n, h.mem(), n), 0) << "READ";
    EXPECT_EQ(std::memcmp(h.mem() + 3 * n, h.mem() + 100, 4096), 0) << "SEND";
    EXPECT_EQ(*counter, 42u);
    uint64_t orig = 0;
    std::memcpy(&orig, h.mem() + 4 * n + 64, 8);
    EXPECT_EQ(orig, 40u);
    const EngineCounters& ec = h.engine().counters();
    EXPECT_GE(ec.loopback_frames, 2u * (n / 4096));
    EXPECT_EQ(ec.tx_frames, ec.loopback_frames) << "a frame went to the port";
    EXPECT_EQ(ec.rx_frames, ec.loopback_frames);
    EXPECT_EQ(qa->counters_.retransmitted_packets + qb->counters_.retransmitted_packets, 0u);
  }
}
// Forty loopback pairs writing 64 KiB (16 frames, a requester's turn) each at once put more
// frames in one poll than the loopback ring holds (512): the rest wait in the transmit queue,
// and nothing is lost or retransmitted.
TEST(Loopback, AFullLoopbackRingHoldsFramesBack) {
  sim::SimNetwork net(9);
  HostOptions ho;
  ho.mem_bytes = 8u << 20;
  ho.port_inflight_psns = 0;  // no port budget: every requester sends its whole window
  SimHost h(net, 1, ho);
  add_engines(net, {&h});
  constexpr uint32_t kPairs = 40;
  constexpr uint32_t kLen = 64u << 10;
  for (uint32_t i = 0; i < kLen; ++i) h.mem()[i] = static_cast<uint8_t>(i * 11 + 5);
  std::vector<Qp*> qps;
  for (uint32_t p = 0; p < kPairs; ++p) {
    Qp* a = h.create_rc();
    Qp* b = h.create_rc();
    ConnectOptions o;
    o.mtu = Mtu::k4096;
    std::string err;
    ASSERT_TRUE(connect_rc(h, a, h, b, o, &err)) << err;
    qps.push_back(a);
    qps.push_back(b);
  }
  Sge s{h.addr(), kLen, h.key()};
  for (uint32_t p = 0; p < kPairs; ++p) {
    ASSERT_EQ(qps[2 * p]->post_send({.wr_id = p,
                                     .sg_list = &s,
                                     .num_sge = 1,
                                     .opcode = WrOpcode::kRdmaWrite,
                                     .send_flags = kSendSignaled,
                                     .remote_addr = h.addr((p + 1) * kLen * 2),
                                     .rkey = h.key()}),
              0);
  }
  std::vector<Cqe> c;
  ASSERT_TRUE(wait_completions(net, h, kPairs, c));
  for (const Cqe& e : c) EXPECT_EQ(e.status, WcStatus::kSuccess) << "wr " << e.wr_id;
  for (uint32_t p = 0; p < kPairs; ++p) {
    EXPECT_EQ(std::memcmp(h.mem() + (p + 1) * kLen * 2, h.mem(), kLen), 0) << "pair " << p;
  }
  const EngineCounters& ec = h.engine().counters();
  EXPECT_GT(ec.loopback_waits, 0u) << "the ring never filled: the test shows nothing";
  EXPECT_EQ(ec.tx_frames, ec.loopback_frames);
  uint64_t retransmitted = 0;
  for (Qp* q : qps) retransmitted += q->counters_.retransmitted_packets;
  EXPECT_EQ(retransmitted, 0u);
}
// Frames looped back while the ring is being received (a NAK sent at once, as a request that
// puts its QP in the error state is answered) join the ring behind the frames being received
// and go at the next poll. 300 pairs whose WRITEs all carry a bad R_Key put 300 NAKs on the
// transmit queue during one delivery of 300 requests, more than the ring has room for beside
// them: every WRITE still completes with REM_ACCESS_ERR, none by running out of retries.
TEST(Loopback, FramesLoopedWhileTheRingIsReceivedAreNotLost) {
  sim::SimNetwork net(11);
  HostOptions ho;
  ho.mem_bytes = 1u << 20;
  SimHost h(net, 1, ho);
  add_engines(net, {&h});
  constexpr uint32_t kPairs = 300;
  std::vector<Qp*> requesters;
  for (uint32_t p = 0; p < kPairs; ++p) {
    Qp* a = h.create_rc(4, 1);
    Qp* b = h.create_rc(4, 1);
    ConnectOptions o;
    o.timeout = 8;  // ~1 ms: a lost NAK shows as RETRY_EXC_ERR within milliseconds
    o.retry_cnt = 1;
    std::string err;
    ASSERT_TRUE(connect_rc(h, a, h, b, o, &err)) << err;
    requesters.push_back(a);
  }
  Sge s{h.addr(), 64, h.key()};
  for (uint32_t p = 0; p < kPairs; ++p) {
    ASSERT_EQ(requesters[p]->post_send({.wr_id = p,
                                        .sg_list = &s,
                                        .num_sge = 1,
                                        .opcode = WrOpcode::kRdmaWrite,
                                        .send_flags = kSendSignaled,
                                        .remote_addr = h.addr(4096),
                                        .rkey = h.key() ^ 0x100}),
              0);
  }
  std::vector<Cqe> c;
  ASSERT_TRUE(wait_completions(net, h, kPairs, c));
  size_t access_errors = 0;
  for (const Cqe& e : c) access_errors += e.status == WcStatus::kRemAccessErr;
  EXPECT_EQ(access_errors, kPairs) << "a NAK was lost: " << to_string(c.front().status);
  EXPECT_GT(h.engine().counters().loopback_waits, 0u) << "the ring never filled";
}
}  // namespace
