#!/usr/bin/env bash
# Debian's libgloo, its ibverbs transport, over the verbs shim between namespaces: gloo-bench's
# AllreduceRing and AllreduceRingChunked on 2 and 4 ranks (scripts/coll-run.sh), each run
# checked element by element (gloo-bench's #wrong, exit 1) and for Gloo's teardown abort
# ("Destructing buffer expecting completions", SIGABRT).
#   gloo_ibverbs_test.sh BUILD_DIR [RUNS] [GLOO-BENCH FLAGS...]
#       RUNS runs of each algorithm on each rank count (default 2: the CI's short form); prints
#       one line per configuration: runs, aborts, wrong results, other failures; exit 1 if any.
#       A SIGSEGV after every rank has checked every size is Gloo's own teardown race (Debian's
#       Gloo, docs/middleware.md): counted and printed apart, not a failure.
#       The acceptance's 100 runs each, by hand (as root, about 20 minutes on a 2-core VM):
#         tests/e2e/gloo_ibverbs_test.sh build 100
#       Extra flags go to every gloo-bench (e.g. --barrier 0: each size's buffers are destroyed
#       at once, which a transport whose completions lag loses; see apps/baselines/gloo_bench.cc).
# ROCE_TB_PREFIX as in scripts/testbed.sh (default: one of this test's own).
set -euo pipefail
BUILD=${1:?build directory}
RUNS=${2:-2}
shift $(($# < 2 ? $# : 2))
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
bench=$BUILD/apps/gloo-bench
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
[[ -x $bench ]] || { echo "SKIP: no $bench (Debian's libgloo-dev was not there at configure)"; exit 77; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "RUNS: a positive number"; exit 2; }
export ROCE_TB_PREFIX=${ROCE_TB_PREFIX:-e2e-gloo-$$-}
work=$(mktemp -d /tmp/roce-gloo-test.XXXXXX)
failed=0
cleanup() {
  "$root/scripts/testbed.sh" down >/dev/null 2>&1 || true
  ((failed)) && echo "the failed runs' logs are in $work" || rm -rf "$work"
}
trap cleanup EXIT

# Whether a failed run is Gloo's own teardown race: Debian's Gloo lets the device thread post a
# receive on a pair the main thread is destroying (docs/middleware.md, "Gloo"). Every rank got as
# far as its teardown with every size checked, and one died of SIGSEGV there.
teardown_crash() {
  local logs=$1 n=$2 i
  for ((i = 0; i < n; i++)); do
    grep -qs "every size checked, 0 wrong; tearing down" "$logs/rank$i.log" || return 1
  done
  grep -qsE "dumped core|Segmentation fault" "$logs"/rank*.log
}

for n in 2 4; do
  "$root/scripts/testbed.sh" down >/dev/null 2>&1 || true
  "$root/scripts/testbed.sh" up "$n" >"$work/testbed.log" 2>&1 || { cat "$work/testbed.log"; exit 1; }
  for algo in ring ring_chunked; do
    aborts=0 wrong=0 other=0 crashes=0
    for ((k = 1; k <= RUNS; k++)); do
      store=$(mktemp -d "$work/store.XXXXXX")
      logs=$work/logs.$n.$algo.$k
      rc=0
      "$root/scripts/coll-run.sh" -n "$n" --reuse --logs "$logs" --timeout 120 -- \
        env LD_LIBRARY_PATH="$BUILD/verbs_shim" "$bench" all_reduce --store "$store" \
        --transport ibverbs --algo "$algo" -b 8 -e 1M -f 32 -n 3 -w 1 "$@" \
        >"$work/out" 2>&1 || rc=$?
      rm -rf "$store"
      ((rc == 0)) && { rm -rf "$logs"; continue; }
      if grep -qs "expecting completions" "$logs"/rank*.log; then
        aborts=$((aborts + 1)) kind=abort
      elif grep -qs "wrong elements" "$logs"/rank*.log; then
        wrong=$((wrong + 1)) kind="wrong result"
      elif teardown_crash "$logs" "$n"; then
        crashes=$((crashes + 1))
        echo "run $k, $algo on $n ranks: Gloo's teardown race (SIGSEGV after every rank checked" \
          "every size; docs/middleware.md), not counted as a failure"
        rm -rf "$logs"
        continue
      else
        other=$((other + 1)) kind="failure (exit $rc)"
      fi
      failed=1
      echo "run $k, $algo on $n ranks: $kind; the last lines of its logs:"
      tail -n 3 "$logs"/rank*.log | sed 's/^/  /'
    done
    echo "gloo $algo, $n ranks: $RUNS runs, $aborts aborts, $wrong wrong results, $other other" \
      "failures, $crashes crashes in Gloo's teardown"
  done
done
((failed == 0)) || { echo "FAIL"; exit 1; }
echo "PASS"
