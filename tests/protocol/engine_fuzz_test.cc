// The engine fuzz program (tests/support/engine_fuzz.h) on seeded random bytes: a fixed set of
// programs that runs in every suite, the ASan/UBSan one included. The libFuzzer target
// (tests/fuzz/engine_fuzzer.cc) explores further from the same code.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "../support/engine_fuzz.h"

namespace roce::test {
namespace {

TEST(EngineFuzz, SeededRandomProgramsKeepEveryInvariant) {
  constexpr int kPrograms = 2000;
  EngineFuzzStats st;
  for (int seed = 1; seed <= kPrograms; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    std::vector<uint8_t> bytes(64 + rng() % 2048);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    const std::string err = run_engine_program(bytes.data(), bytes.size(), &st);
    ASSERT_EQ(err, "") << "program seed " << seed;
  }
  std::printf(
      "frames sent %lu, completions %lu ok / %lu in error; NAKs sent: %lu sequence, %lu error, "
      "%lu RNR; %lu duplicates, %lu atomics; requester: %lu retransmissions, %lu timeouts, %lu "
      "RNR NAKs, %lu error NAKs, %lu stale responses\n",
      st.frames_sent, st.completions_ok, st.completions_err, st.qp.seq_naks_sent,
      st.qp.error_naks_sent, st.qp.rnr_naks_sent, st.qp.duplicate_requests, st.qp.atomics_executed,
      st.qp.retransmit_events, st.qp.local_ack_timeouts, st.qp.rnr_naks_received,
      st.qp.error_naks_received, st.qp.dropped_responses);
  // The programs reach the states they are meant to (fixed seeds: this is deterministic).
  EXPECT_GT(st.completions_ok, 0u);
  EXPECT_GT(st.completions_err, 0u);
  EXPECT_GT(st.qp.seq_naks_sent, 0u);
  EXPECT_GT(st.qp.error_naks_sent, 0u);
  EXPECT_GT(st.qp.rnr_naks_sent, 0u);
  EXPECT_GT(st.qp.duplicate_requests, 0u);
  EXPECT_GT(st.qp.atomics_executed, 0u);
  EXPECT_GT(st.qp.retransmit_events, 0u);
  EXPECT_GT(st.qp.local_ack_timeouts, 0u);
  EXPECT_GT(st.qp.rnr_naks_received, 0u);
  EXPECT_GT(st.qp.error_naks_received, 0u);
  EXPECT_GT(st.qp.dropped_responses, 0u);
  // UC and UD QPs take requests too, and refuse what is not theirs.
  std::printf(
      "programs RC/UC/UD %lu/%lu/%lu, requests taken %lu/%lu/%lu; UD: %lu Q_Key mismatches, "
      "%lu too long; %lu of the wrong transport\n",
      st.programs[0], st.programs[1], st.programs[2], st.rx_packets[0], st.rx_packets[1],
      st.rx_packets[2], st.ud_qkey_mismatch, st.ud_too_long, st.rx_wrong_transport);
  for (int t = 0; t < 3; ++t) {
    EXPECT_GT(st.programs[t], 100u) << t;
    EXPECT_GT(st.rx_packets[t], 0u) << t;
  }
  EXPECT_GT(st.ud_qkey_mismatch, 0u);
  EXPECT_GT(st.ud_too_long, 0u);
  EXPECT_GT(st.rx_wrong_transport, 0u);
}

}  // namespace
}  // namespace roce::test
