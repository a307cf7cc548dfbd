// Two engines over the in-memory wire, every operation, message sizes around the MTU and up to
// 1 MiB, under loss, reordering, duplication and corruption, with PSNs starting just below 2^24
// so they wrap: every byte lands exactly once where it should (the workload checks all of
// memory against its expected image), completions arrive in order with the right status,
// opcode, length and immediate data, and no atomic executes twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "stack/sim/workload.h"

namespace {
using namespace roce;
using namespace roce::sim;

struct Fault {
  const char* name;
  LinkConfig link;
};

LinkConfig faults(double drop, double dup, double reorder, double corrupt) {
  LinkConfig l;
  l.drop = drop;
  l.duplicate = dup;
  l.reorder = reorder;
  l.corrupt = corrupt;
  l.jitter_ns = reorder > 0 ? 3000 : 0;
  return l;
}

const Fault kFaults[] = {
    {"clean", faults(0, 0, 0, 0)},      {"loss1", faults(0.01, 0, 0, 0)},
    {"loss5", faults(0.05, 0, 0, 0)},   {"loss20", faults(0.20, 0, 0, 0)},
    {"reorder", faults(0, 0, 0.05, 0)}, {"duplicate", faults(0, 0.05, 0, 0)},
    {"corrupt", faults(0, 0, 0, 0.05)}, {"everything", faults(0.05, 0.03, 0.03, 0.03)},
};

const WrOpcode kOps[] = {WrOpcode::kSend,
                         WrOpcode::kSendWithImm,
                         WrOpcode::kRdmaWrite,
                         WrOpcode::kRdmaWriteWithImm,
                         WrOpcode::kRdmaRead,
                         WrOpcode::kAtomicCmpAndSwp,
                         WrOpcode::kAtomicFetchAndAdd};

std::string op_label(WrOpcode o) {
  switch (o) {
    case WrOpcode::kSend:
      return "Send";
    case WrOpcode::kSendWithImm:
      return "SendImm";
    case WrOpcode::kRdmaWrite:
      return "Write";
    case WrOpcode::kRdmaWriteWithImm:
      return "WriteImm";
    case WrOpcode::kRdmaRead:
      return "Read";
    case WrOpcode::kAtomicCmpAndSwp:
      return "CmpSwap";
    case WrOpcode::kAtomicFetchAndAdd:
      return "FetchAdd";
    default:
      return "X";
  }
}

using Param = std::tuple<WrOpcode, int /*fault index*/>;

class OpUnderFaults : public ::testing::TestWithParam<Param> {};

TEST_P(OpUnderFaults, EveryByteOnceInOrder) {
  const auto [opcode, fi] = GetParam();
  const Fault& fault = kFaults[fi];
  const uint32_t mtu = 1024;
  WorkloadConfig cfg;
  cfg.ops = {opcode};
  cfg.mtu = Mtu::k1024;
  cfg.link = fault.link;
  cfg.start_psn = -1;  // near 2^24: the run crosses the wrap
  const bool atomic =
      opcode == WrOpcode::kAtomicCmpAndSwp || opcode == WrOpcode::kAtomicFetchAndAdd;
  // Sizes 0, 1, MTU-1, MTU, MTU+1 many times; 1 MiB a few times.
  for (uint64_t seed : {1u, 2u}) {
    cfg.sizes = {0, 1, mtu - 1, mtu, mtu + 1};
    cfg.ops_per_qp = atomic ? 60 : 40;
    WorkloadResult r = run_workload(seed, cfg);
    EXPECT_TRUE(r.ok) << "seed " << seed << " small sizes: " << r.error;
    if (fault.link.drop >= 0.05) {
      // Lost ACKs may be covered by later ones, but at this rate data packets are lost too.
      EXPECT_GT(r.retransmitted, 0u) << "frames were lost but nothing was retransmitted";
    }
    if (atomic) {
      EXPECT_EQ(r.atomics_executed, r.atomics_issued);
      continue;
    }
    cfg.sizes = {1u << 20};
    cfg.ops_per_qp = 2;
    r = run_workload(seed + 100, cfg);
    EXPECT_TRUE(r.ok) << "seed " << seed + 100 << " 1 MiB: " << r.error;
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, OpUnderFaults,
                         ::testing::Combine(::testing::ValuesIn(kOps), ::testing::Range(0, 8)),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return op_label(std::get<0>(i.param)) + "_" +
                                  kFaults[std::get<1>(i.param)].name;
                         });

// Mixed operations, several QPs and hosts, both GID families, unsignalled WQEs in between.
TEST(Workload, MixedOpsManyQpsUnderFaults) {
  WorkloadConfig cfg;
  cfg.hosts = 3;
  cfg.qps_per_pair = 3;
  cfg.ops_per_qp = 40;
  cfg.signal_every = 0;
  cfg.link = faults(0.02, 0.01, 0.02, 0.01);
  for (uint64_t seed = 10; seed < 14; ++seed) {
    WorkloadResult r = run_workload(seed, cfg);
    EXPECT_TRUE(r.ok) << "seed " << seed << ": " << r.error;
  }
}

// Every QP limited to 2 Gb/s (IBV_QP_RATE_LIMIT). On a clean link the run takes at least what
// its bytes take at the QPs' combined limit (4 QPs: 2 pairs, each side sending requests and READ
// responses), where the same seed without the limit takes less than that; on a lossy one every
// operation still completes and verifies.
TEST(Workload, RateLimitedQpsTakeTheirTimeAndDeliverEverythingUnderFaults) {
  WorkloadConfig cfg;
  cfg.qps_per_pair = 2;
  cfg.ops_per_qp = 40;
  const WorkloadResult free_run = run_workload(21, cfg);
  ASSERT_TRUE(free_run.ok) << free_run.error;
  cfg.rate_limit_kbps = 2'000'000;
  const WorkloadResult r = run_workload(21, cfg);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.bytes, free_run.bytes);
  const double at_limit_ns = static_cast<double>(r.bytes) * 8 / (4 * 2.0);  // 2 Gb/s = 2 bits/ns
  EXPECT_GE(static_cast<double>(r.virtual_ns), at_limit_ns);
  EXPECT_LT(static_cast<double>(free_run.virtual_ns), at_limit_ns);

