#!/usr/bin/env bash
# End to end: a net_memif peer killed (SIGKILL) in the middle of a write_bw. The survivor must
# neither crash nor hang: it exits 1 with a line that says what went wrong, within seconds (the
# run would last 20 s, and a stalled one 60 s more). A client whose server was killed sees its
# port's link go down and says so. Each side is killed
# in turn, with memif copying both ways and with a zero-copy client (zero-copy=yes, EAL's
# --single-file-segments), and over the verbs transport (roce-perf-verbs, where the link's loss
# shows as port 1 going down). Both processes run in the first namespace of the test's testbed
# (which makes two), joined by a memif socket in the test's directory, and exchange their QP
# details over its loopback.
#
# net_memif tears the link down on EAL's interrupt thread when the peer goes; a burst the
# survivor's engine was inside then touched unmapped memory (SIGSEGV once in 212 kills here
# before dpdk/burst_gate.h; tests/dpdk/memif_leave_test.cc shows the race within a process,
# where it is met in every run).
#
# Usage: peer_leaves_test.sh ROCE_PERF [REPEATS]
E2E_NAME=leave
PERF=${1:?roce-perf binary}
REPEATS=${2:-2}
source "$(dirname "$0")/lib.sh"
require_netns
[[ -x $PERF ]] || die "no roce-perf at $PERF"
testbed_up 2
NS="${ROCE_TB_PREFIX}1"

# memif_device ROLE HOST ZEROCOPY SOCKET
memif_device() {
  local extra="" eal=""
  if [[ $3 == yes && $1 == client ]]; then
    extra=",zero-copy=yes"
    eal="; eal=--single-file-segments"
  fi
  echo "port=net_memif0,role=$1,socket=$4,socket-abstract=no$extra; ipv4=10.97.0.$2/24;" \
    "mac=02:00:00:97:00:0$2; mtu=4200$eal"
}

# kill_one NAME VICTIM(server|client) ZEROCOPY(yes|no) [ROCE_PERF_FLAGS]
kill_one() {
  local name=$1 victim=$2 zc=$3 sock="$WORK/$1.sock"
  local args="write_bw -s 65536 -D 20 -p 18517 --timeout 60 ${4:-}"
  local spid cpid
  # shellcheck disable=SC2086
  timeout -k 5 60 ip netns exec "$NS" "$PERF" $args \
    --device "$(memif_device server 1 "$zc" "$sock")" >"$WORK/$name.server.out" 2>&1 &
  spid=$!
  PIDS+=("$spid")
  for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
  [[ -S $sock ]] || die "$name: the server made no memif socket: $(tail -n 3 "$WORK/$name.server.out")"
  # shellcheck disable=SC2086
  timeout -k 5 60 ip netns exec "$NS" "$PERF" $args \
    --device "$(memif_device client 2 "$zc" "$sock")" 127.0.0.1 >"$WORK/$name.client.out" 2>&1 &
  cpid=$!
  PIDS+=("$cpid")
  # Traffic flows once the client prints its report's header; let it run a second more.
  for _ in $(seq 150); do grep -qs '#bytes' "$WORK/$name.client.out" && break; sleep 0.1; done
  grep -q '#bytes' "$WORK/$name.client.out" || die "$name: the client never started: $(tail -n 3 "$WORK/$name.client.out")"
  sleep 1
  local vpid=$spid survivor=client survivor_pid=$cpid
  if [[ $victim == client ]]; then vpid=$cpid survivor=server survivor_pid=$spid; fi
  # roce-perf is timeout's child (ip netns exec replaced itself with timeout).
  pkill -KILL -P "$vpid" || die "$name: no $victim process to kill"
  local killed_at
  killed_at=$(date +%s%N)
  wait "$vpid" 2>/dev/null || true
  local rc=0
  wait "$survivor_pid" || rc=$?
  local took_ms=$((($(date +%s%N) - killed_at) / 1000000))
  local out="$WORK/$name.$survivor.out"
  if [[ $rc -ne 1 ]] || ! grep -q '^roce-perf: ' "$out"; then
    echo "--- $survivor ($name) ---"
    tail -n 20 "$out"
    die "$name: the $survivor exited $rc after its peer was killed (want 1 and an error line)"
  fi
  if ((took_ms > 10000)); then
    tail -n 5 "$out"
    die "$name: the $survivor took ${took_ms} ms to see that its peer was gone (want 10 s at most)"
  fi
  if [[ $survivor == client ]] && ! grep -q "link went down" "$out"; then
    tail -n 5 "$out"
    die "$name: the client did not say that its link went down"
  fi
  log "$name: the $survivor exited 1 after ${took_ms} ms: $(grep '^roce-perf: ' "$out" | head -n 1)"
  rm -f "$sock"
}

for ((r = 1; r <= REPEATS; r++)); do
  for zc in no yes; do
    for victim in server client; do
      kill_one "r$r-zc-$zc-kill-$victim" "$victim" "$zc"
    done
  done
  for victim in server client; do
    kill_one "r$r-verbs-kill-$victim" "$victim" no "--transport verbs"
  done
done
log "PASS"
