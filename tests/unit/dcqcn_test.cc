// DCQCN reaction point, pacer and notification point against hand-computed sequences. All time
// is virtual: every call gets an explicit now_ns. Rates are Gb/s. The rules under test are
// quoted, with their sources, in stack/cc/dcqcn.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "stack/cc/dcqcn.h"
#include "stack/cc/pacer.h"

namespace {
using roce::cc::DcqcnNp;
using roce::cc::DcqcnParams;
using roce::cc::DcqcnRp;
using roce::cc::EcnMark;

constexpr uint64_t kUs = 1000;

// paper(100) with `overrides` applied.
DcqcnParams Paper(const std::string& overrides = "") {
  DcqcnParams p = DcqcnParams::paper(100);
  std::string err;
  EXPECT_TRUE(p.parse(overrides, &err)) << err;
  return p;
}

DcqcnParams Connectx(const std::string& overrides = "") {
  DcqcnParams p = DcqcnParams::connectx(100);
  std::string err;
  EXPECT_TRUE(p.parse(overrides, &err)) << err;
  return p;
}

// --- Profiles and parse ----------------------------------------------------------------------

TEST(DcqcnParams, PaperProfile) {
  const DcqcnParams p = DcqcnParams::paper(40);
  EXPECT_EQ(p.line_gbps, 40);
  EXPECT_EQ(p.min_rate_gbps, 0.1);
  EXPECT_EQ(p.rai_gbps, 0.040);
  EXPECT_EQ(p.rhai_gbps, 0.200);
  EXPECT_EQ(p.first_cnp_rate_gbps, 0);
  EXPECT_EQ(p.g, 1.0 / 256);
  EXPECT_EQ(p.initial_alpha, 1.0);
  EXPECT_EQ(p.alpha_period_ns, 55 * kUs);
  EXPECT_EQ(p.min_dec_factor, 0);
  EXPECT_EQ(p.min_cut_interval_ns, 0u);
  EXPECT_TRUE(p.clamp_tgt_rate);
  EXPECT_EQ(p.rate_timer_ns, 55 * kUs);
  EXPECT_EQ(p.byte_counter_bytes, 10'000'000u);
  EXPECT_EQ(p.threshold, 5u);
  EXPECT_EQ(p.cnp_interval_ns, 50 * kUs);
  EXPECT_EQ(p.ecn, EcnMark::kEct0);
  std::string err;
  EXPECT_TRUE(p.validate(&err)) << err;
}

TEST(DcqcnParams, ConnectxProfile) {
  const DcqcnParams p = DcqcnParams::connectx(100);
  EXPECT_EQ(p.line_gbps, 100);
  EXPECT_EQ(p.min_rate_gbps, 0.001);             // rpg_min_rate 1 Mb/s
  EXPECT_EQ(p.rai_gbps, 0.005);                  // rpg_ai_rate 5 Mb/s
  EXPECT_EQ(p.rhai_gbps, 0.050);                 // rpg_hai_rate 50 Mb/s
  EXPECT_EQ(p.first_cnp_rate_gbps, 0);           // rate_to_set_on_first_cnp 0
  EXPECT_EQ(p.g, 5.0 / 1024);                    // dce_tcp_g 1019: g = (1024 - 1019)/1024
  EXPECT_EQ(p.initial_alpha, 1023.0 / 1024);     // initial_alpha_value 1023
  EXPECT_EQ(p.alpha_period_ns, 1 * kUs);         // dce_tcp_rtt 1 us
  EXPECT_EQ(p.min_dec_factor, 0.5);              // rpg_min_dec_fac 50 %
  EXPECT_EQ(p.min_cut_interval_ns, 4 * kUs);     // rate_reduce_monitor_period 4 us
  EXPECT_FALSE(p.clamp_tgt_rate);                // clamp_tgt_rate 0
  EXPECT_TRUE(p.clamp_tgt_rate_after_time_inc);  // clamp_tgt_rate_after_time_inc 1
  EXPECT_EQ(p.rate_timer_ns, 300 * kUs);         // rpg_time_reset 300 us
  EXPECT_EQ(p.byte_counter_bytes, 32767u);       // rpg_byte_reset 32767 B
  EXPECT_EQ(p.threshold, 1u);                    // rpg_threshold 1
  EXPECT_EQ(p.cnp_interval_ns, 4 * kUs);
  std::string err;
  EXPECT_TRUE(p.validate(&err)) << err;
}

TEST(DcqcnParams, ParseOverridesByNameAndUnitAlias) {
  DcqcnParams p = DcqcnParams::paper(100);
  std::string err;
  ASSERT_TRUE(
      p.parse(" g=0.5, threshold=3,clamp_tgt_rate=false,ecn=ect1,rate_timer_us=300,"
              "rai_mbps=5,byte_counter_bytes=300000,min_cut_interval_us=0.5,",
              &err))
      << err;
  EXPECT_EQ(p.g, 0.5);
  EXPECT_EQ(p.threshold, 3u);
  EXPECT_FALSE(p.clamp_tgt_rate);
  EXPECT_EQ(p.ecn, EcnMark::kEct1);
  EXPECT_EQ(p.rate_timer_ns, 300 * kUs);
  EXPECT_DOUBLE_EQ(p.rai_gbps, 0.005);
  EXPECT_EQ(p.byte_counter_bytes, 300000u);
  EXPECT_EQ(p.min_cut_interval_ns, 500u);
  EXPECT_EQ(p.rhai_gbps, 0.200);  // untouched
  EXPECT_TRUE(p.parse("", &err));
}

TEST(DcqcnParams, ParseErrorsNameTheKeyAndLeaveParamsUnchanged) {
  const DcqcnParams orig = DcqcnParams::paper(100);
  struct Case {
    const char* spec;
    const char* err;
  } cases[] = {
      {"foo=1", "dcqcn: unknown key 'foo'"},
      {"g=abc", "dcqcn: bad value 'abc' for 'g' (expected a number)"},
      {"g=nan", "dcqcn: bad value 'nan' for 'g' (expected a number)"},
      {"g", "dcqcn: 'g' is not key=value"},
      {"threshold=-1",
       "dcqcn: bad value '-1' for 'threshold' (expected an integer in [0, 4294967295])"},
      {"rate_timer_ns=1.5",
       "dcqcn: bad value '1.5' for 'rate_timer_ns' (expected a non-negative integer)"},
      {"clamp_tgt_rate=yes",
       "dcqcn: bad value 'yes' for 'clamp_tgt_rate' (expected true, false, 1 or 0)"},
      {"ecn=ce", "dcqcn: bad value 'ce' for 'ecn' (expected ect0 or ect1)"},
      {"g=0", "dcqcn: g=0 out of range (0, 1]"},
      {"min_rate_gbps=200", "dcqcn: min_rate_gbps=200 out of range (0, line_gbps]"},
      {"rate_timer_us=0", "dcqcn: rate_timer_ns=0 out of range [1, inf)"},
      {"g=0.5,bogus_us=3", "dcqcn: unknown key 'bogus_us'"},  // first item must not stick
      // Control characters written out: the error stays one line (ROCE_DEVICE may hold any).
      {"g=1\n2", "dcqcn: bad value '1\\n2' for 'g' (expected a number)"},
      {"g\x01=1", "dcqcn: unknown key 'g\\x01'"},
  };
  for (const Case& c : cases) {
    DcqcnParams p = orig;
    std::string err;
    EXPECT_FALSE(p.parse(c.spec, &err)) << c.spec;
    EXPECT_EQ(err, c.err) << c.spec;
    EXPECT_EQ(p.to_string(), orig.to_string()) << c.spec;
  }
}

// The edges of each range are values a user may set: min_dec_factor=1 (no cut below the current
// rate, ConnectX rpg_min_dec_fac=100), g=1, alpha 0 or 1, a floor equal to the line rate, a first
// CNP rate at the floor.
TEST(DcqcnParams, EdgesOfEachRangeAreAccepted) {
  for (const char* spec :
       {"min_dec_factor=1", "min_dec_factor=0", "g=1", "initial_alpha=0", "initial_alpha=1",
        "min_rate_gbps=100", "first_cnp_rate_gbps=0.1", "first_cnp_rate_gbps=100"}) {
    DcqcnParams p = DcqcnParams::paper(100);
    std::string err;
    EXPECT_TRUE(p.parse(spec, &err)) << spec << ": " << err;
  }
}

TEST(DcqcnParams, ToStringRoundTripsThroughParse) {
  const DcqcnParams cx = DcqcnParams::connectx(25);
  DcqcnParams p;  // defaults differ from cx in most fields
  std::string err;
  ASSERT_TRUE(p.parse(cx.to_string(), &err)) << err;
  EXPECT_EQ(p.to_string(), cx.to_string());
  EXPECT_EQ(p.g, cx.g);
  EXPECT_EQ(p.initial_alpha, cx.initial_alpha);
  EXPECT_NE(cx.to_string().find("g=0.0048828125"), std::string::npos) << cx.to_string();
}

// --- Reaction point: decrease and alpha ---------------------------------------------------

TEST(DcqcnRp, StartsAtLineRateWithNothingArmed) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  EXPECT_EQ(rp.rate_gbps(), 100);
  EXPECT_EQ(rp.target_gbps(), 100);
  EXPECT_EQ(rp.alpha(), 1.0);
  EXPECT_FALSE(rp.recovering());
  EXPECT_EQ(rp.next_timer_ns(), DcqcnRp::kNoTimer);
  rp.on_bytes_sent(100'000'000, 1 * kUs);  // the byte counter only runs after a cut
  EXPECT_EQ(rp.counters().byte_events, 0u);
}

