// Unit tests of the engine's building blocks: timer wheel, SPSC queue, CQ arming, doorbells, MR
// table, the address-space check behind memory registration, the capture writer.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>
#include <thread>
#include <vector>

#include "stack/core/counters_format.h"
#include "stack/core/mr.h"
#include "stack/core/queues.h"
#include "stack/core/types.h"
#include "stack/util/address_space.h"
#include "stack/util/doorbell.h"
#include "stack/util/pcap_writer.h"
#include "stack/util/rng.h"
#include "stack/util/spsc_queue.h"
#include "stack/util/timer_wheel.h"

namespace {
using namespace roce;

TEST(TimerWheel, FiresAtOrAfterDeadlineNeverBefore) {
  TimerWheel w(0);
  std::vector<TimerNode> nodes(200);
  Rng rng(3);
  std::vector<uint64_t> deadline(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    deadline[i] = 1000 + rng.below(20'000'000);  // up to 20 ms: several revolutions
    nodes[i].owner = static_cast<uint32_t>(i);
    w.arm(nodes[i], deadline[i]);
  }
  EXPECT_EQ(w.armed(), nodes.size());
  std::vector<uint64_t> fired_at(nodes.size(), 0);
  for (uint64_t now = 0; now <= 21'000'000; now += 777) {
    w.advance(now, [&](TimerNode& n) { fired_at[n.owner] = now; });
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_GE(fired_at[i], deadline[i]) << i;
    // Within one tick plus one advance step of the deadline.
    EXPECT_LE(fired_at[i], deadline[i] + (1u << TimerWheel::kTickShift) + 777) << i;
  }
  EXPECT_EQ(w.armed(), 0u);
}

TEST(TimerWheel, CancelRearmAndNextDeadline) {
  TimerWheel w(0);
  TimerNode a, b;
  w.arm(a, 50'000);
  w.arm(b, 10'000'000);
  EXPECT_EQ(w.next_deadline_ns() >> TimerWheel::kTickShift, (50'000 + 1023) >> 10);
  w.cancel(a);
  EXPECT_FALSE(a.armed);
  EXPECT_EQ(w.next_deadline_ns() >> TimerWheel::kTickShift, (10'000'000 + 1023) >> 10);
  w.arm(b, 30'000);  // re-arm earlier
  EXPECT_EQ(w.next_deadline_ns() >> TimerWheel::kTickShift, (30'000 + 1023) >> 10);
  int fired = 0;
  w.advance(10'000'000, [&](TimerNode&) { ++fired; });
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(w.next_deadline_ns(), UINT64_MAX);
}

TEST(TimerWheel, LongJumpFiresEverythingDueOnce) {
  TimerWheel w(0);
  std::vector<TimerNode> n(50);
  for (size_t i = 0; i < n.size(); ++i) w.arm(n[i], i * 1'000'000);
  int fired = 0;
  w.advance(10'000'000'000ull, [&](TimerNode&) { ++fired; });  // 10 s in one step
  EXPECT_EQ(fired, 50);
}

TEST(TimerWheel, CallbackMayRearmItself) {
  TimerWheel w(0);
  TimerNode t;
  w.arm(t, 5000);
  int fired = 0;
  for (uint64_t now = 0; now < 100'000; now += 1000) {
    w.advance(now, [&](TimerNode& n) {
      ++fired;
      w.arm(n, now + 10'000);
    });
  }
  EXPECT_GE(fired, 8);
  EXPECT_LE(fired, 10);
}

// A callback that re-arms or cancels another timer of the same slot (a QP's congestion-control
// timer re-arming its pacing timer) must leave the wheel consistent.
TEST(TimerWheel, CallbackMayTouchOtherTimersOfTheSameSlot) {
  TimerWheel w(0);
  TimerNode a, b, c;
  a.owner = 1;
  b.owner = 2;
  c.owner = 3;
  w.arm(a, 5000);
  w.arm(b, 5000);
  w.arm(c, 5000);
  std::vector<uint32_t> fired;
  w.advance(6000, [&](TimerNode& n) {
    fired.push_back(n.owner);
    if (n.owner == 3) {
      w.arm(b, 9000);  // b is still in the slot being processed
      w.cancel(a);
    }
  });
  // c fired first (last armed, head of the slot), moved b and cancelled a.
  EXPECT_EQ(fired, std::vector<uint32_t>{3});
  EXPECT_EQ(w.armed(), 1u);
  EXPECT_TRUE(b.armed);
  w.advance(10000, [&](TimerNode& n) { fired.push_back(n.owner); });
  EXPECT_EQ(fired, (std::vector<uint32_t>{3, 2}));
  EXPECT_EQ(w.armed(), 0u);
  EXPECT_EQ(w.next_deadline_ns(), UINT64_MAX);
}

// A deadline on a tick boundary fires at the advance() to exactly that time, not a tick later;
// one just after it, at the next tick.
TEST(TimerWheel, ADeadlineOnATickBoundaryFiresAtThatTime) {
  constexpr uint64_t kTick = uint64_t{1} << TimerWheel::kTickShift;
  TimerWheel w(0);
  TimerNode a, b;
  w.arm(a, 5 * kTick);
  w.arm(b, 5 * kTick + 1);
  std::vector<TimerNode*> fired;
  auto fire = [&](TimerNode& n) { fired.push_back(&n); };
  w.advance(5 * kTick - 1, fire);
  EXPECT_TRUE(fired.empty());
  w.advance(5 * kTick, fire);
  EXPECT_EQ(fired, std::vector<TimerNode*>{&a});
  w.advance(6 * kTick - 1, fire);
  EXPECT_EQ(fired.size(), 1u);
  w.advance(6 * kTick, fire);
  EXPECT_EQ(fired, (std::vector<TimerNode*>{&a, &b}));
}

// A deadline already passed (the current tick's, or older) fires at the next tick, not a
// revolution later.
TEST(TimerWheel, ADeadlineAlreadyPassedFiresAtTheNextTick) {
  constexpr uint64_t kTick = uint64_t{1} << TimerWheel::kTickShift;
  TimerWheel w(0);
  w.advance(10 * kTick + 500, [](TimerNode&) {});
  TimerNode a, b;
  w.arm(a, 10 * kTick);     // rounds up to the current tick
  w.arm(b, 3 * kTick + 7);  // long past
  EXPECT_EQ(w.next_deadline_ns(), 11 * kTick);
  int fired = 0;
  w.advance(11 * kTick, [&](TimerNode&) { ++fired; });
  EXPECT_EQ(fired, 2);
  EXPECT_EQ(w.armed(), 0u);
}

// A jump of more than a revolution fires a timer of every slot exactly once.
TEST(TimerWheel, AJumpPastARevolutionVisitsEverySlot) {
  constexpr uint64_t kTick = uint64_t{1} << TimerWheel::kTickShift;
  for (uint64_t jump :
       {TimerWheel::kSlots + 1, 2 * TimerWheel::kSlots, 3 * TimerWheel::kSlots + 17}) {
    TimerWheel w(0);
    std::vector<TimerNode> n(TimerWheel::kSlots);
    for (size_t i = 0; i < n.size(); ++i) {
      n[i].owner = static_cast<uint32_t>(i);
      w.arm(n[i], (i + 1) * kTick);  // ticks 1 .. kSlots: one per slot
    }
    std::vector<int> fired(n.size());
    w.advance(jump * kTick, [&](TimerNode& t) { ++fired[t.owner]; });
    EXPECT_EQ(std::count(fired.begin(), fired.end(), 1), static_cast<long>(n.size())) << jump;
    EXPECT_EQ(w.armed(), 0u);
  }
}

// next_deadline_ns() finds the earliest timer wherever it sits: armed after the last answer
// (the cached one), in a slot at the start of a bitmap word seen from the middle of the one
// before, or a whole revolution out (the slot of the current tick, also where that slot starts a
// word and the scan reaches it by skipping empty words).
TEST(TimerWheel, NextDeadlineFindsTheEarliestTimerWhereverItIs) {
  constexpr uint64_t kTick = uint64_t{1} << TimerWheel::kTickShift;
  TimerWheel w(0);
  TimerNode a, b;
  w.arm(a, 10'000'000);
  EXPECT_EQ(w.next_deadline_ns(), ((10'000'000 + kTick - 1) / kTick) * kTick);
  w.arm(b, 50 * kTick);  // earlier than the cached answer
  EXPECT_EQ(w.next_deadline_ns(), 50 * kTick);
  w.cancel(a);
  w.cancel(b);
  w.arm(a, TimerWheel::kSlots * kTick);  // one revolution out, seen from tick 0
  EXPECT_EQ(w.next_deadline_ns(), TimerWheel::kSlots * kTick);

  TimerWheel u(0);
  u.advance(10 * kTick, [](TimerNode&) {});
  TimerNode c;
  u.arm(c, 128 * kTick);  // slot 128: bit 0 of word 2
  EXPECT_EQ(u.next_deadline_ns(), 128 * kTick);
  u.arm(c, (10 + TimerWheel::kSlots) * kTick);  // one revolution out: the current tick's slot
  EXPECT_EQ(u.next_deadline_ns(), (10 + TimerWheel::kSlots) * kTick);
  int fired = 0;
  u.advance((10 + TimerWheel::kSlots) * kTick, [&](TimerNode&) { ++fired; });
  EXPECT_EQ(fired, 1);
}

TEST(SpscQueue, OrderAndCapacityAcrossThreads) {
  SpscQueue q;
  ASSERT_TRUE(q.init(100, sizeof(uint64_t)));
  EXPECT_EQ(q.capacity(), 128u);
  constexpr uint64_t kN = 1'000'000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN;) {
      if (q.free_slots() == 0) continue;
      const uint32_t p = q.prod_local();
      *q.at<uint64_t>(p) = i++;
      q.publish(p + 1);
    }
  });
  uint64_t expect = 0;
  while (expect < kN) {
    const uint32_t c = q.cons_local();
    if (q.prod_acquire() == c) continue;
    ASSERT_EQ(*q.at<uint64_t>(c), expect);
    ++expect;
    q.retire(c + 1);
  }
  producer.join();
}

// Slots are slot_bytes rounded up to 16 and never overlap, whatever the size; free_slots() counts
// what the producer may still fill; reset() and a second init() leave an empty queue.
TEST(SpscQueue, SlotsFreeSlotsResetAndReinit) {
  for (uint32_t bytes : {1u, 15u, 16u, 17u, 33u, 40u, 129u}) {
    SpscQueue q;
    ASSERT_TRUE(q.init(4, bytes));
    EXPECT_EQ(q.stride(), (bytes + 15) / 16 * 16) << bytes;
    for (uint32_t i = 0; i < q.capacity(); ++i) {
      std::memset(q.slot(i), static_cast<int>(i + 1), bytes);
    }
    for (uint32_t i = 0; i < q.capacity(); ++i) {
      for (uint32_t b = 0; b < bytes; ++b) ASSERT_EQ(q.slot(i)[b], i + 1) << bytes << " " << i;
    }
  }
  SpscQueue q;
  ASSERT_TRUE(q.init(3, 8));
  EXPECT_EQ(q.capacity(), 4u);
  EXPECT_EQ(q.free_slots(), 4u);
  q.publish(4);
  EXPECT_EQ(q.free_slots(), 0u);
  q.retire(1);
  EXPECT_EQ(q.free_slots(), 1u);
  q.reset();
  EXPECT_EQ(q.free_slots(), 4u);
  EXPECT_EQ(q.prod_acquire(), q.cons_local());
  q.publish(3);
  q.retire(2);
  ASSERT_TRUE(q.init(8, 8));
  EXPECT_EQ(q.capacity(), 8u);
  EXPECT_EQ(q.free_slots(), 8u);
  EXPECT_EQ(q.prod_local(), 0u);
  EXPECT_EQ(q.cons_local(), 0u);
}

// ibv_req_notify_cq(3): with solicited_only, a CQE is solicited if it completes a message with
// the Solicited Event bit, or if its status is not successful (IBA 11.4.2.2). The engine pushes
// flushes and errors with solicited = false: the CQ itself must count them.
TEST(CompletionQueue, SolicitedArmFiresOnSolicitedAndUnsuccessfulCompletions) {
  CompletionQueue cq;
  ASSERT_TRUE(cq.init(0, 16));
  int notified = 0;
  cq.set_notify([](void* n, CompletionQueue*) { ++*static_cast<int*>(n); }, &notified);
  Cqe ok;
  Cqe flushed;
  flushed.status = WcStatus::kWrFlushErr;
  cq.arm(true);
  ASSERT_TRUE(cq.push(ok, false));
  EXPECT_EQ(notified, 0);  // successful and unsolicited: the arm stays
  ASSERT_TRUE(cq.push(flushed, false));
  EXPECT_EQ(notified, 1);
  ASSERT_TRUE(cq.push(flushed, false));
  EXPECT_EQ(notified, 1);  // one event per arm
  cq.arm(true);
  ASSERT_TRUE(cq.push(ok, true));
  EXPECT_EQ(notified, 2);
  cq.arm(false);
  ASSERT_TRUE(cq.push(ok, false));
  EXPECT_EQ(notified, 3);
}

// The SRQ limit event comes once fewer than `limit` receives remain, not when exactly `limit` do
// (ibv_modify_srq(3): when the number drops below the limit), and once: the limit is disarmed.
TEST(SharedReceiveQueue, LimitEventWhenFewerThanTheLimitRemain) {
  SharedReceiveQueue srq;
  ASSERT_TRUE(srq.init(1, 1, 8, 1));
  Sge s{0x1000, 64, 1};
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(srq.post_recv({.wr_id = i, .sg_list = &s, .num_sge = 1}), 0);
  }
  srq.set_limit(3);
  std::vector<uint64_t> buf(recv_slot_bytes(1) / 8 + 1);
  auto* w = reinterpret_cast<RecvWqe*>(buf.data());
  ASSERT_TRUE(srq.take(w));  // 3 left: not below the limit
  EXPECT_FALSE(srq.take_limit_event());
  ASSERT_TRUE(srq.take(w));  // 2 left
  EXPECT_TRUE(srq.take_limit_event());
  EXPECT_FALSE(srq.take_limit_event());
  EXPECT_EQ(srq.limit(), 0u);
}

TEST(Doorbell, EveryRingIsSeenOnce) {
  DoorbellSet d(10000);
  std::set<uint32_t> want = {0, 1, 63, 64, 4095, 4096, 9999};
  for (uint32_t i : want) d.ring(i);
  d.ring(64);  // twice: still one
  std::set<uint32_t> got;
  d.drain([&](uint32_t i) { EXPECT_TRUE(got.insert(i).second); });
  EXPECT_EQ(got, want);
  got.clear();
  d.drain([&](uint32_t i) { got.insert(i); });
  EXPECT_TRUE(got.empty());
}

TEST(Doorbell, ConcurrentRingersLoseNothing) {
  DoorbellSet d(4096);
  std::atomic<bool> stop{false};
  std::vector<std::atomic<int>> rung(4096);
  std::thread t1([&] {
    for (int k = 0; k < 200000; ++k) d.ring(static_cast<uint32_t>(k % 4096));
  });
  std::set<uint32_t> seen;
  for (int i = 0; i < 100000; ++i) d.drain([&](uint32_t x) { seen.insert(x); });
  t1.join();
  d.drain([&](uint32_t x) { seen.insert(x); });
  EXPECT_EQ(seen.size(), 4096u);
  (void)stop;
  (void)rung;
}

TEST(MrTable, ChecksKeyPdAccessAndBounds) {
  MrTable t(1);
  std::vector<uint8_t> mem(4096);
  const uint32_t k = t.add(mem.data(), 0x10000, mem.size(), kAccessRemoteRead, 7);
  ASSERT_NE(k, 0u);
  uint8_t* host = nullptr;
  EXPECT_EQ(t.check(k, 7, 0x10000, 4096, kAccessRemoteRead, &host), MrCheck::kOk);
  EXPECT_EQ(host, mem.data());
  EXPECT_EQ(t.check(k, 7, 0x10FFF, 1, kAccessRemoteRead, &host), MrCheck::kOk);
  EXPECT_EQ(t.check(k, 7, 0x10FFF, 2, kAccessRemoteRead, &host), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 7, 0xFFFF, 1, kAccessRemoteRead, &host), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 7, UINT64_MAX - 2, 8, kAccessRemoteRead, &host), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 7, 0x10000, UINT64_MAX, kAccessRemoteRead, &host), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 8, 0x10000, 1, kAccessRemoteRead, &host), MrCheck::kBadPd);
  EXPECT_EQ(t.check(k, 7, 0x10000, 1, kAccessRemoteWrite, &host), MrCheck::kNoAccess);
  EXPECT_EQ(t.check(k ^ 0x10000, 7, 0x10000, 1, kAccessRemoteRead, &host), MrCheck::kBadKey);
  EXPECT_EQ(t.check(k + 1, 7, 0x10000, 1, kAccessRemoteRead, &host), MrCheck::kBadKey);
}

TEST(MrTable, KeysAreNotReusedAndCarryRandomBits) {
  MrTable t(2);
  uint8_t b[8];
  std::set<uint32_t> keys;
  uint32_t k = 0;
  for (int i = 0; i < 1000; ++i) {
    k = t.add(b, 0, 8, 0, 1);
    ASSERT_TRUE(keys.insert(k).second) << "key reused";
    ASSERT_TRUE(t.remove(k));
    uint8_t* h;
    EXPECT_EQ(t.check(k, 1, 0, 1, 0, &h), MrCheck::kBadKey);  // stale key is dead
  }
  // The generation bits differ: same slot, 1000 different keys.
  std::set<uint32_t> gens;
  for (uint32_t x : keys) gens.insert(x >> 16);
  EXPECT_GT(gens.size(), 990u);
}

// [va, va + len) may be empty at the region's end (a zero-length SGE between others is checked
// with its address), not past it; `need` flags must all be there, not one of them.
TEST(MrTable, AnEmptyRangeAtTheEndIsInsideAndEveryNeededFlagCounts) {
  MrTable t(1);
  std::vector<uint8_t> mem(4096);
  const uint32_t k =
      t.add(mem.data(), 0x10000, mem.size(), kAccessLocalWrite | kAccessRemoteRead, 7);
  ASSERT_NE(k, 0u);
  uint8_t* host = nullptr;
  EXPECT_EQ(t.check(k, 7, 0x11000, 0, kAccessLocalWrite, &host), MrCheck::kOk);
  EXPECT_EQ(host, mem.data() + 4096);
  EXPECT_EQ(t.check(k, 7, 0x11001, 0, kAccessLocalWrite, &host), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(k, 7, 0x10000, 1, kAccessLocalWrite | kAccessRemoteRead, &host), MrCheck::kOk);
  EXPECT_EQ(t.check(k, 7, 0x10000, 1, kAccessRemoteRead | kAccessRemoteWrite, &host),
            MrCheck::kNoAccess);
  EXPECT_EQ(t.check(k, 7, 0x10000, 1, 0, &host), MrCheck::kOk);
}

// The table holds kMaxRegions regions (index 0 is never used), then refuses; count() follows
// add and remove; a freed slot is reused, the oldest freed first.
TEST(MrTable, HoldsEveryIndexAndReusesTheOldestFreedSlot) {
  MrTable t(3);
  uint8_t b[8];
  std::vector<uint32_t> keys;
  for (uint32_t i = 0; i < MrTable::kMaxRegions; ++i) {
    const uint32_t k = t.add(b, 0, 8, 0, 1);
    ASSERT_NE(k, 0u) << i;
    ASSERT_EQ(k & MrTable::kMaxRegions, i + 1);
    keys.push_back(k);
  }
  EXPECT_EQ(t.count(), MrTable::kMaxRegions);
  EXPECT_EQ(t.add(b, 0, 8, 0, 1), 0u);  // full
  ASSERT_TRUE(t.remove(keys[100]));
  ASSERT_TRUE(t.remove(keys[7]));
  ASSERT_TRUE(t.remove(keys[5000]));
  EXPECT_FALSE(t.remove(keys[7]));
  EXPECT_EQ(t.count(), MrTable::kMaxRegions - 3);
  EXPECT_EQ(t.add(b, 0, 8, 0, 1) & MrTable::kMaxRegions, 101u);
  EXPECT_EQ(t.add(b, 0, 8, 0, 1) & MrTable::kMaxRegions, 8u);
  EXPECT_EQ(t.add(b, 0, 8, 0, 1) & MrTable::kMaxRegions, 5001u);
  EXPECT_EQ(t.add(b, 0, 8, 0, 1), 0u);
  EXPECT_EQ(t.count(), MrTable::kMaxRegions);
}

// One slot's keys do not repeat for 65536 registrations, whatever the table's seed, and the
// generation advances by a per-table secret stride: another table's step (or 1) says nothing.
TEST(MrTable, ASlotsKeysRepeatOnlyAfter65536RegistrationsAndStepBySecretStrides) {
  uint8_t b[8];
  std::set<uint32_t> strides;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    MrTable t(seed);
    std::vector<bool> seen(65536);
    uint32_t prev = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      const uint32_t k = t.add(b, 0, 8, 0, 1);
      ASSERT_EQ(k & MrTable::kMaxRegions, 1u);
      ASSERT_FALSE(seen[k >> 16]) << "seed " << seed << ": key repeated after " << i;
      seen[k >> 16] = true;
      if (i == 1) strides.insert(((k >> 16) - (prev >> 16)) & 0xFFFF);
      prev = k;
      ASSERT_TRUE(t.remove(k));
    }
  }
  EXPECT_GE(strides.size(), 6u);
  EXPECT_EQ(strides.count(1), 0u);
}

