#!/usr/bin/env bash
# The collectives across processes: N ranks of coll_check, each a stack instance in a network
# namespace of its own on the testbed's bridge (net_af_packet), meeting through a TCP store at
# rank 0 (MASTER_ADDR on the kernel's link), started as torchrun starts ranks (RANK,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
#
#   coll_netns_test.sh COLL_CHECK N [--drop FRACTION] [--max-bytes BYTES]
#     every operation, results compared bit for bit; --drop: the stack drops that fraction of
#     the frames each instance sends and receives, and the results must still be exact.
#   coll_netns_test.sh COLL_CHECK N --ovs [--max-bytes BYTES]
#     every operation on the fast testbed: net_virtio_user ports on a private Open vSwitch with
#     DPDK (scripts/ovs-switch.sh) instead of net_af_packet on the bridge; skipped, saying why,
#     without openvswitch-switch-dpdk or the hugepages it needs.
#   coll_netns_test.sh COLL_CHECK N --kill
#     ranks AllReduce in a loop; rank N-1 is killed (SIGKILL) mid-collective: every other rank
#     must fail within the configured timeout with an error naming it, and exit.
E2E_NAME=coll
BIN=${1:?coll_check binary}
N=${2:?world size}
shift 2
DROP= MAX=$((64 << 20)) KILL=0 VDEV=af_packet
while (($#)); do
  case $1 in
    --drop) DROP=$2; shift 2 ;;
    --max-bytes) MAX=$2; shift 2 ;;
    --kill) KILL=1; shift ;;
    --ovs) VDEV=ovs; shift ;;
    *) echo "coll_netns_test: unknown argument $1" >&2; exit 64 ;;
  esac
done
[[ -n $DROP ]] && E2E_NAME=coll-drop
((KILL)) && E2E_NAME=coll-kill
[[ $VDEV == ovs ]] && E2E_NAME=coll-ovs
source "$(dirname "$0")/../e2e/lib.sh"
require_netns
[[ -x $BIN ]] || die "no coll_check at $BIN"

if [[ $VDEV == ovs ]]; then
  ovs=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
  [[ -x $ovs ]] || skip "needs openvswitch-switch-dpdk ($ovs)"
  if ! "$TESTBED" up "$N" --ovs >"$WORK/testbed.out" 2>&1; then
    grep -q "hugepages" "$WORK/testbed.out" && skip "$(grep -m1 hugepages "$WORK/testbed.out")"
    die "testbed up failed: $(cat "$WORK/testbed.out")"
  fi
else
  testbed_up "$N"
fi
port=$((20000 + $$ % 20000))
timeout_ms=10000
# 67 ms local ACK timeouts: lost frames are resent soon and a killed rank is named within a
# second. Through the switch the default (0.54 s) instead: its poll-mode thread shares the two
# cores with four ranks and can leave a rank's ring unserved for longer than 7 x 67 ms, which is
# a slow link, not a dead peer.
ib_timeout=14
[[ $VDEV == ovs ]] && ib_timeout=17
start_rank() {  # start_rank I EXTRA-DEVICE-KEYS ARGS...: rank I-1 in namespace I
  local i=$1 extra=$2
  shift 2
  ip netns exec "${ROCE_TB_PREFIX}$i" env ROCE_DEVICE="$(device "$i" "$VDEV" "$extra")" \
    RANK=$((i - 1)) WORLD_SIZE="$N" MASTER_ADDR=10.78.0.1 MASTER_PORT="$port" \
    ROCE_COLL_TIMEOUT_MS=$timeout_ms ROCE_COLL_IB_TIMEOUT=$ib_timeout \
    timeout 600 "$BIN" "$@" >"$WORK/rank$i.out" 2>&1 &
  PIDS+=($!)
}

if ((KILL)); then
  for ((i = 1; i <= N; i++)); do start_rank "$i" "" --loop; done
  victim=$N
  # Killed once every rank is well into the loop.
  for ((t = 0; t < 600; t++)); do
    grep -q "^iteration 20$" "$WORK/rank$victim.out" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "^iteration 20$" "$WORK/rank$victim.out" || die "rank $((victim - 1)) never reached iteration 20"
  # PIDS holds `timeout`; coll_check is its child.
  pkill -KILL -P "${PIDS[victim - 1]}" || true
  kill -KILL "${PIDS[victim - 1]}" 2>/dev/null || true
  killed_at=$(date +%s%N)
  log "killed rank $((victim - 1))"
  for ((i = 1; i < N; i++)); do
    rc=0
    wait "${PIDS[i - 1]}" || rc=$?
    took=$((($(date +%s%N) - killed_at) / 1000000))
    ((rc == 2)) || die "rank $((i - 1)) exited $rc, not 2 (an error)"
    grep -q "^error: peer $((victim - 1)): " "$WORK/rank$i.out" ||
      die "rank $((i - 1)) did not name rank $((victim - 1)): $(grep error: "$WORK/rank$i.out")"
    ((took <= timeout_ms + 5000)) || die "rank $((i - 1)) took $took ms (timeout $timeout_ms ms)"
    log "rank $((i - 1)): $(grep '^error:' "$WORK/rank$i.out" | cut -c1-160) (after $took ms)"
  done
  log "PASS: every rank named rank $((victim - 1)) and exited"
  exit 0
fi

for ((i = 1; i <= N; i++)); do
  extra=
  [[ -n $DROP ]] && extra="drop=$DROP; fault_seed=$((i * 7)); counters=$WORK/rank$i.counters"
  start_rank "$i" "$extra" --max-bytes "$MAX"
done
fail=0
for ((i = 1; i <= N; i++)); do
  rc=0
  wait "${PIDS[i - 1]}" || rc=$?
  line=$(grep '^coll_check: rank .* checks passed' "$WORK/rank$i.out" || true)
  log "rank $((i - 1)): exit $rc: ${line:-no result line}"
  ((rc == 0)) && [[ $line == *", 0 failed"* ]] || fail=1
done
((fail == 0)) || die "a rank failed"
if [[ -n $DROP ]]; then
  # The loss was real: the fault injection's counters ("dropped rx N tx M") of every rank.
  dropped=$(cat "$WORK"/rank*.counters |
    awk '/^fault injection: dropped/ { s += $5 + $7 } END { print s + 0 }')
  log "frames dropped, all ranks: $dropped"
  ((dropped > 0)) || die "no frame was dropped"
fi
if [[ $VDEV == ovs ]]; then
  # The frames went through the switch: it learned every instance's MAC on a port of its own.
  stats=$("$(dirname "$TESTBED")/ovs-switch.sh" stats "/run/${ROCE_TB_PREFIX}ovs")
  log "switch: $(echo "$stats" | grep -v '^vh' | paste -sd';')"
  for ((i = 1; i <= N; i++)); do
    mac=$(printf '02:00:00:77:00:%02x' "$i")
    echo "$stats" | grep -q "^learned port=[0-9]* mac=$mac$" || die "the switch never saw $mac"
  done
  ports=$(echo "$stats" | sed -n 's/^learned port=\([0-9]*\) .*/\1/p' | sort -u | wc -l)
  ((ports >= N)) || die "the instances' MACs were learned on $ports ports, not $N"
fi
log "PASS: $N ranks on $VDEV, every result exact${DROP:+ with $DROP of the frames dropped}"
