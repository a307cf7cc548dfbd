#!/usr/bin/env bash
# End to end: roce-perf's loops at counts the transfer tests do not reach.
#   - Bandwidth loops whose iterations are not a multiple of the completion moderation.
#     perftest signals every cq_mod-th message and the last one; without the last, the final
#     messages of the run would never complete and the run would stall (until --timeout).
#     1,050 messages of 64 B with the default moderation of 100 leave 50 behind the last
#     moderated completion.
#   - --verify with more messages in a pass than the send queue holds (2,000 of 64 B against
#     -t 128): the requester's window of slots is bounded by the TX depth, or a post fails.
#   - --reversed: the side that listens sends: its QP sends the 100 WRITEs of 4 KiB, the side
#     that connects only ACKs them, and both print the report.
#   - --mr_per_qp: with -q 3 each QP has its own memory region, so each side prints three R_Keys
#     of its own and three of the peer's, and the WRITEs through them all complete.
#   - --perform_warm_up: before the run the client's QP sends a send queue's worth (-t 64) of
#     messages and waits for them, so its QP sends 64 + 500 single-frame WRITEs (perftest's
#     perform_warm_up); the report still counts the run's 500. -l 4: one list of 4 first.
#   - --use-srq: with send_bw -q 4 -r 8 the receiving side's four QPs all take their receives
#     from one SRQ (the counters name it) and the sending side's from none; all 4 x 1000
#     messages arrive (the report counts 4000). With -b both sides receive from one, and in
#     send_lat too. --verify checks every byte of 2,000 SENDs received through it.
#   - --latency_gap 1000: each side spins 1 ms before each post and the samples include it, as
#     perftest's do, so no sample of write_lat, read_lat or send_lat is under 1000 us (write and
#     send halve a round trip that holds both sides' gaps; read has the client's only).
#   - --cpu_util with -D: the report gains perftest's CPU_Util[%] column, and busy-polling sides
#     show a share above 0 and at most 100 (write_bw, send_bw on both sides, send_lat); without
#     -D perftest's warning and no column.
#   - --rate_limit (perftest's SW limiter): 200 messages in bursts of 10 leave 19 gaps of
#     10 / rate seconds, so the average can be at most 20/19 of the rate: write_bw at 0.5 Gb/s
#     (at most 0.526; about 7 unlimited) and send_bw at 1000 messages a second (-s 64,
#     --rate_units p: at most 1053). Without a type the limiter is perftest's HW one, which
#     falls back to SW with perftest's line. --rate_limit_type PP instead limits each QP in the
#     stack (IBV_QP_RATE_LIMIT): write_bw at 1 Gb/s averages at most 1 Gb/s of payload (the limit
#     counts whole frames), where it runs at several unlimited; a UD send_bw of 1 KiB messages at
#     0.1 Gb/s at most that too.
#   - --out_json: the file holds perftest's blocks (test_info, results) with the result the
#     report line shows: write_bw's BW average, send_lat -D's t_avg and CPU share, and with
#     --output bandwidth the one number printed.
#   - Ctrl-C: a --run_infinitely pair, both sides sent SIGINT as a user ends them, cleans up
#     (EAL's runtime directory goes) and dies of the signal, as perftest does: 130 to a shell.
#   - --use_hugepages: the buffer (2 MiB a side here) in huge pages where two of 2 MiB are free;
#     where none are free (as on CI machines), both sides end at once with perftest's error.
#     Other cases (pages of another size, one free) are left out, saying so.
#
# Usage: perf_loops_test.sh ROCE_PERF
E2E_NAME=loops
PERF=${1:?roce-perf binary}
source "$(dirname "$0")/lib.sh"
require_netns
testbed_up 2

