#!/usr/bin/env bash
# tests/verbs/ucx_test.sh SHIM_DIR info | perftest TLS GID | mpi MPI_EXACT TLS GID
#
# Debian's UCX (ucx-utils 1.13) and Open MPI over UCX, unmodified, over the verbs shim in
# SHIM_DIR between two namespaces of scripts/testbed.sh (net_af_packet on a veth pair):
#   info      ucx_info -d in namespace 1 lists the stack's device roce0:1 with rc_verbs and
#             ud_verbs
#   perftest  ucx_perftest tag_lat (8 B), tag_bw and ucp_put_bw (64 KiB) from namespace 2 to 1,
#             UCX_TLS=TLS (rc_v: rc_verbs with ud_verbs for wire-up; ud_v: ud_verbs) on roce0:1,
#             UCX_IB_GID_INDEX=GID (1: IPv4-mapped, 2: IPv6); both sides exit 0 and each device's
#             counters hold at least the bytes the test moved to it
#   mpi       mpirun (pml ucx, osc ucx, UCX_TLS=self,TLS on roce0:1) starts MPI_EXACT check on one
#             rank per namespace, the remote one through scripts/mpi-netns-agent.sh as ssh would:
#             every Allreduce, Alltoall, Put and Get result exact, and each device's counters
#             hold at least the bytes the checks brought that rank from the other (so neither
#             TCP nor shared memory carried them)
# ucx_perftest has no data check (1.13's UCX_PERF_TEST_FLAG_VALIDATE is never read): the mpi
# runs check UCX's data, over both transports and both GID families between them.
# UCX lists a device only if /dev/infiniband exists (verbs_shim/README.md, "Middleware"): where
# it does not, the test runs itself under scripts/with-dev-infiniband.sh. Skips (77), saying
# why, without root, ucx-utils, mpirun or MPI_EXACT.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
skip() {
  echo "SKIP: $*"
  exit 77
}
(($# >= 2)) || { echo "usage: $0 SHIM_DIR info | perftest TLS GID | mpi MPI_EXACT TLS GID" >&2; exit 2; }
shim=$(cd "$1" && pwd)
what=$2
shift 2
[[ $(id -u) -eq 0 ]] || skip "needs root (network and mount namespaces)"
command -v ucx_info >/dev/null && command -v ucx_perftest >/dev/null ||
  skip "needs ucx-utils (ucx_info, ucx_perftest)"
if [[ $what == mpi ]]; then
  command -v mpirun >/dev/null || skip "needs openmpi-bin (mpirun)"
  [[ -n ${1-} && -x ${1-} ]] || skip "mpi_exact not built (needs libopenmpi-dev's mpicxx at cmake time)"
  ompi_info --parsable 2>/dev/null | grep -q "^mca:pml:ucx:" || skip "Open MPI has no pml ucx here"
fi
[[ -d /dev/infiniband ]] || exec "$repo/scripts/with-dev-infiniband.sh" "$0" "$shim" "$what" "$@"

if [[ -n ${ROCE_SANITIZER_PRELOAD:-} ]]; then
  # A shim built with the sanitizers: their runtimes first in Debian's programs, whose own
  # leaks are not ours (as tests/verbs/verbs_netns.py does).
  export LD_PRELOAD=$ROCE_SANITIZER_PRELOAD ASAN_OPTIONS=detect_leaks=0
fi
E2E_NAME=ucx-$what
# shellcheck source=../e2e/lib.sh
source "$repo/tests/e2e/lib.sh"
require_netns
testbed_up 2
ns1=${ROCE_TB_PREFIX}1
ns2=${ROCE_TB_PREFIX}2
export LD_LIBRARY_PATH=$shim UCX_NET_DEVICES=roce0:1

# counter FILE NAME: the port's counter NAME in a counters file (0 if absent).
counter() { awk -v n="$2" '/^port:/ { p = 1; next } /^[^ ]/ { p = 0 } p && $1 == n { print $2; f = 1 } END { if (!f) print 0 }' "$1"; }

# at_least FILE BYTES WHAT: the device of FILE received at least BYTES.
at_least() {
  local got
  got=$(counter "$1" rx_bytes)
  ((got >= $2)) || die "$3: the device received $got bytes, fewer than the $2 the test moved to it"
}

cmd_info() {
  ip netns exec "$ns1" env ROCE_DEVICE="$(device 1 af_packet)" timeout 60 ucx_info -d \
    >"$WORK/info.out" 2>&1 || die "ucx_info -d failed: $(tail -5 "$WORK/info.out")"
  local tl
  for tl in rc_verbs ud_verbs; do
    grep -A1 "Transport: $tl\$" "$WORK/info.out" | grep -q "Device: roce0:1\$" ||
      die "ucx_info -d lists no $tl on roce0:1: $(grep -E 'Transport|Device' "$WORK/info.out")"
  done
  log "ucx_info -d: roce0:1 with rc_verbs and ud_verbs"
}

# perftest_one PORT TEST SIZE ITERS
perftest_one() {
  local port=$1 t=$2 size=$3 n=$4 name="$2.$3"
  local env=(UCX_TLS="$TLS" UCX_IB_GID_INDEX="$GID")
  ip netns exec "$ns1" env "${env[@]}" ROCE_DEVICE="$(device 1 af_packet "counters=$WORK/$name.ctr1")" \
    timeout -k 5 60 ucx_perftest -p "$port" >"$WORK/$name.server.out" 2>&1 &
  local spid=$! src=0 crc=0
  PIDS+=("$spid")
  for _ in $(seq 100); do
    [[ -n $(ip netns exec "$ns1" ss -Hltn "sport = :$port") ]] && break
    sleep 0.1
  done
  ip netns exec "$ns2" env "${env[@]}" ROCE_DEVICE="$(device 2 af_packet "counters=$WORK/$name.ctr2")" \
    timeout -k 5 60 ucx_perftest 10.78.0.1 -p "$port" -t "$t" -s "$size" -n "$n" -w 10 \
    >"$WORK/$name.client.out" 2>&1 || crc=$?
  wait "$spid" || src=$?
  if ((crc != 0 || src != 0)) || ! grep -q "^Final:" "$WORK/$name.client.out" ||
    grep -q "UCX  ERROR" "$WORK/$name.client.out" "$WORK/$name.server.out"; then
    tail -n 20 "$WORK/$name.server.out" "$WORK/$name.client.out"
    die "ucx_perftest -t $t -s $size ($TLS, GID $GID): client exit $crc, server exit $src"
  fi
  # Every message went to the server's device; a latency test's answers came back.
  at_least "$WORK/$name.ctr1" $((n * size)) "$t server"
  [[ $t != tag_lat ]] || at_least "$WORK/$name.ctr2" $((n * size)) "$t client"
  log "ucx_perftest -t $t -s $size -n $n ($TLS, GID $GID): $(grep '^Final:' "$WORK/$name.client.out" | tr -s ' ')"
}

cmd_perftest() {
  TLS=$1 GID=$2
  perftest_one 13401 tag_lat 8 2000
  perftest_one 13402 tag_bw 65536 300
  perftest_one 13403 ucp_put_bw 65536 300
}

cmd_mpi() {
  local exe=$1 tls=$2 gid=$3 rc=0
  # Ranks in namespace 1 take ROCE_DEVICE from mpirun's environment, those the agent starts
  # in namespace I the testbed's device I (mpi-netns-agent.sh, ROCE_TB_VDEV).
  ROCE_TB_VDEV=af_packet ROCE_TB_DEVICE_EXTRA="counters=$WORK/mpi.ctr%I" \
    ROCE_DEVICE="$(device 1 af_packet "counters=$WORK/mpi.ctr1")" \
    UCX_TLS="self,$tls" UCX_IB_GID_INDEX="$gid" \
    timeout -k 5 120 ip netns exec "$ns1" mpirun --allow-run-as-root -np 2 \
    --host 10.78.0.1,10.78.0.2 --mca plm_rsh_agent "$repo/scripts/mpi-netns-agent.sh" \
    --mca pml ucx --mca osc ucx --mca btl self --mca oob_tcp_if_include mg0 \
    "$exe" check $((1 << 20)) >"$WORK/mpi.out" 2>&1 || rc=$?
  local line
  line=$(grep "^mpi_exact:" "$WORK/mpi.out" || true)
  if ((rc != 0)) || [[ ! $line =~ \ 0\ wrong ]]; then
    tail -n 30 "$WORK/mpi.out"
    die "mpirun (pml ucx, $tls, GID $gid) exit $rc"
  fi
  local moved
  moved=$(sed -n 's/.*at least \([0-9]*\) bytes.*/\1/p' <<<"$line")
  at_least "$WORK/mpi.ctr1" "$moved" "rank 0"
  at_least "$WORK/mpi.ctr2" "$moved" "rank 1"
  log "Open MPI, pml ucx over $tls, GID $gid: $line; devices received $(counter "$WORK/mpi.ctr1" rx_bytes) and $(counter "$WORK/mpi.ctr2" rx_bytes) bytes"
}

case $what in
  info) cmd_info ;;
  perftest) cmd_perftest "$@" ;;
  mpi) cmd_mpi "$@" ;;
  *) die "unknown test '$what'" ;;
esac
log "ok"
