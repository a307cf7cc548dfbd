// The engine's part of what rdma-core's test suite expects of a provider (the verbs shim's
// tests check the same at the verbs interface, tests/verbs/rdma_core_conformance_test.cc):
// re-registering an MR keeps its key (rxe, mlx5), a CQ drops a reset QP's completions (mlx5's
// __mlx5_cq_clean) and resizes with its pending completions in order (rxe).
#include <gtest/gtest.h>

#include "../support/sim_host.h"

namespace {
using namespace roce;
using namespace roce::test;

class EngineVerbs : public ::testing::Test {
 protected:
  EngineVerbs() : net_(7), a_(net_, 1) { add_engines(net_, {&a_}); }
  sim::SimNetwork net_;
  SimHost a_;
};

TEST_F(EngineVerbs, ReregKeepsTheKeyAndChangesPdAccessAndTranslation) {
  Engine& e = a_.engine();
  const uint32_t pd1 = e.alloc_pd(), pd2 = e.alloc_pd();
  static uint8_t buf[256];
  uint32_t key = 0;
  ASSERT_EQ(e.reg_mr(pd1, buf, 128, 0x7000, kAccessLocalWrite | kAccessRemoteWrite, &key), 0);
  uint8_t* host = nullptr;

  // Access only (the shim passes the region's own PD, address and IOVA).
  ASSERT_EQ(e.rereg_mr(key, pd1, buf, 128, 0x7000, kAccessLocalWrite), 0);
  EXPECT_EQ(e.mrs().check(key, pd1, 0x7000, 8, kAccessRemoteWrite, &host), MrCheck::kNoAccess);
  EXPECT_EQ(e.mrs().check(key, pd1, 0x7000, 8, kAccessLocalWrite, &host), MrCheck::kOk);
  EXPECT_EQ(host, buf);

  // PD: the old one is free to go, the new one is in use.
  ASSERT_EQ(e.rereg_mr(key, pd2, buf, 128, 0x7000, kAccessLocalWrite), 0);
  EXPECT_EQ(e.mrs().check(key, pd1, 0x7000, 8, kAccessLocalWrite, &host), MrCheck::kBadPd);
  EXPECT_EQ(e.mrs().check(key, pd2, 0x7000, 8, kAccessLocalWrite, &host), MrCheck::kOk);
  EXPECT_EQ(e.dealloc_pd(pd2), EBUSY);
  EXPECT_EQ(e.dealloc_pd(pd1), 0);

  // Translation: new host memory and IOVA behind the same key.
  ASSERT_EQ(e.rereg_mr(key, pd2, buf + 128, 64, 0x9000, kAccessLocalWrite), 0);
  EXPECT_EQ(e.mrs().check(key, pd2, 0x7000, 8, kAccessLocalWrite, &host), MrCheck::kOutOfBounds);
  EXPECT_EQ(e.mrs().check(key, pd2, 0x9000, 64, kAccessLocalWrite, &host), MrCheck::kOk);
  EXPECT_EQ(host, buf + 128);

  // Refused as a registration would be, and then nothing changed.
  EXPECT_EQ(e.rereg_mr(key, pd2, buf + 128, 64, 0x9000, kAccessRemoteWrite), EINVAL);
  EXPECT_EQ(e.rereg_mr(key, pd1, buf + 128, 64, 0x9000, kAccessLocalWrite), EINVAL);  // freed PD
  EXPECT_EQ(e.rereg_mr(key + 1, pd2, buf, 64, 0, kAccessLocalWrite), EINVAL);
  EXPECT_EQ(e.mrs().check(key, pd2, 0x9000, 64, kAccessLocalWrite, &host), MrCheck::kOk);
  EXPECT_EQ(e.dereg_mr(key), 0);
  EXPECT_EQ(e.dealloc_pd(pd2), 0);
}

Cqe cqe(uint32_t qpn, uint64_t wr_id) {
  Cqe c;
  c.qp_num = qpn;
  c.wr_id = wr_id;
  return c;
}

std::vector<uint64_t> drain(CompletionQueue& cq) {
  std::vector<uint64_t> ids;
  Cqe c;
  while (cq.poll(&c, 1) == 1) ids.push_back(c.wr_id);
  return ids;
}

TEST(CompletionQueueMaintenance, DiscardDropsOneQpsCompletionsAndKeepsTheOrder) {
  CompletionQueue cq;
  ASSERT_TRUE(cq.init(0, 8));
  // Wrap the ring first, so the kept completions straddle its end.
  for (uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(cq.push(cqe(1, 100 + i), false));
  ASSERT_EQ(drain(cq).size(), 6u);
  for (uint64_t i = 0; i < 7; ++i) ASSERT_TRUE(cq.push(cqe(i % 2 ? 5 : 9, i), false));
  EXPECT_EQ(cq.discard_qp(5), 3u);
  EXPECT_EQ(cq.discard_qp(42), 0u);
  EXPECT_EQ(cq.pending(), 4u);
  // The freed slots are usable again.
  for (uint64_t i = 7; i < 11; ++i) ASSERT_TRUE(cq.push(cqe(9, i), false));
  EXPECT_EQ(drain(cq), (std::vector<uint64_t>{0, 2, 4, 6, 7, 8, 9, 10}));
}

TEST(CompletionQueueMaintenance, ResizeGrowsAndShrinksAboveWhatIsPending) {
  CompletionQueue cq;
  ASSERT_TRUE(cq.init(0, 3));
  ASSERT_EQ(cq.resize(1), 0);
  EXPECT_EQ(cq.depth(), 1u);
  ASSERT_TRUE(cq.push(cqe(1, 1), false));
  EXPECT_FALSE(cq.push(cqe(1, 2), false));  // one slot now
  ASSERT_EQ(drain(cq).size(), 1u);
  ASSERT_EQ(cq.resize(7), 0);
  EXPECT_EQ(cq.depth(), 7u);
  for (uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(cq.push(cqe(1, i), false));
  // Fewer than are pending, nothing, or too many: EINVAL, unchanged.
  EXPECT_EQ(cq.resize(5), EINVAL);
  EXPECT_EQ(cq.resize(0), EINVAL);
  EXPECT_EQ(cq.resize(kMaxCqe + 1), EINVAL);
  EXPECT_EQ(cq.depth(), 7u);
  // Growing keeps them, oldest first, and makes room.
  ASSERT_EQ(cq.resize(100), 0);
  for (uint64_t i = 6; i < 100; ++i) ASSERT_TRUE(cq.push(cqe(1, i), false));
  const std::vector<uint64_t> got = drain(cq);
  ASSERT_EQ(got.size(), 100u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(got[i], i);
}

}  // namespace
