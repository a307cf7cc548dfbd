#!/usr/bin/env bash
# The scripts' --help: exit 0 and print the usage comment at the top of the script, not the
# code after it. Runs anywhere (nothing is set up).
#
# Usage: scripts_help_test.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
for s in demo.sh testbed.sh bench-datapath.sh bench-shim.sh; do
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
echo "$fails failed"
((fails == 0))
