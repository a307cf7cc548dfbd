#!/usr/bin/env bash
# End to end: the kernel of namespace 2, on the same veth segment, pings the stack instance of
# namespace 1 (a roce-perf server waiting for its client): `ping` to its IPv4 address, `ping -R`
# and `ping -T tsandaddr` (options echoed, updated), `ping -6` to its IPv6 address and to
# all-nodes (ff02::1). The stack answers the kernel's ARP and Neighbor Solicitation and the echo
# requests itself; its counters must show the replies. A client then ends the server's run
# normally.
#
# Usage: ping_test.sh ROCE_PERF
E2E_NAME=ping
PERF=${1:?roce-perf binary}
source "$(dirname "$0")/lib.sh"
require_netns
command -v ping >/dev/null || skip "needs ping (iputils-ping)"

testbed_up 2
eval "$("$TESTBED" env 1 af_packet)"
stack4=$TB_STACK_IPV4 stack6=$TB_STACK_IPV6 dev1=$TB_DEVICE
dev2=$(device 2 af_packet)

timeout -k 5 90 ip netns exec "${ROCE_TB_PREFIX}1" "$PERF" send_lat -n 10 --counters --timeout 60 \
  --device "$dev1" >"$WORK/server.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
  grep -q "Waiting for client" "$WORK/server.out" && break
  sleep 0.1
done
grep -q "Waiting for client" "$WORK/server.out" || die "the stack instance did not come up"

log "ping $stack4 and ping -6 $stack6 from the kernel of namespace 2"
ip netns exec "${ROCE_TB_PREFIX}2" ping -c 3 -i 0.2 -W 2 "$stack4" >"$WORK/ping4.out" 2>&1 ||
  die "ping $stack4: $(tail -n 2 "$WORK/ping4.out")"
ip netns exec "${ROCE_TB_PREFIX}2" ping -6 -c 3 -i 0.2 -W 2 "$stack6" >"$WORK/ping6.out" 2>&1 ||
  die "ping -6 $stack6: $(tail -n 2 "$WORK/ping6.out")"
# A larger echo too: the reply carries the whole payload back.
ip netns exec "${ROCE_TB_PREFIX}2" ping -c 2 -i 0.2 -W 2 -s 1400 "$stack4" >>"$WORK/ping4.out" 2>&1 ||
  die "ping -s 1400 $stack4: $(tail -n 2 "$WORK/ping4.out")"
# Record route and timestamps (RFC 1122 3.2.2.6): the reply brings them back with the stack's
# address twice, as a Linux host's does (recorded as the request arrives and as the reply leaves).
ip netns exec "${ROCE_TB_PREFIX}2" ping -c 1 -W 2 -R "$stack4" >"$WORK/pingR.out" 2>&1 ||
  die "ping -R $stack4: $(tail -n 2 "$WORK/pingR.out")"
ip netns exec "${ROCE_TB_PREFIX}2" ping -c 1 -W 2 -T tsandaddr "$stack4" >"$WORK/pingT.out" 2>&1 ||
  die "ping -T tsandaddr $stack4: $(tail -n 2 "$WORK/pingT.out")"
rr=$(grep -cE "^(RR:)?[[:space:]]+${stack4//./\\.}\$" "$WORK/pingR.out" || true)
ts=$(grep -cE "^(TS:)?[[:space:]]+${stack4//./\\.}[[:space:]]+[0-9]+" "$WORK/pingT.out" || true)
((rr == 2 && ts == 2)) ||
  die "the stack's address $rr times in ping -R's route, $ts times in ping -T's (want 2 each): $(cat "$WORK/pingR.out" "$WORK/pingT.out")"
sed -n '/^RR:/,/^$/p;/^TS:/,/^$/p' "$WORK/pingR.out" "$WORK/pingT.out" | sed '/^$/d; s/^/    /'
# An echo to all-nodes: the stack answers it from its link-local address (EUI-64 of its MAC),
# beside the kernels on the segment.
ll=$(python3 -c 'import ipaddress, sys
m = bytes.fromhex(sys.argv[1].replace(":", ""))
print(ipaddress.IPv6Address(bytes([0xfe, 0x80] + [0] * 6 + [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])))' \
  "$TB_STACK_MAC")
ip netns exec "${ROCE_TB_PREFIX}2" ping -6 -c 3 -i 0.2 -W 2 "ff02::1%tb0" >"$WORK/ping6m.out" 2>&1 ||
  die "ping -6 ff02::1%tb0: $(tail -n 2 "$WORK/ping6m.out")"
grep -q "bytes from $ll%tb0: icmp_seq=" "$WORK/ping6m.out" ||
  die "no reply from the stack's $ll to ping -6 ff02::1: $(grep -c 'bytes from' "$WORK/ping6m.out") replies, none from it"
grep -h "packets transmitted" "$WORK/ping4.out" "$WORK/ping6.out" "$WORK/ping6m.out" | sed 's/^/    /'
# The kernel resolved the stack's MAC (ARP / ND answered by the stack).
mac=$(ip netns exec "${ROCE_TB_PREFIX}2" ip neigh show "$stack4" | awk '{print $5}')
[[ $mac == "$TB_STACK_MAC" ]] || die "ARP resolved $stack4 to '$mac', not the stack's $TB_STACK_MAC"
mac6=$(ip netns exec "${ROCE_TB_PREFIX}2" ip -6 neigh show "$stack6" | awk '{print $5}')
[[ $mac6 == "$TB_STACK_MAC" ]] || die "ND resolved $stack6 to '$mac6', not the stack's $TB_STACK_MAC"

# End the server's run with a client, so it exits normally and prints its counters.
timeout -k 5 60 ip netns exec "${ROCE_TB_PREFIX}2" "$PERF" send_lat -n 10 --timeout 30 \
  --device "$dev2" 10.78.0.1 >"$WORK/client.out" 2>&1 || die "the closing client failed"
wait "${PIDS[0]}" || die "the server failed"
line=$(grep "^neighbour:" "$WORK/server.out") || die "no neighbour counters"
echo "    $line"
[[ $line =~ echo\ ([0-9]+)/([0-9]+)\ echo6\ ([0-9]+)/([0-9]+) ]] || die "cannot read the echo counters"
((BASH_REMATCH[2] >= 5 && BASH_REMATCH[4] >= 3)) ||
  die "the stack answered ${BASH_REMATCH[2]} echo and ${BASH_REMATCH[4]} echo6 requests"
[[ $line =~ arp\ req\ rx\ ([0-9]+)\ rep\ tx\ ([0-9]+) ]] && ((BASH_REMATCH[2] >= 1)) ||
  die "the stack sent no ARP reply"
[[ $line =~ ns\ rx\ ([0-9]+)\ na\ tx\ ([0-9]+) ]] && ((BASH_REMATCH[2] >= 1)) ||
  die "the stack sent no neighbor advertisement"
log "PASS"
