#!/usr/bin/env bash
# roce-perf's command line: every bad flag or value is one line on stderr and exit 2; --help and
# --version exit 0; an unreachable server is one line and exit 1. No device is opened (the
# checks come first), so this runs anywhere, without root.
#
# Usage: cli_test.sh ROCE_PERF
set -uo pipefail
PERF=${1:?roce-perf binary}
dev='port=net_null0; ipv4=192.0.2.1/24'
CLI_TOOL=$PERF
source "$(dirname "$0")/../support/expect_cli.sh"

expect 2 "test is required"
expect 2 "unknown test 'write_bandwidth'" write_bandwidth
expect 2 "not expected: --bogus" write_bw --bogus
expect 2 "rdma_cm .* not supported" write_bw -R
expect 2 "-b: bidirectional is only available in bw tests" send_lat -b
expect 2 "--verify checks one direction: run it without -b" write_bw --verify -b
expect 2 "-D: duration mode doesn't work with events" send_lat -e -D 5
expect 2 "-e sleeps until the engine thread reports a completion: drop --inline-engine" \
  send_lat -e --inline-engine
expect 2 "--verify polls its completions: run it without -e" send_bw --verify -e
expect 2 "-e: events are not available on the WRITE verb" write_lat -e
expect 2 "-X: events must be enabled \\(-e\\) to select a completion vector" send_lat -X 0
expect 2 "-X: events are not available on the WRITE verb" write_bw -X 0
expect 2 "eq_num: '2049' is not a number in 0..2048" send_bw -e -X 2049
expect 2 "-c UD: UD connection only possible in SEND verb" write_bw -c UD
expect 2 "-c UC: UC connection not possible in READ/ATOMIC verbs" read_bw -c UC
expect 2 "-c UC: UC connection not possible in READ/ATOMIC verbs" atomic_bw -c UC
expect 2 "connection type 'XRC': choose RC, UC or UD" send_bw -c XRC
expect 2 "--verify needs a reliable connection: -c UC may lose messages" write_bw --verify -c UC
expect 2 "iters: '3' is not a number in 5..100000000" write_bw -n 3
expect 2 "tclass: '256' is not a number in 0..255" write_bw --tclass 256
expect 2 "tclass: 'x' is not a number in 0..255" write_bw --tclass=x
expect 2 "hop_limit: '-1' is not a number in 0..255" write_bw -L -1
expect 2 "-L: Hop limit only valid for RawEth QP" write_bw -L 32
expect 2 "-T: TOS only valid for rdma_cm based QP and RawEth QP \\(use --tclass\\)" write_bw -T 32
expect 2 "tos: '300' is not a number in 0..255" send_lat -T 300
expect 2 "--output: 'bw': invalid verbosity level output flag. Please use bandwidth, latency, message_rate" write_bw --output bw
expect 2 "--output: output verbosity level for BW can be: bandwidth, message_rate" write_bw --output latency
expect 2 "--output: output verbosity level for LAT can be: latency" send_lat --output=bandwidth
expect 2 "limit_bw: '-1' is not a number of 0 or more" write_bw -w -1
expect 2 "limit_msgrate: 'nan' is not a number of 0 or more" write_bw -y nan
expect 2 "limit_bw: a limit applies to bw tests only" write_lat -w 10
expect 2 "--run_infinitely does not support events feature yet" write_bw --run_infinitely -e
expect 2 "--run_infinitely exists only in BW tests for now" send_lat --run_infinitely
expect 2 "--run_infinitely mode is not supported in SEND Bidirectional BW test" send_bw -b --run_infinitely
expect 2 "--run_infinitely runs one size: no -a or --sizes" write_bw -a --run_infinitely
expect 2 "--perform_warm_up: valid in write_bw, read_bw and atomic_bw" send_bw --perform_warm_up
expect 2 "--perform_warm_up: --verify checks its own messages only" write_bw --verify --perform_warm_up
expect 2 "--reversed: --verify runs in the usual direction" write_bw --verify --reversed
expect 2 "--mr_per_qp: --verify uses one memory region" write_bw --verify --mr_per_qp
expect 2 "rate_limit: '0' is not a rate above 0" write_bw --rate_limit 0
expect 2 "rate_limit: 'fast' is not a rate above 0" write_bw --rate_limit fast
expect 2 "--rate_limit_type HW: a RoCE port takes no static rate: use SW" write_bw --rate_limit 10 --rate_limit_type HW
expect 2 "--rate_limit_type PP: a QP's limit is a bit rate: --rate_units g or M" write_bw --rate_limit 1000 --rate_units p --rate_limit_type PP
expect 2 "--rate_limit_type PP: a QP's limit is 1 Mb/s to 400 Gb/s" write_bw --rate_limit 401 --rate_limit_type PP
expect 2 "--rate_limit_type PP: a QP's limit is 1 Mb/s to 400 Gb/s" write_bw --rate_limit 0.0001 --rate_limit_type PP
expect 2 "--burst_size: bursts are the SW limiter's, not PP's" write_bw --rate_limit 1 --rate_limit_type PP --burst_size 4
expect 2 "--run_infinitely does not support rate limit feature yet" write_bw --run_infinitely --rate_limit 1 --rate_limit_type PP
expect 2 "rate_limit_type: 'XX': use HW, SW or PP" write_bw --rate_limit 10 --rate_limit_type XX
expect 2 "--rate_limit_type: give the rate \\(--rate_limit\\)" write_bw --rate_limit_type SW
expect 2 "--rate_limit: SW Rate limiter cann't be executed on non-BW, ATOMIC or bidirectional SEND tests" write_lat --rate_limit 1
expect 2 "--rate_limit: SW Rate limiter cann't be executed" atomic_bw --rate_limit 1
expect 2 "--rate_limit: SW Rate limiter cann't be executed" send_bw -b --rate_limit 1
expect 2 "--rate_limit: perftest limits no -b run" write_bw -b --rate_limit 1
expect 2 "--run_infinitely does not support rate limit feature yet" write_bw --run_infinitely --rate_limit 1
expect 2 "rate_units: 'G': Invalid rate limit units. Please use M,g or p" write_bw --rate_limit 1 --rate_units G
expect 2 "--burst_size: Can't enable burst mode when rate limiter is off" write_bw --burst_size 4
expect 2 "burst_size: '-1' is not a number in 0..2147483647" write_bw --rate_limit 1 --burst_size -1
expect 2 "--latency_gap: only for latency tests" write_bw --latency_gap 5 --cpu_util
expect 2 "latency_gap: '-1' is not a number in 0..10000000" send_lat --latency_gap -1
expect 2 "--use-srq: a shared receive queue is only available in SEND tests" write_bw --use-srq
expect 2 "--use-srq: the SRQ's depth \\(8; -r, or -n when smaller\\) must be at least the number of QPs \\(16; -q\\)" \
  send_bw --use-srq -r 8 -q 16
