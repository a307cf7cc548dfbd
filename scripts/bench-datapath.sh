#!/usr/bin/env bash
# The DPDK datapath against its baselines (docs/performance.md, "DPDK datapath"). Each
# repetition runs, one after the other on the same two CPUs (side A on CPU_A, side B on CPU_B,
# one busy thread per side):
#
#   bandwidth  roce-perf write_bw, 64 KiB messages, path MTU 4096, over net_memif (two
#              processes, --inline-engine: the engine runs in the test's thread)
#              dpdk-testpmd txonly -> rxonly over net_memif with frames of the size the WRITE
#              stream's frames have (4154 B): the raw one-way capacity of the same link
#              iperf3 over the kernel's TCP on loopback, 64 KiB writes
#   latency    roce-perf send_lat, 8 B, over net_memif (--inline-engine)
#              roce-raw-pingpong: one 64-byte frame bounced over the same vdev (dpdk/tools/)
#              roce-raw-pingpong --frames 2: two frames a burst each way, as an RC ping-pong
#              sends them (each message with the ACK of the one it answers)
#              sockperf ping-pong over the kernel's TCP on loopback (14 B, sockperf's minimum)
#
# and prints a markdown table of the medians with the ratios, then every sample. A target is met
# only when both the paired ratio (each repetition over its own baseline) and the ratio of
# roce-perf's median to the link's best repetition meet it.
#
#   scripts/bench-datapath.sh [-n N] [-s SECONDS] [--build DIR] [--cpus A,B] [--keep]
#     -n N        repetitions (default 5)
#     -s SECONDS  length of each bandwidth run (default 5)
#     --build     build directory with apps/roce-perf and dpdk/tools/roce-raw-pingpong
#                 (default build-bench; ninja -C DIR roce-perf roce-raw-pingpong)
#     --cpus A,B  the two CPUs (default 0,1)
#     --keep      keep the outputs (printed path)
#
# Needs root (DPDK's runtime directory, memif sockets), dpdk-testpmd (dpdk-dev), iperf3,
# sockperf. Everything runs in the root network namespace: memif is a unix socket, roce-perf's
# exchange and the kernel baselines use 127.0.0.1. Every process is bounded by timeout and
# killed on exit.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=5
SECS=5
BUILD=$REPO/build-bench
CPU_A=0
CPU_B=1
KEEP=0
LAT_ITERS=${BENCH_LAT_ITERS:-50000}
# A WRITE of 64 KiB at path MTU 4096 is 16 frames of 14 (Ethernet) + 20 (IPv4) + 8 (UDP) + 12
# (BTH) + 4096 + 4 (ICRC) = 4154 B (the first also carries a 16-byte RETH).
FRAME=4154

die() {
  echo "bench: $*" >&2
  exit 2
}

parse_args() {
  while (($#)); do
    case $1 in
      -n) N=${2:?}; shift ;;
      -s) SECS=${2:?}; shift ;;
      --build) BUILD=${2:?}; shift ;;
      --cpus) CPU_A=${2%%,*}; CPU_B=${2##*,}; shift ;;
      --vdev) VDEV=${2:?}; shift ;;
      --keep) KEEP=1 ;;
      -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
  done
  [[ $N =~ ^[0-9]+$ && $N -ge 1 ]] || die "-n: a positive number"
  [[ $SECS =~ ^[0-9]+$ && $SECS -ge 3 ]] || die "-s: at least 3 seconds"
  [[ $VDEV == memif || $VDEV == af_packet ]] || die "--vdev: memif or af_packet"
}

# --- processes --------------------------------------------------------------------------------
WORK=
PIDS=()
bench_init() {
  [[ $(id -u) -eq 0 ]] || die "needs root"
  WORK=$(mktemp -d /tmp/roce-bench.XXXXXX)
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}
bench_cleanup() {
  local rc=$?
  set +e
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf /var/run/dpdk/rbench-"$$"-* 2>/dev/null
  ((TB_UP)) && ROCE_TB_PREFIX=$TB_PREFIX "$REPO/scripts/testbed.sh" down >/dev/null 2>&1
  if ((KEEP)) || ((rc != 0 && rc != 130)); then
    echo "bench: outputs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit $rc
}

