#!/usr/bin/env bash
# End to end against the real thing: Debian's perftest binaries (ib_write_bw, ib_send_lat, ...)
# on one side, roce-perf on the other, both over the stack: perftest runs on our drop-in
# libibverbs (verbs_shim/), with stand-ins for the provider libraries it links (perftest_stubs/).
# Every test in both directions (perftest as server, then as client), plus the multi-size (-a),
# multi-QP (-q), duration (-D), bidirectional (-b), completion-event (-e) and UC / UD (-c) runs: both sides
# must finish with exit 0 and print their results. This is the check that roce-perf speaks perftest's out-of-band protocol.
#
# Usage: perftest_interop_test.sh ROCE_PERF SHIM_DIR STUB_DIR
E2E_NAME=interop
PERF=${1:?roce-perf binary}
SHIM=${2:?directory of the shim libibverbs.so.1}
STUBS=${3:?directory of the stub libmlx5.so.1 / libefa.so.1}
source "$(dirname "$0")/lib.sh"
require_netns
[[ -x /usr/bin/ib_write_bw ]] || skip "needs Debian's perftest"
[[ -e $SHIM/libibverbs.so.1 && -e $STUBS/libmlx5.so.1 ]] || die "no shim or stubs"

testbed_up 2
dev1=$(device 1 af_packet)
dev2=$(device 2 af_packet)
lib=("LD_LIBRARY_PATH=$STUBS:$SHIM")
# A shim built with the sanitizers: their runtimes first in Debian's binaries (whose own leaks
# are not ours to report).
if [[ -n ${ROCE_SANITIZER_PRELOAD:-} ]]; then
  lib+=("LD_PRELOAD=$ROCE_SANITIZER_PRELOAD" "ASAN_OPTIONS=detect_leaks=0")
fi

# wait_listen: until the server in namespace 1 listens on perftest's port (18515), at most
# 10 s: a client that does not retry a refused connection (perftest's; roce-perf's without
# --timeout) starts after it. (roce-perf's client with --timeout retries every 100 ms, so it
# starts beside the server at once.)
wait_listen() {
  for _ in $(seq 200); do
    ip netns exec "${ROCE_TB_PREFIX}1" ss -Hltn 'sport = :18515' | grep -q . && return 0
    sleep 0.05
  done
  die "the server did not listen on port 18515 within 10 s"
}