expect 2 "--use-srq: the SRQ's depth \\(10; " send_bw --use-srq -n 10 -q 16
expect 2 "iters: 'many'" write_bw -n many
expect 2 "size: '0'" write_bw -s 0
expect 2 "size: '12X'" write_bw -s 12X
expect 2 "size: '17592186044416M'" write_bw -s 17592186044416M  # 2^44 MiB: wraps to 0
expect 2 "mtu: '1500' is not one of" write_bw -m 1500
expect 2 "tx-depth" write_bw -t 0
expect 2 "multiple QPs only available on bw tests" send_lat -q 2
expect 2 "inline data is not available on READ" read_bw -I 64
expect 2 "outstanding reads apply to READ" write_bw -o 4
expect 2 "atomic type applies to atomic tests only" write_bw -A CMP_AND_SWAP
expect 2 "atomic_type: 'ADD'" atomic_bw -A ADD
expect 2 "cannot be changed for atomic tests" atomic_bw -s 16
expect 2 "on RDMA verbs it can only be 1" write_bw -r 4
expect 2 "multiple of the post list" write_bw -l 3 -n 1000
expect 2 "post_list: the post list size \\(256\\) must not exceed the TX depth \\(128; -t\\)" \
  write_bw -l 256 -t 128 -n 1024
