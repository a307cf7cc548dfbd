// A fuzz "program" for the engine: one engine with a QP (RC mostly, UC or UD) connected to an
// imaginary peer (ProtocolHarness), driven by bytes that choose what happens next. The peer sends
// requests and responses whose opcodes, PSNs, lengths, addresses, keys and syndromes are fuzzed
// (mostly near what the QP expects, sometimes anything); the application posts sends and receives;
// virtual time jumps to the next timer. Shared by the libFuzzer target
// (tests/fuzz/engine_fuzzer.cc) and a seeded gtest that runs in every suite, ASan included.
//
// Invariants checked, beyond "no crash and no sanitizer report":
//   - every frame the engine sends parses (addresses, lengths and ICRC are well formed);
//   - nothing outside the registered memory region changes (guard bytes at both ends);
//   - every completion belongs to a posted work request, and none completes twice;
//   - once the program ends and the timers run out, the QP is quiet, and destroying the engine
//     returns every packet buffer it took from the port.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "stack/core/qp.h"

namespace roce::test {

// What programs did, summed over runs: shows that they reach the states they are meant to.
struct EngineFuzzStats {
  uint64_t frames_sent = 0;
  uint64_t completions_ok = 0;
  uint64_t completions_err = 0;
  QpCounters qp{};              // the QP's counters, summed
  uint64_t programs[3] = {};    // by QP type: RC, UC, UD
  uint64_t rx_packets[3] = {};  // requests the QP took, by QP type
  uint64_t ud_qkey_mismatch = 0;
  uint64_t ud_too_long = 0;
  uint64_t rx_wrong_transport = 0;
};

// Runs one program. Returns "" when every invariant holds, else what broke.
std::string run_engine_program(const uint8_t* data, size_t size, EngineFuzzStats* stats = nullptr);

}  // namespace roce::test
