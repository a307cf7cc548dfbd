#!/usr/bin/env bash
# What the verbs shim adds to roce-perf's figures (docs/performance.md, "Verbs shim overhead"):
# roce-perf send_lat 8 B and write_bw 64 KiB (path MTU 4096) over net_memif, each run through
# the stack's native API (roce-perf) and through <infiniband/verbs.h> and our libibverbs
# (roce-perf --transport verbs, i.e. roce-perf-verbs), the two alternating (native first in odd
# repetitions, verbs first in even ones), on the same two CPUs, the engine in the test thread
# (--inline-engine / mode = inline) on both. Prints a markdown table of the medians, the
# overhead, and every sample.
#
#   scripts/bench-shim.sh [-n N] [-s SECONDS] [--build DIR] [--cpus A,B] [--keep]
#                         [--vdev memif|af_packet]
#     (as scripts/bench-datapath.sh; build: ninja -C DIR roce-perf roce-perf-verbs)
#     --vdev af_packet: the pairs run in two namespaces (scripts/testbed.sh) over a veth pair
#     and net_af_packet instead of net_memif in the root namespace
#
# Needs root. Processes bounded by timeout and killed on exit (helpers of bench-datapath.sh).
set -euo pipefail
BENCH_LIB_ONLY=1
# shellcheck source=scripts/bench-datapath.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-datapath.sh"

shim_main() {
  parse_args "$@"
  local perf=$BUILD/apps/roce-perf
  [[ -x $perf && -x $BUILD/apps/roce-perf-verbs ]] ||
    die "build first: ninja -C $BUILD roce-perf roce-perf-verbs"
  bench_init
  [[ $VDEV == af_packet ]] && testbed_up
  echo "bench: $N repetitions, CPUs $CPU_A (side A) and $CPU_B (side B), outputs in $WORK" >&2
  local i t order
  for ((i = 1; i <= N; i++)); do
    echo "bench: repetition $i/$N" >&2
    order="native verbs"
    ((i % 2 == 0)) && order="verbs native"
    local -A bw=() lat=()
    for t in $order; do
      REP=$i.$t
      roce_write_bw "$perf" --transport "$t"; bw[$t]=$RESULT
    done
    for t in $order; do
      REP=$i.$t
      roce_send_lat "$perf" --transport "$t"; lat[$t]=$RESULT
    done
    echo "${bw[native]} ${bw[verbs]} ${lat[native]} ${lat[verbs]}" >>"$WORK/shim.txt"
    sed 's/^/bench:   /' <(tail -n 1 "$WORK/shim.txt") >&2
  done
  local bn bv ln lv ln99 lv99
  bn=$(median "$WORK/shim.txt" 1)
  bv=$(median "$WORK/shim.txt" 2)
  ln=$(median "$WORK/shim.txt" 3)
  ln99=$(median "$WORK/shim.txt" 4)
  lv=$(median "$WORK/shim.txt" 5)
  lv99=$(median "$WORK/shim.txt" 6)
  # Overhead: bandwidth lost, latency added, relative to native; per repetition (the two
  # transports back to back) and of the medians. Target <= 10 %, judged on the paired figure.
  awk '{printf "%.4f %.4f %.4f\n", ($1 - $2) / $1, ($5 - $3) / $3, ($6 - $4) / $4}' \
    "$WORK/shim.txt" >"$WORK/overhead.txt"
  local pb pl pl99 bok lok
  pb=$(median "$WORK/overhead.txt" 1)
  pl=$(median "$WORK/overhead.txt" 2)
  pl99=$(median "$WORK/overhead.txt" 3)
  bok=$(awk -v r="$pb" 'BEGIN {print (r <= 0.1) ? 1 : 0}')
  lok=$(awk -v r="$pl" 'BEGIN {print (r <= 0.1) ? 1 : 0}')
  sp() { awk -v r="$1" 'BEGIN {printf "%+.1f %%", 100 * r}'; }
  cat <<EOF

Medians of $N repetitions, native and verbs back to back, alternating which goes first (CPUs
$CPU_A and $CPU_B, net_$VDEV, --inline-engine on both sides; write_bw -D $SECS -f 1, send_lat
-n $LAT_ITERS). Overhead: bandwidth lost / latency added by the shim, relative to native; "paired"
is the median of the per-repetition overheads, on which the target is judged.

| measurement | native API | verbs shim | overhead of the medians | paired overhead | target ≤ 10 % |
|---|---|---|---|---|---|
| write_bw 64 KiB, MTU 4096 (Gb/s) | $bn | $bv | $(sp "$(awk -v n="$bn" -v v="$bv" 'BEGIN {print (n - v) / n}')") | $(sp "$pb") | $(met "$bok") |
| send_lat 8 B, median half round trip (µs) | $ln | $lv | $(sp "$(awk -v n="$ln" -v v="$lv" 'BEGIN {print (v - n) / n}')") | $(sp "$pl") | $(met "$lok") |
| send_lat 8 B, 99 % (µs) | $ln99 | $lv99 | $(sp "$(awk -v n="$ln99" -v v="$lv99" 'BEGIN {print (v - n) / n}')") | $(sp "$pl99") | |
$( [[ -s $WORK/failures ]] && echo && echo "Runs that failed and were repeated: $(paste -sd ';' "$WORK/failures")." )

Every repetition (write_bw Gb/s; send_lat µs, median / 99 %):

| # | first | write_bw native | write_bw verbs | send_lat native | send_lat verbs | bandwidth lost | latency added |
|---|---|---|---|---|---|---|---|
EOF
  paste -d ' ' "$WORK/shim.txt" "$WORK/overhead.txt" |
    awk '{printf "| %d | %s | %s | %s | %s / %s | %s / %s | %+.1f %% | %+.1f %% |\n", NR, NR % 2 ? "native" : "verbs", $1, $2, $3, $4, $5, $6, 100 * $7, 100 * $8}'
}

shim_main "$@"