expect 2 "available only on latency tests" write_bw -U
expect 2 "--verify applies to write_bw, read_bw and send_bw" write_lat --verify
expect 2 "--verify counts messages" write_bw --verify -D 5
expect 2 "DURATION must be greater than 2 \\* MARGIN" write_bw -D 4 -f 2
expect 2 "DURATION must be greater than 2 \\* MARGIN" write_bw -D 5 -f 1073741824  # 2 * f: 2^31
for t in nan inf 1e10 -0.5; do
  expect 2 "timeout: '$t' is not a number of seconds in 0..1000000" write_bw --timeout $t
done
expect 2 "ib-port: a device has one port" write_bw -i 2
expect 2 "--sizes and -a" write_bw -a --sizes 1,2
expect 2 "--sizes: size: 'x'" write_bw --sizes 1,x
expect 2 "--sizes: size: ''" write_bw --sizes ""
expect 2 "no device configured" write_bw
expect 2 "--device: unknown setting 'colour'" write_bw --device "colour=blue"
expect 2 "--device: mtu: '99999'" write_bw --device "port=x; ipv4=10.0.0.1; mtu=99999"
expect 2 "--device: inflight: '8' is not 0 \\(no bound\\) or PSNs in 16..4194304" write_bw \
  --device "port=x; ipv4=10.0.0.1; inflight=8"
expect 2 "--device: counters: '' is not a file name, or - for standard error" write_bw \
  --device "port=x; ipv4=10.0.0.1; counters="
expect 2 "no address given" write_bw --device "port=net_null0"
expect 2 "ib-dev: no device 'mlx5_0' configured" write_bw -d mlx5_0 --config /dev/null
expect 2 "--config: cannot read" write_bw --config /nonexistent/roce.conf
# DCQCN overrides are checked with the rest of the configuration, before anything opens.
expect 2 "roce0: cc_params: dcqcn: unknown key 'bogus'" write_bw \
  --device "port=x; ipv4=10.0.0.1; cc_params=bogus=1"

# A runtime failure: the device opens (net_null, no namespace needed) but nobody listens.
if [[ $(id -u) -eq 0 ]]; then
  expect 1 "Couldn't connect to 127.0.0.1:9 \\(Connection refused\\)" write_bw --device "$dev" \
    --timeout 1 -p 9 127.0.0.1
  expect 1 "roce0: counters: cannot open '/nonexistent-dir/c.txt': No such file or directory" \
    write_bw --device "$dev; counters=/nonexistent-dir/c.txt" --timeout 1 -p 9 127.0.0.1
  # The device's completion vectors bound -X. The CQs are made after the exchange of versions,
  # as perftest makes them, so the check needs a peer: a server on a null device of its own.
  xport=$((20000 + RANDOM % 10000))
  xerr=$(mktemp)
  timeout 20 "$PERF" send_lat -e -X 1 --device 'port=net_null0; ipv4=192.0.2.2/24' --timeout 5 \
    -p "$xport" >/dev/null 2>"$xerr" &
  xpid=$!
  sleep 1
  expect 1 "-X 1: roce0 has 1 completion vector \\(0 .. 0\\)" send_lat -e -X 1 --device "$dev" \
    --timeout 5 -p "$xport" 127.0.0.1
  wait "$xpid"
  xrc=$?
  if [[ $xrc -ne 1 || $(cat "$xerr") != "roce-perf: -X 1: roce0 has 1 completion vector (0 .. 0)" ]]; then
    echo "FAIL: the -X 1 server: exit $xrc, stderr: $(cat "$xerr")"
    fails=$((fails + 1))
  else
    echo "ok: the -X 1 server -> 1: $(cat "$xerr")"
  fi
  rm -f "$xerr"
fi

for flag in --help -V; do
  if out=$(timeout 20 "$PERF" $flag 2>&1) && [[ -n $out ]]; then
    echo "ok: roce-perf $flag -> 0"
  else
    echo "FAIL: roce-perf $flag"
    fails=$((fails + 1))
  fi
done
timeout 20 "$PERF" -V | grep -q "^Version: 6.06" || { echo "FAIL: -V does not say 6.06"; fails=$((fails + 1)); }

echo "$fails failed"
((fails == 0))