# out NAME: the output file of NAME in the current repetition ($REP).
REP=0
out() { echo "$WORK/$1.r$REP.out"; }
# bg NAME CPU SECONDS CMD...: runs CMD on CPU in the background (bounded), output in
# $(out NAME); its pid in $BG.
BG=
bg() {
  local name=$1 cpu=$2 secs=$3
  shift 3
  timeout -k 3 "$secs" taskset -c "$cpu" "$@" >"$(out "$name")" 2>&1 &
  BG=$!
  PIDS+=("$BG")
}
# fg NAME CPU SECONDS CMD...: the same in the foreground; returns CMD's status.
fg() {
  local name=$1 cpu=$2 secs=$3
  shift 3
  timeout -k 3 "$secs" taskset -c "$cpu" "$@" >"$(out "$name")" 2>&1
}
# stop PID [SIGNAL]: signals one of our processes and waits for it (status ignored).
stop() {
  kill -"${2:-TERM}" "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
# wait_file FILE SECONDS: true once FILE exists.
wait_file() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.1
  done
  return 1
}

# An EAL file prefix of our own per process (the shim and roce-perf make their own).
prefix() { echo "rbench-$$-$1"; }
memif() { echo "net_memif0,role=$1,socket=$WORK/$2.sock,socket-abstract=no"; }
# The memif buffer size our ports choose for mtu 4200 (DpdkPort: the largest frame, 4214 B,
# rounded up to a cache line): one ring slot per frame. testpmd gets the same, so that the
# baseline runs on the same link.
MEMIF_BSIZE=4224
# roce_device ROLE SOCK I: a stack instance on a memif port, 10.96.0.I.
roce_device() {
  echo "port=$(memif "$1" "$2"); ipv4=10.96.0.$3/24; mac=02:00:00:96:00:0$3; mtu=4200"
}

# VDEV=af_packet (bench-shim.sh --vdev af_packet): roce-perf pairs run in two network
# namespaces of scripts/testbed.sh (prefix rbench-PID-) joined by a veth pair, each instance on
# net_af_packet, the exchange over the namespaces' own link.
VDEV=memif
TB_UP=0
TB_PREFIX="rbench-$$-"
testbed_up() {
  ROCE_TB_PREFIX=$TB_PREFIX "$REPO/scripts/testbed.sh" up 2 >"$WORK/testbed.out" 2>&1 ||
    die "testbed up failed: $(cat "$WORK/testbed.out")"
  TB_UP=1
}
tb_setting() { ROCE_TB_PREFIX=$TB_PREFIX "$REPO/scripts/testbed.sh" env "$1" | sed -n "s/^$2='\{0,1\}\([^']*\)'\{0,1\}$/\1/p"; }

# roce_pair NAME PERF "ARGS" TCP_PORT [EXTRA...]: roce-perf server (memif server) on CPU_B,
# client on CPU_A; EXTRA is given to both (e.g. --transport verbs). A failed pair is run once
# more (counted in $WORK/failures, its outputs kept as *.failed); a second failure ends the
# benchmark.
roce_pair() {
  local attempt
  for attempt in 1 2; do
    if roce_pair_once "$@"; then return 0; fi
    echo "bench: $1 failed (attempt $attempt), outputs kept as $(out "$1").*.failed" >&2
    echo "$1 repetition $REP attempt $attempt" >>"$WORK/failures"
    mv "$(out "$1.server")" "$(out "$1.server").$attempt.failed"
    mv "$(out "$1.client")" "$(out "$1.client").$attempt.failed"
  done
  die "$1 failed twice"
}
roce_pair_once() {
  local name=$1 perf=$2 args=$3 port=$4
  shift 4
  local sock=$name-$RANDOM sdev cdev addr=127.0.0.1 sns=() cns=()
  if [[ $VDEV == af_packet ]]; then
    sdev=$(tb_setting 1 TB_DEVICE)
    cdev=$(tb_setting 2 TB_DEVICE)
    addr=$(tb_setting 1 TB_OOB_ADDR)
    sns=(ip netns exec "${TB_PREFIX}1")
    cns=(ip netns exec "${TB_PREFIX}2")
  else
    sdev=$(roce_device server "$sock" 1)
    cdev=$(roce_device client "$sock" 2)
  fi
  # shellcheck disable=SC2086
  bg "$name.server" "$CPU_B" 120 "${sns[@]}" "$perf" $args "$@" -p "$port" --timeout 30 \
    --device "$sdev"
  local spid=$BG crc=0 src=0
  if [[ $VDEV == memif ]] && ! wait_file "$WORK/$sock.sock" 30; then
    stop "$spid"
    return 1
  fi
  # shellcheck disable=SC2086
  fg "$name.client" "$CPU_A" 120 "${cns[@]}" "$perf" $args "$@" -p "$port" --timeout 30 \
    --device "$cdev" "$addr" || crc=$?
  wait "$spid" || src=$?
  if ((crc || src)); then
    tail -n 3 "$(out "$name.server")" "$(out "$name.client")" >&2
    echo "bench: $name: client exit $crc, server exit $src" >&2
    return 1
  fi
  # A -D run whose link never carried traffic "succeeds" with 0 messages: a failed attempt.
  if ! awk 'NF >= 5 && $1 ~ /^[0-9]+$/ && $2 > 0 {ok = 1} END {exit !ok}' "$(out "$name.client")"; then
    echo "bench: $name: no message went through (memif link down?)" >&2
    return 1
  fi
}

