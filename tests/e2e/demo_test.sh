#!/usr/bin/env bash
# The README's one-command demo (scripts/demo.sh), with the build already done by this ctest
# run: it must print perftest's result lines for write_bw and send_lat and nccl-tests' tables
# for AllReduce and AlltoAll on 4 ranks (nothing wrong), exit 0, and leave no namespace behind;
# a second demo started beside it is refused.
#
# Usage: demo_test.sh BUILD_DIR
E2E_NAME=demo
BUILD=${1:?build directory}
PERF=$BUILD/apps/roce-perf
source "$(dirname "$0")/lib.sh"
require_netns
export ROCE_DEMO_PREFIX="$ROCE_TB_PREFIX"
log "scripts/demo.sh --skip-build --build-dir $BUILD"
timeout -k 5 250 "$REPO/scripts/demo.sh" --skip-build --build-dir "$BUILD" >"$WORK/demo.out" 2>&1 &
demo=$!
PIDS+=("$demo")
# A second demo of the same prefix, started while the first runs, is refused and leaves the
# first alone (it used to tear down the first's namespaces on its way up).
for ((i = 0; i < 600; i++)); do
  ip netns list | grep -q "^${ROCE_TB_PREFIX}2" && break
  sleep 0.05
done
rc=0
"$REPO/scripts/demo.sh" --skip-build --build-dir "$BUILD" >"$WORK/demo2.out" 2>&1 || rc=$?
((rc == 2)) && grep -q "another demo is running" "$WORK/demo2.out" ||
  die "a second demo beside the first: exit $rc, $(cat "$WORK/demo2.out")"
log "a second demo beside the first: refused ($(head -c 60 "$WORK/demo2.out")...)"
wait "$demo" || die "demo.sh failed: $(tail -n 20 "$WORK/demo.out")"
grep -q "RDMA_Write BW Test" "$WORK/demo.out" || die "no write_bw banner"
grep -q "Send Latency Test" "$WORK/demo.out" || die "no send_lat banner"
grep -Eq '^ 65536 +5000 +[0-9.]+ +[0-9.]+' "$WORK/demo.out" || die "no write_bw result line"
grep -Eq '^ 2 +1000 +[0-9.]+ +[0-9.]+' "$WORK/demo.out" || die "no send_lat result line"
for op in all_reduce alltoall; do
  grep -q "^# Collective test concluded: ${op}_perf$" "$WORK/demo.out" || die "no ${op}_perf table"
  grep -Eq "^ +16777216 +[0-9]+ +float " "$WORK/demo.out" || die "no 16 MiB row"
done
(($(grep -c '^# Out of bounds values : 0 OK$' "$WORK/demo.out") == 2)) || die "wrong values in a table"
grep -q '^#  Rank  3 ' "$WORK/demo.out" || die "not 4 ranks"
ip netns list | grep -q "^${ROCE_TB_PREFIX}" && die "demo.sh left namespaces behind"
grep -E '^ (65536|2) ' "$WORK/demo.out" | sed 's/^/    /'
log "PASS"