TEST(DcqcnRp, FirstCnpHalvesTheRateWithAlphaOne) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  rp.on_cnp(1 * kUs);
  // Rt = Rc = 100; Rc = 100 (1 - 1/2) = 50; alpha = (255/256) 1 + 1/256 = 1.
  EXPECT_EQ(rp.target_gbps(), 100);
  EXPECT_EQ(rp.rate_gbps(), 50);
  EXPECT_EQ(rp.alpha(), 1.0);
  EXPECT_TRUE(rp.recovering());
  EXPECT_EQ(rp.next_timer_ns(), 56 * kUs);  // cut + T
  EXPECT_EQ(rp.counters().cnps, 1u);
  EXPECT_EQ(rp.counters().rate_cuts, 1u);
}

TEST(DcqcnRp, CutUsesTheAlphaFromBeforeTheCnp) {
  DcqcnRp rp;
  rp.init(Paper("initial_alpha=0.5"), 0);
  rp.on_cnp(0);
  // Rc = 100 (1 - 0.5/2) = 75; alpha = 0.5 (255/256) + 1/256 = 128.5/256 = 0.501953125.
  EXPECT_EQ(rp.rate_gbps(), 75);
  EXPECT_EQ(rp.alpha(), 0.501953125);
  rp.on_cnp(0);  // the paper cuts on every CNP
  // Rt = 75; Rc = 75 (1 - 0.501953125/2) = 75 * 0.7490234375 = 56.1767578125;
  // alpha = (0.501953125 * 255 + 1)/256 = 66047/131072 = 0.50389862060546875.
  EXPECT_EQ(rp.target_gbps(), 75);
  EXPECT_EQ(rp.rate_gbps(), 56.1767578125);
  EXPECT_EQ(rp.alpha(), 0.50389862060546875);
}

