#!/usr/bin/env bash
# A soak of the stack (docs/soak.md): two roce-soak processes in two network namespaces, over
# net_af_packet on a veth pair or over net_memif, run every RC operation (SEND, SEND_WITH_IMM,
# WRITE, WRITE_WITH_IMM, READ, FETCH_ADD, CMP_SWAP) on several QPs, 1 B .. 1 MiB, every byte
# checked, with the stack's fault injection losing a fraction of the frames each way; they
# sample mbufs, memory, descriptors and counters into CSVs. Then this script checks that the
# samples are flat after the warm-up, and exits non-zero on any failure.
#
#   scripts/soak.sh [--minutes M | --seconds S] [--vdev af_packet|memif] [--loss L]
#                   [--interval S] [--warmup S] [--out DIR] [--build-dir DIR] [--qps N]
#                   [--seed N] [--timeout N]
#
#   --minutes / --seconds  how long batches start (default 30 minutes)
#   --vdev                 af_packet (default) or memif
#   --loss                 the fraction lost each way (default 0.01): each side's fault injection
#                          drops 1 - sqrt(1 - L) of what it sends and of what it receives
#   --interval             seconds between samples (default 60)
#   --warmup               seconds before the flatness baseline (default: 120, at most a third
#                          of the run)
#   --out                  where the CSVs, logs and summary.txt go (default a new /tmp dir)
#   --timeout              the QPs' local ACK timeout exponent (default 14: 67 ms)
#
# "Flat after warm-up": for each of the least mbufs in use between samples (a leak raises it),
# the resident memory, the open descriptors and the threads, the largest value after the
# baseline sample (the first at or after the warm-up) less the baseline is within a bound:
# mbufs 128 (the engine keeps a stash of up to 64 empty buffers, and the least seen between
# samples moves with the traffic), RSS 4 MiB, descriptors and threads 0; and roce-soak itself
# fails if the mbufs in use with the link quiet after the run exceed those before it by more
# than 64. Needs root (namespaces). One soak at a time
# per ROCE_TB_PREFIX (default soak-<pid>-).
set -euo pipefail
case "${1-}" in -h | --help)
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"
  exit 0
  ;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)
seconds=1800 vdev=af_packet loss=0.01 interval=60 warmup="" out="" build="$repo/build"
qps=8 seed=1 timeout=14
die() {
  echo "soak: $*" >&2
  exit 2
}
while (($#)); do
  [[ $# -ge 2 ]] || die "$1 needs a value (see --help)"
  case $1 in
    --minutes) seconds=$(awk -v m="$2" 'BEGIN { print m * 60 }') ;;
    --seconds) seconds=$2 ;;
    --vdev) vdev=$2 ;;
    --loss) loss=$2 ;;
    --interval) interval=$2 ;;
    --warmup) warmup=$2 ;;
    --out) out=$2 ;;
    --build-dir) build=$2 ;;
    --qps) qps=$2 ;;
    --seed) seed=$2 ;;
    --timeout) timeout=$2 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift 2
