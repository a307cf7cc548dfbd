#!/usr/bin/env bash
# End to end: two stack instances on 802.1Q VLAN 100 with priority 3 (device keys vlan, pcp),
# over net_af_packet on the testbed's veth pair, their QPs given traffic class 104 (DSCP 26,
# roce-perf's --tclass, as perftest's).
#   1. Verified WRITE, READ and SEND runs, sizes 1 B ... 1 MiB, IPv4 and IPv6 GIDs, RoCE MTU
#      4096 and 1024, the server capturing (pcap = FILE). In every capture each RoCE frame, sent
#      or received (requests, responses and ACKs), carries VID 100, PCP 3 and DSCP 26; tshark
#      finds no malformed frame and no expert error; scripts/icrc_check.py and roce-pcap check
#      find every ICRC right.
#   2. Another VLAN is another network: a client on VLAN 200, given the server's MAC as a static
#      neighbour (no ARP), sends its WRITEs to the server's MAC and addresses. The server's
#      engine counts them as "another VLAN" and drops them; no message completes and both sides
#      fail on their stall timeout.
# (This kernel has no 8021q module on some machines, so no kernel VLAN interface takes part: the
# tagged frames only cross the veth.)
#
# Usage: vlan_test.sh ROCE_PERF ROCE_PCAP
E2E_NAME=vlan
PERF=${1:?roce-perf binary}
ROCE_PCAP=${2:?roce-pcap binary}
source "$(dirname "$0")/lib.sh"
require_netns
require_capture_tools

testbed_up 2
TAG="vlan=100; pcp=3"

# --- 1. verified transfers on VLAN 100 ---
declare -A GID=([write_bw]=1 [read_bw]=2 [send_bw]=2)
declare -A MTU=([write_bw]=4096 [read_bw]=1024 [send_bw]=4096)
for t in write_bw read_bw send_bw; do
  args="$t --verify --sizes 1,4096,65536,1048576 -n 8 -x ${GID[$t]} -m ${MTU[$t]} --tclass 104"
  cap="$WORK/$t.pcap"
  run_pair "$t" 120 "$args" "$args" "$TAG; pcap=$cap" "$TAG"
  for side in server client; do
    bytes=$(verified_bytes "$WORK/$t.$side.out")
    ((bytes > 8 * 1048576)) || die "$t: the $side verified $bytes bytes"
  done
  roce=$(tshark -r "$cap" -Y infiniband 2>/dev/null | wc -l)
  ((roce > 0)) || die "$t: tshark sees no RoCE frame in the capture"
  untagged=$(tshark -r "$cap" -Y 'infiniband && !(vlan.id == 100 && vlan.priority == 3)' 2>/dev/null | wc -l)
  ((untagged == 0)) || die "$t: $untagged of $roce RoCE frames lack VID 100 / PCP 3"
  other=$(tshark -r "$cap" -Y 'infiniband && !(ip.dsfield.dscp == 26 || ipv6.tclass.dscp == 26)' 2>/dev/null | wc -l)
  ((other == 0)) || die "$t: $other of $roce RoCE frames lack DSCP 26 (--tclass 104)"
  check_capture "$t" "$cap" "$ROCE_PCAP"
  log "$t: $roce RoCE frames, all VID 100 / PCP 3 / DSCP 26; $(head -n 1 <<<"$CAPTURE_ICRC")"
done

# --- 2. a client on VLAN 200 reaches nothing ---
eval "$("$TESTBED" env 1 af_packet)"
neighbor="neighbor=$TB_STACK_IPV4 $TB_STACK_MAC"
sdev=$(device 1 af_packet "$TAG")
cdev=$(device 2 af_packet "vlan=200; pcp=3; $neighbor")
log "mismatch: server on VLAN 100, client on VLAN 200 (static neighbour $TB_STACK_IPV4)"
args="write_bw -s 4096 -n 10 -u 10 --counters --timeout 3"
# shellcheck disable=SC2086
timeout -k 5 60 ip netns exec "${ROCE_TB_PREFIX}1" "$PERF" $args --device "$sdev" \
  >"$WORK/mismatch.server.out" 2>&1 &
spid=$!
PIDS+=("$spid")
crc=0 src=0
# shellcheck disable=SC2086
timeout -k 5 60 ip netns exec "${ROCE_TB_PREFIX}2" "$PERF" $args --device "$cdev" 10.78.0.1 \
  >"$WORK/mismatch.client.out" 2>&1 || crc=$?
wait "$spid" || src=$?
((crc != 0 && src != 0)) || die "mismatch: client exit $crc, server exit $src (both should fail)"
grep -q "no progress for 3 s: 0 of 10 messages completed" "$WORK/mismatch.client.out" ||
  die "mismatch: the client did not stall with nothing completed"
dropped=$(sed -n 's/^  drop: another VLAN *\([0-9]*\)$/\1/p' "$WORK/mismatch.server.out")
sent=$(sed -n 's/^  tx_frames *\([0-9]*\)$/\1/p' "$WORK/mismatch.client.out" | head -n 1)
[[ -n $dropped && -n $sent ]] || die "mismatch: cannot read the counters"
((dropped >= 10 && dropped <= sent)) ||
  die "mismatch: the server dropped $dropped frames of another VLAN, the client sent $sent"
if grep -q "^  rx_roce " "$WORK/mismatch.server.out"; then
  die "mismatch: the server took RoCE frames: $(grep '^  rx_roce ' "$WORK/mismatch.server.out")"
fi
log "mismatch: the server dropped $dropped frames of VLAN 200 (the client sent $sent); nothing completed"
log "PASS"
