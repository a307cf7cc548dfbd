// Two engines over a clean simulated wire: each operation works end to end.
#include <gtest/gtest.h>

#include <cstring>

#include "../support/sim_host.h"

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
}  // namespace
