#!/usr/bin/env bash
# End to end over net_tap: two stack instances in one network namespace, each on a tap
# interface its DPDK port creates, joined by a bridge the kernel also sits on. The kernel pings
# both instances (IPv4 and IPv6: the stacks answer ARP, ND and echo), then roce-perf runs a
# verified RDMA WRITE and a SEND latency test between them, over IPv4 and IPv6 GIDs.
#
# net_tap carries frames up to 1522 bytes (the port refuses a larger mtu), so the RoCE path
# MTU is 1024. The tap PMD gives the kernel's end of the tap the port's MAC; a bridge would then
# take frames for that MAC as its own, so each tap's kernel end gets another MAC here.
#
# Usage: tap_test.sh ROCE_PERF
E2E_NAME=tap
PERF=${1:?roce-perf binary}
source "$(dirname "$0")/lib.sh"
require_netns
[[ -c /dev/net/tun ]] || skip "needs /dev/net/tun"
command -v ping >/dev/null || skip "needs ping (iputils-ping)"

NS="${ROCE_TB_PREFIX}1"  # removed with the prefix by the clean-up
ip netns add "$NS"
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up
nsx ip link add br0 type bridge
nsx ip link set br0 type bridge ageing_time 0 2>/dev/null || true
nsx sysctl -qw net.ipv6.conf.br0.accept_dad=0 net.ipv6.conf.default.accept_dad=0
nsx ip link set br0 up
nsx ip addr add 10.79.0.1/24 dev br0
nsx ip addr add fd79::1/64 dev br0 nodad

dev() {  # dev I: the device string of instance I (tap rtapI, MAC 02:00:00:79:00:0I)
  echo "port=net_tap$1,iface=rtap$1; ipv4=10.79.0.10$1/24; ipv6=fd79::10$1/64; mac=02:00:00:79:00:0$1; mtu=1500"
}
# attach I: waits until instance I's port has set its MAC on its tap (the port sets it after
# starting), gives the tap's kernel end a MAC of its own, and bridges it.
attach() {
  local ifc=rtap$1
  for _ in $(seq 200); do
    nsx ip link show "$ifc" 2>/dev/null | grep -q "link/ether 02:00:00:79:00:0$1 " && break
    sleep 0.05
  done
  nsx ip link show "$ifc" 2>/dev/null | grep -q "link/ether 02:00:00:79:00:0$1 " ||
    die "instance $1 did not bring up its tap $ifc"
  nsx ip link set "$ifc" address "02:00:00:79:ff:0$1"
  nsx ip link set "$ifc" master br0
  nsx ip link set "$ifc" up
}

# run NAME SERVER_ARGS...: a server (instance 1) and a client (instance 2) of one test.
run() {
  local name=$1
  shift
  log "$name: roce-perf $*"
  # shellcheck disable=SC2086
  timeout -k 5 120 ip netns exec "$NS" "$PERF" "$@" --device "$(dev 1)" --timeout 60 \
    --counters >"$WORK/$name.server.out" 2>&1 &
  local spid=$!
  PIDS+=("$spid")
  attach 1
  if [[ $name == write_bw_ipv4 ]]; then
    log "ping 10.79.0.101 and ping -6 fd79::101 from the kernel on the bridge"
    nsx ping -c 3 -i 0.2 -W 2 10.79.0.101 >"$WORK/ping4.out" 2>&1 ||
      die "ping 10.79.0.101: $(tail -n 2 "$WORK/ping4.out")"
    nsx ping -6 -c 3 -i 0.2 -W 2 fd79::101 >"$WORK/ping6.out" 2>&1 ||
      die "ping -6 fd79::101: $(tail -n 2 "$WORK/ping6.out")"
    grep -h "packets transmitted" "$WORK/ping4.out" "$WORK/ping6.out" | sed 's/^/    /'
  fi
  local crc=0 src=0
  timeout -k 5 120 ip netns exec "$NS" "$PERF" "$@" --device "$(dev 2)" --timeout 60 \
    --counters 127.0.0.1 >"$WORK/$name.client.out" 2>&1 &
  local cpid=$!
  PIDS+=("$cpid")
  attach 2
  wait "$cpid" || crc=$?
  wait "$spid" || src=$?
  if ((crc || src)); then
    tail -n 25 "$WORK/$name.server.out" "$WORK/$name.client.out"
    die "$name: client exit $crc, server exit $src"
  fi
  report_lines "$WORK/$name.client.out" | sed 's/^/    /'
  # Both taps are gone with their processes; the next pair creates them again.
  for _ in $(seq 50); do
    nsx ip link show rtap1 >/dev/null 2>&1 || nsx ip link show rtap2 >/dev/null 2>&1 || break
    sleep 0.1
  done
}

run write_bw_ipv4 write_bw --verify --sizes 1,1024,65536 -n 64 -m 1024 -x 1
for side in server client; do
  bytes=$(verified_bytes "$WORK/write_bw_ipv4.$side.out")
  ((bytes >= 64 * 66561)) || die "write_bw $side verified $bytes bytes"
done
grep -q "echo 3/3 echo6 3/3" "$WORK/write_bw_ipv4.server.out" ||
  die "the stack's counters do not show 3 echo and 3 echo6 replies: $(grep '^neighbour:' "$WORK/write_bw_ipv4.server.out")"
run send_bw_ipv6 send_bw --verify --sizes 1,4096 -n 256 -m 1024 -x 2
run send_lat_ipv4 send_lat -s 8 -n 500 -m 1024 -x 1
log "PASS"