// Pages: read-write, read-only, no access, unmapped.
TEST(AddressSpace, RangeAccessibleFollowsTheMappingsAndTheirRights) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<uint8_t*>(
      mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(mprotect(p + page, page, PROT_READ), 0);
  ASSERT_EQ(mprotect(p + 2 * page, page, PROT_NONE), 0);
  ASSERT_EQ(munmap(p + 3 * page, page), 0);
  EXPECT_TRUE(range_accessible(p, page, true));
  EXPECT_TRUE(range_accessible(p + 10, page - 20, true));
  EXPECT_TRUE(range_accessible(p, 2 * page, false));  // across two mappings
  EXPECT_FALSE(range_accessible(p, 2 * page, true));
  EXPECT_FALSE(range_accessible(p + page - 1, 2, true));
  EXPECT_TRUE(range_accessible(p + page, page, false));
  EXPECT_FALSE(range_accessible(p + page, page + 1, false));  // one byte of PROT_NONE
  EXPECT_FALSE(range_accessible(p + 2 * page, 1, false));
  EXPECT_FALSE(range_accessible(p + 3 * page, page, false));  // unmapped
  EXPECT_TRUE(range_accessible(p + 3 * page, 0, true));       // nothing to access
  EXPECT_FALSE(range_accessible(reinterpret_cast<void*>(UINTPTR_MAX - 10), 100, false));
  static uint8_t data[100];
  EXPECT_TRUE(range_accessible(data, sizeof data, true));
  static const char kText[] = "in a read-only section";
  EXPECT_FALSE(range_accessible(kText, sizeof kText, true));
  EXPECT_TRUE(range_accessible(kText, sizeof kText, false));
  ASSERT_EQ(munmap(p, 3 * page), 0);
}

