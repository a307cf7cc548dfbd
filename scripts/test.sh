#!/usr/bin/env bash
# scripts/test.sh: the project's test command (README, .ci/run). On a fresh Debian 12 machine
# it installs what is missing, then:
#   1. builds everything (RelWithDebInfo, warnings as errors) in build/ and runs the whole ctest
#      suite;
#   2. builds everything again with ASan + UBSan in build-asan/ and runs the tests of every
#      layer there but the long ones (the cc scenarios, perftest interop and the rxe guest);
#   3. builds the libFuzzer targets with clang in build-fuzz/ (the code under test instrumented
#      for coverage and ASan/UBSan) and fuzzes the parser (seeded from the golden captures), the
#      engine, the neighbour agent (ARP / ND / echo) and the device configuration's parsers,
#      ${ROCE_FUZZ_SECONDS:-60} s each.
# Exits non-zero if any step fails. ROCE_TEST_QUICK=1 runs step 1 only. It takes no arguments:
# --help prints this text, anything else is refused (exit 2) before anything starts.
set -euo pipefail
case "${1-}" in
  "") ;;
  -h | --help)
    awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"
    exit 0
    ;;
  *)
    echo "test.sh: takes no arguments, got '$1' (see scripts/test.sh --help)" >&2
    exit 2
    ;;
esac
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)

"$root/scripts/install-deps.sh"

step() { printf '\n=== %s ===\n' "$*"; }

step "build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j "$jobs"
step "test (build/)"
(cd build && ctest --output-on-failure -j "$jobs" ${ROCE_CTEST_ARGS:-})

if [[ "${ROCE_TEST_QUICK:-0}" == 1 ]]; then exit 0; fi

step "build with ASan + UBSan (build-asan/)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DROCE_SANITIZE=ON \
  -DROCE_WITH_DPDK=ON -DROCE_BENCHMARKS=OFF >/dev/null
ninja -C build-asan -j "$jobs"
step "test with ASan + UBSan (build-asan/)"
(cd build-asan && ctest --output-on-failure -j "$jobs" -L 'unit|protocol|sim|dpdk|verbs|e2e|coll' \
  -E '^e2e_perftest_interop$')

step "fuzz the parser, the engine, the neighbour agent and the configuration (build-fuzz/, clang libFuzzer)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DROCE_FUZZ=ON -DROCE_FUZZ_SECONDS="${ROCE_FUZZ_SECONDS:-60}" -DROCE_WITH_DPDK=OFF \
  -DROCE_BENCHMARKS=OFF >/dev/null
ninja -C build-fuzz -j "$jobs" parse_fuzzer engine_fuzzer neighbor_fuzzer config_fuzzer
(cd build-fuzz && ctest --output-on-failure -j "$jobs" -L fuzz)