TEST(DcqcnRp, AlphaDecaysOncePerQuietPeriodCountedFromTheLatestCut) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  rp.on_cnp(0);  // alpha = 1, decay periods end at 55, 110, ... us
  rp.on_timer(55 * kUs - 1);
  EXPECT_EQ(rp.alpha(), 1.0);  // no full period yet
  rp.on_timer(55 * kUs);
  EXPECT_DOUBLE_EQ(rp.alpha(), 255.0 / 256);
  rp.on_timer(110 * kUs + 7);
  EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(255.0 / 256, 2));
  rp.on_timer(550 * kUs);
  EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(255.0 / 256, 10));

  // A cut at 560 us: alpha = (255/256) (255/256)^10 + 1/256, and the period restarts there.
  const double a10 = std::pow(255.0 / 256, 10);
  rp.on_cnp(560 * kUs);
  const double after = (255.0 / 256) * a10 + 1.0 / 256;
  EXPECT_DOUBLE_EQ(rp.alpha(), after);
  rp.on_timer(614 * kUs);  // 54 us after the cut: unchanged although 605 us was a boundary of old
  EXPECT_DOUBLE_EQ(rp.alpha(), after);
  rp.on_timer(615 * kUs);
  EXPECT_DOUBLE_EQ(rp.alpha(), after * 255 / 256);
}

TEST(DcqcnRp, AlphaDependsOnlyOnTimeNotOnHowOftenTheEngineCalls) {
  DcqcnRp often, once;
  often.init(Paper(), 0);
  once.init(Paper(), 0);
  often.on_cnp(0);
  once.on_cnp(0);
  for (uint64_t t = 0; t <= 5000 * kUs; t += 1 * kUs) often.on_timer(t);
  once.on_timer(5000 * kUs);
  EXPECT_EQ(often.alpha(), once.alpha());  // bit-identical: alpha = base (1-g)^k
  EXPECT_DOUBLE_EQ(once.alpha(), std::pow(255.0 / 256, 5000 / 55));
}

TEST(DcqcnRp, MinRateFloor) {
  DcqcnRp rp;
  rp.init(Paper("min_rate_gbps=10"), 0);
  // alpha stays 1, so each cut halves: 50, 25, 12.5, then max(6.25, 10) = 10, and 10 again.
  const double expect[] = {50, 25, 12.5, 10, 10};
  for (double e : expect) {
    rp.on_cnp(0);
    EXPECT_EQ(rp.rate_gbps(), e);
  }
  EXPECT_EQ(rp.counters().rate_cuts, 5u);
}

TEST(DcqcnRp, MinDecFactorBoundsOneCut) {
  DcqcnRp rp;
  rp.init(Paper("min_dec_factor=0.75"), 0);
  rp.on_cnp(0);
  EXPECT_EQ(rp.rate_gbps(), 75);  // max(100 (1 - 1/2), 0.75 * 100)

  // ConnectX: alpha 1023/1024 gives 100 (1 - 1023/2048) = 100 * 1025/2048 = 50.048828125, above
  // the 50 % floor; then alpha = (1019/1024)(1023/1024) + 5/1024 = 1047557/1048576.
  DcqcnRp cx;
  cx.init(Connectx(), 0);
  cx.on_cnp(0);
  EXPECT_EQ(cx.rate_gbps(), 50.048828125);
  EXPECT_EQ(cx.target_gbps(), 100);  // clamp_tgt_rate 0: no increase yet, Rt stays
  EXPECT_EQ(cx.alpha(), 1047557.0 / 1048576);
}

TEST(DcqcnRp, NoCutFasterThanTheMinimumInterval) {
  DcqcnRp rp;
  rp.init(Connectx(), 0);
  rp.on_cnp(1 * kUs);  // cut 1
  const double rc1 = rp.rate_gbps();
  const double a1 = rp.alpha();
  rp.on_cnp(2 * kUs);  // inside rate_reduce_monitor_period: deferred to 1 + 4 = 5 us
  rp.on_cnp(3 * kUs);  // merged into the same deferred cut
  EXPECT_EQ(rp.rate_gbps(), rc1);
  EXPECT_EQ(rp.counters().rate_cuts, 1u);
  EXPECT_EQ(rp.counters().cnps_deferred, 2u);
  EXPECT_EQ(rp.next_timer_ns(), 5 * kUs);
  rp.on_timer(5 * kUs - 1);
  EXPECT_EQ(rp.counters().rate_cuts, 1u);
  rp.on_timer(5 * kUs);
  // Cut 2 at 5 us: alpha has decayed 4 periods of 1 us since cut 1; Rt unchanged (no increase).
  const double a = a1 * std::pow(1019.0 / 1024, 4);
  EXPECT_EQ(rp.counters().rate_cuts, 2u);
  EXPECT_DOUBLE_EQ(rp.rate_gbps(), rc1 * (1 - a / 2));
  EXPECT_DOUBLE_EQ(rp.alpha(), (1019.0 / 1024) * a + 5.0 / 1024);
  EXPECT_EQ(rp.target_gbps(), 100);
  EXPECT_EQ(rp.counters().cnps, 3u);

  // A CNP every microsecond for 100 us: cuts at 5, 9, 13, ..., 101 us and never closer.
  DcqcnRp storm;
  storm.init(Connectx(), 0);
  uint64_t last_cut_at = 0;
  uint64_t cuts = 0;
  auto note_cuts = [&](uint64_t t) {
    if (storm.counters().rate_cuts == cuts) return;
    if (cuts > 0) {
      EXPECT_GE(t - last_cut_at, 4 * kUs) << t;
    }
    last_cut_at = t;
    cuts = storm.counters().rate_cuts;
  };
  for (uint64_t t = 1 * kUs; t <= 101 * kUs; t += 1 * kUs) {
    storm.on_timer(t);  // the engine's wheel: a deferred cut falls due
    note_cuts(t);
    storm.on_cnp(t);
    note_cuts(t);
  }
  EXPECT_EQ(cuts, 26u);  // 1 us, then every 4 us from 5 to 101 us
  EXPECT_EQ(storm.counters().cnps, 101u);

  // The paper has no such interval: two CNPs at the same instant are two cuts.
  DcqcnRp paper;
  paper.init(Paper(), 0);
  paper.on_cnp(0);
  paper.on_cnp(0);
  EXPECT_EQ(paper.rate_gbps(), 25);
}

