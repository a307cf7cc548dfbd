#!/usr/bin/env bash
# A private Open vSwitch with DPDK (Debian's openvswitch-switch-dpdk): a userspace switch whose
# vhost-user ports face stack instances on DPDK's net_virtio_user, so a frame crosses no kernel.
#
#   scripts/ovs-switch.sh start DIR N   database, sockets, logs and hugetlbfs mount under DIR;
#                                       bridge br0 (learning, the NORMAL flow) with ports vh1..vhN,
#                                       each a vhost-user server socket DIR/vhI, MTU 9000
#   scripts/ovs-switch.sh stop DIR      stops it and gives back what start took (idempotent)
#   scripts/ovs-switch.sh stats DIR     the frames the poll-mode thread received, the MACs the
#                                       bridge learned on each port (what passed through it: a
#                                       vhost port's own counters restart when its instance leaves)
#                                       and each port's drop counters
#
# A stack instance connects to its port's socket as it starts, so its link is up before the
# program's first message:
#   port=net_virtio_user0,path=DIR/vhI,queues=1,queue_size=1024
# (The other way round, the switch as the client of a socket the instance serves, the switch
# retries its connection once a second: an instance's first messages were lost for up to a
# second and short runs waited out retransmission timeouts.)
# Nothing here touches the system's own Open vSwitch: another database, other sockets, and the
# DPDK binary run directly, not through the ovs-vswitchd alternative or a service.
#
# Why each setting:
#   hugepages      OVS's DPDK refuses --no-huge beside the --in-memory it always passes, so start
#                  reserves ROCE_OVS_HUGEPAGES (default 600) 2 MiB pages more than the system has
#                  and mounts a hugetlbfs of its own (stop gives back exactly what it got)
#   --no-pci       keeps OVS's DPDK off the machine's own NICs
#   mtu_request    9000: vhost ports default to 1500 and drop every larger frame (a 4096-byte RoCE
#                  payload is a 4.2 KB frame)
#   tx-retries-max 32 (OVS's most): a switch port retries a full guest ring before dropping
#   pmd-cpu-mask   the poll-mode thread on the last CPU (ROCE_OVS_PMD_CPU); pmd-maxsleep lets it
#                  sleep up to 50 us when idle, so an idle switch does not hold a core
set -euo pipefail

die() {
  echo "ovs-switch: $*" >&2
  exit 2
}
vswitchd=${ROCE_OVS_VSWITCHD:-/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk}
schema=/usr/share/openvswitch/vswitch.ovsschema
pages=${ROCE_OVS_HUGEPAGES:-600}
nr=/proc/sys/vm/nr_hugepages

vsctl() { ovs-vsctl --db="unix:$dir/db.sock" --timeout=20 "$@"; }

cmd_stop() {
  local f pid
  for f in vswitchd ovsdb; do
    [[ -f $dir/$f.pid ]] || continue
    pid=$(cat "$dir/$f.pid")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/$f.pid"
  done
  if mountpoint -q "$dir/huge" 2>/dev/null; then umount "$dir/huge"; fi
  if [[ -f $dir/hugepages.taken ]]; then
    local taken cur
    taken=$(cat "$dir/hugepages.taken")
    cur=$(cat $nr)
    echo $((cur > taken ? cur - taken : 0)) >$nr
    rm -f "$dir/hugepages.taken"
  fi
  # Only what start made: DIR may have been given by hand.
  rm -f "$dir"/{conf.db,.conf.db.~lock~,db.sock,ovsdb.log,vswitchd.log,ovsdb.ctl,vswitchd.ctl}
  rm -f "$dir"/vh[0-9]* "$dir"/br0.mgmt "$dir"/br0.snoop
  rmdir "$dir/huge" "$dir" 2>/dev/null || true
}