# interop ps|rs TEST ARGS...: ps = perftest server + roce-perf client; rs = the other way.
interop() {
  local mode=$1 t=$2
  shift 2
  local name="$mode-$t-$(tr -d ' -' <<<"$*")" s c src=0 crc=0
  local sd=${IOP_SERVER_DIR:-$PWD} cd=${IOP_CLIENT_DIR:-$PWD}  # each side's working directory
  log "$name: $([[ $mode == ps ]] && echo "ib_$t server, roce-perf client" || echo "roce-perf server, ib_$t client") $*"
  if [[ $mode == ps ]]; then
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}1" env -C "$sd" "${lib[@]}" ROCE_DEVICE="$dev1" \
      "/usr/bin/ib_$t" -d roce0 -F "$@" >"$WORK/$name.server.out" 2>&1 &
    s=$!
    PIDS+=("$s")
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}2" env -C "$cd" "$PERF" "$t" "$@" \
      --device "$dev2" --timeout 60 10.78.0.1 >"$WORK/$name.client.out" 2>&1 || crc=$?
  else
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}1" env -C "$sd" "$PERF" "$t" "$@" \
      --device "$dev1" --timeout 60 >"$WORK/$name.server.out" 2>&1 &
    s=$!
    PIDS+=("$s")
    wait_listen
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}2" env -C "$cd" "${lib[@]}" ROCE_DEVICE="$dev2" \
      "/usr/bin/ib_$t" -d roce0 -F "$@" 10.78.0.1 >"$WORK/$name.client.out" 2>&1 || crc=$?
  fi
  wait "$s" || src=$?
  if ((src != 0 || crc != 0)); then
    tail -n 15 "$WORK/$name.server.out" "$WORK/$name.client.out"
    die "$name: server exit $src, client exit $crc"
  fi
  local side quiet=server
  [[ " $* " == *" --reversed "* ]] && quiet=client  # the test's server is the side that connects
  for side in server client; do
    [[ $t == read_lat && $side == "$quiet" ]] && continue  # perftest's read_lat server reports nothing
    report_lines "$WORK/$name.$side.out" | tail -n 1 | grep -q . || die "$name: no result line ($side)"
  done
  echo "    $(report_lines "$WORK/$name.client.out" | tail -n 1 | tr -s ' \t' ' ')"
  if [[ " $* " == *" --cpu_util "* ]]; then
    for side in server client; do
      grep -q 'CPU_Util\[%\]$' "$WORK/$name.$side.out" || die "$name: no CPU_Util column ($side)"
    done
  fi
  # --rate_limit L (bursts of 10, 200 messages): the sender's average is at most L x 20/19, in
  # Gb/s (--report_gbits: BW average) or, with --rate_units p, messages a second (MsgRate).
  if [[ " $* " == *" --rate_limit "* ]]; then
    local lim v
    lim=$(sed -n 's/.*--rate_limit \([0-9.]*\).*/\1/p' <<<"$*")
    if [[ " $* " == *" --rate_units p "* ]]; then
      v=$(report_lines "$WORK/$name.client.out" | tail -n 1 | awk '{print $5 * 1e6}')
    else
      v=$(report_lines "$WORK/$name.client.out" | tail -n 1 | awk '{print $4}')
    fi
    awk -v v="$v" -v l="$lim" 'BEGIN { exit !(v != "" && v <= l * 20 / 19) }' ||
      die "$name: the sender's average '$v' exceeds $lim x 20/19"
  fi
  # --latency_gap G: every sample holds at least G us of spinning (a ping-pong's half round trip
  # holds both sides' gaps, a READ's round trip the client's).
  if [[ " $* " == *" --latency_gap "* ]]; then
    local gap tmin
    gap=$(sed -n 's/.*--latency_gap \([0-9]*\).*/\1/p' <<<"$*")
    for side in server client; do
      [[ $t == read_lat && $side == "$quiet" ]] && continue
      tmin=$(report_lines "$WORK/$name.$side.out" | tail -n 1 | awk '{print $3}')
      awk -v m="$tmin" -v g="$gap" 'BEGIN { exit !(m >= g) }' ||
        die "$name: $side's t_min '$tmin' us is under the gap of $gap us"
    done
  fi
  # -c UD: a message fits one packet, so both sides cut the sizes to the MTU (-s 65536 becomes
  # the MTU, -a stops there) and must agree on them, or the receives would not fit the SENDs.
  if [[ " $* " == *" -c UD "* && $t == send_bw ]]; then
    local ss cs
    ss=$(report_lines "$WORK/$name.server.out" | awk '{print $1}' | tr '\n' ' ')
    cs=$(report_lines "$WORK/$name.client.out" | awk '{print $1}' | tr '\n' ' ')
    [[ $ss == "$cs" && $cs != *65536* && -n $cs ]] ||
      die "$name: UD sizes differ or exceed the MTU (server: $ss, client: $cs)"
  fi
  # -b: each side prints its own direction plus the one the peer reported, so with a report
  # exchange (all but send_bw -D) the sums (peak, average, message rate) match on both sides.
  if [[ " $* " == *" -b "* && !($t == send_bw && " $* " == *" -D "*) ]]; then
    local sums
    sums=$(for side in server client; do
      sed '/Local results/q' "$WORK/$name.$side.out" | report_lines /dev/stdin |
        awk '{print $1, $3, $4, $5}' | md5sum
    done | sort -u | wc -l)
    ((sums == 1)) || {
      report_lines "$WORK/$name.server.out"
      report_lines "$WORK/$name.client.out"
      die "$name: the two sides print different bidirectional sums"
    }
    grep -q "Bidirectional BW Test" "$WORK/$name.server.out" || die "$name: no bidirectional banner"
  fi
  # --report-both: each side's "Remote results" line is the other side's "Local results" line.
  if [[ " $* " == *" --report-both "* ]]; then
    local sl cl sr cr
    sl=$(sed -n '/Local results/,/Remote results/p' "$WORK/$name.server.out" | report_lines /dev/stdin)
    cl=$(sed -n '/Local results/,/Remote results/p' "$WORK/$name.client.out" | report_lines /dev/stdin)
    sr=$(sed -n '/Remote results/,$p' "$WORK/$name.server.out" | report_lines /dev/stdin)
    cr=$(sed -n '/Remote results/,$p' "$WORK/$name.client.out" | report_lines /dev/stdin)
    [[ -n $sl && $sl == "$cr" && -n $cl && $cl == "$sr" ]] || {
      printf 'server local: %s\nclient remote: %s\nclient local: %s\nserver remote: %s\n' \
        "$sl" "$cr" "$cl" "$sr"
      die "$name: --report-both lines do not match across the sides"
    }
  fi
}

