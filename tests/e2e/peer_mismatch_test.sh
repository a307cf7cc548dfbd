#!/usr/bin/env bash
# End to end: two sides given different sizes both exit 1 with a line that says so, at once,
# instead of waiting for each other or reporting a wrong bandwidth.
#   --verify, one size against two: the first verification record carries the number of sizes
#   (before, the server read the client's second record as part of a key message, and both
#   waited until --timeout).
#   send_bw, -s 65536 against -s 2, and over UD, and send_lat, -s 64 against -s 8: the receiver
#   checks each message's length.
#
# Usage: peer_mismatch_test.sh ROCE_PERF
E2E_NAME=mismatch
PERF=${1:?roce-perf binary}
source "$(dirname "$0")/lib.sh"
require_netns
testbed_up 2

# expect_said NAME SIDE PATTERN
expect_said() {
  grep -q -- "$3" "$WORK/$1.$2.out" || die "$1 $2: no '$3': $(tail -n 1 "$WORK/$1.$2.out")"
  log "$1 $2: $(grep -- "$3" "$WORK/$1.$2.out")"
}

EXPECT_RC=1 run_pair verify_sizes 60 "write_bw --verify -s 64 -n 100" \
  "write_bw --verify --sizes 64,128 -n 100"
same='give both sides the same -s/--sizes/-a and -n'
expect_said verify_sizes server "the number of sizes differs (the peer runs 2, this side 1): $same"
expect_said verify_sizes client "the number of sizes differs (the peer runs 1, this side 2): $same"

EXPECT_RC=1 run_pair send_size 60 "send_bw -s 65536 -n 100" "send_bw -s 2 -n 100"
expect_said send_size server "received 2 bytes, expected 65536: give both sides the same"
# UD: the receive's byte count includes the 40 bytes of GRH; the line names the message's.
EXPECT_RC=1 run_pair send_size_ud 60 "send_bw -c UD -s 1024 -n 100" "send_bw -c UD -s 2 -n 100"
expect_said send_size_ud server "received 2 bytes, expected 1024: give both sides the same"
# send_lat: the receiving side checks too (before, a server given -s 64 answered a client's 8-byte
# SENDs and reported 64-byte latencies).
EXPECT_RC=1 run_pair send_lat_size 60 "send_lat -s 64 -n 100" "send_lat -s 8 -n 100"
expect_said send_lat_size server "received 8 bytes, expected 64: give both sides the same"
# The client, waiting for the server's answer, sees the server leave (it used to wait out
# --timeout).
expect_said send_lat_size client "the peer closed the out-of-band connection"
log "PASS"