// A deferred cut replayed by a late call (the engine's wheel fires after the deadline) happens at
// its own time, not at the call's: the increase timer and the alpha decay count from it, so a
// late engine sees the same rate changes as a punctual one.
TEST(DcqcnRp, ALateDeferredCutRestartsTheTimerFromItsOwnTime) {
  DcqcnRp punctual, late;
  for (DcqcnRp* rp : {&punctual, &late}) {
    rp->init(Connectx(), 0);
    rp->on_cnp(1 * kUs);  // cut 1
    rp->on_cnp(2 * kUs);  // deferred to 5 us
  }
  punctual.on_timer(5 * kUs);
  late.on_timer(50 * kUs);  // 45 us late, still long before the increase timer (300 us)
  EXPECT_EQ(late.counters().rate_cuts, 2u);
  EXPECT_EQ(late.next_timer_ns(), 5 * kUs + 300 * kUs);
  EXPECT_EQ(late.next_timer_ns(), punctual.next_timer_ns());
  punctual.on_timer(50 * kUs);
  EXPECT_EQ(late.rate_gbps(), punctual.rate_gbps());
  EXPECT_EQ(late.alpha(), punctual.alpha());
}

TEST(DcqcnRp, ClampTargetRateOffKeepsTheTargetUntilAnIncrease) {
  // alpha pinned at 1 (no decay within the test) so every cut halves.
  const std::string base = "min_cut_interval_ns=0,initial_alpha=1,alpha_period_us=1000000";
  DcqcnRp rp;
  rp.init(Connectx(base), 0);
  rp.on_cnp(0);
  rp.on_cnp(0);
  EXPECT_EQ(rp.target_gbps(), 100);  // no increase between the cuts: Rt is not clamped
  EXPECT_EQ(rp.rate_gbps(), 25);
  rp.on_timer(300 * kUs);  // T = 0 < F = 1: fast recovery toward Rt = 100
  EXPECT_EQ(rp.rate_gbps(), 62.5);
  rp.on_cnp(301 * kUs);  // a timer increase happened and after_time_inc is set: Rt = Rc
  EXPECT_EQ(rp.target_gbps(), 62.5);
  EXPECT_EQ(rp.rate_gbps(), 31.25);

  DcqcnRp bytes_only;  // clamp_tgt_rate_after_time_inc off: only byte-counter increases count
  bytes_only.init(Connectx(base + ",clamp_tgt_rate_after_time_inc=false"), 0);
  bytes_only.on_cnp(0);
  bytes_only.on_cnp(0);
  bytes_only.on_timer(300 * kUs);
  bytes_only.on_cnp(301 * kUs);
  EXPECT_EQ(bytes_only.target_gbps(), 100);
  EXPECT_EQ(bytes_only.rate_gbps(), 31.25);
  bytes_only.on_bytes_sent(32767, 302 * kUs);  // T = 0, BC = 0: fast recovery, 65.625
  EXPECT_EQ(bytes_only.rate_gbps(), 65.625);
  bytes_only.on_cnp(303 * kUs);
  EXPECT_EQ(bytes_only.target_gbps(), 65.625);
}

TEST(DcqcnRp, FirstCnpRateReplacesTheFirstCut) {
  DcqcnRp rp;
  rp.init(Paper("first_cnp_rate_gbps=10"), 0);
  rp.on_cnp(0);
  EXPECT_EQ(rp.rate_gbps(), 10);
  EXPECT_EQ(rp.target_gbps(), 10);
  rp.on_cnp(0);  // later cuts are ordinary
  EXPECT_EQ(rp.rate_gbps(), 5);
  EXPECT_EQ(rp.target_gbps(), 10);
}

// --- Reaction point: increase -----------------------------------------------------------------

TEST(DcqcnRp, FastRecoveryConvergesTowardTheTarget) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  rp.on_cnp(0);  // Rc 50, Rt 100
  // F = 5 timer events with T = 0..4 before each: Rc = (100 + Rc)/2.
  const double fr[] = {75, 87.5, 93.75, 96.875, 98.4375};
  for (int k = 0; k < 5; ++k) {
    rp.on_timer((k + 1) * 55 * kUs);
    EXPECT_EQ(rp.rate_gbps(), fr[k]) << k;
    EXPECT_EQ(rp.target_gbps(), 100);
  }
  EXPECT_EQ(rp.timer_stage(), 5u);
  // Sixth: T = 5 = F, BC = 0: additive, Rt = min(100, 100.04) = 100, Rc = (100 + 98.4375)/2.
  rp.on_timer(330 * kUs);
  EXPECT_EQ(rp.rate_gbps(), 99.21875);
  EXPECT_EQ(rp.counters().fast_recovery, 5u);
  EXPECT_EQ(rp.counters().additive_increase, 1u);
}

TEST(DcqcnRp, AdditiveIncreaseAfterFastRecovery) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  rp.on_cnp(0);
  rp.on_cnp(1 * kUs);  // Rt = 50, Rc = 25; the timer restarts: expiries at 56, 111, ... us
  EXPECT_EQ(rp.target_gbps(), 50);
  EXPECT_EQ(rp.rate_gbps(), 25);
  const double fr[] = {37.5, 43.75, 46.875, 48.4375, 49.21875};
  for (int k = 0; k < 5; ++k) {
    rp.on_timer(1 * kUs + (k + 1) * 55 * kUs);
    EXPECT_EQ(rp.rate_gbps(), fr[k]) << k;
  }
  // T = 5: additive. Rt = 50 + 0.04 = 50.04, Rc = (50.04 + 49.21875)/2 = 49.629375.
  rp.on_timer(331 * kUs);
  EXPECT_NEAR(rp.target_gbps(), 50.04, 1e-12);
  EXPECT_NEAR(rp.rate_gbps(), 49.629375, 1e-12);
  // T = 6, BC = 0: still additive (hyper needs both counters past F). Rt = 50.08,
  // Rc = (50.08 + 49.629375)/2 = 49.8546875.
  rp.on_timer(386 * kUs);
  EXPECT_NEAR(rp.target_gbps(), 50.08, 1e-12);
  EXPECT_NEAR(rp.rate_gbps(), 49.8546875, 1e-12);
  EXPECT_EQ(rp.counters().hyper_increase, 0u);
  EXPECT_EQ(rp.counters().additive_increase, 2u);
}