for t in write_bw send_bw read_bw; do
  run_pair "$t" 60 "$t -s 64 -n 1050" "$t -s 64 -n 1050"
  line=$(report_lines "$WORK/$t.client.out")
  [[ $(awk '{print $2}' <<<"$line") == 1050 ]] || die "$t: no report of 1050 iterations: $line"
  log "$t: $line"
  run_pair "$t.verify" 60 "$t --verify -s 64 -n 2000" "$t --verify -s 64 -n 2000"
  for side in server client; do
    [[ $(verified_bytes "$WORK/$t.verify.$side.out") == 128000 ]] ||
      die "$t --verify $side: not 128000 bytes verified: $(tail -n 1 "$WORK/$t.verify.$side.out")"
  done
  log "$t --verify: $(grep -h ' Verified' "$WORK/$t.verify.client.out")"
done
for l in 1 4; do
  args="write_bw -s 4096 -n 500 -t 64 -l $l --perform_warm_up"
  run_pair "warm$l" 60 "$args" "$args --counters"
  sent=$(sed -n 's/^  tx_packets *\([0-9]*\)$/\1/p' "$WORK/warm$l.client.out" | head -n 1)
  want=$((500 + (l == 1 ? 64 : 4)))
  [[ $sent == "$want" ]] || die "warm-up -l $l: the client's QP sent '$sent' frames, want $want"
  line=$(report_lines "$WORK/warm$l.client.out")
  [[ $(awk '{print $2}' <<<"$line") == 500 ]] || die "warm-up -l $l: no report of 500 iterations: $line"
  log "--perform_warm_up -l $l: $sent frames sent, $line"
done
run_pair reversed 60 "write_bw -s 4096 -n 100 --reversed --counters" \
  "write_bw -s 4096 -n 100 --reversed --counters"
s_tx=$(sed -n 's/^  tx_packets *\([0-9]*\)$/\1/p' "$WORK/reversed.server.out" | head -n 1)
s_rx=$(sed -n 's/^  rx_packets *\([0-9]*\)$/\1/p' "$WORK/reversed.server.out" | head -n 1)
c_rx=$(sed -n 's/^  rx_packets *\([0-9]*\)$/\1/p' "$WORK/reversed.client.out" | head -n 1)
[[ $s_tx == 100 && $c_rx == 100 && $s_rx -le 100 ]] ||
  die "--reversed: the listener sent '$s_tx' and received '$s_rx' frames, the connector received '$c_rx' (want 100, at most 100, 100)"
for side in server client; do
  [[ $(report_lines "$WORK/reversed.$side.out" | awk '{print $2}') == 100 ]] ||
    die "--reversed: no report of 100 iterations ($side)"
done
log "--reversed: the listener sent $s_tx WRITEs, the connector ACKed with $s_rx frames"
run_pair mrqp 60 "write_bw -q 3 -n 200 --mr_per_qp" "write_bw -q 3 -n 200 --mr_per_qp"
keys=$(grep -o 'RKey 0x[0-9a-f]*' "$WORK/mrqp.client.out" | sort -u | wc -l)
((keys == 6)) || die "--mr_per_qp -q 3: the client printed $keys distinct R_Keys, want 6"
[[ $(report_lines "$WORK/mrqp.client.out" | awk '{print $2}') == 600 ]] ||
  die "--mr_per_qp: no report of 600 iterations"
log "--mr_per_qp -q 3: $keys distinct R_Keys, $(report_lines "$WORK/mrqp.client.out")"
run_pair srq 60 "send_bw -q 4 -r 8 -n 1000 --use-srq --counters" \
  "send_bw -q 4 -r 8 -n 1000 --use-srq --counters"
srq_qps() { grep -Ec '^qp 0x[0-9a-f]+ \([A-Z]+, receives from SRQ [0-9]+\):$' "$1" || true; }
srq_ids() { sed -n 's/^qp 0x[0-9a-f]* ([A-Z]*, receives from SRQ \([0-9]*\)):$/\1/p' "$1" | sort -u | wc -l; }
[[ $(srq_qps "$WORK/srq.server.out") == 4 && $(srq_ids "$WORK/srq.server.out") == 1 ]] ||
  die "--use-srq: the receiver's 4 QPs do not share one SRQ: $(grep '^qp ' "$WORK/srq.server.out" | tr '\n' ' ')"