# --- measurements (each sets RESULT to one number or two; no subshell, so the EXIT trap sees
# every process) ---------------------------------------------------------------------------------
RESULT=

# write_bw 64 KiB over memif: Gb/s (the client's BW average, --report_gbits).
roce_write_bw() {
  local perf=$1
  shift
  roce_pair write_bw "$perf" "write_bw -s 65536 -m 4096 -D $SECS -f 1 --report_gbits --inline-engine --counters" 18771 "$@"
  RESULT=$(awk '$1 == 65536 && NF >= 5 {v = $4} END {print v}' "$(out write_bw.client)")
  [[ -n $RESULT ]] || die "write_bw: no result line in $(out write_bw.client)"
}

# send_lat 8 B over memif: t_typical (median half round trip) and the 99 % percentile, in us.
roce_send_lat() {
  local perf=$1
  shift
  roce_pair send_lat "$perf" "send_lat -s 8 -n $LAT_ITERS --inline-engine" 18772 "$@"
  RESULT=$(awk '$1 == 8 && NF >= 8 {m = $5; p = $8} END {if (m != "") print m, p}' "$(out send_lat.client)")
  [[ -n $RESULT ]] || die "send_lat: no result line in $(out send_lat.client)"
}

# dpdk-testpmd txonly (CPU_A) -> rxonly (CPU_B) over memif, frames of FRAME bytes: Gb/s of
# frames received, the median of the per-second Rx-pps samples once the link carries traffic
# (the first non-zero sample, a partial second, is left out). A link that carries no traffic
# within a minute is retried once (counted in $WORK/failures).
testpmd_capacity() {
  local attempt
  for attempt in 1 2; do
    if testpmd_once; then return 0; fi
    echo "bench: testpmd: the memif link carried too little traffic (attempt $attempt)" >&2
    echo "testpmd repetition $REP attempt $attempt" >>"$WORK/failures"
    mv "$(out testpmd.rx)" "$(out testpmd.rx).$attempt.failed"
    mv "$(out testpmd.tx)" "$(out testpmd.tx).$attempt.failed"
  done
  die "testpmd failed twice"
}
testpmd_once() {
  local sock=tp-$RANDOM mbuf=$((MEMIF_BSIZE + 128))
  # Main lcores sleep (stats loop); the forwarding lcore of each side is pinned to its CPU.
  bg testpmd.rx "$CPU_B" 90 dpdk-testpmd --no-huge -m 1024 --no-pci --file-prefix "$(prefix tprx)" \
    --lcores "0@$CPU_A,1@$CPU_B" --log-level=4 --vdev "$(memif server "$sock"),bsize=$MEMIF_BSIZE" -- \
    --forward-mode=rxonly --mbuf-size="$mbuf" --stats-period 1 --nb-cores=1
  local rx=$BG
  wait_file "$WORK/$sock.sock" 30 || { stop "$rx"; die "testpmd: no memif socket"; }
  bg testpmd.tx "$CPU_A" 90 dpdk-testpmd --no-huge -m 1024 --no-pci --file-prefix "$(prefix tptx)" \
    --lcores "0@$CPU_B,1@$CPU_A" --log-level=4 --vdev "$(memif client "$sock"),bsize=$MEMIF_BSIZE" -- \
    --forward-mode=txonly --mbuf-size="$mbuf" --txpkts="$FRAME" --stats-period 1 --nb-cores=1
  local tx=$BG i n=0
  # memif takes a few seconds to connect: wait for SECS full samples after the first traffic.
  for ((i = 0; i < 60 && n < SECS + 1; i++)); do
    sleep 1
    n=$(awk '/Rx-pps/ && $2 > 0' "$(out testpmd.rx)" | wc -l)
  done
  stop "$tx" INT
  stop "$rx" INT
  ((n >= SECS + 1)) || return 1
  RESULT=$(awk '/Rx-pps/ && $2 > 0 {print $2}' "$(out testpmd.rx)" | tail -n +2 | head -n "$SECS" |
    sort -n | awk -v f="$FRAME" '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f\n", m * f * 8 / 1e9}')
}