for mode in ps rs; do
  for t in write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat; do
    interop $mode $t -n 200
  done
  interop $mode send_bw -a -n 5
  interop $mode write_bw -q 3 -s 4096 -n 500
  interop $mode send_lat -D 2
  # -b: both sides send at once.
  for t in write_bw read_bw send_bw atomic_bw; do
    interop $mode $t -b -n 200
  done
  interop $mode write_bw -b -a -n 5
  interop $mode send_bw -b -a -n 5
  interop $mode write_bw -b -q 2 -D 2
  interop $mode send_bw -b -D 2
  interop $mode write_bw -b --report-both -n 200
  # --perform_warm_up: the requester sends a send queue's worth before the run (both with -b).
  interop $mode write_bw --perform_warm_up -n 200
  interop $mode read_bw -b --perform_warm_up --use_old_post_send -n 200
  # --reversed: the side that listens sends (fan-in set-ups); perftest's roles swapped alike.
  interop $mode write_bw --reversed -n 200
  interop $mode send_bw --reversed -n 200
  interop $mode read_lat --reversed -n 200
  # --mr_per_qp: each QP's own memory region and keys.
  interop $mode write_bw -q 2 --mr_per_qp -n 200
  interop $mode read_bw -q 2 --mr_per_qp -n 200
  # --use-srq: the receiving QPs share one receive queue (both sides' with -b and in send_lat).
  interop $mode send_bw -q 4 --use-srq -n 200
  interop $mode send_bw -b -q 2 --use-srq -n 200
  interop $mode send_lat --use-srq -n 200
  # (UD: one QP, whose share is the whole SRQ, so a receive waits for each of the 200
  # messages; with -q 2 each QP's share would be half the messages, and a receiver that re-posts
  # slower than the sender sends loses datagrams and waits for ever, with perftest alike.)
  interop $mode send_bw -c UD --use-srq -n 200
  # --latency_gap: both sides spin 500 us before each post; the samples include it.
  interop $mode write_lat --latency_gap 500 -n 200
  interop $mode send_lat --latency_gap 500 -n 200
  interop $mode read_lat --latency_gap 500 -n 200
  # --cpu_util: a -D run's report gains the CPU_Util[%] column on every side that reports.
  interop $mode send_bw -D 2 --cpu_util
  interop $mode write_lat -D 2 --cpu_util
  # --rate_limit (SW): the sender's 200 messages in bursts of 10 average at most 20/19 of it.
  interop $mode write_bw --rate_limit 0.5 --rate_limit_type SW --burst_size 10 --report_gbits -n 200
  interop $mode send_bw -s 64 --rate_limit 1000 --rate_units p --rate_limit_type SW --burst_size 10 -n 200
  # -e: both sides sleep on completion events (perftest in our libibverbs' channel).
  for t in read_bw send_bw atomic_bw read_lat send_lat; do  # perftest: no -e on WRITE
    interop $mode $t -e -n 200
  done
  interop $mode send_bw -b -e -X 0 -n 200  # -X: the completion vector (our devices have one)
  # -c UC / UD: unreliable transports (UD on SEND only, UC without READ / atomics). Nothing
  # retransmits a lost frame, so each run sends no more frames than a receiver's af_packet ring
  # holds (512, see scripts/testbed.sh): a burst that overflows it loses messages for good, and
  # the receiver would wait for them until its stall timeout.
  for t in write_bw send_bw; do
    interop $mode $t -c UC -s 4096 -n 200
  done
  for t in write_lat send_lat; do
    interop $mode $t -c UC -n 200
  done
  interop $mode send_bw -c UD -n 200  # 64 KiB, cut to the MTU
  interop $mode send_lat -c UD -n 200
  interop $mode send_bw -c UD -a -n 5
  interop $mode send_bw -c UD -b -q 2 -n 100
  interop $mode write_bw -c UC -b -s 4096 -n 200
  interop $mode send_lat -c UD -e -n 200
done

