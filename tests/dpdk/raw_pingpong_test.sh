#!/usr/bin/env bash
# roce-raw-pingpong (dpdk/tools/), the benchmark's latency floor: ROUNDS short ping-pong pairs over
# net_memif, each process on its own EAL. Both sides must report and exit 0 every round: the pong
# side used to crash at exit now and then on a loaded machine (3 of 6 runs of this test failed),
# when its port's stop on the main thread met net_memif's handling of the ping side's disconnect
# on the interrupt thread.
#
#   raw_pingpong_test.sh TOOL [ROUNDS]
set -euo pipefail

TOOL=${1:?usage: raw_pingpong_test.sh TOOL [ROUNDS]}
ROUNDS=${2:-20}
if ((EUID != 0)); then
  echo "SKIP: needs root (DPDK's runtime directory under /var/run/dpdk)"
  exit 77
fi
WORK=$(mktemp -d /tmp/roce-rawpp.XXXXXX)
PONG=
HOG=
cleanup() {
  local rc=$?
  set +e
  [[ -n $PONG ]] && kill "$PONG" 2>/dev/null && wait "$PONG" 2>/dev/null
  [[ -n $HOG ]] && kill "$HOG" 2>/dev/null && wait "$HOG" 2>/dev/null
  if ((rc != 0)); then
    for f in "$WORK"/*.out; do [[ -f $f ]] && { echo "== $f"; tail -n 20 "$f"; }; done
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
die() {
  echo "FAIL: $*"
  exit 1
}

# Each side's lcore on a CPU of its own where there are two (as the benchmark runs them).
cpus=()
for part in $(taskset -pc $$ | sed 's/.*: //' | tr ',' ' '); do
  if [[ $part == *-* ]]; then
    for ((c = ${part%-*}; c <= ${part#*-}; c++)); do cpus+=("$c"); done
  else
    cpus+=("$part")
  fi
done
cpu_of() { if ((${#cpus[@]} >= 2)); then echo "${cpus[$1]}"; else echo "${cpus[0]:-0}"; fi; }
eal() { echo "--no-huge -m 256 --no-pci --file-prefix rawpp-$$-$1 --log-level=4 --lcores 0@$(cpu_of "$2")"; }
# The crash needed the interrupt thread held up while the main thread went on (it showed on a
# loaded machine only: 5 of 30 runs with a third busy thread, 0 of 30 without). A niced busy
# loop, killed on exit, plays the load.
timeout 600 nice -n 19 sh -c 'while :; do :; done' &
HOG=$!
for ((r = 1; r <= ROUNDS; r++)); do
  sock=$WORK/pp-$r.sock
  vdev="net_memif0,socket=$sock,socket-abstract=no"
  # shellcheck disable=SC2046 # eal's words are separate arguments
  timeout 60 "$TOOL" $(eal pong 1) --vdev "$vdev,role=server" -- --role pong --timeout 30 \
    >"$WORK/pong.out" 2>&1 &
  PONG=$!
  for ((i = 0; i < 300; i++)); do
    [[ -S $sock ]] && break
    sleep 0.1
  done
  [[ -S $sock ]] || die "round $r: the pong side made no memif socket"
  ping_rc=0
  # shellcheck disable=SC2046
  timeout 60 "$TOOL" $(eal ping 0) --vdev "$vdev,role=client" -- --role ping --iters 2000 \
    --warmup 100 --timeout 30 >"$WORK/ping.out" 2>&1 || ping_rc=$?
  pong_rc=0
  wait "$PONG" || pong_rc=$?
  PONG=
  ((ping_rc == 0)) || die "round $r: the ping side exited with $ping_rc"
  ((pong_rc == 0)) || die "round $r: the pong side exited with $pong_rc"
  grep -q '^raw_pingpong: iters=2000 .* median=' "$WORK/ping.out" ||
    die "round $r: no result line from the ping side"
  grep -q '^raw_pingpong: pong echoed 2101 frames' "$WORK/pong.out" ||
    die "round $r: the pong side did not echo the 2,101 frames (warm-up, timed, stop)"
done
echo "PASS: $ROUNDS rounds, both sides exited 0 every time"
