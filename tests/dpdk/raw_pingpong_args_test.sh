#!/usr/bin/env bash
# roce-raw-pingpong refuses each bad argument with exit 2 and a first line naming it, and leaves
# no DPDK runtime directory behind (EAL has started by then: it makes /var/run/dpdk/<prefix>,
# which rte_eal_cleanup leaves); a device that does not probe is named as the cause. Nothing
# is sent: no port opens.
#
#   raw_pingpong_args_test.sh TOOL
set -euo pipefail
TOOL=${1:?usage: raw_pingpong_args_test.sh TOOL}
if ((EUID != 0)); then
  echo "SKIP: needs root (DPDK's runtime directory under /var/run/dpdk)"
  exit 77
fi
prefix=ppargs-$$
out=$(mktemp /tmp/roce-ppargs.XXXXXX)
trap 'rm -f "$out"; rm -rf "/var/run/dpdk/$prefix"' EXIT
fail=0
# "ARGS|what the first line must contain"
cases=(
  "--role|missing value for --role"
  "--role pang|--role: 'pang'"
  "--bogus|unknown option --bogus"
  "--bogus 1|unknown option --bogus"
  "--role ping --iters 0|--iters: '0'"
  "--role ping --size 10|--size: '10'"
  "--role ping --frames 1x|--frames: '1x'"
  "--iters 5|--role ping|pong is required"
)
for c in "${cases[@]}"; do
  args=${c%%|*}
  want=${c#*|}
  rc=0
  # shellcheck disable=SC2086 # the case's words are separate arguments
  timeout 30 "$TOOL" --no-huge -m 256 --no-pci --file-prefix "$prefix" --log-level=4 \
    -- $args >"$out" 2>&1 || rc=$?
  first=$(head -n 1 "$out")
  if ((rc != 2)); then
    echo "FAIL: '$args' exited with $rc, not 2: $first"
    fail=1
  elif [[ $first != *"$want"* ]]; then
    echo "FAIL: '$args': first line '$first' does not say '$want'"
    fail=1
  fi
  if [[ -e /var/run/dpdk/$prefix ]]; then
    echo "FAIL: '$args' left /var/run/dpdk/$prefix behind"
    rm -rf "/var/run/dpdk/$prefix"
    fail=1
  fi
done
# A device that does not probe (an interface that is not there) is named as the cause, not
# reported as a missing --vdev; the run fails (exit 1) and leaves nothing behind either.
rc=0
timeout 30 "$TOOL" --no-huge -m 256 --no-pci --file-prefix "$prefix" --log-level=1 \
  --vdev "net_af_packet0,iface=roce-no-such-if" -- --role pong --timeout 1 >"$out" 2>&1 || rc=$?
if ((rc != 1)) || ! grep -q "the device given to EAL did not probe" "$out"; then
  echo "FAIL: a device that did not probe: exit $rc, $(tr '\n' ' ' <"$out")"
  fail=1
fi
if [[ -e /var/run/dpdk/$prefix ]]; then
  echo "FAIL: the failed probe left /var/run/dpdk/$prefix behind"
  fail=1
fi
((fail == 0)) && echo "PASS: ${#cases[@]} bad arguments refused, a device that did not probe named, nothing left behind"
exit "$fail"