// A range that starts where an inaccessible mapping ends is judged by its own pages; one whose
// length reaches past the top of the address space, or that lies above every mapping, is
// refused.
TEST(AddressSpace, RangesAtTheEdgesOfMappingsAndOfTheAddressSpace) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<uint8_t*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(mprotect(p, page, PROT_NONE), 0);
  EXPECT_TRUE(range_accessible(p + page, page, true));
  EXPECT_TRUE(range_accessible(p + page, 1, false));
  EXPECT_FALSE(range_accessible(p + page - 1, 2, false));
  // first + len - 1 would wrap around to a low address.
  EXPECT_FALSE(range_accessible(p + page, UINT64_MAX, false));
  const auto first = reinterpret_cast<uintptr_t>(p + page);
  EXPECT_FALSE(range_accessible(p + page, UINTPTR_MAX - first + 2, false));
  // Above the last mapping (x86-64's vsyscall page ends at 0xffffffffff601000).
  EXPECT_FALSE(range_accessible(reinterpret_cast<void*>(UINTPTR_MAX - 10), 5, false));
  EXPECT_FALSE(range_accessible(reinterpret_cast<void*>(UINTPTR_MAX), 1, false));
  ASSERT_EQ(munmap(p, 2 * page), 0);
}

// Completion statuses read as libibverbs' ibv_wc_status_str() has them (tools print them next
// to rxe's and perftest's output), QP states as the verbs man pages name them.
TEST(Types, StatusAndStateNamesAreTheVerbsOnes) {
  const char* const kStatus[] = {"success",
                                 "local length error",
                                 "local QP operation error",
                                 "local EE context operation error",
                                 "local protection error",
                                 "Work Request Flushed Error",
                                 "memory management operation error",
                                 "bad response error",
                                 "local access error",
                                 "remote invalid request error",
                                 "remote access error",
                                 "remote operation error",
                                 "transport retry counter exceeded",
                                 "RNR retry counter exceeded",
                                 "local RDD violation error",
                                 "remote invalid RD request",
                                 "aborted error",
                                 "invalid EE context number",
                                 "invalid EE context state",
                                 "fatal error",
                                 "response timeout error",
                                 "general error"};
  static_assert(std::size(kStatus) == static_cast<size_t>(WcStatus::kGeneralErr) + 1);
  for (size_t i = 0; i < std::size(kStatus); ++i) {
    EXPECT_STREQ(to_string(static_cast<WcStatus>(i)), kStatus[i]) << i;
  }
  const char* const kState[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  static_assert(std::size(kState) == static_cast<size_t>(QpState::kErr) + 1);
  for (size_t i = 0; i < std::size(kState); ++i) {
    EXPECT_STREQ(to_string(static_cast<QpState>(i)), kState[i]) << i;
  }
  EXPECT_STREQ(to_string(static_cast<WcStatus>(std::size(kStatus))), "?");
  EXPECT_STREQ(to_string(static_cast<QpState>(std::size(kState))), "?");
}

// The engine thread's counters as a tool prints them: one line each, zero ones left out.
TEST(CountersFormat, RunnerCountersOneLineEachZeroOnesLeftOut) {
  RunnerStats st;
  st.polls = 1000;
  st.busy_polls = 40;
  st.yields = 15;
  st.long_yields = 7;
  st.starved_yields = 2;
  st.sleeps = 30;
  EXPECT_EQ(format_runner_counters(st),
            "engine thread:\n"
            "  polls                        1000\n"
            "  polls that found work        40\n"
            "  yields                       15\n"
            "  yields that lost the core    7\n"
            "  starved yields               2\n"
            "  sleeps                       30\n");
  st.wakeups = 3;
  EXPECT_NE(format_runner_counters(st).find("  sleeps ended by a doorbell   3\n"),
            std::string::npos);
  EXPECT_EQ(format_standby_counters(st), "");  // inline mode's standby driver never ran
  st.standby_polls = 9;
  st.standby_sleeps = 4;
  EXPECT_EQ(format_standby_counters(st),
            "standby driver (inline mode, a CQ armed on a channel):\n"
            "  polls                        9\n"
            "  sleeps                       4\n");
}

// A capture file's records (roce::PcapWriter): the byte count of each record, from the file.
std::vector<uint32_t> pcap_record_lengths(const std::string& path, bool* whole) {
  std::vector<uint32_t> caplens;
  FILE* f = std::fopen(path.c_str(), "rb");
  std::vector<uint8_t> d;
  if (f) {
    uint8_t b[4096];
    size_t n;
    while ((n = std::fread(b, 1, sizeof b, f)) > 0) d.insert(d.end(), b, b + n);
    std::fclose(f);
  }
  size_t pos = 24;
  while (pos + 16 <= d.size()) {
    uint32_t cap;
    std::memcpy(&cap, &d[pos + 8], 4);
    if (pos + 16 + cap > d.size()) break;
    caplens.push_back(cap);
    pos += 16 + cap;
  }
  *whole = d.size() >= 24 && pos == d.size();
  return caplens;
}

// Opens `w` on a new file in /tmp; returns its path.
std::string open_temp_capture(PcapWriter& w, const char* name) {
  const std::string path = "/tmp/roce-core-unit-" + std::to_string(getpid()) + "-" + name + ".pcap";
  std::string err;
  EXPECT_TRUE(w.open(path, &err)) << err;
  return path;
}

TEST(PcapWriter, TheFileHoldsWholeRecordsWhileItIsWritten) {
  PcapWriter w;
  const std::string path = open_temp_capture(w, "whole");
  ASSERT_TRUE(w.is_open());
  std::vector<uint8_t> frame(1000, 0xAB);
  for (int i = 0; i < 3000; ++i) w.write(frame.data(), 1000, 1'000'000'000ull * i);
  bool whole = false;
  const auto recs = pcap_record_lengths(path, &whole);  // not flushed: what a killed process leaves
  EXPECT_TRUE(whole) << "the file ends inside a record";
  EXPECT_GT(recs.size(), 0u);
  w.close();
  EXPECT_EQ(pcap_record_lengths(path, &whole).size(), 3000u);
  EXPECT_TRUE(whole);
  std::remove(path.c_str());
}

TEST(PcapWriter, AForkedChildThatExitsWritesNothing) {
  PcapWriter w;
  const std::string path = open_temp_capture(w, "fork");
  ASSERT_TRUE(w.is_open());
  std::vector<uint8_t> frame(60, 0xCD);
  w.write(frame.data(), 60, 0);  // buffered
  std::fflush(nullptr);          // gtest's output is not the child's to write
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::fflush(nullptr);  // as exit() does: the capture's buffer must not be stdio's
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  w.close();
  bool whole = false;
  EXPECT_EQ(pcap_record_lengths(path, &whole).size(), 1u);
  EXPECT_TRUE(whole);
  std::remove(path.c_str());
}

TEST(PcapWriter, AFullDiskKeepsWholeRecordsAndSaysSo) {
  // The file may grow to 300 kB; past that write() fails (EFBIG) as on a full disk.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 300'000;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  PcapWriter w;
  const std::string path = open_temp_capture(w, "full");
  const bool opened = w.is_open();
  std::vector<uint8_t> frame(1000, 0xEF);
  for (int i = 0; i < 3000 && opened; ++i) w.write(frame.data(), 1000, 0);
  const bool closed = w.close();
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_TRUE(opened);
  EXPECT_FALSE(closed);
  EXPECT_NE(w.error().find("File too large"), std::string::npos) << w.error();
  bool whole = false;
  const auto recs = pcap_record_lengths(path, &whole);
  EXPECT_TRUE(whole) << "the file ends inside a record";
  EXPECT_GT(recs.size(), 0u) << "what fitted is kept";
  EXPECT_EQ(recs.size(), w.frames());
  EXPECT_NE(w.error().find("after " + std::to_string(recs.size()) + " frames"), std::string::npos)
      << w.error();
  std::remove(path.c_str());
}

// The bytes of a file ("" if it cannot be read).
std::vector<uint8_t> file_bytes(const std::string& path) {
  std::vector<uint8_t> d;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    uint8_t b[4096];
    size_t n;
    while ((n = std::fread(b, 1, sizeof b, f)) > 0) d.insert(d.end(), b, b + n);
    std::fclose(f);
  }
  return d;
}
uint32_t u32_at(const std::vector<uint8_t>& d, size_t off) {
  uint32_t v = 0;
  std::memcpy(&v, &d[off], 4);
  return v;
}

// Runs `body` with the files this process writes limited to `bytes` (write() past it fails
// with EFBIG, as on a full disk), then puts the limit back.
template <typename F>
void with_file_size_limit(rlim_t bytes, F body) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = bytes;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  body();
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
}

