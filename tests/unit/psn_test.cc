#include <gtest/gtest.h>

#include "stack/wire/psn.h"

namespace {
using namespace roce::wire;

TEST(Psn, AddWrapsAt24Bits) {
  EXPECT_EQ(psn_add(0xFFFFFF, 1), 0u);
  EXPECT_EQ(psn_add(0xFFFFF0, 0x20), 0x10u);
  EXPECT_EQ(psn_add(5, -10), 0xFFFFFBu);
  EXPECT_EQ(psn_next(0xFFFFFF), 0u);
}

TEST(Psn, DiffIsSignedAcrossWraparound) {
  EXPECT_EQ(psn_diff(0, 0xFFFFFF), 1);
  EXPECT_EQ(psn_diff(0xFFFFFF, 0), -1);
  EXPECT_EQ(psn_diff(0x000010, 0xFFFFF0), 0x20);
  EXPECT_EQ(psn_diff(0x400000, 0), 0x400000);
  EXPECT_EQ(psn_diff(0, 0x400000), -0x400000);
  // The boundary: exactly 2^23 apart reads as negative in one direction only.
  EXPECT_EQ(psn_diff(0x800000, 0), -0x800000);
}

TEST(Psn, OrderingHoldsForEveryBaseWithinHalfTheSpace) {
  for (uint32_t base : {0u, 1u, 0x7FFFFFu, 0x800000u, 0xFFFFF0u, 0xFFFFFFu}) {
    for (int32_t d : {1, 2, 100, 0x10000, 0x7FFFFF}) {
      uint32_t ahead = psn_add(base, d);
      EXPECT_TRUE(psn_lt(base, ahead)) << base << " " << d;
      EXPECT_TRUE(psn_gt(ahead, base));
      EXPECT_TRUE(psn_le(base, base));
      EXPECT_TRUE(psn_ge(ahead, ahead));
      EXPECT_EQ(psn_diff(ahead, base), d);
    }
  }
}

// The strict comparisons are false for equal PSNs, and every comparison is false the wrong way
// round (a PSN equal to the expected one is not a duplicate, nor one just ahead a late one).
TEST(Psn, ComparisonsAreStrictWhereTheyShouldBe) {
  for (uint32_t base : {0u, 1u, 0x7FFFFFu, 0x800000u, 0xFFFFFFu}) {
    EXPECT_FALSE(psn_lt(base, base)) << base;
    EXPECT_FALSE(psn_gt(base, base)) << base;
    EXPECT_TRUE(psn_ge(base, base)) << base;
    for (int32_t d : {1, 0x7FFFFF}) {
      const uint32_t ahead = psn_add(base, d);
      EXPECT_FALSE(psn_lt(ahead, base)) << base << " " << d;
      EXPECT_FALSE(psn_le(ahead, base)) << base << " " << d;
      EXPECT_FALSE(psn_gt(base, ahead)) << base << " " << d;
      EXPECT_FALSE(psn_ge(base, ahead)) << base << " " << d;
      EXPECT_TRUE(psn_le(base, ahead)) << base << " " << d;
      EXPECT_TRUE(psn_ge(ahead, base)) << base << " " << d;
    }
  }
}
}  // namespace