take_hugepages() {
  local before after
  before=$(cat $nr)
  echo $((before + pages)) >$nr 2>/dev/null || true
  after=$(cat $nr)
  echo $((after - before)) >"$dir/hugepages.taken"
  ((after - before >= pages)) ||
    die "asked the kernel for $pages more 2 MiB hugepages and got $((after - before)) ($nr): not enough free memory, or no hugepage support here"
  mkdir -p "$dir/huge"
  mount -t hugetlbfs -o pagesize=2M none "$dir/huge"
}

cmd_start() {
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 50 ]] || die "start DIR N: N must be 1..50"
  [[ -x $vswitchd ]] || die "no $vswitchd (apt-get install openvswitch-switch-dpdk)"
  [[ -d /sys/kernel/mm/hugepages/hugepages-2048kB ]] || die "this kernel has no 2 MiB hugepages"
  cmd_stop
  mkdir -p "$dir"
  trap 'cmd_stop' EXIT
  take_hugepages
  local cpu=${ROCE_OVS_PMD_CPU:-$(($(nproc) - 1))}
  ovsdb-tool create "$dir/conf.db" "$schema"
  export OVS_RUNDIR=$dir OVS_LOGDIR=$dir OVS_DBDIR=$dir
  ovsdb-server -vconsole:off --remote="punix:$dir/db.sock" --pidfile="$dir/ovsdb.pid" --detach \
    --log-file="$dir/ovsdb.log" --unixctl="$dir/ovsdb.ctl" "$dir/conf.db"
  vsctl --no-wait init
  vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
    "other_config:dpdk-extra=--huge-dir=$dir/huge --no-pci" other_config:dpdk-socket-mem=512 \
    other_config:dpdk-lcore-mask=0x1 other_config:pmd-cpu-mask="$(printf '0x%x' $((1 << cpu)))" \
    other_config:pmd-maxsleep=50
  "$vswitchd" -vconsole:off "unix:$dir/db.sock" --pidfile="$dir/vswitchd.pid" --detach \
    --log-file="$dir/vswitchd.log" --unixctl="$dir/vswitchd.ctl" ||
    die "ovs-vswitchd-dpdk did not start: $(grep -E 'ERR|EMER' "$dir/vswitchd.log" | tail -3)"
  vsctl add-br br0 -- set bridge br0 datapath_type=netdev
  local i
  for ((i = 1; i <= n; i++)); do
    vsctl add-port br0 "vh$i" -- set Interface "vh$i" type=dpdkvhostuser \
      options:tx-retries-max=32 mtu_request=9000
  done
  for ((i = 1; i <= n; i++)); do
    for _ in $(seq 100); do [[ -S $dir/vh$i ]] && break; sleep 0.1; done
    [[ -S $dir/vh$i ]] || die "port vh$i made no socket $dir/vh$i: $(grep -E 'ERR|WARN' "$dir/vswitchd.log" | tail -2)"
  done
  trap - EXIT
  echo "ovs-switch: up in $dir, $n vhost-user ports, poll-mode thread on CPU $cpu"
}

cmd_stats() {
  local p
  echo "pmd $(ovs-appctl -t "$dir/vswitchd.ctl" dpif-netdev/pmd-stats-show |
    awk '/packets received:/ { n += $3 } END { print "packets_received=" n + 0 }')"
  ovs-appctl -t "$dir/vswitchd.ctl" fdb/show br0 | awk 'NR > 1 { print "learned port=" $1 " mac=" $3 }'
  for p in $(vsctl list-ports br0); do
    echo "$p $(vsctl get Interface "$p" statistics | tr -d '{} ' | tr ',' '\n' |
      grep -E '^(rx|tx)_packets=|drop|failure|retries' | paste -sd' ')"
  done
}

dir=${2:-}
n=${3:-}
case ${1:-} in
  start | stop | stats)
    [[ $dir == /* ]] || die "$1 DIR: DIR must be an absolute path"
    [[ $(id -u) -eq 0 ]] || die "needs root (hugepages)"
    "cmd_$1"
    ;;
  "" | -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0" ;;
  *) die "unknown command '$1' (start DIR N, stop DIR, stats DIR)" ;;
esac