// The classic pcap format (what libpcap and tshark read): the file header in the writer's byte
// order (magic 0xa1b2c3d4 for microsecond timestamps, version 2.4, the snap length, link type 1
// for Ethernet), then per frame seconds, microseconds, the bytes kept and the length on the wire.
TEST(PcapWriter, FileAndRecordHeadersFollowTheClassicFormat) {
  PcapWriter w;
  const std::string path = "/tmp/roce-core-unit-" + std::to_string(getpid()) + "-format.pcap";
  std::string err;
  ASSERT_TRUE(w.open(path, &err, 100)) << err;
  std::vector<uint8_t> small(60), big(150);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i + 1);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint8_t>(200 - i);
  w.write(small.data(), 60, 1'234'567'890'123'456'789ull);
  w.write(big.data(), 150, 5'999'999'999ull);  // cut to the snap length
  EXPECT_EQ(w.frames(), 2u);
  ASSERT_TRUE(w.close());
  const std::vector<uint8_t> d = file_bytes(path);
  std::remove(path.c_str());
  ASSERT_EQ(d.size(), 24u + 16 + 60 + 16 + 100);
  EXPECT_EQ(u32_at(d, 0), 0xa1b2c3d4u);
  uint16_t major = 0, minor = 0;
  std::memcpy(&major, &d[4], 2);
  std::memcpy(&minor, &d[6], 2);
  EXPECT_EQ(major, 2);
  EXPECT_EQ(minor, 4);
  EXPECT_EQ(u32_at(d, 8), 0u);     // GMT offset
  EXPECT_EQ(u32_at(d, 12), 0u);    // timestamp accuracy
  EXPECT_EQ(u32_at(d, 16), 100u);  // snap length
  EXPECT_EQ(u32_at(d, 20), 1u);    // LINKTYPE_ETHERNET
  EXPECT_EQ(u32_at(d, 24), 1'234'567'890u);
  EXPECT_EQ(u32_at(d, 28), 123'456u);
  EXPECT_EQ(u32_at(d, 32), 60u);
  EXPECT_EQ(u32_at(d, 36), 60u);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), d.begin() + 40));
  EXPECT_EQ(u32_at(d, 100), 5u);
  EXPECT_EQ(u32_at(d, 104), 999'999u);
  EXPECT_EQ(u32_at(d, 108), 100u);  // kept
  EXPECT_EQ(u32_at(d, 112), 150u);  // on the wire
  EXPECT_TRUE(std::equal(big.begin(), big.begin() + 100, d.begin() + 116));
}

