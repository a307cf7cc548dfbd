#!/usr/bin/env bash
# roce-coll-perf through scripts/coll-run.sh on the testbed:
#   coll_perf_test.sh BINDIR N          every OP on N ranks, sizes 8 B .. 1 MiB: exit 0, #wrong 0,
#                                       the table checked by coll_perf_check.py
#   coll_perf_test.sh BINDIR N --hooks  the corruption hook (#wrong > 0, FAILED, exit 1), an
#                                       unreachable NCCL_TESTS_MIN_BW (FAILED, exit 1), the
#                                       nccl-tests names, JSON output, and the launcher as Open
#                                       MPI and Slurm start ranks
#   coll_perf_test.sh BINDIR 2 --qps    4 QPs per peer with grants in a class of their own
#                                       (ROCE_COLL_QPS=4, ROCE_COLL_GRANT_TC=104): exact, and
#                                       rank 0's capture shows 5 UDP source ports toward rank 1
#                                       (4 data QPs and the control QP), its grant writes in DSCP
#                                       26 and its data in DSCP 0
set -euo pipefail
BIN=${1:?directory of roce-coll-perf}
N=${2:?ranks}
MODE=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../../scripts/coll-run.sh
check=$here/coll_perf_check.py
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
export ROCE_TB_PREFIX="e2e-cperf-$$-"
work=$(mktemp -d /tmp/roce-coll-perf-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work"/*.out 2>/dev/null | tail -40; exit 1; }

if [[ -z $MODE ]]; then
  for op in all_reduce all_gather reduce_scatter broadcast reduce alltoall alltoallv sendrecv; do
    args=(-b 8 -e 1M -f 8 -n 3 -w 1 -c 1 -r $((N - 1)))
    [[ $op == all_reduce ]] && args+=(-d all -o all -e 64K -f 64)
    rc=0
    "$run" -n "$N" --timeout 300 -- "$BIN/roce-coll-perf" "$op" "${args[@]}" >"$work/$op.out" 2>&1 || rc=$?
    ((rc == 0)) || fail "$op on $N ranks exited $rc"
    /usr/bin/python3 "$check" "$work/$op.out" "$op" "$N" || fail "$op: the table does not check out"
  done
  echo "PASS: every OP on $N ranks"
  exit 0
fi

if [[ $MODE == --qps ]]; then
  command -v tshark >/dev/null || { echo "SKIP: needs tshark"; exit 77; }
  rc=0
  ROCE_COLL_QPS=4 ROCE_COLL_GRANT_TC=104 ROCE_COLL_CHUNK=64K "$run" -n "$N" \
    --device-extra "pcap=$work/rank%r.pcap" -- "$BIN/roce-coll-perf" all_reduce -b 1M -e 4M -f 4 \
    -n 3 -w 1 -c 1 >"$work/qps.out" 2>&1 || rc=$?
  ((rc == 0)) || fail "4 QPs per peer: exit $rc"
  /usr/bin/python3 "$check" "$work/qps.out" all_reduce "$N" || fail "4 QPs per peer: the table"
  grep -q "QPs per peer 4 (rr), .* grant TC 104, data TC 0" "$work/qps.out" || fail "settings line"
  # Rank 0's frames toward rank 1 (RoCEv2, UDP 4791): source port and DSCP per BTH opcode.
  tshark -r "$work/rank0.pcap" -Y "ip.src == 10.77.0.101 && udp.dstport == 4791" \
    -T fields -e udp.srcport -e ip.dsfield.dscp -e infiniband.bth.opcode >"$work/frames.txt" 2>/dev/null
  ports=$(cut -f1 "$work/frames.txt" | sort -u | wc -l)
  ((ports == 5)) || fail "$ports UDP source ports toward rank 1, not 5: $(cut -f1 "$work/frames.txt" | sort | uniq -c | tr '\n' ' ')"
  # RDMA WRITE Only (opcode 10): grants and probes; the data are WRITE ... with Immediate.
  bad=$(awk -F'\t' '($3 == 10 && $2 != 26) || ($3 != 10 && $3 != 17 && $2 != 0)' "$work/frames.txt" | head -3)
  [[ -z $bad ]] || fail "frames in the wrong class (port, DSCP, opcode): $bad"
  grants=$(awk -F'\t' '$3 == 10' "$work/frames.txt" | wc -l)
  ((grants > 0)) || fail "no grant write captured"
  echo "PASS: 4 QPs per peer: $ports source ports toward rank 1, $grants grant writes in DSCP 26"
  exit 0
fi

# The corruption hook: one wrong element on rank 0 is counted and fails the run.
rc=0
"$run" -n "$N" -- "$BIN/all_reduce_perf" -b 4K -e 4K -n 2 --test-corrupt >"$work/corrupt.out" 2>&1 || rc=$?
((rc == 1)) || fail "a corrupted result exited $rc, not 1"
/usr/bin/python3 "$check" "$work/corrupt.out" all_reduce "$N" --expect-wrong || fail "corrupt run"
grep -q "^# Collective test starting: all_reduce_perf$" "$work/corrupt.out" || fail "not named all_reduce_perf"
# A bandwidth floor no run reaches.
rc=0
NCCL_TESTS_MIN_BW=1000 "$run" -n "$N" -- "$BIN/roce-coll-perf" alltoall -b 64K -e 64K -n 2 \
  >"$work/floor.out" 2>&1 || rc=$?
((rc == 1)) || fail "a missed NCCL_TESTS_MIN_BW exited $rc, not 1"
grep -Eq "^# Avg bus bandwidth    : [0-9.e+-]+ FAILED$" "$work/floor.out" || fail "no FAILED floor"
# Open MPI's and Slurm's variables, and JSON whose numbers are the table's.
for l in openmpi slurm; do
  rc=0
  "$run" -n "$N" --launcher "$l" -- "$BIN/roce-coll-perf" broadcast -b 1K -e 1K -n 2 -r 1 \
    -J "$work/$l.json" >"$work/$l.out" 2>&1 || rc=$?
  ((rc == 0)) || fail "launched as $l: exit $rc"
  /usr/bin/python3 - "$work/$l.json" "$work/$l.out" <<'PY' || fail "launched as $l: JSON"
import json, sys
j = json.load(open(sys.argv[1]))
row = [l.split() for l in open(sys.argv[2]) if l.startswith("        1024")][0]
r = j["results"][0]
assert (r["size"], r["count"], r["type"], r["root"]) == (1024, 256, "float", 1), r
assert j["out_of_bounds"] == {"count": 0, "okay": True}, j
assert abs(r["out_of_place"]["bus_bw"] - float(row[7])) < 0.01, (r, row)
PY
done
echo "PASS: hooks, floor, names, JSON, launchers on $N ranks"
