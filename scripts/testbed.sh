#!/usr/bin/env bash
# A testbed of network namespaces for stack instances (roce-perf, tests, demos).
#
#   scripts/testbed.sh up N [--bridge] [--ovs]
#                                        N namespaces PREFIX1..PREFIXN, each with interfaces
#                                        tb0 (data, MTU 9000) and mg0 (the kernel's TCP): N = 2
#                                        joins them by veth pairs, N > 2 (or --bridge) by bridges
#                                        in namespace PREFIXbr; prints each instance's settings
#                                        (if it fails or is interrupted, it removes them again).
#                                        --ovs (implies --bridge) also starts a private Open
#                                        vSwitch with DPDK (scripts/ovs-switch.sh) in
#                                        /run/PREFIXovs with one vhost-user port per instance:
#                                        the fast testbed, whose frames cross no kernel
#   scripts/testbed.sh env I [VDEV]      the settings of instance I again (shell assignments);
#                                        VDEV af_packet (default, on tb0), pcap (on tb0) or ovs
#                                        (net_virtio_user facing the switch's port vhI)
#   scripts/testbed.sh run I -- CMD...   runs CMD inside namespace I
#   scripts/testbed.sh down              removes the namespaces of the prefix (idempotent): PREFIX1..
#                                        PREFIX50 and PREFIXbr, not those of a longer prefix
#   scripts/testbed.sh status            lists them
#
# PREFIX is $ROCE_TB_PREFIX (default roce-tb-): tests use their own so they never meet.
# Addressing (instance I):
#   tb0, the data segment: the stack instance (a DPDK vdev on tb0) owns 10.77.0.(100+I)/24 and
#     fd77::(100+I)/64 with MAC 02:00:00:77:00:I -- addresses the kernel does NOT own, so the
#     stack answers ARP, ND and ping for them itself. The kernel has 10.77.0.I and fd77::I there
#     too, to ping the stack from (DAD off: nothing would answer the kernel's probes anyway).
#     The vdev sets tb0's MAC to the stack's, so the kernel's own traffic does not use tb0.
#   mg0, the kernel's link: 10.78.0.I/24, for perftest's TCP exchange (TB_OOB_ADDR).
# Everything lives inside the namespaces the script creates; the root namespace is untouched.
set -euo pipefail

prefix=${ROCE_TB_PREFIX:-roce-tb-}
subnet4=${ROCE_TB_SUBNET4:-10.77.0}
subnet6=${ROCE_TB_SUBNET6:-fd77}
oob4=${ROCE_TB_OOB4:-10.78.0}

die() {
  echo "testbed: $*" >&2
  exit 2
}
need_root() { [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"; }
ns() { echo "${prefix}$1"; }
ovs_dir() { echo "/run/${prefix}ovs"; }
in_ns() {
  local n=$1
  shift
  ip netns exec "$(ns "$n")" "$@"
}

# Instance I's settings, as shell assignments (eval-able) and as a --device string.
settings() {
  local i=$1 vdev=${2:-af_packet}
  local mac
  mac=$(printf '02:00:00:77:00:%02x' "$i")
  local port
  case $vdev in
    pcap) port="net_pcap0,iface=tb0" ;;
    # The switch serves the socket (ovs-switch.sh); 1024 descriptors (virtio's most) ride out a
    # few hundred microseconds without a poll.
    ovs) port="net_virtio_user0,path=$(ovs_dir)/vh${i},queues=1,queue_size=1024" ;;
    *) port="net_af_packet0,iface=tb0,blocksz=8192,framesz=8192,framecnt=512" ;;
  esac
  echo "TB_NS=$(ns "$i")"
  echo "TB_KERNEL_IPV4=${subnet4}.${i}"
  echo "TB_KERNEL_IPV6=${subnet6}::${i}"
  echo "TB_STACK_IPV4=${subnet4}.$((100 + i))"
  echo "TB_STACK_IPV6=${subnet6}::$((100 + i))"
  echo "TB_STACK_MAC=${mac}"
  echo "TB_OOB_ADDR=${oob4}.${i}"
  echo "TB_DEVICE='port=${port}; ipv4=${subnet4}.$((100 + i))/24; ipv6=${subnet6}::$((100 + i))/64; mac=${mac}; mtu=4200'"
}

setup_if() {
  # $1 instance, interfaces tb0 and mg0 already inside its namespace.
  local i=$1
  in_ns "$i" ip link set lo up
  in_ns "$i" sysctl -qw net.ipv6.conf.mg0.disable_ipv6=1
  in_ns "$i" ip link set mg0 up
  in_ns "$i" ip addr add "${oob4}.${i}/24" dev mg0
  # DAD off and no router solicitations before the link comes up.
  in_ns "$i" sysctl -qw net.ipv6.conf.tb0.accept_dad=0
  in_ns "$i" sysctl -qw net.ipv6.conf.tb0.dad_transmits=0
  in_ns "$i" sysctl -qw net.ipv6.conf.tb0.router_solicitations=0
  in_ns "$i" ip link set tb0 mtu 9000 up
  in_ns "$i" ip addr add "${subnet4}.${i}/24" dev tb0
  in_ns "$i" ip -6 addr add "${subnet6}::${i}/64" dev tb0 nodad
}