// Writes 1000-byte frames, `before` of them flushed first, then 3000 more, to a file that may grow
// to `limit` bytes; the file must end up holding `kept` whole records, as frames() and error() say.
void expect_full_disk_keeps(rlim_t limit, int before, uint64_t kept, const char* name) {
  PcapWriter w;
  const std::string path = open_temp_capture(w, name);
  std::vector<uint8_t> frame(1000, 0x22);
  bool closed = true;
  with_file_size_limit(limit, [&] {
    for (int i = 0; i < before; ++i) w.write(frame.data(), 1000, 0);
    w.flush();
    for (int i = 0; i < 3000; ++i) w.write(frame.data(), 1000, 0);
    closed = w.close();
  });
  EXPECT_FALSE(closed);
  bool whole = false;
  EXPECT_EQ(pcap_record_lengths(path, &whole).size(), kept);
  EXPECT_TRUE(whole);
  EXPECT_EQ(w.frames(), kept);
  EXPECT_NE(w.error().find("after " + std::to_string(kept) + " frames"), std::string::npos)
      << w.error();
  std::remove(path.c_str());
}

// A disk that fills exactly where a record ends keeps that record.
TEST(PcapWriter, AFullDiskAtARecordsEndKeepsThatRecord) {
  expect_full_disk_keeps(24 + 100 * 1016, 0, 100, "full-at-end");
}

