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
#include <set>
#include <thread>
#include <vector>

#include "stack/core/counters_format.h"
#include "stack/core/mr.h"
#include "stack/core/queues.h"
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

// The engine thread's counters as a tool prints them: one line each, zero ones left out.
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

}  // namespace
