#!/usr/bin/env bash
# End to end: two roce-perf processes in two network namespaces over a veth pair, through one
# DPDK vdev (net_af_packet or net_pcap). RDMA WRITE, READ and SEND, each 256 MiB and more in
# messages of 1 B .. 1 MiB, every byte verified end to end (--verify). Across the two vdevs
# every operation runs over IPv4 and IPv6 GIDs and with path MTU 1024 and 4096:
#
#            af_packet          pcap
#   WRITE    IPv4, MTU 4096     IPv6, MTU 1024
#   READ     IPv6, MTU 1024     IPv4, MTU 4096
#   SEND     IPv6, MTU 4096     IPv4, MTU 1024
#
# Usage: transfer_test.sh ROCE_PERF af_packet|pcap [--drop FRACTION]
#   --drop: the stack's fault injection drops that fraction of frames on both sides, received
#   and sent; the test then also requires retransmissions in the requesters' counters.
E2E_NAME=transfer
PERF=${1:?roce-perf binary}
VDEV=${2:?af_packet or pcap}
DROP=
[[ ${3:-} == --drop ]] && DROP=${4:?fraction}
[[ -n $DROP ]] && E2E_NAME=faults
source "$(dirname "$0")/lib.sh"
require_netns
[[ -x $PERF ]] || die "no roce-perf at $PERF"
[[ $VDEV == af_packet || $VDEV == pcap ]] || die "vdev must be af_packet or pcap"

SIZES=1,64,4096,65536,1048576
ITERS=256  # x (1 + 64 + 4096 + 65536 + 1048576) bytes = 273 MiB per operation
MIN_BYTES=$((256 << 20))

# gid index: 1 = the IPv4 GID, 2 = the first configured IPv6 address (0 is link-local).
declare -A GID MTU
if [[ $VDEV == af_packet ]]; then
  GID=([write_bw]=1 [read_bw]=2 [send_bw]=2)
  MTU=([write_bw]=4096 [read_bw]=1024 [send_bw]=4096)
else
  GID=([write_bw]=2 [read_bw]=1 [send_bw]=1)
  MTU=([write_bw]=1024 [read_bw]=4096 [send_bw]=1024)
fi

sextra= cextra= flags="--counters"
if [[ -n $DROP ]]; then
  sextra="drop=$DROP; fault_seed=11"
  cextra="drop=$DROP; fault_seed=22"
  # A lost last packet waits for the local ACK timeout: 4.096 us * 2^10 = 4 ms, not perftest's
  # 67 ms default (-u 14), so the run stays short.
  flags="-u 10 --counters"
fi

testbed_up 2
for t in write_bw read_bw send_bw; do
  args="$t --verify --sizes $SIZES -n $ITERS -x ${GID[$t]} -m ${MTU[$t]} $flags"
  run_pair "$t" 240 "$args" "$args" "$sextra" "$cextra"
  for side in server client; do
    out="$WORK/$t.$side.out"
    bytes=$(verified_bytes "$out")
    ((bytes >= MIN_BYTES)) || die "$t $side verified $bytes bytes, expected >= $MIN_BYTES"
    grep -q "Mtu             : ${MTU[$t]}\[B\]" "$out" || die "$t $side: path MTU is not ${MTU[$t]}"
    grep -q "GID index       : ${GID[$t]}$" "$out" || die "$t $side: GID index is not ${GID[$t]}"
  done
  # The GID really is of the family asked for: IPv4-mapped GIDs print as ...:255:255:10:77:...
  if [[ ${GID[$t]} == 1 ]]; then
    grep -q "GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:102" "$WORK/$t.client.out" ||
      die "$t: the client's GID is not its IPv4 address"
  else
    grep -q "GID: 253:119:" "$WORK/$t.client.out" || die "$t: the client's GID is not fd77::/64"
  fi
  lines=$(report_lines "$WORK/$t.client.out" | wc -l)
  ((lines == 5)) || die "$t: expected 5 result lines (one per size), got $lines"
  if [[ -z $DROP && $VDEV == af_packet ]]; then
    # A clean link loses nothing: the af_packet rings (framecnt=512) hold the go-back-N window
    # (256 PSNs), and a READ asks for at most the window (1 MiB READs at MTU 1024 used to put
    # 1,024 frames in flight and overrun the ring into local ACK timeouts).
    for side in server client; do
      if grep -Eq "local_ack_timeouts +[1-9]" "$WORK/$t.$side.out"; then
        die "$t $side: local ACK timeouts on a clean link: $(grep -E 'local_ack_timeouts|retransmit' "$WORK/$t.$side.out" | tr -s ' ' | paste -sd ';')"
      fi
    done
  fi
  if [[ -n $DROP ]]; then
    # The requester's QP retransmitted, and the injected drops happened on both sides.
    req="$WORK/$t.client.out"
    [[ $t == send_bw || $t == write_bw || $t == read_bw ]] || true
    rtx=$(awk '/retransmitted_packets/ {s += $2} END {print s + 0}' "$req")
    ((rtx > 0)) || die "$t: no retransmitted packets in the client's counters"
    for side in server client; do
      grep -Eq "fault injection: dropped rx [1-9][0-9]* tx [1-9][0-9]*" "$WORK/$t.$side.out" ||
        die "$t $side: the fault injection dropped nothing"
    done
    log "$t: $rtx packets retransmitted by the client"
  fi
  log "$t: $(verified_bytes "$WORK/$t.client.out") bytes verified ($VDEV, GID ${GID[$t]}, MTU ${MTU[$t]})"
  report_lines "$WORK/$t.client.out" | sed 's/^/    /'