[[ $(srq_qps "$WORK/srq.client.out") == 0 ]] || die "--use-srq: the sender's QPs have an SRQ"
grep -q 'Using SRQ      : ON' "$WORK/srq.server.out" || die "--use-srq: the banner says SRQ OFF"
[[ $(report_lines "$WORK/srq.server.out" | awk '{print $2}') == 4000 ]] ||
  die "--use-srq: no report of 4000 iterations: $(report_lines "$WORK/srq.server.out")"
log "--use-srq -q 4: $(srq_qps "$WORK/srq.server.out") QPs on one SRQ, $(report_lines "$WORK/srq.server.out")"
run_pair srqb 60 "send_bw -q 2 -n 500 -b --use-srq --counters" "send_bw -q 2 -n 500 -b --use-srq --counters"
run_pair srqlat 60 "send_lat -n 500 --use-srq --counters" "send_lat -n 500 --use-srq --counters"
for side in server client; do
  [[ $(srq_qps "$WORK/srqb.$side.out") == 2 ]] || die "--use-srq -b: the $side's QPs are not on an SRQ"
  [[ $(srq_qps "$WORK/srqlat.$side.out") == 1 ]] || die "--use-srq send_lat: the $side's QP is not on an SRQ"
done
log "--use-srq -b and send_lat: both sides receive from an SRQ"
run_pair srqv 60 "send_bw --verify --use-srq -s 64 -n 2000" "send_bw --verify --use-srq -s 64 -n 2000"
for side in server client; do
  [[ $(verified_bytes "$WORK/srqv.$side.out") == 128000 ]] ||
    die "send_bw --verify --use-srq $side: not 128000 bytes verified: $(tail -n 1 "$WORK/srqv.$side.out")"
done
log "--use-srq --verify: $(grep -h ' Verified' "$WORK/srqv.server.out")"
for t in write_lat read_lat send_lat; do
  run_pair "gap_$t" 60 "$t -n 200 --latency_gap 1000" "$t -n 200 --latency_gap 1000"
  tmin=$(report_lines "$WORK/gap_$t.client.out" | awk '{print $3}')
  [[ -n $tmin ]] && awk -v m="$tmin" 'BEGIN { exit !(m >= 1000) }' ||
    die "$t --latency_gap 1000: t_min '$tmin' us, want at least 1000"
  log "$t --latency_gap 1000: $(report_lines "$WORK/gap_$t.client.out" | tr -s ' \t' ' ')"
done
# cpu_col FILE: the CPU_Util[%] of FILE's report line, if its header has the column.
cpu_col() {
  grep -q 'MsgRate\[Mpps\]    CPU_Util\[%\]$\|tps average    CPU_Util\[%\]$' "$1" || return 0
  grep -A1 'CPU_Util\[%\]$' "$1" | tail -n 1 | awk '{print $NF}'
}
for t in write_bw send_bw send_lat; do
  run_pair "cpu_$t" 60 "$t -D 2 -f 0 --cpu_util" "$t -D 2 -f 0 --cpu_util"
  sides=client
  [[ $t != write_bw ]] && sides="server client"
  for side in $sides; do
    cpu=$(cpu_col "$WORK/cpu_$t.$side.out")
    [[ -n $cpu ]] && awk -v c="$cpu" 'BEGIN { exit !(c > 0 && c <= 100) }' ||
      die "$t -D --cpu_util $side: CPU_Util '$cpu', want a share above 0 and at most 100"
  done
  log "$t -D 2 --cpu_util: $(grep -A1 'CPU_Util' "$WORK/cpu_$t.client.out" | tail -n 1 | tr -s ' \t' ' ')"