# roce-raw-pingpong, 64-byte frames over memif: median and 99 % half round trip, in us. With an
# argument N, N frames per burst each way (2: a message and the ACK an RC responder sends with it).
raw_pingpong() {
  local frames=${1:-1}
  local tool=$BUILD/dpdk/tools/roce-raw-pingpong sock=pp-$RANDOM
  bg pong "$CPU_B" 120 "$tool" --no-huge -m 256 --no-pci --file-prefix "$(prefix pong)" \
    --lcores "0@$CPU_B" --log-level=4 --vdev "$(memif server "$sock")" -- --role pong --timeout 60
  local pong=$BG rc=0
  wait_file "$WORK/$sock.sock" 30 || { stop "$pong"; die "pingpong: no memif socket"; }
  fg ping "$CPU_A" 120 "$tool" --no-huge -m 256 --no-pci --file-prefix "$(prefix ping)" \
    --lcores "0@$CPU_A" --log-level=4 --vdev "$(memif client "$sock")" -- --role ping \
    --iters "$LAT_ITERS" --warmup 1000 --size 64 --frames "$frames" --timeout 60 || rc=$?
  wait "$pong" || true
  ((rc == 0)) || { tail -n 5 "$(out ping)" "$(out pong)" >&2; die "pingpong failed ($rc)"; }
  RESULT=$(sed -n 's/.* median=\([0-9.]*\) .* p99=\([0-9.]*\) .*/\1 \2/p' "$(out ping)")
  [[ -n $RESULT ]] || die "pingpong: no result line in $(out ping)"
}

# iperf3 over loopback, 64 KiB writes, client on CPU_A and server on CPU_B: Gb/s received.
iperf3_bw() {
  bg iperf3.server "$CPU_B" 60 iperf3 -s -1 -p 18773
  local srv=$BG
  sleep 0.5
  fg iperf3.client "$CPU_A" 60 iperf3 -c 127.0.0.1 -p 18773 -l 64K -t "$SECS" -J ||
    { stop "$srv"; die "iperf3 failed"; }
  wait "$srv" || true
  RESULT=$(python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))' \
    "$(out iperf3.client)")
}

# sockperf ping-pong over loopback TCP: median and 99 % half round trip, in us.
sockperf_lat() {
  bg sockperf.server "$CPU_B" 60 sockperf sr --tcp -i 127.0.0.1 -p 18774
  local srv=$BG
  sleep 0.5
  fg sockperf.client "$CPU_A" 60 sockperf pp --tcp -i 127.0.0.1 -p 18774 -m 14 -t "$SECS" ||
    { stop "$srv" INT; die "sockperf failed"; }
  stop "$srv" INT
  RESULT=$(awk '/percentile 50.000 =/ {m = $NF} /percentile 99.000 =/ {p = $NF} END {if (m != "") print m, p}' \
    "$(out sockperf.client)")
  [[ -n $RESULT ]] || die "sockperf: no result in $(out sockperf.client)"
}

# --- tables ------------------------------------------------------------------------------------

# median FILE COLUMN: the median of a column of numbers.
median() {
  awk -v c="$2" '{print $c}' "$1" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) {print "nan"; exit} m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f %%", 100 * a / b}'; }
pc() { awk -v r="$1" 'BEGIN {printf "%.0f %%", 100 * r}'; }
xr() { awk -v r="$1" 'BEGIN {printf "%.2f ×", r}'; }
# met OK: yes / no
met() { [[ $1 == 1 ]] && echo "**met**" || echo "**not met**"; }