// A disk that fills after earlier writes went out keeps those too: the file is cut back to the
// last whole record of all, and frames() counts what it holds.
TEST(PcapWriter, AFullDiskAfterAFlushKeepsWhatWasWrittenBefore) {
  expect_full_disk_keeps(24 + 150 * 1016 + 500, 100, 150, "full-later");
}

// A disk that fills inside the 24-byte file header leaves an empty file, not a header padded
// with zeros.
TEST(PcapWriter, AFullDiskInsideTheFileHeaderLeavesAnEmptyFile) {
  PcapWriter w;
  const std::string path = open_temp_capture(w, "full-header");
  std::vector<uint8_t> frame(60, 0x33);
  bool closed = true;
  with_file_size_limit(10, [&] {
    w.write(frame.data(), 60, 0);
    closed = w.close();
  });
  EXPECT_FALSE(closed);
  EXPECT_EQ(file_bytes(path).size(), 0u);
  EXPECT_EQ(w.frames(), 0u);
  std::remove(path.c_str());
}

// A writer opened again starts a new capture: its count and its error are those of the new
// file, and the file loses what it held before (here a longer capture of something else).
TEST(PcapWriter, OpeningAgainStartsAFreshCapture) {
  PcapWriter w;
  std::vector<uint8_t> frame(60, 0x44);
  const std::string first = open_temp_capture(w, "first");
  bool closed = true;
  with_file_size_limit(24 + 2 * 76 + 10, [&] {  // the first capture fails after two frames
    for (int i = 0; i < 5; ++i) w.write(frame.data(), 60, 0);
    closed = w.close();
  });
  EXPECT_FALSE(closed);
  EXPECT_EQ(w.frames(), 2u);
  const std::string path = "/tmp/roce-core-unit-" + std::to_string(getpid()) + "-again.pcap";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f);
    const std::vector<uint8_t> junk(10000, 0xff);
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  std::string err;
  ASSERT_TRUE(w.open(path, &err)) << err;
  w.write(frame.data(), 60, 0);
  EXPECT_TRUE(w.close()) << w.error();
  EXPECT_FALSE(w.is_open());
  EXPECT_TRUE(w.error().empty());
  EXPECT_EQ(w.frames(), 1u);
  EXPECT_EQ(file_bytes(path).size(), 24u + 16 + 60);
  std::remove(first.c_str());
  std::remove(path.c_str());
}

}  // namespace