done
run_pair cpu_iters 60 "write_bw -n 100 --cpu_util" "write_bw -n 100 --cpu_util"
grep -q "CPU Utilization works only with Duration mode" "$WORK/cpu_iters.client.out" ||
  die "--cpu_util without -D: no warning"
! grep -q 'CPU_Util' "$WORK/cpu_iters.client.out" || die "--cpu_util without -D: a CPU column"
# at_most NAME COLUMN SCALE LIMIT WHAT: the client's result in COLUMN, times SCALE, is at most
# LIMIT (an awk expression).
at_most() {
  local v
  v=$(report_lines "$WORK/$1.client.out" | awk -v c="$2" -v s="$3" '{print $c * s}')
  [[ -n $v ]] && awk -v v="$v" "BEGIN { exit !(v <= $4) }" || die "$5: '$v', want at most $4"
  log "$5: $(report_lines "$WORK/$1.client.out" | tr -s ' \t' ' ')"
}
run_pair rate_gbps 60 "write_bw -n 200 --report_gbits" \
  "write_bw -n 200 --report_gbits --rate_limit 0.5 --rate_limit_type SW --burst_size 10"
at_most rate_gbps 4 1 "0.5 * 20 / 19" "write_bw --rate_limit 0.5 (bursts of 10), Gb/s"
run_pair rate_pps 60 "send_bw -s 64 -n 200" "send_bw -s 64 -n 200 --rate_limit 1000 --rate_units p --burst_size 10"
at_most rate_pps 5 1e6 "1000 * 20 / 19" "send_bw --rate_limit 1000 p (bursts of 10), messages a second"
grep -q "The QP failed to accept HW rate limit, providing SW rate limit" "$WORK/rate_pps.client.out" ||
  die "--rate_limit without a type: no fall-back line"
run_pair rate_pp 60 "write_bw -n 300 --report_gbits" \
  "write_bw -n 300 --report_gbits --rate_limit 1 --rate_limit_type PP"
at_most rate_pp 4 1 1 "write_bw --rate_limit 1 --rate_limit_type PP, Gb/s"
run_pair rate_pp_ud 60 "send_bw -c UD -s 1024 -n 200 --report_gbits" \
  "send_bw -c UD -s 1024 -n 200 --report_gbits --rate_limit 0.1 --rate_limit_type PP"
at_most rate_pp_ud 4 1 0.1 "send_bw -c UD --rate_limit 0.1 --rate_limit_type PP, Gb/s"
# json_val FILE KEY: the value of "KEY: value," in a --out_json file.
json_val() { sed -n "s/^$2: \\(.*\\),\\?$/\\1/p" "$1" | sed 's/,$//' | head -n 1; }
run_pair json_bw 60 "write_bw -n 200" "write_bw -n 200 --out_json --out_json_file $WORK/bw.json"
want_keys="{ test_info test Dual_port Device Number_of_qps Transport_type Connection_type Using_SRQ"
want_keys+=" PCIe_relax_order ibv_wr_API TX_depth CQ_Moderation Mtu Link_type GID_index"
want_keys+=" Max_inline_data rdma_cm_QPs Data_ex_method }, results MsgSize n_iterations BW_peak"
want_keys+=" BW_average MsgRate }, }"
keys=$(sed 's/^ *\([^: ]*\).*/\1/' "$WORK/bw.json" | tr '\n' ' ' | sed 's/ $//')
[[ $keys == "$want_keys" ]] || die "--out_json write_bw: keys '$keys', want '$want_keys'"
line=$(report_lines "$WORK/json_bw.client.out")
[[ $(json_val "$WORK/bw.json" test) == RDMA_Write_BW_Test &&
  $(json_val "$WORK/bw.json" n_iterations) == 200 &&
  $(json_val "$WORK/bw.json" BW_average) == "$(awk '{print $4}' <<<"$line")" ]] ||
  die "--out_json write_bw: $(tr '\n' ' ' <"$WORK/bw.json") does not match '$line'"