  cfg.link = faults(0.02, 0.01, 0.02, 0.01);
  for (uint64_t seed = 21; seed < 25; ++seed) {
    const WorkloadResult f = run_workload(seed, cfg);
    EXPECT_TRUE(f.ok) << "seed " << seed << ": " << f.error;
  }
}

TEST(Workload, Mtu4096AndIpv6) {
  WorkloadConfig cfg;
  cfg.mtu = Mtu::k4096;
  cfg.gid_index = 0;
  cfg.sizes = {4095, 4096, 4097, 100000};
  cfg.ops_per_qp = 30;
  cfg.link = faults(0.05, 0, 0.02, 0);
  WorkloadResult r = run_workload(77, cfg);
  EXPECT_TRUE(r.ok) << r.error;
}

// The same seed gives the same run, event for event.
TEST(Workload, Deterministic) {
  WorkloadConfig cfg;
  cfg.link = faults(0.05, 0.02, 0.02, 0.02);
  WorkloadResult a = run_workload(5, cfg), b = run_workload(5, cfg);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.virtual_ns, b.virtual_ns);
  EXPECT_EQ(a.frames_sent, b.frames_sent);
  EXPECT_EQ(a.retransmitted, b.retransmitted);
}
// A copy of a request held back on the wire (a duplicate, or a reordered retransmission) can
// arrive after the last completion. The check waits for it: otherwise a responder executing a
// late duplicate atomic a second time, or completing a stray receive, would go unseen.
TEST(Workload, ChecksOnlyOnceTheWireIsEmpty) {
  WorkloadConfig cfg;
  cfg.ops = {WrOpcode::kAtomicFetchAndAdd, WrOpcode::kAtomicCmpAndSwp};
  cfg.ops_per_qp = 4;
  cfg.link = faults(0, 1.0, 0.5, 0);  // every frame twice, half of the copies held back
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const WorkloadResult r = run_workload(seed, cfg);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.error;
    EXPECT_EQ(r.events_left, 0u) << "seed " << seed << ": judged with frames still on the wire";
    // Every atomic request was sent twice and nothing was lost: the responder saw each copy.
    EXPECT_GE(r.duplicates, r.atomics_issued) << "seed " << seed;
    EXPECT_EQ(r.atomics_executed, r.atomics_issued) << "seed " << seed;
  }
}