TEST(DcqcnRp, HyperIncreaseWhenBothCountersPassTheThreshold) {
  // F = 1, B = 1000 B, Rai = 1, Rhai = 10 (Gb/s) for round numbers.
  DcqcnRp rp;
  rp.init(Paper("threshold=1,byte_counter_bytes=1000,rai_gbps=1,rhai_gbps=10"), 0);
  rp.on_cnp(0);
  rp.on_cnp(0);  // Rt 50, Rc 25; timer expiries at 55, 110, 165, 220 us
  struct Step {
    bool timer;  // else: 1000 bytes sent
    uint64_t at_us;
    double rt, rc;
  } steps[] = {
      {false, 1, 50, 37.5},           // T0 BC0: max < F: fast recovery (50+25)/2
      {false, 2, 51, 44.25},          // T0 BC1: additive, Rt 51, (51+37.5)/2
      {true, 55, 52, 48.125},         // T0 BC2: additive, (52+44.25)/2
      {true, 110, 53, 50.5625},       // T1 BC2: min = 1, not > F: additive, (53+48.125)/2
      {false, 111, 63, 56.78125},     // T2 BC2: hyper i = 2-1 = 1: Rt 53+10, (63+50.5625)/2
      {true, 165, 73, 64.890625},     // T2 BC3: hyper i = 1, (73+56.78125)/2
      {false, 166, 93, 78.9453125},   // T3 BC3: hyper i = 2: Rt 73+20, (93+64.890625)/2
      {true, 220, 100, 89.47265625},  // T3 BC4: i = 2: Rt min(100, 113), (100+78.9453125)/2
  };
  for (const Step& s : steps) {
    if (s.timer) {
      rp.on_timer(s.at_us * kUs);
    } else {
      rp.on_bytes_sent(1000, s.at_us * kUs);
    }
    EXPECT_EQ(rp.target_gbps(), s.rt) << s.at_us;
    EXPECT_EQ(rp.rate_gbps(), s.rc) << s.at_us;
  }
  EXPECT_EQ(rp.counters().fast_recovery, 1u);
  EXPECT_EQ(rp.counters().additive_increase, 3u);
  EXPECT_EQ(rp.counters().hyper_increase, 4u);
  EXPECT_EQ(rp.counters().timer_events, 4u);
  EXPECT_EQ(rp.counters().byte_events, 4u);
}

TEST(DcqcnRp, ByteCounterCarriesTheRemainder) {
  // B = 4000 B, 1500-byte frames, the timer far away: expiries after frames 3 (4500, keep 500),
  // 6 (5000, keep 1000), 8 (4000, keep 0), 11, 14, 16: 6 events in 16 frames (24000 B).
  DcqcnRp rp;
  rp.init(Paper("byte_counter_bytes=4000,rate_timer_us=1000000"), 0);
  rp.on_cnp(0);
  rp.on_cnp(0);  // Rt 50, Rc 25
  int events_at[16] = {};
  for (int i = 0; i < 16; ++i) {
    rp.on_sent(1500, (i + 1) * kUs);  // on_sent feeds the byte counter too
    events_at[i] = static_cast<int>(rp.counters().byte_events);
  }
  const int expect[16] = {0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 6};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(events_at[i], expect[i]) << "frame " << i + 1;
  // BC 0..4 fast recovery, BC 5: additive. Rt 50.04, Rc = (50.04 + 49.21875)/2.
  EXPECT_EQ(rp.byte_stage(), 6u);
  EXPECT_NEAR(rp.rate_gbps(), 49.629375, 1e-12);
  EXPECT_EQ(rp.counters().timer_events, 0u);

  DcqcnRp bulk;  // one big report: the same five events at once
  bulk.init(Paper("byte_counter_bytes=4000,rate_timer_us=1000000"), 0);
  bulk.on_cnp(0);
  bulk.on_cnp(0);
  bulk.on_bytes_sent(20000, 1 * kUs);
  EXPECT_EQ(bulk.counters().byte_events, 5u);
  EXPECT_EQ(bulk.rate_gbps(), 49.21875);
}

TEST(DcqcnRp, LateTimerCatchesUpInOrderAndIsIdempotent) {
  DcqcnRp punctual, late;
  punctual.init(Paper(), 0);
  late.init(Paper(), 0);
  punctual.on_cnp(0);
  late.on_cnp(0);
  punctual.on_timer(55 * kUs);
  punctual.on_timer(110 * kUs);
  punctual.on_timer(165 * kUs);
  punctual.on_timer(192 * kUs);
  late.on_timer(192 * kUs);  // 3.5 periods late: replays 55, 110, 165
  EXPECT_EQ(late.rate_gbps(), 93.75);
  EXPECT_EQ(late.rate_gbps(), punctual.rate_gbps());
  EXPECT_EQ(late.alpha(), punctual.alpha());
  EXPECT_EQ(late.timer_stage(), 3u);
  EXPECT_EQ(late.next_timer_ns(), 220 * kUs);  // the period grid is kept, not restarted at 192
  late.on_timer(192 * kUs);                    // again: nothing new
  late.on_timer(100 * kUs);                    // time never goes back
  EXPECT_EQ(late.rate_gbps(), 93.75);
  EXPECT_EQ(late.counters().timer_events, 3u);

  // A byte report that arrives after a missed expiry sees that expiry first: T = 1 when it is
  // classified, as if the engine had been on time.
  DcqcnRp a, b;
  a.init(Paper("byte_counter_bytes=1000"), 0);
  b.init(Paper("byte_counter_bytes=1000"), 0);
  a.on_cnp(0);
  b.on_cnp(0);
  a.on_timer(55 * kUs);
  a.on_bytes_sent(1000, 60 * kUs);
  b.on_bytes_sent(1000, 60 * kUs);
  EXPECT_EQ(a.rate_gbps(), b.rate_gbps());
  EXPECT_EQ(b.timer_stage(), 1u);
  EXPECT_EQ(b.byte_stage(), 1u);
}