run_pair json_lat 60 "send_lat -D 2 -f 0" "send_lat -D 2 -f 0 --cpu_util --out_json --out_json_file $WORK/lat.json"
line=$(grep -A1 'CPU_Util' "$WORK/json_lat.client.out" | tail -n 1)
[[ $(json_val "$WORK/lat.json" t_avg) == "$(awk '{print $3}' <<<"$line")" &&
  $(json_val "$WORK/lat.json" CPU_util) == "$(awk '{print $5}' <<<"$line")" &&
  $(json_val "$WORK/lat.json" test) == Send_Latency_Test ]] ||
  die "--out_json send_lat -D: $(tr '\n' ' ' <"$WORK/lat.json") does not match '$line'"
run_pair json_out 60 "read_bw -n 200" "read_bw -n 200 --output bandwidth --out_json --out_json_file $WORK/out.json"
[[ $(json_val "$WORK/out.json" bw_avg) == "$(tail -n 1 "$WORK/json_out.client.out")" ]] ||
  die "--out_json --output bandwidth: bw_avg '$(json_val "$WORK/out.json" bw_avg)', printed '$(tail -n 1 "$WORK/json_out.client.out")'"
log "--out_json: write_bw, send_lat -D --cpu_util and --output bandwidth match their reports"
intr_s=$(device 1 af_packet)
intr_c=$(device 2 af_packet)
ip netns exec "${ROCE_TB_PREFIX}1" "$PERF" write_bw --run_infinitely -D 1 --timeout 30 --device "$intr_s" \
  >"$WORK/intr.server.out" 2>&1 &
s=$!
ip netns exec "${ROCE_TB_PREFIX}2" "$PERF" write_bw --run_infinitely -D 1 --timeout 30 --device "$intr_c" \
  10.78.0.1 >"$WORK/intr.client.out" 2>&1 &
c=$!
PIDS+=("$s" "$c")
for _ in $(seq 150); do
  (($(report_lines "$WORK/intr.client.out" | wc -l) >= 2)) && break
  sleep 0.1
done
(($(report_lines "$WORK/intr.client.out" | wc -l) >= 2)) || die "--run_infinitely: no two lines in 15 s"
kill -INT "$c" "$s"
src=0 crc=0
wait "$s" || src=$?
wait "$c" || crc=$?
((src == 130 && crc == 130)) || die "interrupted: server exit $src, client exit $crc (want 130: SIGINT)"
for p in "$s" "$c"; do
  [[ ! -e /var/run/dpdk/roce-$p ]] || die "interrupted: /var/run/dpdk/roce-$p left behind"
done
log "Ctrl-C: both sides cleaned up and died of SIGINT"
huge_free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
huge_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
if [[ $huge_kb == 2048 ]] && ((huge_free >= 2)); then
  run_pair huge 60 "write_bw -n 100 --use_hugepages" "write_bw -n 100 --use_hugepages"
  [[ $(report_lines "$WORK/huge.client.out" | awk '{print $2}') == 100 ]] ||
    die "--use_hugepages: no report of 100 iterations"
  log "--use_hugepages ($huge_free huge pages free): $(report_lines "$WORK/huge.client.out")"
elif ((huge_free == 0)); then
  EXPECT_RC=1 run_pair huge 60 "write_bw -n 100 --use_hugepages" "write_bw -n 100 --use_hugepages"
  for side in server client; do
    grep -q "Failed to allocate hugepages. Please configure hugepages" "$WORK/huge.$side.out" ||
      die "--use_hugepages without free huge pages: no error line ($side)"
  done
  log "--use_hugepages (no free huge pages of $huge_kb kB): both sides refuse, as perftest"
else
  log "--use_hugepages: not run: $huge_free free huge pages of $huge_kb kB, neither none nor two of 2 MiB"
fi
log "PASS"
