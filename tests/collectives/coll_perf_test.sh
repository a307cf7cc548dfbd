#!/usr/bin/env bash
# roce-coll-perf through scripts/coll-run.sh on the testbed:
#   coll_perf_test.sh BINDIR N          every OP on N ranks, sizes 8 B .. 1 MiB: exit 0, #wrong 0,
#                                       the table checked by coll_perf_check.py
#   coll_perf_test.sh BINDIR N --hooks  the corruption hook (#wrong > 0, FAILED, exit 1), an
#                                       unreachable NCCL_TESTS_MIN_BW (FAILED, exit 1), the
#                                       nccl-tests names, JSON output, and the launcher as Open
#                                       MPI and Slurm start ranks
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