TEST(DcqcnRp, VeryLateTimerIsBoundedPerCallAndEndsAtLineRate) {
  // Down to the 1 Mb/s floor, then recovery by the timer alone: F = 1, then +5 Mb/s per 300 us
  // (BC stays 0, so never hyper): ~20000 expiries, about 6 s.
  const std::string spec = "clamp_tgt_rate=true,min_cut_interval_ns=0";
  DcqcnRp late, punctual;
  late.init(Connectx(spec), 0);
  punctual.init(Connectx(spec), 0);
  for (int i = 0; i < 20; ++i) {
    late.on_cnp(0);
    punctual.on_cnp(0);
  }
  ASSERT_EQ(late.rate_gbps(), 0.001);
  const uint64_t now = 100'000'000'000;  // 100 s
  int calls = 0;
  while (late.next_timer_ns() <= now) {
    const uint64_t before = late.counters().timer_events;
    late.on_timer(now);
    EXPECT_LE(late.counters().timer_events - before, DcqcnRp::kMaxEventsPerCall);
    ASSERT_LT(++calls, 100);
  }
  EXPECT_GT(calls, 10);
  for (uint64_t t = punctual.next_timer_ns(); t <= now; t = punctual.next_timer_ns()) {
    punctual.on_timer(t);
  }
  EXPECT_EQ(late.rate_gbps(), 100);
  EXPECT_FALSE(late.recovering());
  EXPECT_EQ(late.next_timer_ns(), DcqcnRp::kNoTimer);
  EXPECT_EQ(late.counters().timer_events, punctual.counters().timer_events);
  EXPECT_EQ(late.counters().additive_increase, punctual.counters().additive_increase);
  EXPECT_GT(late.counters().timer_events, 19000u);
}

TEST(DcqcnRp, RecoveryToLineRateStopsTimerAndByteCounter) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  rp.on_cnp(0);
  int events = 0;
  while (rp.next_timer_ns() != DcqcnRp::kNoTimer) {
    rp.on_timer(rp.next_timer_ns());
    ASSERT_LT(++events, 1000);
  }
  EXPECT_EQ(rp.rate_gbps(), 100);
  EXPECT_EQ(rp.target_gbps(), 100);
  EXPECT_FALSE(rp.recovering());
  const uint64_t byte_events = rp.counters().byte_events;
  rp.on_bytes_sent(100'000'000, rp.params().rate_timer_ns * 1000);
  EXPECT_EQ(rp.counters().byte_events, byte_events);
}

// --- The line rate moving under a running RP (a NIC's link came up at its speed) --------------

TEST(DcqcnParams, SetLineRateLowersWhatWouldBeAboveIt) {
  DcqcnParams p = Paper("first_cnp_rate_gbps=40");
  p.set_line_rate(25);
  EXPECT_EQ(p.line_gbps, 25);
  EXPECT_EQ(p.min_rate_gbps, 0.1);
  EXPECT_EQ(p.first_cnp_rate_gbps, 25);
  std::string err;
  EXPECT_TRUE(p.validate(&err)) << err;
  p.set_line_rate(0.01);  // a 10 Mb/s link: below the paper's 100 Mb/s floor
  EXPECT_EQ(p.min_rate_gbps, 0.01);
  EXPECT_TRUE(p.validate(&err)) << err;
  p.set_line_rate(400);  // up again: nothing else moves
  EXPECT_EQ(p.min_rate_gbps, 0.01);
  EXPECT_EQ(p.first_cnp_rate_gbps, 0.01);
  EXPECT_TRUE(p.validate(&err)) << err;
}

TEST(DcqcnRp, AtLineRateItMovesToTheNewLineRateAndCutsFromThere) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  rp.set_line_rate(25, 1 * kUs);
  EXPECT_EQ(rp.rate_gbps(), 25);
  EXPECT_EQ(rp.target_gbps(), 25);
  EXPECT_FALSE(rp.recovering());
  EXPECT_EQ(rp.params().line_gbps, 25);
  EXPECT_EQ(rp.tx_time(2 * kUs), 2 * kUs);
  // 4000-byte frames at 25 Gb/s take 1,280 ns each; the burst is 8192 bytes' time (2,621.44
  // ns), so the third waits 3 x 1,280 - 2,621.44 ns (at 100 Gb/s it would not wait at all).
  for (int i = 0; i < 3; ++i) rp.on_sent(4000, 2 * kUs);
  EXPECT_NEAR(static_cast<double>(rp.tx_time(2 * kUs)), 2000 + 3840 - 2621.44, 1);
  rp.on_cnp(3 * kUs);
  EXPECT_EQ(rp.rate_gbps(), 12.5);  // 25 (1 - 1/2), not 50: the cut starts from the link's rate
  rp.set_line_rate(100, 4 * kUs);   // while recovering, a faster link changes neither rate
  EXPECT_EQ(rp.rate_gbps(), 12.5);
  EXPECT_EQ(rp.target_gbps(), 25);
  EXPECT_TRUE(rp.recovering());
  int events = 0;  // and recovery now climbs on to the new line rate
  while (rp.next_timer_ns() != DcqcnRp::kNoTimer) {
    rp.on_timer(rp.next_timer_ns());
    ASSERT_LT(++events, 100000);
  }
  EXPECT_EQ(rp.rate_gbps(), 100);
  EXPECT_FALSE(rp.recovering());
}

