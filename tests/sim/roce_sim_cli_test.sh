#!/usr/bin/env bash
# roce-sim's command line: every bad value is one line on stderr naming it and exit 2, within
# seconds (never a run that goes on for ever); good edge values run.
#
# Usage: roce_sim_cli_test.sh ROCE_SIM
set -uo pipefail
SIM=${1:?roce-sim binary}
CLI_TOOL=$SIM
source "$(dirname "$0")/../support/expect_cli.sh"

# runs PATTERN ARGS...: exit 0 within 20 s, stdout matching PATTERN.
runs() {
  local pattern=$1
  shift
  local out rc
  out=$(timeout 20 "$SIM" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne 0 || ! $out =~ $pattern ]]; then
    echo "FAIL: roce-sim $*: exit $rc (want 0), output: $(tail -n 3 <<<"$out")"
    fails=$((fails + 1))
  else
    echo "ok: roce-sim $* -> 0"
  fi
}

expect 2 "--seeds: '9-3' is not a seed or a range A-B" --seeds 9-3
expect 2 "--seeds: '5--3' is not a seed or a range A-B" --seeds 5--3  # not 5..2^64-3
expect 2 "--seeds: '-3' is not a seed or a range A-B" --seeds=-3
expect 2 "--seeds: '1-18446744073709551616' is not a seed or a range A-B" \
  --seeds 1-18446744073709551616
# The options' own checks, one line each (not CLI11's two) and exit 2, as the header says.
expect 2 "^roce-sim: --hosts: Value 1 not in range 2 to 16$" --hosts 1
expect 2 "^roce-sim: --mtu: 100 not in" --mtu 100
expect 2 "^roce-sim: The following argument was not expected: --bogus$" --bogus
expect 2 "^roce-sim: --ops: Value 0 not in range" --ops 0
# Scenario options without --scenario, and seed options with it, are not silently ignored.
expect 2 "^roce-sim: --flows requires --scenario$" --flows 2
expect 2 "^roce-sim: --csv requires --scenario$" --seeds 1 --csv /tmp/x.csv
expect 2 "^roce-sim: --hosts excludes --scenario$" --scenario fairness --hosts 3
expect 2 "^roce-sim: --faults excludes --scenario$" --scenario incast --faults drop=0.1
# Scenario values that ran anyway: NaN passes CLI11's Range, an empty --flows ran nothing and
# exited 0, Kmin above Kmax, a phase length whose nanoseconds overflow.
expect 2 "^roce-sim: --flows: '' is not a list of counts in 1..64$" --scenario fairness --flows ''
expect 2 "^roce-sim: --link-gbps: 'nan' is not a number$" --scenario fairness --link-gbps nan
expect 2 "^roce-sim: --pmax: 'nan' is not a number$" --scenario fairness --pmax nan
expect 2 "^roce-sim: --kmin \\(300000\\) is above --kmax \\(100\\)$" --scenario fairness \
  --kmin 300000 --kmax 100
# CLI11 reads "-1" for an unsigned option as 2^64-1.
expect 2 "^roce-sim: --kmin: '-1' is negative$" --scenario fairness --kmin -1
expect 2 "^roce-sim: --kmax: '-1' is negative$" --scenario fairness --kmax -1
expect 2 "^roce-sim: --scenario-seed: '-1' is negative$" --scenario fairness --scenario-seed -1
expect 2 "^roce-sim: --join-interval-ms: Value 18446744073709551615 not in range 0 to 100000$" \
  --scenario joinleave --join-interval-ms 18446744073709551615
expect 2 "^roce-sim: --faults: fault 'drop' has a bad value 'nan'$" --faults drop=nan
# A CSV that cannot be written whole (a full disk) is an error, not exit 0 with half a file.
expect 2 "^roce-sim: --csv: cannot write /dev/full: No space left on device$" --scenario fairness \
  --flows 2 --duration-ms 1 --csv /dev/full
expect 2 "^roce-sim: --loopback: Value 65 not in range 0 to 64$" --loopback 65
expect 2 "^roce-sim: --loopback excludes --scenario$" --scenario fairness --loopback 1
# QP pairs within each host (loopback), alone beside the pairs between hosts or none.
runs "ok   seed=3 hosts=2 qps=1 loopback=2 .*1 seeds: 1 passed, 0 failed" --seeds 3 --loopback 2 -v
runs "ok   seed=2 hosts=2 qps=3 loopback=0 .*1 seeds: 1 passed, 0 failed" --seeds 2 --loopback 0 -v
# --max-size 0 is empty messages, not the seed's own size (0 was taken as "not given").
runs "ok   seed=7 .* max_size=0 .*1 seeds: 1 passed, 0 failed" --seeds 7 --max-size 0 -v
expect 2 "^roce-sim: --faults: fault 'rate' is Gb/s: 0 \\(no limit\\) or 0.001..1000000, got 1e-17$" \
  --faults rate=1e-17
# The ECMP scenario's own values, and its options where they mean nothing (and the reverse).
expect 2 "^roce-sim: --qps-per-peer: '0,2' is not a list of counts in 1..64$" --scenario ecmp \
  --qps-per-peer 0,2
expect 2 "^roce-sim: --qps-per-peer: '' is not a list of counts in 1..64$" --scenario ecmp \
  --qps-per-peer ''
expect 2 "^roce-sim: --qps-per-peer: '1,65' is not a list of counts in 1..64$" --scenario ecmp \
  --qps-per-peer 1,65
expect 2 "^roce-sim: --hash-seeds: '5-3' is not a seed or a range A-B of at most 1000$" \
  --scenario ecmp --hash-seeds 5-3
expect 2 "^roce-sim: --paths: Value 1 not in range 2 to 64$" --scenario ecmp --paths 1
expect 2 "^roce-sim: --peers is an option of --scenario ecmp$" --scenario fairness --peers 2
expect 2 "^roce-sim: --flows is not an option of --scenario ecmp$" --scenario ecmp --flows 2
expect 2 "^roce-sim: --qps-per-peer requires --scenario$" --qps-per-peer 2
expect 2 "^roce-sim: --peers x --peer-bytes: 65536 MiB over 2 GiB$" --scenario ecmp --peers 64 \
  --peer-bytes 1073741824
expect 2 "^roce-sim: --csv: cannot write /dev/full: No space left on device$" --scenario ecmp \
  --hash-seeds 1 --qps-per-peer 1 --peer-bytes 65536 --csv /dev/full
# A single byte per peer, and QPs that get no message at all.
runs "PASS ecmp" --scenario ecmp --peers 2 --paths 2 --qps-per-peer 1,64 --hash-seeds 7 \
  --peer-bytes 1
runs "1 seeds: 1 passed, 0 failed" --seeds 18446744073709551615 --hosts 2 --qps 1 --ops 1
runs "2 seeds: 2 passed, 0 failed" --seeds 18446744073709551614-18446744073709551615 --hosts 2 \
  --qps 1 --ops 1

((fails == 0)) || { echo "$fails failed"; exit 1; }
echo "PASS"