# ours NAME: whether NAME is one of this prefix's namespaces (PREFIX1..PREFIX50 or PREFIXbr),
# so that `down` never removes those of a longer prefix that begins with ours.
ours() { [[ ${1#"$prefix"} != "$1" && ${1#"$prefix"} =~ ^([1-9][0-9]?|br)$ ]]; }

cmd_down() {
  need_root
  local n removed=0
  for n in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    if ours "$n"; then
      # Processes left in the namespace (a stack instance that did not exit) go first.
      local pids
      pids=$(ip netns pids "$n" 2>/dev/null || true)
      if [[ -n $pids ]]; then kill $pids 2>/dev/null || true; sleep 0.5; kill -9 $pids 2>/dev/null || true; fi
      ip netns del "$n" 2>/dev/null || true
      removed=$((removed + 1))
    fi
  done
  if [[ -d $(ovs_dir) ]]; then "$(dirname "$0")/ovs-switch.sh" stop "$(ovs_dir)"; fi
  echo "testbed: down (${removed} namespaces removed)"
}

cmd_up() {
  need_root
  local n=${1:-}
  [[ $n =~ ^[0-9]+$ && $n -ge 2 && $n -le 50 ]] || die "up N: N must be 2..50"
  local bridge=0 ovs=0 opt
  for opt in "${@:2}"; do
    case $opt in
      --bridge) bridge=1 ;;
      --ovs) ovs=1 bridge=1 ;;
      *) die "up N: unknown option '$opt' (--bridge, --ovs)" ;;
    esac
  done
  ((n > 2)) && bridge=1
  # Idempotent: whatever an earlier `up` left of this prefix goes first.
  cmd_down >/dev/null
  # A step that fails (set -e) or a signal part-way through leaves nothing behind either.
  trap 'cmd_down >/dev/null 2>&1' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local i
  for ((i = 1; i <= n; i++)); do ip netns add "$(ns "$i")"; done
  if ((bridge == 0)); then
    # Veth pairs, created inside namespace 1, their second ends moved to namespace 2.
    local l
    for l in tb0 mg0; do
      in_ns 1 ip link add "$l" type veth peer name "${l}p"
      in_ns 1 ip link set "${l}p" netns "$(ns 2)"
      in_ns 2 ip link set "${l}p" name "$l"
    done
  else
    ip netns add "$(ns br)"
    in_ns br ip link set lo up
    in_ns br ip link add br0 type bridge
    in_ns br ip link set br0 mtu 9000 up
    in_ns br ip link add br1 type bridge
    in_ns br ip link set br1 up
    for ((i = 1; i <= n; i++)); do
      in_ns br ip link add "p$i" type veth peer name tb0 netns "$(ns "$i")"
      in_ns br ip link set "p$i" mtu 9000 master br0 up
      in_ns br ip link add "m$i" type veth peer name mg0 netns "$(ns "$i")"
      in_ns br ip link set "m$i" master br1 up
    done
  fi
  for ((i = 1; i <= n; i++)); do setup_if "$i"; done
  local vdev=af_packet kind="veth pair"
  ((bridge)) && kind=bridge
  if ((ovs)); then
    "$(dirname "$0")/ovs-switch.sh" start "$(ovs_dir)" "$n"
    vdev=ovs kind="Open vSwitch (DPDK) for the stack, bridge for the kernel"
  fi
  trap - EXIT INT TERM
  echo "testbed: up, $n instances ($kind)"
  for ((i = 1; i <= n; i++)); do
    echo "# instance $i"
    settings "$i" "$vdev"
  done
}

cmd_status() {
  local n
  for n in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    if ours "$n"; then echo "$n"; fi
  done
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  env)
    [[ ${2:-} =~ ^[0-9]+$ && $2 -ge 1 && $2 -le 50 ]] || die "env I [VDEV]: I must be 1..50"
    [[ ${3:-af_packet} =~ ^(af_packet|pcap|ovs)$ ]] || die "env I VDEV: af_packet, pcap or ovs"
    settings "$2" "${3:-af_packet}"
    ;;
  run)
    need_root
    [[ ${2:-} =~ ^[0-9]+$|^br$ && ${3:-} == -- ]] || die "run I -- COMMAND..."
    i=$2
    shift 3
    exec ip netns exec "$(ns "$i")" "$@"
    ;;
  status) cmd_status ;;
  "" | -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0" ;;
  *) die "unknown command '$1' (up N, down, env I, run I -- CMD, status)" ;;
esac
