#!/usr/bin/env bash
# The scripts' --help: exit 0 and print the usage comment at the top of the script, not the
# code after it. Runs anywhere (nothing is set up).
#
# Usage: scripts_help_test.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
# test.sh took no arguments at all: --help started the whole run (packages, builds, tests).
for s in test.sh demo.sh testbed.sh bench-datapath.sh bench-shim.sh coll-run.sh coll-baselines.sh mpi-netns-agent.sh ovs-switch.sh with-dev-infiniband.sh bench-middleware.sh soak.sh soak-plot.sh; do
  out=$(timeout 20 "$REPO/scripts/$s" --help 2>&1)
  rc=$?
  if [[ $rc -ne 0 || $out != *"scripts/$s"* || $out == *"set -euo pipefail"* ]]; then
    echo "FAIL: $s --help: exit $rc; last lines:"
    tail -n 3 <<<"$out"
    fails=$((fails + 1))
  else
    echo "ok: $s --help"
  fi
done
out=$(timeout 20 "$REPO/scripts/test.sh" --bogus 2>&1)
rc=$?
if [[ $rc -ne 2 || $out != "test.sh: takes no arguments, got '--bogus' (see scripts/test.sh --help)" ]]; then
  echo "FAIL: test.sh --bogus: exit $rc (want 2): $out"
  fails=$((fails + 1))
else
  echo "ok: test.sh --bogus refused"
fi
echo "$fails failed"
((fails == 0))