// A deadline of UINT64_MAX ("no deadline") used to make every jump of the clock 1 ns long
// (deadline + 1 wrapped to 0), so a wait for a timer crawled there a nanosecond at a time.
TEST(SimNetwork, RunUntilWithoutDeadlineJumpsToTheNextEvent) {
  SimNetwork net(1);
  constexpr uint64_t kAt = 1'000'000'000;
  uint64_t polls = 0;
  net.add_actor({[&] {
                   ++polls;
                   return false;
                 },
                 [&] { return kAt; }, nullptr});
  EXPECT_TRUE(net.run_until([&] { return net.now() >= kAt || polls > 100; }, UINT64_MAX));
  EXPECT_EQ(net.now(), kAt);
  EXPECT_LE(polls, 3u);
}

// "dup" and "corrupt" are independent faults: the second copy of a duplicated frame is a copy of
// the frame sent, not of the first copy after its bit flip. (It was cloned from the first copy
// once corrupted, so a duplicate never rescued a corrupted frame.)
TEST(SimNetwork, DuplicateIsCorruptedIndependently) {
  SimNetwork net(3);
  const Mac ma{0x02, 0, 0, 0, 0, 1}, mb{0x02, 0, 0, 0, 0, 2};
  SimPort* a = net.add_port(ma);
  SimPort* b = net.add_port(mb);
  a->uplink().duplicate = 1.0;
  a->uplink().corrupt = 0.5;
  constexpr uint32_t kFrames = 200, kLen = 1000;
  for (uint32_t i = 0; i < kFrames; ++i) {
    PktBuf f;
    ASSERT_EQ(a->alloc(&f, 1), 1);
    std::memcpy(f.data, mb.data(), 6);
    std::memcpy(f.data + 6, ma.data(), 6);
    std::memset(f.data + 12, static_cast<int>(i), kLen - 12);
    f.len = kLen;
    ASSERT_EQ(a->tx_burst(&f, 1), 1);
  }
  net.run_until([&] { return net.events_pending() == 0; }, 1'000'000'000);
  // Per frame (its fill byte, which one bit flip cannot hide), whether each copy came intact.
  std::vector<std::vector<bool>> intact(kFrames);
  PktBuf f;
  while (b->rx_burst(&f, 1) == 1) {
    uint32_t counts[256] = {};
    for (uint32_t k = 12; k < f.len; ++k) ++counts[f.data[k]];
    const uint32_t i = static_cast<uint32_t>(std::max_element(counts, counts + 256) - counts);
    bool ok = f.len == kLen && std::memcmp(f.data, mb.data(), 6) == 0;
    for (uint32_t k = 12; k < f.len; ++k) ok = ok && f.data[k] == i;
    if (i < kFrames) intact[i].push_back(ok);
    b->free(&f, 1);
  }
  uint32_t first_bad_second_good = 0, first_good_second_bad = 0;
  for (const auto& v : intact) {
    if (v.size() != 2) continue;
    first_bad_second_good += !v[0] && v[1];
    first_good_second_bad += v[0] && !v[1];
  }
  // Each about a quarter of the frames.
  EXPECT_GT(first_bad_second_good, kFrames / 10);
  EXPECT_GT(first_good_second_bad, kFrames / 10);
}

// roce-sim --faults: every value that is not a number the link can use is refused, naming it
// (strtod takes "nan" and "inf"; a delay past uint64_t's range was undefined behaviour).
TEST(ParseFaults, RefusesNanInfinityAndDelaysBeyondAnHour) {
  for (const char* spec : {"drop=nan", "dup=-nan", "corrupt=inf", "rate=nan", "rate=inf",
                           "delay=1e30", "jitter=inf", "reorder_delay=nan", "delay=3600000000001",
                           // A rate so low that one frame's serialisation overflows the clock
                           // (undefined behaviour converting the double), or below any link's.
                           "rate=1e-17", "rate=0.0001", "rate=-1"}) {
    LinkConfig l;
    std::string err;
    EXPECT_FALSE(parse_faults(spec, &l, &err)) << spec;
    const std::string key(spec, std::strchr(spec, '=') - spec);
    EXPECT_NE(err.find("'" + key + "'"), std::string::npos) << spec << ": " << err;
  }
  LinkConfig l;
  std::string err;
  EXPECT_TRUE(parse_faults("drop=0.5,delay=3600000000000,rate=25", &l, &err)) << err;
  EXPECT_EQ(l.delay_ns, 3'600'000'000'000ull);
  EXPECT_TRUE(parse_faults("rate=0", &l, &err)) << err;  // no limit
  EXPECT_TRUE(parse_faults("rate=0.001", &l, &err)) << err;
}

}  // namespace