main() {
  parse_args "$@"
  [[ $VDEV == memif ]] || die "--vdev: the DPDK baselines run over memif only (bench-shim.sh takes af_packet)"
  local perf=$BUILD/apps/roce-perf
  [[ -x $perf && -x $BUILD/dpdk/tools/roce-raw-pingpong ]] ||
    die "build first: ninja -C $BUILD roce-perf roce-raw-pingpong"
  local t
  for t in dpdk-testpmd iperf3 sockperf taskset; do
    command -v "$t" >/dev/null || die "needs $t (scripts/install-deps.sh)"
  done
  bench_init
  echo "bench: $N repetitions, CPUs $CPU_A (side A) and $CPU_B (side B), outputs in $WORK" >&2
  local i a b c d
  for ((i = 1; i <= N; i++)); do
    echo "bench: repetition $i/$N" >&2
    REP=$i
    # Each pair back to back; the baseline first in odd repetitions, last in even ones.
    if ((i % 2)); then
      testpmd_capacity; a=$RESULT
      roce_write_bw "$perf"; b=$RESULT
    else
      roce_write_bw "$perf"; b=$RESULT
      testpmd_capacity; a=$RESULT
    fi
    iperf3_bw; c=$RESULT
    echo "$a $b $c" >>"$WORK/bw.txt"
    # The two-frame ping-pong sits next to send_lat in both orders.
    if ((i % 2)); then
      raw_pingpong; a=$RESULT
      raw_pingpong 2; d=$RESULT
      roce_send_lat "$perf"; b=$RESULT
    else
      roce_send_lat "$perf"; b=$RESULT
      raw_pingpong 2; d=$RESULT
      raw_pingpong; a=$RESULT
    fi
    sockperf_lat; c=$RESULT
    echo "$a $b $c $d" >>"$WORK/lat.txt"
    tail -n 1 "$WORK/bw.txt" "$WORK/lat.txt" | grep -v '^==\|^$' | sed 's/^/bench:   /' >&2
  done
  report
}

# report: the tables, from the samples in $WORK/bw.txt ("testpmd write_bw iperf3" a line) and
# $WORK/lat.txt ("raw raw99 send_lat send_lat99 sockperf sockperf99 raw2 raw2_99"), one line
# per repetition. BENCH_LIB_ONLY=1 WORK=DIR N=... (bench_report_test.sh) calls it on its own.
report() {
  local tp wb ip rp rp99 sl sl99 sp sp99 r2 r299
  tp=$(median "$WORK/bw.txt" 1)
  wb=$(median "$WORK/bw.txt" 2)
  ip=$(median "$WORK/bw.txt" 3)
  rp=$(median "$WORK/lat.txt" 1)
  rp99=$(median "$WORK/lat.txt" 2)
  sl=$(median "$WORK/lat.txt" 3)
  sl99=$(median "$WORK/lat.txt" 4)
  sp=$(median "$WORK/lat.txt" 5)
  sp99=$(median "$WORK/lat.txt" 6)
  r2=$(median "$WORK/lat.txt" 7)
  r299=$(median "$WORK/lat.txt" 8)
  # Paired ratios: each repetition's figure over its own baseline (measured back to back).
  paste -d ' ' "$WORK/bw.txt" "$WORK/lat.txt" | awk '{
      printf "%.4f %.4f %.4f %.4f %.4f %.4f %.4f\n", $2 / $1, $2 / $3, $6 / $4, $7 / $5, $6 / $8, $7 / $9,
        $6 / $10
    }' >"$WORK/ratios.txt"
  local r_bw r_bw_tcp r_lat r_lat99 r_lat_tcp r_lat99_tcp r_lat2 bw_ok lat_ok
  r_bw=$(median "$WORK/ratios.txt" 1)
  r_bw_tcp=$(median "$WORK/ratios.txt" 2)
  r_lat=$(median "$WORK/ratios.txt" 3)
  r_lat99=$(median "$WORK/ratios.txt" 4)
  r_lat_tcp=$(median "$WORK/ratios.txt" 5)
  r_lat99_tcp=$(median "$WORK/ratios.txt" 6)
  r_lat2=$(median "$WORK/ratios.txt" 7)
  # The link's best (testpmd's fastest repetition, the raw ping-pong's quickest): a baseline
  # that slumps for a whole repetition reads ~300 % paired, and a majority of such repetitions
  # would carry the paired median (docs/performance.md, "How the targets are judged").
  local tp_best rp_best r_bw_best r_lat_best spread
  tp_best=$(awk '$1 > m {m = $1} END {print m}' "$WORK/bw.txt")
  rp_best=$(awk 'NR == 1 || $1 < m {m = $1} END {print m}' "$WORK/lat.txt")
  r_bw_best=$(awk -v a="$wb" -v b="$tp_best" 'BEGIN {printf "%.4f", a / b}')
  r_lat_best=$(awk -v a="$sl" -v b="$rp_best" 'BEGIN {printf "%.4f", a / b}')
  spread=$(awk 'NR == 1 || $1 < lo {lo = $1} $1 > hi {hi = $1} END {printf "%.1f", hi / lo}' "$WORK/bw.txt")
  bw_ok=$(awk -v r="$r_bw" -v s="$r_bw_best" 'BEGIN {print (r >= 0.8 && s >= 0.8) ? 1 : 0}')
  lat_ok=$(awk -v r="$r_lat" -v s="$r_lat_best" 'BEGIN {print (r <= 1.3 && s <= 1.3) ? 1 : 0}')
  cat <<EOF

