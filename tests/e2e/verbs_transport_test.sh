#!/usr/bin/env bash
# End to end: roce-perf over the verbs transport (--transport verbs: roce-perf-verbs, the same
# loops through <infiniband/verbs.h> and our libibverbs) between two network namespaces over
# net_af_packet. A verified write_bw (every byte checked, both sides), a send_lat with the
# engine driven from the test thread (mode = inline), one with its own thread and one on
# completion events (-e), a send_bw -b -e, UD and UC runs (-c), a verified send_bw through a
# shared receive queue (--use-srq), a per-QP rate limit (--rate_limit_type PP), the shim's
# virtio PMD (net_virtio_user) facing a native net_vhost, and mixed pairs (verbs server, native
# client) that show both transports speak the same protocol.
#
# Usage: verbs_transport_test.sh ROCE_PERF   (roce-perf-verbs must sit beside it)
E2E_NAME=verbs
PERF=${1:?roce-perf binary}
source "$(dirname "$0")/lib.sh"
require_netns
[[ -x $PERF ]] || die "no roce-perf at $PERF"
[[ -x $(dirname "$PERF")/roce-perf-verbs ]] || die "no roce-perf-verbs beside $PERF"

# The verbs side says so in its counters (the shim has no counter API).
ran_verbs() { grep -q "not available over the verbs API" "$1" || die "$1: not the verbs transport"; }
lat_iters() { sed -n 's/^ 8 \+\([0-9]\+\) .*/\1/p' "$1" | tail -n 1; }

testbed_up 2

V="--transport verbs --counters"
BYTES=$((64 << 20))  # 1024 x 64 KiB
args="write_bw --verify -s 65536 -n 1024 -m 4096"
run_pair write_bw 120 "$args $V" "$args $V"
for side in server client; do
  out="$WORK/write_bw.$side.out"
  bytes=$(verified_bytes "$out")
  ((bytes >= BYTES)) || die "write_bw $side verified $bytes bytes, expected >= $BYTES"
  grep -q "Mtu             : 4096\[B\]" "$out" || die "write_bw $side: path MTU is not 4096"
  ran_verbs "$out"
done
[[ $(report_lines "$WORK/write_bw.client.out" | wc -l) -ge 1 ]] || die "write_bw: no result line"

for mode in inline thread events; do
  flags="send_lat -s 8 -n 2000 $V"
  [[ $mode == inline ]] && flags="$flags --inline-engine"
  [[ $mode == events ]] && flags="$flags -e"  # ibv_req_notify_cq / ibv_get_cq_event
  run_pair "send_lat_$mode" 120 "$flags" "$flags"
  for side in server client; do
    out="$WORK/send_lat_$mode.$side.out"
    ran_verbs "$out"
    n=$(lat_iters "$out")
    [[ $n == 2000 ]] || die "send_lat ($mode) $side: no result line for 2000 iterations"
    [[ $mode != events ]] || grep -q "Test with events" "$out" || die "send_lat ($mode): no -e"
  done
done
# -e on a bw pair over the verbs transport: send_bw -b waits on both CQs of one channel.
flags="send_bw -b -e -s 4096 -n 2000 $V"
run_pair send_bw_events 120 "$flags" "$flags"
for side in server client; do
  ran_verbs "$WORK/send_bw_events.$side.out"
  [[ $(report_lines "$WORK/send_bw_events.$side.out" | wc -l) -ge 1 ]] ||
    die "send_bw -b -e $side: no result line"
done

# -c UD and -c UC over the verbs transport (UD QPs with address handles and GRH room in every
# receive; UC QPs without ACKs), and UD between the two transports. Nothing retransmits a lost
# frame: the bw runs send no more frames than the receiver's af_packet ring holds (512).
for c in "send_bw -c UD -n 200" "write_bw -c UC -s 4096 -n 200" "send_lat -c UD -n 2000"; do
  name=$(tr -d ' -' <<<"$c")
  conn=$(sed -n 's/.*-c \(U[CD]\).*/\1/p' <<<"$c")
  run_pair "$name" 120 "$c $V" "$c $V"
  for side in server client; do
    ran_verbs "$WORK/$name.$side.out"
    grep -q "Connection type : $conn" "$WORK/$name.$side.out" || die "$c $side: no $conn banner"
    [[ $(report_lines "$WORK/$name.$side.out" | wc -l) -ge 1 ]] || die "$c $side: no result line"
  done
done
run_pair mixed_ud 120 "send_lat -c UD -n 2000 $V" "send_lat -c UD -n 2000"
for side in server client; do
  [[ $(report_lines "$WORK/mixed_ud.$side.out" | wc -l) -ge 1 ]] || die "mixed UD $side: no result line"
done

# --use-srq over the verbs transport: ibv_create_srq / ibv_post_srq_recv, every byte checked.
run_pair srq 120 "send_bw --verify --use-srq -s 4096 -n 1000 $V" "send_bw --verify --use-srq -s 4096 -n 1000 $V"
for side in server client; do
  ran_verbs "$WORK/srq.$side.out"
  [[ $(verified_bytes "$WORK/srq.$side.out") == 4096000 ]] || die "send_bw --use-srq $side: not 4096000 bytes verified"
done
grep -q 'Using SRQ      : ON' "$WORK/srq.server.out" || die "send_bw --use-srq: no SRQ in the banner"

# A per-QP rate limit set through ibv_modify_qp (IBV_QP_RATE_LIMIT): at most 1 Gb/s of payload.
run_pair pp 120 "write_bw -n 300 --report_gbits $V" \
  "write_bw -n 300 --report_gbits --rate_limit 1 --rate_limit_type PP $V"
ran_verbs "$WORK/pp.client.out"
avg=$(report_lines "$WORK/pp.client.out" | awk '{print $4}')
[[ -n $avg ]] && awk -v a="$avg" 'BEGIN { exit !(a <= 1) }' ||
  die "write_bw --rate_limit_type PP over verbs: average '$avg' Gb/s, want at most 1"

# The shim's own virtio PMD (linked in for cloud VMs' NICs) as net_virtio_user, facing a native
# roce-perf's net_vhost (the shared DPDK's driver) over a vhost-user socket: verified write_bw.
vsock="$WORK/vhost.sock"
SDEV_OVERRIDE="port=net_vhost0,iface=$vsock,queues=1; ipv4=10.77.0.101/24; mac=02:00:00:77:00:01; mtu=4200" \
  CDEV_OVERRIDE="port=net_virtio_user0,path=$vsock,queues=1; ipv4=10.77.0.102/24; mac=02:00:00:77:00:02; mtu=4200" \
  CLIENT_AFTER=$vsock run_pair virtio 120 "$args" "$args $V"
ran_verbs "$WORK/virtio.client.out"
for side in server client; do
  bytes=$(verified_bytes "$WORK/virtio.$side.out")
  ((bytes >= BYTES)) || die "virtio $side verified $bytes bytes, expected >= $BYTES"
done

# Mixed: the verbs transport against the native one, verified both ways.
run_pair mixed 120 "$args $V" "$args"
for side in server client; do
  bytes=$(verified_bytes "$WORK/mixed.$side.out")
  ((bytes >= BYTES)) || die "mixed $side verified $bytes bytes, expected >= $BYTES"
done
ran_verbs "$WORK/mixed.server.out"
! grep -q "not available over the verbs API" "$WORK/mixed.client.out" ||
  die "mixed: the client ran the verbs transport"
log "verbs transport: write_bw verified, send_lat inline, thread and events, send_bw -b -e, UD and UC, --use-srq, PP rate limit, virtio_user, mixed pairs"
echo "PASS"