TEST(DcqcnRp, WhileRecoveringASlowerLinkCutsWhatIsAboveIt) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  rp.on_cnp(0);  // Rc 50, Rt 100
  rp.set_line_rate(80, 1 * kUs);
  EXPECT_EQ(rp.rate_gbps(), 50);
  EXPECT_EQ(rp.target_gbps(), 80);
  EXPECT_TRUE(rp.recovering());
  rp.set_line_rate(40, 2 * kUs);  // Rc above the line: at the line, recovery over
  EXPECT_EQ(rp.rate_gbps(), 40);
  EXPECT_EQ(rp.target_gbps(), 40);
  EXPECT_FALSE(rp.recovering());
  EXPECT_EQ(rp.next_timer_ns(), DcqcnRp::kNoTimer);
}

// --- Pacer ------------------------------------------------------------------------------------

// Sends `frames` frames of `bytes` as soon as the pacer allows, the engine waking exactly at
// tx_time(). Returns the start time of the last frame.
uint64_t SendBackToBack(DcqcnRp* rp, int frames, uint32_t bytes) {
  uint64_t now = 0;
  for (int i = 0; i < frames; ++i) {
    now = rp->tx_time(now);
    rp->on_sent(bytes, now);
  }
  return now;
}

TEST(DcqcnPacer, HoldsTheRateExactlyOverAMillionFrames) {
  // 3 Gb/s, 1000-byte frames: 8000/3 = 2666.67 ns each, never a whole number of ns.
  DcqcnRp rp;
  rp.init(Paper("line_gbps=3,pacer_burst_ns=0,pacer_burst_bytes=0"), 0);
  const int n = 1'000'000;
  const double cost = 1000 * 8 / 3.0;
  const uint64_t last = SendBackToBack(&rp, n, 1000);
  // Frame k starts at k * cost: the error stays within one frame, in fact within 1 ns (the
  // pacer rounds each start to whole ns but carries the fraction).
  const double expect_last = (n - 1) * cost;
  EXPECT_LT(std::abs(static_cast<double>(last) - expect_last), cost);
  EXPECT_LE(std::abs(static_cast<double>(last) - expect_last), 1.0);
}

// The pacer on its own, as a QP's rate limit uses it: a frame may start once the frames before
// it have taken their time at the rate (less the tolerance), and a new rate rescales what is
// owed. 1 Gb/s, 1000-byte frames: 8 us each; tolerance 2 us (burst_bytes 0).
TEST(Pacer, KeepsItsRateAndRescalesWhatIsOwedWhenTheRateChanges) {
  roce::cc::Pacer p;
  p.set_rate(1.0, 0, 2 * kUs, 0);
  uint64_t now = 0;
  for (int i = 0; i < 10; ++i) {
    now = p.tx_time(now);
    EXPECT_EQ(now, i == 0 ? 0 : i * 8 * kUs - 2 * kUs) << i;
    p.on_sent(1000, now);
  }
  // Owed at 9 * 8 - 2 = 70 us: 10 us more at 1 Gb/s; 5 us at 2 Gb/s.
  p.set_rate(2.0, now, 2 * kUs, 0);
  EXPECT_EQ(p.tx_time(now), now + 5 * kUs - 2 * kUs);
  // A long idle earns only the tolerance, less than a frame here: one frame at once after it.
  now += 1'000'000 * kUs;
  int at_once = 0;
  while (p.tx_time(now) == now && at_once < 10) {
    p.on_sent(1000, now);
    ++at_once;
  }
  EXPECT_EQ(at_once, 1);  // 4 us per frame at 2 Gb/s, tolerance 2 us: the second waits 2 us
}

// A burst cap (ibv_modify_qp_rate_limit's max_burst_sz): after an idle, frames of the typical
// size leave max_burst / typical at once, then one every frame time. 1 Gb/s, 1000-byte frames.
TEST(Pacer, ABurstCapLetsThatManyTypicalFramesGoAtOnce) {
  auto at_once = [](uint32_t max_burst, uint32_t pkt, uint32_t frame) {
    roce::cc::Pacer p;
    p.set_rate_burst(1.0, 0, max_burst, pkt);
    const uint64_t now = 1'000'000 * kUs;  // long idle
    int n = 0;
    while (p.tx_time(now) == now && n < 100) {
      p.on_sent(frame, now);
      ++n;
    }
    // Then the rate: the next frame waits until only the burst's tolerance is owed.
    EXPECT_EQ(p.tx_time(now) - now,
              8ull * kUs * n - 8ull * kUs * (max_burst > pkt ? max_burst - pkt : 0) / 1000);
    return n;
  };
  EXPECT_EQ(at_once(4000, 1000, 1000), 4);
  EXPECT_EQ(at_once(3999, 1000, 1000), 3);
  EXPECT_EQ(at_once(4000, 2000, 1000), 3);  // a larger typical size: fewer of the smaller frames
  EXPECT_EQ(at_once(500, 1000, 1000), 1);   // a cap below one frame still lets one go
  EXPECT_EQ(at_once(0, 1000, 1000), 1);
}

TEST(DcqcnPacer, FollowsTheRateAfterACut) {
  DcqcnRp rp;
  rp.init(Paper("pacer_burst_ns=0,pacer_burst_bytes=0,rate_timer_us=1000000000"), 0);
  rp.on_cnp(0);  // 50 Gb/s: a 4000-byte frame costs 640 ns
  const uint64_t last = SendBackToBack(&rp, 1001, 4000);
  EXPECT_EQ(last, 1000 * 640u);
}