Medians of $N repetitions (CPUs $CPU_A and $CPU_B, one busy thread per side; write_bw -D $SECS -f 1,
send_lat -n $LAT_ITERS). "paired" is the median of the per-repetition ratios (each figure over the
baseline measured right before or after it); "against the best" sets roce-perf's median against
the link's best repetition (testpmd's fastest, the raw ping-pong's quickest). A target is met
only when both are.

| measurement | roce-perf | baseline | ratio of medians | paired ratio | against the best | target |
|---|---|---|---|---|---|---|
| write_bw 64 KiB, MTU 4096, net_memif (Gb/s) | $wb | $tp (dpdk-testpmd txonly → rxonly, $FRAME B frames; best $tp_best) | $(pct "$wb" "$tp") | $(pc "$r_bw") | $(pc "$r_bw_best") | ≥ 80 %: $(met "$bw_ok") |
| send_lat 8 B, net_memif, median half round trip (µs) | $sl | $rp (roce-raw-pingpong, 64 B frames; best $rp_best) | $(ratio "$sl" "$rp") × | $(xr "$r_lat") | $(xr "$r_lat_best") | ≤ 1.3 ×: $(met "$lat_ok") |
| send_lat 8 B, net_memif, 99 % (µs) | $sl99 | $rp99 (roce-raw-pingpong) | $(ratio "$sl99" "$rp99") × | $(xr "$r_lat99") | | |
| send_lat 8 B vs two frames a burst, median (µs) | $sl | $r2 (roce-raw-pingpong --frames 2: each message with the ACK RC sends beside it; 99 %: $r299) | $(ratio "$sl" "$r2") × | $(xr "$r_lat2") | | |
| write_bw 64 KiB vs kernel TCP on loopback (Gb/s) | $wb | $ip (iperf3, 64 KiB writes) | $(pct "$wb" "$ip") | $(pc "$r_bw_tcp") | | |
| send_lat 8 B vs kernel TCP on loopback, median (µs) | $sl | $sp (sockperf ping-pong, 14 B) | $(ratio "$sl" "$sp") × | $(xr "$r_lat_tcp") | | |
| send_lat 8 B vs kernel TCP on loopback, 99 % (µs) | $sl99 | $sp99 (sockperf) | $(ratio "$sl99" "$sp99") × | $(xr "$r_lat99_tcp") | | |

$( [[ -s $WORK/failures ]] && echo "Runs that failed and were repeated: $(paste -sd ';' "$WORK/failures")." )
$(awk -v s="$spread" 'BEGIN {exit !(s >= 2)}' && echo "testpmd's repetitions spread ${spread}-fold (slowest to fastest): its per-second samples are in testpmd.rx.r*.out (--keep).")

Every repetition (bandwidth in Gb/s, latency in µs as median / 99 %; odd repetitions run the
DPDK baselines first, even ones roce-perf first):

| # | testpmd | write_bw | iperf3 | raw ping-pong | send_lat | sockperf | raw, 2 frames | write_bw / testpmd | send_lat / raw |
|---|---|---|---|---|---|---|---|---|---|
EOF
  paste -d ' ' "$WORK/bw.txt" "$WORK/lat.txt" "$WORK/ratios.txt" |
    awk '{printf "| %d | %s | %s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %.0f %% | %.2f × |\n", NR, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 100 * $12, $14}'
}

# bench-shim.sh sources this file for its helpers.
if [[ ${BENCH_LIB_ONLY:-0} != 1 ]]; then main "$@"; fi