# --out_json: perftest and roce-perf write the same keys in the same order, side for side: each
# side runs in a directory of its own, so its file is its own. write_bw's server and client
# both report; read_lat's client only. (Values differ where they name the build: perftest's
# PCIe_relax_order and ibv_wr_API.)
json_keys() { sed 's/^ *\([^: ]*\).*/\1/' "$1" | tr '\n' ' '; }
for t in write_bw read_lat; do
  for mode in ps rs; do
    mkdir -p "$WORK/$t.$mode.server" "$WORK/$t.$mode.client"
    IOP_SERVER_DIR=$WORK/$t.$mode.server IOP_CLIENT_DIR=$WORK/$t.$mode.client \
      interop $mode $t -n 200 --out_json
  done
  for side in server client; do
    [[ $t == read_lat && $side == server ]] && continue  # perftest's read_lat server reports nothing
    local_f=$WORK/$t.$([[ $side == client ]] && echo ps || echo rs).$side/perftest_out.json
    peer_f=$WORK/$t.$([[ $side == client ]] && echo rs || echo ps).$side/perftest_out.json
    # (Which wrote which: roce-perf's relaxed-ordering line is the #else branch's.)
    grep -q '^ PCIe_relax_order: Unsupported,$' "$local_f" && ! grep -q Unsupported "$peer_f" ||
      die "$t --out_json ($side): not one file from each tool"
    ours=$(json_keys "$local_f")
    theirs=$(json_keys "$peer_f")
    [[ -n $ours && $ours == "$theirs" ]] ||
      die "$t --out_json ($side): roce-perf's keys '$ours', perftest's '$theirs'"
  done
  log "$t --out_json: roce-perf's files have perftest's keys"
done
# --output (perftest's verbosity): each side prints one number per result and nothing else,
# and a bw run's two sides print the same one (the client's report). -w / -y: the limit
# verifier's line on stderr and exit 1 where perftest runs it (write_bw: the client; send_bw:
# both sides).
# output_case ps|rs TEST SERVER_RC CLIENT_RC ARGS...
output_case() {
  local mode=$1 t=$2 want_s=$3 want_c=$4
  shift 4
  local name="out-$mode-$t-$(tr -d ' -=' <<<"$*")" s src=0 crc=0 side
  log "$name: $([[ $mode == ps ]] && echo "ib_$t server, roce-perf client" || echo "roce-perf server, ib_$t client") $*"
  if [[ $mode == ps ]]; then
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}1" env "${lib[@]}" ROCE_DEVICE="$dev1" \
      "/usr/bin/ib_$t" -d roce0 -F "$@" >"$WORK/$name.server.out" 2>"$WORK/$name.server.err" &
    s=$!
    PIDS+=("$s")
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}2" "$PERF" "$t" "$@" --device "$dev2" \
      --timeout 60 10.78.0.1 >"$WORK/$name.client.out" 2>"$WORK/$name.client.err" || crc=$?
  else
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}1" "$PERF" "$t" "$@" --device "$dev1" \
      --timeout 60 >"$WORK/$name.server.out" 2>"$WORK/$name.server.err" &
    s=$!
    PIDS+=("$s")
    wait_listen
    timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}2" env "${lib[@]}" ROCE_DEVICE="$dev2" \
      "/usr/bin/ib_$t" -d roce0 -F "$@" 10.78.0.1 >"$WORK/$name.client.out" \
      2>"$WORK/$name.client.err" || crc=$?
  fi
  wait "$s" || src=$?
  ((src == want_s && crc == want_c)) || {
    tail -n 5 "$WORK/$name".*
    die "$name: server exit $src, client exit $crc (want $want_s, $want_c)"
  }
  for side in server client; do
    # perftest prints a rule line with its inline-feature warning (on stderr) for our devices.
    grep -vx -- '-*' "$WORK/$name.$side.out" | grep -Eqx '[0-9]+\.[0-9]{6}' ||
      die "$name: $side printed $(head -c 300 "$WORK/$name.$side.out"), not one number"
    (($(grep -cvx -- '-*' "$WORK/$name.$side.out") == 1)) || die "$name: $side printed more than one line"
  done
  if [[ $t == *_bw && $t != send_bw ]]; then
    local sv cv
    sv=$(grep -vx -- '-*' "$WORK/$name.server.out")
    cv=$(grep -vx -- '-*' "$WORK/$name.client.out")
    [[ $sv == "$cv" ]] || die "$name: the sides print $sv and $cv"
  fi
  for side in server client; do
    local want=$want_c
    [[ $side == server ]] && want=$want_s
    if ((want == 1)); then
      grep -qx "Error: BW result is below bw limit" "$WORK/$name.$side.err" ||
        die "$name: $side exited 1 without perftest's limit line: $(cat "$WORK/$name.$side.err")"
    fi
  done
  echo "    server: $(grep -vx -- '-*' "$WORK/$name.server.out") client: $(grep -vx -- '-*' "$WORK/$name.client.out")"
}
for mode in ps rs; do
  output_case $mode write_bw 0 0 --output=bandwidth -n 200
  output_case $mode read_bw 0 0 --output=message_rate -n 200
  output_case $mode send_lat 0 0 --output=latency -n 200
  output_case $mode write_bw 0 1 --output=bandwidth -n 200 -w 1000000
  output_case $mode send_bw 1 1 --output=message_rate -n 200 -w 1000000
  output_case $mode write_bw 0 0 --output=bandwidth -b -n 200 -w 1
