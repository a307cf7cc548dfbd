#!/usr/bin/env bash
# End to end: --verify finds a bad byte. With the test hook --test-corrupt 37 the verifying
# side (the WRITE and SEND responder, the READ requester) flips one byte of message 37 where it
# landed; both sides must exit 1 and name message 37 and the byte's offset.
#
# Usage: verify_detects_test.sh ROCE_PERF
E2E_NAME=vfail
PERF=${1:?roce-perf binary}
source "$(dirname "$0")/lib.sh"
require_netns
testbed_up 2
for t in write_bw read_bw send_bw; do
  args="$t --verify -s 4096 -n 100 --test-corrupt 37"
  EXPECT_RC=1 run_pair "$t" 60 "$args" "$args"
  op=$(tr a-z A-Z <<<"${t%_bw}")
  for side in server client; do
    grep -q "verification FAILED.*$op message 37 (size 4096) offset 2047" "$WORK/$t.$side.out" ||
      die "$t $side: no report of message 37 offset 2047: $(tail -n 1 "$WORK/$t.$side.out")"
  done
  log "$t: $(grep -h 'verification FAILED' "$WORK/$t.client.out" "$WORK/$t.server.out" | head -n 1)"
done
log "PASS"