done
[[ $vdev == af_packet || $vdev == memif ]] || die "--vdev: af_packet or memif, not '$vdev'"
awk -v l="$loss" 'BEGIN { exit !(l >= 0 && l < 1) }' || die "--loss: a fraction in [0, 1), not '$loss'"
[[ $seconds =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--seconds: a number of seconds, not '$seconds'"
soak=$build/apps/roce-soak
[[ -x $soak ]] || die "no $soak (ninja -C $build roce-soak)"
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"
if [[ -z $warmup ]]; then warmup=$(awk -v s="$seconds" 'BEGIN { w = s / 3; print (w > 120 ? 120 : w) }'); fi
[[ -n $out ]] || out=$(mktemp -d /tmp/roce-soak.XXXXXX)
mkdir -p "$out"
out=$(cd "$out" && pwd)
export ROCE_TB_PREFIX=${ROCE_TB_PREFIX:-soak-$$-}
testbed=$repo/scripts/testbed.sh
pids=()
cleanup() {
  local rc=$?
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  "$testbed" down >/dev/null 2>&1
  rm -f "$out/memif.sock"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$testbed" up 2 >"$out/testbed.log" 2>&1 || die "testbed up failed: $(tail -n 3 "$out/testbed.log")"
# Each side drops d of what it sends and of what it receives: a frame crosses two of them.
drop=$(awk -v l="$loss" 'BEGIN { printf "%.6f", 1 - sqrt(1 - l) }')
device() {  # I ROLE
  local s
  eval "$("$testbed" env "$1" af_packet | grep -v '^TB_DEVICE=')"
  if [[ $vdev == memif ]]; then
    s="port=net_memif0,role=$2,socket=$out/memif.sock,socket-abstract=no; ipv4=$TB_STACK_IPV4/24;"
    s+=" mac=$TB_STACK_MAC; mtu=4200"
  else
    s=$("$testbed" env "$1" af_packet | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p")
  fi
  echo "$s; drop=$drop; fault_seed=$((seed * 2 + $1))"
}
args=(--seconds "$seconds" --interval "$interval" --qps "$qps" --seed "$seed" --timeout "$timeout")
limit=$(awk -v s="$seconds" 'BEGIN { printf "%d", s + 300 }')
rm -f "$out/memif.sock"
echo "soak: $vdev, $seconds s, loss $loss each way (drop $drop at each side), $qps QPs, seed $seed; out $out"
timeout -k 5 "$limit" ip netns exec "${ROCE_TB_PREFIX}1" "$soak" "${args[@]}" \
  --device "$(device 1 server)" --csv "$out/server.csv" >"$out/server.log" 2>&1 &
spid=$!
pids+=("$spid")
if [[ $vdev == memif ]]; then
  for _ in $(seq 100); do [[ -S $out/memif.sock ]] && break; sleep 0.1; done
fi
timeout -k 5 "$limit" ip netns exec "${ROCE_TB_PREFIX}2" "$soak" "${args[@]}" \
  --device "$(device 2 client)" --csv "$out/client.csv" 10.78.0.1 >"$out/client.log" 2>&1 &
cpid=$!
pids+=("$cpid")
src=0 crc=0
wait "$spid" || src=$?
wait "$cpid" || crc=$?
pids=()

fails=0
{
  echo "soak: $vdev, $seconds s, loss $loss each way, $qps QPs, seed $seed, interval $interval s, warm-up $warmup s"
  for side in server client; do
    rc=$src
    [[ $side == client ]] && rc=$crc
    echo "== $side (exit $rc)"
    sed -n '/ batches posted and acknowledged/,/longest wait for a completion/p' "$out/$side.log"
    grep -E '^roce-soak: (PASS|FAIL)|imissed|bursts skipped' "$out/$side.log" || true
    if [[ $rc -ne 0 ]] || ! grep -q '^roce-soak: PASS' "$out/$side.log"; then
      echo "FAIL: the $side exited $rc"
      grep -E '^roce-soak: FAIL' "$out/$side.log" || tail -n 5 "$out/$side.log"
      fails=$((fails + 1))
    fi
    # Flatness: growth of each watched column after the baseline sample, against its bound.
    awk -F, -v w="$warmup" -v side="$side" '
      NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
      { t = $col["t_s"] }
      t >= w && !based { based = 1; bt = t; for (k in bound) base[k] = $col[k] }
      t >= w && based { for (k in bound) { g = $col[k] - base[k]; if (g > grow[k]) grow[k] = g } ; n++ }
      BEGIN { bound["mbufs_min"] = 128; bound["rss_kib"] = 4096; bound["fds"] = 0; bound["threads"] = 0 }
      END {
        if (!based || n < 2) { printf "FAIL: %s: too few samples after the warm-up (%d)\n", side, n; exit 1 }
        bad = 0
        for (k in bound) {
          ok = grow[k] <= bound[k]
          printf "  flat %-9s %s: baseline %d at %.0f s, largest growth after it %d (bound %d)\n", k, ok ? "ok  " : "FAIL", base[k], bt, grow[k], bound[k]
          if (!ok) bad = 1
        }
        exit bad
      }' "$out/$side.csv" || fails=$((fails + 1))
  done
  if ((fails)); then echo "soak: FAIL ($fails)"; else echo "soak: PASS"; fi
} | tee "$out/summary.txt"
grep -q '^soak: PASS' "$out/summary.txt"
