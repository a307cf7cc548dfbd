// Every operation x data type x reduction, in place and out of place, several roots, over
// N ranks as threads of one process (ranks.h); results compared bit for bit with coll_data.h's
// reference.
#include <gtest/gtest.h>

#include <numeric>

#include "coll_data.h"
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

std::string what(const char* op, size_t count, DataType t, ReduceOp rop, bool in_place,
                 int root = -1) {
  std::string s = std::string(op) + " count " + std::to_string(count) + " " + std::string(name(t)) +
                  " " + std::string(name(rop)) + (in_place ? " in place" : " out of place");
  if (root >= 0) s += " root " + std::to_string(root);
  return s;
}

void check_all_reduce(Communicator& c, size_t count, DataType t, ReduceOp op, bool in_place) {
  const size_t es = size_of(t);
  auto in = make_input(c.rank(), count, t, op);
  std::vector<uint8_t> out(count * es, 0xee);
  uint8_t* dst = in_place ? in.data() : out.data();
  c.all_reduce(in.data(), dst, count, t, op);
  EXPECT_TRUE(same_bytes(dst, reference(c.size(), count, t, op).data(), count * es, es))
      << what("all_reduce", count, t, op, in_place) << " rank " << c.rank();
}

void check_reduce_scatter(Communicator& c, size_t count, DataType t, ReduceOp op, bool in_place) {
  const size_t es = size_of(t), n = c.size();
  auto in = make_input(c.rank(), count * n, t, op);
  std::vector<uint8_t> out(count * es, 0xee);
  uint8_t* dst = in_place ? in.data() + c.rank() * count * es : out.data();
  c.reduce_scatter(in.data(), dst, count, t, op);
  const auto want = reference(c.size(), count, t, op, c.rank() * count);
  EXPECT_TRUE(same_bytes(dst, want.data(), count * es, es))
      << what("reduce_scatter", count, t, op, in_place) << " rank " << c.rank();
}

// Rank r's block of an all_gather / broadcast: its own input (ReduceOp::kSum's values).
std::vector<uint8_t> block_of(int r, size_t count, DataType t) {
  return make_input(r, count, t, ReduceOp::kSum);
}

void check_all_gather(Communicator& c, size_t count, DataType t, bool in_place) {
  const size_t es = size_of(t), n = c.size();
  std::vector<uint8_t> out(count * es * n, 0xee);
  auto mine = block_of(c.rank(), count, t);
  const uint8_t* src = mine.data();
  if (in_place) {
    std::copy(mine.begin(), mine.end(), out.begin() + c.rank() * count * es);
    src = out.data() + c.rank() * count * es;
  }
  c.all_gather(src, out.data(), count, t);
  for (int r = 0; r < c.size(); ++r) {
    EXPECT_TRUE(
        same_bytes(out.data() + r * count * es, block_of(r, count, t).data(), count * es, es))
        << what("all_gather", count, t, ReduceOp::kSum, in_place) << " block " << r;
  }
}

void check_broadcast(Communicator& c, size_t count, DataType t, bool in_place, int root) {
  const size_t es = size_of(t);
  auto in = block_of(root, count, t);
  std::vector<uint8_t> out(count * es, 0xee);
  if (in_place && c.rank() == root) out = in;
  c.broadcast(c.rank() == root ? (in_place ? out.data() : in.data()) : nullptr, out.data(), count,
              t, root);
  EXPECT_TRUE(same_bytes(out.data(), in.data(), count * es, es))
      << what("broadcast", count, t, ReduceOp::kSum, in_place, root) << " rank " << c.rank();
}

void check_reduce(Communicator& c, size_t count, DataType t, ReduceOp op, bool in_place, int root) {
  const size_t es = size_of(t);
  auto in = make_input(c.rank(), count, t, op);
  std::vector<uint8_t> out(count * es, 0xee);
  uint8_t* dst = in_place ? in.data() : out.data();
  c.reduce(in.data(), dst, count, t, op, root);
  if (c.rank() == root) {
    EXPECT_TRUE(same_bytes(dst, reference(c.size(), count, t, op).data(), count * es, es))
        << what("reduce", count, t, op, in_place, root);
  }
}

// Block q of rank r's input: rank r's values for destination q.
std::vector<uint8_t> a2a_block(int from, int to, size_t count, DataType t) {
  return make_input(from * 31 + to, count, t, ReduceOp::kSum);
}

void check_all_to_all(Communicator& c, size_t count, DataType t, bool in_place) {
  const size_t es = size_of(t), n = c.size(), b = count * es;
  std::vector<uint8_t> in(b * n), out(b * n, 0xee);
  for (size_t q = 0; q < n; ++q) {
    auto blk = a2a_block(c.rank(), int(q), count, t);
    std::copy(blk.begin(), blk.end(), in.begin() + q * b);
  }
  uint8_t* dst = in_place ? in.data() : out.data();
  c.all_to_all(in.data(), dst, count, t);
  for (size_t q = 0; q < n; ++q) {
    EXPECT_TRUE(same_bytes(dst + q * b, a2a_block(int(q), c.rank(), count, t).data(), b, es))
        << what("all_to_all", count, t, ReduceOp::kSum, in_place) << " from " << q;
  }
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduceEveryTypeAndOp) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (size_t n : kCounts)
          for (bool ip : {false, true}) check_all_reduce(c, n, t, op, ip);
  });
}

TEST_P(Collectives, ReduceScatterEveryTypeAndOp) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (size_t n : kCounts)
          for (bool ip : {false, true}) check_reduce_scatter(c, n, t, op, ip);
  });
}

TEST_P(Collectives, ReduceEveryTypeOpAndRoot) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (int root : {0, c.size() - 1, c.size() / 2})
      for (DataType t : kTypes)
        for (ReduceOp op : kOps)
          for (size_t n : {size_t{0}, size_t{7}, size_t{1023}})
            for (bool ip : {false, true}) check_reduce(c, n, t, op, ip, root);
  });
}

TEST_P(Collectives, GatherBroadcastAndAllToAllEveryType) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (DataType t : kTypes) {
      for (size_t n : kCounts) {
        for (bool ip : {false, true}) {
          check_all_gather(c, n, t, ip);
          check_all_to_all(c, n, t, ip);
          for (int root : {0, c.size() - 1}) check_broadcast(c, n, t, ip, root);
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
      check_all_reduce(c, n, DataType::kFloat32, ReduceOp::kSum, ip);
      check_all_reduce(c, n, DataType::kBfloat16, ReduceOp::kMax, ip);
      check_all_reduce(c, n, DataType::kInt64, ReduceOp::kAvg, ip);
      check_reduce_scatter(c, n / c.size() + 1, DataType::kFloat16, ReduceOp::kSum, ip);
      check_all_gather(c, n / c.size() + 1, DataType::kInt32, ip);
      check_broadcast(c, n, DataType::kFloat64, ip, c.size() - 1);
      check_reduce(c, n, DataType::kFloat32, ReduceOp::kProd, ip, c.size() / 2);
      check_all_to_all(c, n / c.size() + 1, DataType::kUint8, ip);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return std::to_string(info.param); });

}  // namespace
}  // namespace roce::coll::test
