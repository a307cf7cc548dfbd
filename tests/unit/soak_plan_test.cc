// roce-soak's plans and patterns (apps/soak/plan.h, pattern.h): both sides derive the same
// batches from the seed, a batch's ranges never share a byte, every operation and size range
// comes up, the atomics' arithmetic is the responder's, and a check finds the first wrong byte.
#include "apps/soak/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace roce::soak {
namespace {

bool same(const PlannedOp& a, const PlannedOp& b) {
  return a.op == b.op && a.size == b.size && a.offset == b.offset && a.recv_len == b.recv_len &&
         a.read_off == b.read_off && a.imm == b.imm && a.operand == b.operand &&
         a.cas_hits == b.cas_hits && a.inline_data == b.inline_data && a.key == b.key;
}

TEST(SoakPlan, IsAFunctionOfSeedQpAndBatch) {
  PlanParams p;
  Plan a, b, c;
  make_plan(p, 3, 17, &a);
  make_plan(p, 3, 17, &b);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) EXPECT_TRUE(same(a.ops[i], b.ops[i])) << i;
  make_plan(p, 3, 18, &c);
  EXPECT_FALSE(c.ops.size() == a.ops.size() && same(c.ops[0], a.ops[0]));
}

TEST(SoakPlan, RangesAreDisjointInsideTheAreaAndTheMarkerComesLast) {
  PlanParams p;
  uint64_t seen[kOps] = {};
  uint32_t smallest = UINT32_MAX, largest = 0;
  Plan plan;
  for (uint32_t q = 0; q < 4; ++q) {
    for (uint64_t batch = 0; batch < 500; ++batch) {
      make_plan(p, q, batch, &plan);
      ASSERT_FALSE(plan.ops.empty());
      ASSERT_LE(plan.ops.size(), p.max_ops);
      EXPECT_EQ(plan.ops.back().op, Op::kSendImm);
      uint64_t end = 0;
      for (const PlannedOp& o : plan.ops) {
        ++seen[static_cast<int>(o.op)];
        smallest = std::min(smallest, o.size);
        largest = std::max(largest, o.size);
        ASSERT_GE(o.size, 1u);
        ASSERT_LE(o.size, p.max_size);
        EXPECT_GE(o.offset, end) << "ranges overlap";
        end = o.offset + std::max(o.size, o.recv_len);
        EXPECT_LE(end, p.area);
        if (is_atomic(o.op)) {
          EXPECT_EQ(o.size, 8u);
          EXPECT_EQ(o.offset % 8, 0u);
        }
        if (o.op == Op::kSend || o.op == Op::kSendImm) {
          EXPECT_GE(o.recv_len, o.size);
        }
        if (o.op == Op::kRead) {
          EXPECT_LE(o.read_off + o.size, p.read_source);
        }
        if (o.inline_data) {
          EXPECT_LE(o.size, p.max_inline);
        }
      }
    }
  }
  for (int k = 0; k < kOps; ++k) EXPECT_GT(seen[k], 100u) << op_name(static_cast<Op>(k));
  EXPECT_EQ(smallest, 1u);
  EXPECT_GE(largest, p.max_size / 2);
}

TEST(SoakPlan, AtomicsFollowTheResponder) {
  Plan plan;
  PlannedOp add, hit, miss, send;
  add.op = Op::kFetchAdd;
  add.operand = 5;
  hit.op = Op::kCmpSwap;
  hit.cas_hits = true;
  hit.operand = 100;
  miss.op = Op::kCmpSwap;
  miss.cas_hits = false;
  miss.operand = 7;
  send.op = Op::kSendImm;
  plan.ops = {add, hit, add, miss, send};
  std::vector<uint64_t> olds;
  EXPECT_EQ(apply_atomics(plan, 10, &olds), 105u);
  EXPECT_EQ(olds[0], 10u);   // then 15
  EXPECT_EQ(olds[1], 15u);   // swapped: 100
  EXPECT_EQ(olds[2], 100u);  // then 105
  EXPECT_EQ(olds[3], 105u);  // compares with another value: stays
  EXPECT_NE(cas_compare(miss, 105), 105u);
  EXPECT_EQ(cas_compare(hit, 105), 105u);
}

TEST(SoakPattern, ChecksFindTheFirstWrongByte) {
  std::vector<uint8_t> buf(1000);
  fill_pattern(buf.data(), buf.size(), 42);
  EXPECT_EQ(check_pattern(buf.data(), buf.size(), 42), -1);
  EXPECT_NE(check_pattern(buf.data(), buf.size(), 43), -1);  // another stream
  buf[777] ^= 0x10;
  EXPECT_EQ(check_pattern(buf.data(), buf.size(), 42), 777);
  // A piece from position 13 is the same bytes as those of the whole stream there.
  std::vector<uint8_t> part(100);
  fill_pattern(part.data(), part.size(), 42, 13);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), buf.begin() + 13));
  EXPECT_EQ(check_pattern(part.data(), part.size(), 42, 13), -1);
}

TEST(SoakPattern, PoisonDiffersInEveryByte) {
  std::vector<uint8_t> want(333), poison(333);
  fill_pattern(want.data(), want.size(), 9, 5);
  fill_pattern(poison.data(), poison.size(), 9, 5, true);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NE(want[i], poison[i]) << i;
  EXPECT_EQ(check_pattern(poison.data(), poison.size(), 9, 5), 0);
  EXPECT_EQ(check_pattern(poison.data(), poison.size(), 9, 5, true), -1);
}

}  // namespace
}  // namespace roce::soak
