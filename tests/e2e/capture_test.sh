#!/usr/bin/env bash
# End to end: a capture (the stack's pcap = FILE) of verified WRITE, READ, SEND and atomic runs
# over IPv4 and IPv6 GIDs, with 1 % of the frames dropped on both sides (so the capture holds
# NAKs, retransmissions and duplicate responses too). Then, on every capture:
#   - tshark decodes it with no malformed frame and no expert error;
#   - scripts/icrc_check.py, an ICRC implementation of its own (and scapy's for IPv4), finds
#     every frame's ICRC right;
#   - roce-pcap check (the stack's own parser) parses and rebuilds every frame byte for byte.
# (tshark's options: TSHARK_OPTS in lib.sh.)
#
# Usage: capture_test.sh ROCE_PERF ROCE_PCAP
E2E_NAME=capture
PERF=${1:?roce-perf binary}
ROCE_PCAP=${2:?roce-pcap binary}
source "$(dirname "$0")/lib.sh"
require_netns
require_capture_tools

testbed_up 2
declare -A GID=([write_bw]=1 [read_bw]=2 [send_bw]=2 [atomic_bw]=1)
captures=()
for t in write_bw read_bw send_bw atomic_bw; do
  if [[ $t == atomic_bw ]]; then
    args="$t -n 500 -x ${GID[$t]} -u 10"
  else
    args="$t --verify --sizes 1,64,4096,65536,1048576 -n 8 -x ${GID[$t]} -u 10"
  fi
  cap="$WORK/$t.pcap"
  run_pair "$t" 120 "$args" "$args" "drop=0.01; fault_seed=5; pcap=$cap" "drop=0.01; fault_seed=6"
  [[ -s $cap ]] || die "$t: no capture written"
  captures+=("$cap")
done

summaries=
for cap in "${captures[@]}"; do
  name=$(basename "$cap")
  frames=$(tshark -r "$cap" 2>/dev/null | wc -l)
  roce=$(tshark -r "$cap" -Y infiniband 2>/dev/null | wc -l)
  ((roce > 0)) || die "$name: tshark sees no RoCE frame ($frames frames)"
  check_capture "$name" "$cap" "$ROCE_PCAP"
  log "$name: $frames frames, $roce RoCE; tshark: no malformed frame, no expert error; $(head -n 1 <<<"$CAPTURE_ICRC")"
  summaries+="$CAPTURE_ICRC"$'\n'
done
# Both GID families made it into the captures.
grep -q "([1-9][0-9]* IPv4" <<<"$summaries" || die "no IPv4 RoCE frame in the captures"
grep -q " [1-9][0-9]* IPv6;" <<<"$summaries" || die "no IPv6 RoCE frame in the captures"
log "PASS"