done

# ring_full FILE: the "af_packet ring full N" count of roce-perf's --counters output ("" if none).
ring_full() { sed -n 's/.*af_packet ring full \([0-9]*\).*/\1/p' "$1"; }

# Several QPs on one port: their windows together (16 x 256 PSNs) are far more than the
# receiver's af_packet ring (512 frames), which the port's in-flight budget (device key
# `inflight`, 512) keeps them within. Nothing may be lost on the clean link (before the budget:
# 2-27 % of the WRITE frames retransmitted; READ, thousands of local ACK timeouts).

if [[ -z $DROP && $VDEV == af_packet ]]; then
  for t in write_bw read_bw; do
    args="$t -q 16 --sizes 65536 -n 64 -x 2 -m 1024 --counters"
    run_pair "$t.q16" 240 "$args" "$args" "" ""
    for side in server client; do
      out="$WORK/$t.q16.$side.out"
      lost=$(awk '/retransmitted_packets|local_ack_timeouts/ {s += $2} END {print s + 0}' "$out")
      ((lost == 0)) ||
        die "$t -q 16 $side: $(grep -E 'local_ack_timeouts|retransmitted' "$out" | sort | uniq -c | tr -s ' ' | paste -sd ';')"
    done
    log "$t -q 16: nothing retransmitted; $(grep -E 'port_budget_waits' "$WORK/$t.q16.client.out" | tr -s ' ')"
    report_lines "$WORK/$t.q16.client.out" | sed 's/^/    /'
  done
  # WRITEs like these with the client's budget off and a server ring of 8 frames (the testbed's
  # has 512, and on a quiet machine the receiver sometimes keeps up with 16 windows): the ring
  # overflows, and the server's counters say so (the kernel's drops, which net_af_packet's own
  # statistics leave out).
  args="write_bw -q 16 --sizes 65536 -n 16 -x 2 -m 1024 --counters"
  small=$(device 1 af_packet | sed 's/framecnt=512/framecnt=8/')
  [[ $small == *framecnt=8* ]] || die "testbed device string has no framecnt=512: $small"
  SDEV_OVERRIDE=$small run_pair "write_bw.q16.nobudget" 240 "$args" "$args" "" "inflight=0"
  ring=$(ring_full "$WORK/write_bw.q16.nobudget.server.out")
  rtx=$(awk '/retransmitted_packets/ {s += $2} END {print s + 0}' "$WORK/write_bw.q16.nobudget.client.out")
  [[ -n $ring ]] || die "write_bw -q 16, no budget: no 'af_packet ring full' in the server's counters"
  ((ring > 0 && rtx > 0)) ||
    die "write_bw -q 16, no budget: server ring drops $ring, client retransmitted $rtx (expected both > 0)"
  log "write_bw -q 16, no budget: the server's ring dropped $ring frames; the client retransmitted $rtx packets"
  for side in server client; do
    ring=$(ring_full "$WORK/write_bw.q16.$side.out")
    [[ $ring == 0 ]] || die "write_bw -q 16 $side: af_packet ring full '$ring' with the budget on"
  done
fi
log "PASS"