TEST(DcqcnPacer, BurstLetsATickedEngineKeepTheRate) {
  // The engine wakes on the timer wheel's 1.024 us ticks (TimerWheel::arm rounds up), sending
  // every frame the pacer allows. 100 Gb/s, 1024-byte frames: 81.92 ns each, ~12.5 per tick.
  auto run = [](const std::string& spec) {
    DcqcnRp rp;
    rp.init(Paper(spec), 0);
    uint64_t now = 0, bytes = 0;
    const uint64_t end = 10'000'000;  // 10 ms
    while (now < end) {
      while (rp.tx_time(now) == now) {
        rp.on_sent(1024, now);
        bytes += 1024;
      }
      const uint64_t t = rp.tx_time(now);
      now = ((t + 1023) >> 10) << 10;  // next tick at or after t
    }
    return static_cast<double>(bytes) * 8 / static_cast<double>(end);  // Gb/s
  };
  EXPECT_NEAR(run(""), 100, 100 * 1e-3);  // default burst 2048 ns covers a tick
  // Without a burst every late wake-up is time lost: about one frame per tick.
  EXPECT_LT(run("pacer_burst_ns=0,pacer_burst_bytes=0"), 10);
}

// Frames of 1024 B the pacer lets go at the single instant `at`.
int FramesAtOneInstant(DcqcnRp* rp, uint64_t at) {
  int n = 0;
  while (rp->tx_time(at) == at && n < 100000) {
    rp->on_sent(1024, at);
    ++n;
  }
  return n;
}

TEST(DcqcnPacer, IdleTimeEarnsNoMoreThanTheBurst) {
  DcqcnRp rp;
  rp.init(Paper(), 0);
  // 100 Gb/s: tolerance max(2048 ns, 8192 B = 655 ns) = 2048 ns; a 1024-byte frame is 81.92 ns:
  // the frame after k others starts while floor(k * 81.92) <= 2048, i.e. k <= 25: 26 frames.
  EXPECT_EQ(FramesAtOneInstant(&rp, 0), 26);
  EXPECT_EQ(FramesAtOneInstant(&rp, 1'000'000'000), 26);  // after 1 s idle: no more
  // At 1 Gb/s the byte budget (8192 B = 65536 ns) is capped at 4 x 2048 ns = 8192 ns: a byte
  // allowance must not become a long burst at low rates. Frames of 8192 ns: 1 + 1 = 2.
  DcqcnRp slow;
  slow.init(Paper("line_gbps=1"), 0);
  EXPECT_EQ(FramesAtOneInstant(&slow, 5'000'000'000), 2);
}

// Frames charged at a low rate are owed at the new rate when it rises: a QP cut to the floor
// must not stay silent for the floor-rate time of what it already sent.
TEST(DcqcnPacer, DebtIsRescaledWhenTheRateChanges) {
  DcqcnRp rp;
  rp.init(DcqcnParams::connectx(100), 0);
  // Drive the rate down with CNPs well apart (ConnectX allows one cut per 4 us).
  uint64_t t = 0;
  for (int i = 0; i < 40; ++i) {
    t += 10'000;
    rp.on_cnp(t);
  }
  const double low = rp.rate_gbps();
  ASSERT_LT(low, 1.0);
  rp.on_sent(1024, t);
  const uint64_t wait_low = rp.tx_time(t) - t;
  // Recovery within that wait: the rate climbs back (timer events every 300 us) and the next
  // frame becomes due far sooner than the low-rate cost said.
  const uint64_t later = t + 2'000'000;
  ASSERT_GT(wait_low, later - t);
  rp.on_timer(later);
  ASSERT_GT(rp.rate_gbps(), 10 * low);
  EXPECT_EQ(rp.tx_time(later), later);  // without the rescale: t + wait_low
}

// --- Notification point ----------------------------------------------------------------------

TEST(DcqcnNp, AtMostOneCnpPerIntervalPerQp) {
  DcqcnNp np;
  np.init(DcqcnParams::paper(100));         // 50 us
  EXPECT_TRUE(np.on_ce_packet(0));          // the first CE packet is answered at once
  EXPECT_FALSE(np.on_ce_packet(10 * kUs));  // 10 us later: absorbed
  EXPECT_TRUE(np.on_ce_packet(60 * kUs));   // 60 us after the last CNP
  EXPECT_FALSE(np.on_ce_packet(109 * kUs));
  EXPECT_TRUE(np.on_ce_packet(110 * kUs));        // exactly one interval
  EXPECT_TRUE(np.on_ce_packet(5'000'000 * kUs));  // after idle: immediately
  EXPECT_EQ(np.counters().ce_packets, 6u);
  EXPECT_EQ(np.counters().cnps_sent, 4u);

  // A CE packet every 10 us for 100 us: CNPs at 0, 50 and 100 us.
  DcqcnNp steady;
  steady.init(50 * kUs);
  int cnps = 0;
  for (uint64_t t = 0; t <= 100 * kUs; t += 10 * kUs) cnps += steady.on_ce_packet(t);
  EXPECT_EQ(cnps, 3);
}

TEST(DcqcnNp, QpsAreIndependent) {
  DcqcnNp a, b;
  a.init(50 * kUs);
  b.init(50 * kUs);
  EXPECT_TRUE(a.on_ce_packet(0));
  EXPECT_TRUE(b.on_ce_packet(10 * kUs));  // a's CNP does not silence b
  EXPECT_FALSE(a.on_ce_packet(20 * kUs));
  EXPECT_FALSE(b.on_ce_packet(20 * kUs));
  EXPECT_TRUE(a.on_ce_packet(50 * kUs));
  EXPECT_FALSE(b.on_ce_packet(50 * kUs));
  EXPECT_TRUE(b.on_ce_packet(60 * kUs));
}

TEST(DcqcnNp, ZeroIntervalAnswersEveryCePacket) {
  DcqcnNp np;
  np.init(0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(np.on_ce_packet(7));
  EXPECT_EQ(np.counters().cnps_sent, 5u);
}

}  // namespace
