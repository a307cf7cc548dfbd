#!/usr/bin/env bash
# End to end: scripts/soak.sh in its short form, over net_af_packet and over net_memif: two
# roce-soak processes in two namespaces run every RC operation on 8 QPs, 1 B .. 1 MiB, with 1 %
# of the frames lost each way, every byte checked; no completion may wait longer than the
# retries allow, the mbufs in use with the link quiet must be back where they were, and the
# samples (every INTERVAL s) must be flat after a third of the run. The QPs' local ACK timeout is
# 268 ms here (2^16 x 4.096 us; the soak's default is 67 ms): CI machines are shared, and a test
# must not fail because another job took the CPUs. docs/soak.md has the long runs.
#
# Usage: soak_test.sh BUILD_DIR SECONDS_PER_VDEV [INTERVAL]
E2E_NAME=soak
BUILD=${1:?build directory}
SECS=${2:-30}
INTERVAL=${3:-3}
source "$(dirname "$0")/lib.sh"
require_netns
[[ -x $BUILD/apps/roce-soak ]] || die "no roce-soak in $BUILD/apps"
for vdev in af_packet memif; do
  log "$vdev: $SECS s"
  if ! "$REPO/scripts/soak.sh" --seconds "$SECS" --interval "$INTERVAL" --vdev "$vdev" \
    --timeout 16 --build-dir "$BUILD" --out "$WORK/$vdev" >"$WORK/$vdev.out" 2>&1; then
    tail -n 60 "$WORK/$vdev.out"
    for side in server client; do
      echo "--- $vdev $side ---"
      grep -E "^roce-soak: (FAIL|t=)" "$WORK/$vdev/$side.log" | tail -n 5
    done
    die "$vdev: the soak failed"
  fi
  log "$vdev: $(grep -h '^  total' "$WORK/$vdev"/server.log "$WORK/$vdev"/client.log | tr -s ' ' | paste -sd ';')"
done
log "PASS"