done
# --run_infinitely -D 1: the sender (and a SEND receiver) prints a line a second until it is
# interrupted (SIGINT, as a user ends it); the other side's perftest or roce-perf runs with it.
# At least two lines in 6 s, each side's setup included.
# infinite_case ps|rs TEST
infinite_case() {
  local mode=$1 t=$2 name="inf-$1-$2" s side n
  log "$name: $([[ $mode == ps ]] && echo "ib_$t server, roce-perf client" || echo "roce-perf server, ib_$t client") --run_infinitely -D 1"
  if [[ $mode == ps ]]; then
    timeout -k 5 30 ip netns exec "${ROCE_TB_PREFIX}1" env "${lib[@]}" ROCE_DEVICE="$dev1" \
      "/usr/bin/ib_$t" -d roce0 -F --run_infinitely -D 1 >"$WORK/$name.server.out" 2>&1 &
    s=$!
    wait_listen
    timeout -k 5 30 ip netns exec "${ROCE_TB_PREFIX}2" "$PERF" "$t" --run_infinitely -D 1 \
      --device "$dev2" 10.78.0.1 >"$WORK/$name.client.out" 2>&1 &
  else
    timeout -k 5 30 ip netns exec "${ROCE_TB_PREFIX}1" "$PERF" "$t" --run_infinitely -D 1 \
      --device "$dev1" >"$WORK/$name.server.out" 2>&1 &
    s=$!
    wait_listen
    timeout -k 5 30 ip netns exec "${ROCE_TB_PREFIX}2" env "${lib[@]}" ROCE_DEVICE="$dev2" \
      "/usr/bin/ib_$t" -d roce0 -F --run_infinitely -D 1 10.78.0.1 >"$WORK/$name.client.out" 2>&1 &
  fi
  local c=$!
  PIDS+=("$s" "$c")
  sleep 6  # perftest's side opens its device (EAL) in a second or two before it starts
  kill -0 "$c" 2>/dev/null || die "$name: the client ended on its own: $(tail -n 3 "$WORK/$name.client.out")"
  pkill -INT -f -- "--run_infinitely -D 1.* 10\.78\.0\.1" || true
  sleep 1.5
  pkill -INT -f -- "--run_infinitely -D 1" || true
  wait "$c" "$s" 2>/dev/null || true
  for side in client $([[ $t == send_bw ]] && echo server); do
    n=$(report_lines "$WORK/$name.$side.out" | awk '$1 == 65536 && $4 > 0' | wc -l)
    ((n >= 2)) || die "$name: the $side printed $n lines of 65536 B with a bandwidth (want 2 or more): $(report_lines "$WORK/$name.$side.out")"
  done
  echo "    $(report_lines "$WORK/$name.client.out" | head -n 3 | awk '{print $4}' | tr '\n' ' ')MB/s, client"
}
for mode in ps rs; do
  infinite_case $mode write_bw
  infinite_case $mode send_bw
done
# Device key counters over the shim: perftest's process writes its device's counters when it
# closes the device (port, engine thread, driver).
cnt="$WORK/perftest.counters"
dev1="$dev1; counters=$cnt"
interop ps send_lat -n 200
grep -q "^engine thread:" "$cnt" && grep -Eq "^  rx_roce +[0-9]+$" "$cnt" || {
  cat "$cnt"
  die "counters=FILE: perftest's device did not write its counters"
}
log "PASS"
