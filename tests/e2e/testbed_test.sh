#!/usr/bin/env bash
# scripts/testbed.sh up leaves nothing behind when it fails part-way (here: an address the
# kernel refuses, after the namespaces and links exist) or is stopped by a signal, with a veth
# pair and with a bridge; down and status touch only PREFIX1..50 and PREFIXbr; and its --help is
# the usage text alone.
#
# Usage: testbed_test.sh
E2E_NAME=testbed
source "$(dirname "$0")/lib.sh"
require_netns

ours() { ip netns list | awk '{print $1}' | grep -c "^${ROCE_TB_PREFIX}" || true; }

for n in 2 3; do
  if ROCE_TB_SUBNET4=10.77.999 "$TESTBED" up "$n" >"$WORK/up$n.out" 2>&1; then
    die "up $n with a bad subnet succeeded"
  fi
  left=$(ours)
  ((left == 0)) || die "up $n failed and left $left namespaces: $(ip netns list | grep "^${ROCE_TB_PREFIX}")"
  log "up $n, failing part-way: nothing left"
done

# Stopped by SIGTERM once its first namespace exists.
"$TESTBED" up 6 >"$WORK/up-term.out" 2>&1 &
pid=$!
PIDS+=("$pid")
for ((i = 0; i < 200; i++)); do
  (($(ours) > 0)) && break
  sleep 0.05
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
((rc != 0)) || die "up 6 stopped by SIGTERM exited 0"
left=$(ours)
((left == 0)) || die "up 6 stopped by SIGTERM left $left namespaces"
log "up 6, stopped by SIGTERM (exit $rc): nothing left"

# down removes this prefix's namespaces only, not those of a longer prefix that begins with it
# (another testbed's, e.g. PREFIX "x-" beside "x-y-"): it used to remove every name it began.
other="${ROCE_TB_PREFIX}y-"
ip netns add "${other}1"
ip netns add "${ROCE_TB_PREFIX}1"
ip netns add "${ROCE_TB_PREFIX}br"
status=$("$TESTBED" status | tr '\n' ' ')
[[ $status == "${ROCE_TB_PREFIX}1 ${ROCE_TB_PREFIX}br " || $status == "${ROCE_TB_PREFIX}br ${ROCE_TB_PREFIX}1 " ]] ||
  { ip netns del "${other}1"; die "status listed '$status'"; }
"$TESTBED" down >/dev/null
kept=$(ip netns list | awk '{print $1}' | grep -c "^${other}1$" || true)
ip netns del "${other}1" 2>/dev/null || true
((kept == 1)) || die "down removed ${other}1, a namespace of the prefix ${other}"
(($(ours) == 0)) || die "down left $(ours) namespaces of its own prefix"
log "down and status: ${other}1 is not ours and stays"

help=$("$TESTBED" --help)
grep -q "testbed.sh up N" <<<"$help" || die "--help does not show the usage"
! grep -q "pipefail\|prefix=" <<<"$help" || die "--help shows the script's code: $help"

# env I names host I of 1..50 (up's bound): a larger I printed addresses such as 10.77.0.400.
for i in 0 51 300; do
  if out=$("$TESTBED" env "$i" 2>&1); then die "env $i succeeded: $out"; fi
  grep -q "I must be 1..50" <<<"$out" || die "env $i: $out"
done
"$TESTBED" env 50 >/dev/null || die "env 50 failed"
log "env I: 0, 51 and 300 refused, 50 taken"
log "PASS"
