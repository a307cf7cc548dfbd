// Every operation x data type x reduction, in place and out of place, several roots, over
// N ranks as threads of one process (ranks.h); results compared bit for bit with coll_data.h's
// reference.
#include <gtest/gtest.h>

#include <numeric>

#include "coll_checks.h"
#include "ranks.h"

namespace roce::coll::test {
namespace {

constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                               DataType::kUint32,  DataType::kInt64,    DataType::kUint64,
                               DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32,
                               DataType::kFloat64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
constexpr size_t kCounts[] = {0, 1, 7, 1023};

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduceEveryTypeAndOp) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (size_t n : kCounts)
          for (bool ip : {false, true})
            EXPECT_EQ(check_all_reduce(c, n, t, op, ip), "") << "rank " << c.rank();
  });
}

TEST_P(Collectives, ReduceScatterEveryTypeAndOp) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (size_t n : kCounts)
          for (bool ip : {false, true})
            EXPECT_EQ(check_reduce_scatter(c, n, t, op, ip), "") << "rank " << c.rank();
  });
}

TEST_P(Collectives, ReduceEveryTypeOpAndRoot) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (int root : {0, c.size() - 1, c.size() / 2})
      for (DataType t : kTypes)
        for (ReduceOp op : kOps)
          for (size_t n : {size_t{0}, size_t{7}, size_t{1023}})
            for (bool ip : {false, true})
              EXPECT_EQ(check_reduce(c, n, t, op, ip, root), "") << "rank " << c.rank();
  });
}

TEST_P(Collectives, GatherBroadcastAndAllToAllEveryType) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (DataType t : kTypes) {
      for (size_t n : kCounts) {
        for (bool ip : {false, true}) {
          EXPECT_EQ(check_all_gather(c, n, t, ip), "") << "rank " << c.rank();
          EXPECT_EQ(check_all_to_all(c, n, t, ip), "") << "rank " << c.rank();
          for (int root : {0, c.size() - 1})
            EXPECT_EQ(check_broadcast(c, n, t, ip, root), "") << "rank " << c.rank();
        }
      }
    }
  });
}

// 1 MiB + 3 elements: many chunks, segments of unequal length, every operation.
TEST_P(Collectives, LargeCounts) {
  const size_t n = (1u << 20) + 3;
  run_ranks(GetParam(), [n](Communicator& c) {
    for (bool ip : {false, true}) {
      EXPECT_EQ(check_all_reduce(c, n, DataType::kFloat32, ReduceOp::kSum, ip), "")
          << "rank " << c.rank();
      EXPECT_EQ(check_all_reduce(c, n, DataType::kBfloat16, ReduceOp::kMax, ip), "")
          << "rank " << c.rank();
      EXPECT_EQ(check_all_reduce(c, n, DataType::kInt64, ReduceOp::kAvg, ip), "")
          << "rank " << c.rank();
      EXPECT_EQ(check_reduce_scatter(c, n / c.size() + 1, DataType::kFloat16, ReduceOp::kSum, ip),
                "")
          << "rank " << c.rank();
      EXPECT_EQ(check_all_gather(c, n / c.size() + 1, DataType::kInt32, ip), "")
          << "rank " << c.rank();
      EXPECT_EQ(check_broadcast(c, n, DataType::kFloat64, ip, c.size() - 1), "")
          << "rank " << c.rank();
      EXPECT_EQ(check_reduce(c, n, DataType::kFloat32, ReduceOp::kProd, ip, c.size() / 2), "")
          << "rank " << c.rank();
      EXPECT_EQ(check_all_to_all(c, n / c.size() + 1, DataType::kUint8, ip), "")
          << "rank " << c.rank();
    }
  });
}

// 1 MiB + 3 elements for every operation x type x reduction, in place and out.
TEST_P(Collectives, LargeCountsEveryTypeAndOp) {
#ifdef ROCE_COLL_SANITIZER_BUILD
  GTEST_SKIP() << "about 1 min here, many times that under ASan: the sanitizer build runs "
                  "LargeCounts (every operation at this size) and the main build this one";
#endif
  if (GetParam() > 8) GTEST_SKIP() << "every type at this size up to 8 ranks (LargeCounts: 16)";
  const size_t n = (1u << 20) + 3;
  run_ranks(GetParam(), [n](Communicator& c) {
    const size_t block = n / c.size() + 1;
    for (DataType t : kTypes) {
      for (bool ip : {false, true}) {
        for (ReduceOp op : kOps) {
          EXPECT_EQ(check_all_reduce(c, n, t, op, ip), "") << "rank " << c.rank();
          EXPECT_EQ(check_reduce_scatter(c, block, t, op, ip), "") << "rank " << c.rank();
          EXPECT_EQ(check_reduce(c, n, t, op, ip, c.size() - 1), "") << "rank " << c.rank();
        }
        EXPECT_EQ(check_all_gather(c, block, t, ip), "") << "rank " << c.rank();
        EXPECT_EQ(check_broadcast(c, n, t, ip, c.size() / 2), "") << "rank " << c.rank();
        EXPECT_EQ(check_all_to_all(c, block, t, ip), "") << "rank " << c.rank();
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 5, 8, 16),
                         [](const auto& info) { return std::to_string(info.param); });

}  // namespace
}  // namespace roce::coll::test
