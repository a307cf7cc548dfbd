#!/usr/bin/env bash
# bench-shim.sh's report on made-up samples: a target (shim overhead <= 10 %) is met only when
# the paired overhead and the overhead of the bests (each transport's best repetition but one)
# both meet it, so that runs on a slumped memif link, on either side, cannot carry the verdict. Runs
# anywhere (no DPDK, no root).
#
# Usage: bench_shim_report_test.sh
set -uo pipefail
# shellcheck source=tests/e2e/bench_report_lib.sh
source "$(dirname "$0")/bench_report_lib.sh"

# shim_report LINES [FAILURES]: the script's report on these samples ("write_bw_native
# write_bw_verbs send_lat_native send_lat_native99 send_lat_verbs send_lat_verbs99" a line).
shim_report() {
  printf '%s\n' "$1" >"$WORK/shim.txt"
  rm -f "$WORK/failures"
  [[ -z ${2-} ]] || printf '%s\n' "$2" >"$WORK/failures"
  local dir=$WORK
  # shellcheck source=scripts/bench-shim.sh
  (BENCH_SHIM_LIB_ONLY=1 source "$REPO/scripts/bench-shim.sh" && WORK=$dir N=5 shim_report)
}
BW="write_bw 64 KiB, MTU 4096"
LAT="send_lat 8 B, median"
SPREAD="write_bw's repetitions spread"
# paired_within NAME OUTPUT ROW_PREFIX: the row's paired overhead is within the target, i.e. the
# paired rule alone would say "met" (the case is one that only the bests can catch).
paired_within() {
  local cell
  cell=$(grep -F "| $3" <<<"$2" | head -n 1 | awk -F ' [|] ' '{print $5}')
  awk -v c="${cell% %}" 'BEGIN {exit !(c != "" && c + 0 <= 10)}' ||
    fail "$1" "the paired overhead ($cell) is not within the target: the case tests nothing"
}

# Steady lines, 5 repetitions: latency (the last four columns), verbs ~5 % slower.
STEADY_LAT=('1.30 24.0 1.365 25.0' '1.31 24.5 1.375 25.2' '1.29 24.2 1.355 25.1'
  '1.30 24.1 1.365 25.3' '1.32 24.3 1.385 25.0')
# with_lat BW_LINES: each bandwidth line ("native verbs") followed by STEADY_LAT's.
with_lat() {
  local i=0 l
  while read -r l; do
    echo "$l ${STEADY_LAT[i]}"
    i=$((i + 1))
  done <<<"$1"
}

# (a) A steady link, verbs ~5 % behind native in both; a repeated run is listed.
out=$(shim_report "$(with_lat '80.0 76.0
81.0 77.0
79.5 75.5
80.5 76.5
80.2 76.2')" "write_bw repetition 2.verbs attempt 1")
expect "steady, 5 % behind: bandwidth" "$out" "$BW" "**met** |" "Runs that failed and were repeated: write_bw repetition 2.verbs attempt 1."
expect "steady, 5 % behind: latency" "$out" "$LAT" "**met** |"
! grep -qF "$SPREAD" <<<"$out" || fail "steady, 5 % behind" "a spread note on a steady link"

# (b) Native slumped in 3 of 5 repetitions: the paired median is about -190 %, but at their
# bests verbs is 20 % behind (64 against 80 Gb/s).
out=$(shim_report "$(with_lat '20.0 64.0
80.0 64.0
21.0 63.5
22.0 64.0
79.0 63.0')")
expect "native slumped in most repetitions: bandwidth" "$out" "$BW" "**not met** |" "$SPREAD"
paired_within "native slumped in most repetitions" "$out" "$BW"
expect "native slumped in most repetitions: latency" "$out" "$LAT" "**met** |"

# (c) Verbs slumped in one repetition, otherwise 3 % behind: neither figure moves much.
out=$(shim_report "$(with_lat '80.0 77.6
81.0 20.0
79.0 76.6
80.0 77.6
80.5 78.1')")
expect "verbs slumped once, otherwise 3 % behind" "$out" "$BW" "**met** |" "$SPREAD"

# (d) Latency: native slow in 3 of 5 repetitions, verbs 24 % slower at the bests but one (1.25
# against 1.01 µs): paired about -36 %.
out=$(shim_report '80.0 76.0 2.00 26.0 1.25 25.0
81.0 77.0 1.00 24.0 1.26 25.2
79.5 75.5 1.01 24.2 1.25 25.1
80.5 76.5 2.05 26.1 1.27 25.3
80.2 76.2 1.95 26.3 1.25 25.0')
expect "native latency slow in most repetitions" "$out" "$LAT" "**not met** |"
paired_within "native latency slow in most repetitions" "$out" "$LAT"
expect "native latency slow in most repetitions: bandwidth" "$out" "$BW" "**met** |"

# (e) Both figures count: verbs 15 % behind in three repetitions (the paired median), 2 % at the
# bests.
out=$(shim_report "$(with_lat '80.0 68.0
80.0 68.0
80.0 68.0
90.0 88.0
90.0 88.0')")
expect "paired over the target, bests within" "$out" "$BW" "**not met** |"

# (f) One native run in the machine's fast state (57.4 Gb/s against ~31, as measured at 8f4e727;
# docs/performance.md, "Verbs shim overhead"): the very best is left out, and verbs ~3 % behind
# is met.
out=$(shim_report "$(with_lat '57.4 30.0
31.0 30.5
31.5 29.8
30.8 30.2
31.2 30.1')")
expect "one native run in the fast state" "$out" "$BW" "**met** |"

echo "$fails failed"
((fails == 0))
