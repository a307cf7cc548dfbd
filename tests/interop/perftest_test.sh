#!/usr/bin/env bash
# Acceptance 2 of the interop issue: roce-perf (the stack on DPDK net_af_packet) against
# Debian's perftest on Linux rxe in a qemu guest: ib_write_bw, ib_read_bw, ib_send_lat and
# ib_atomic_bw, with roce-perf as client and as server, over the IPv4-mapped (-x 1) and IPv6
# link-local (-x 0) GIDs (write_bw also at path MTU 1024); ib_send_bw, ib_write_lat and
# ib_read_lat over the IPv4-mapped GID. Both sides must exit 0 and print their
# results. The capture of the whole run must pass scripts/icrc_check.py.
#
# Usage: perftest_test.sh ROCE_PERF [RESULTS_DIR]
set -euo pipefail
PERF=${1:?roce-perf binary}
RXE_NAME=perftest
RXE_RESULTS=${2:-}
source "$(dirname "$0")/../../scripts/rxe/lib.sh"
rxe_require
[[ -x $PERF ]] || rxe_die "no roce-perf at $PERF"
DEV=$(rxe_device)
rxe_up 9000
rxe_capture_start "$RXE_OUT/perftest.pcap"

# The result lines of perftest's (and roce-perf's) report: "bytes iterations ...".
results() { grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$1" || true; }

# pt_case ROLE TEST GID ARGS...: ROLE is roce-perf's (client or server).
pt_case() {
  local role=$1 t=$2 gid=$3
  shift 3
  local args="-x $gid $*"
  local name="$t-$role-g$gid$(tr -d ' ' <<<"$*")" hrc=0 grc=0 ok=1
  local hout=$RXE_OUT/$name.host.out gout=$RXE_OUT/$name.guest.out t0=$SECONDS
  local gcmd="ib_$t -d rxe0 -F $args"
  if [[ $role == server ]]; then
    rxe_host_bg "$hout" 90 "$PERF" "$t" $args --device "$DEV" --timeout 60
    local hpid=$RXE_BG
    if rxe_wait_listen 18515 20 "$hpid"; then
      rxe_guest 80 "$gcmd $RXE_HOST_IP" >"$gout" 2>&1 || grc=$?
    else
      grc=-1
    fi
    wait "$hpid" || hrc=$?
  else
    rxe_guest_bg "$gout" 80 "rxe-serve 18515 $gcmd"
    local gpid=$RXE_BG
    if rxe_wait_file "$gout" RXE-LISTENING 20 "$gpid"; then
      rxe_host 90 "$PERF" "$t" $args --device "$DEV" --timeout 60 "$RXE_GUEST_IP" >"$hout" 2>&1 || hrc=$?
    else
      hrc=-1
    fi
    wait "$gpid" || grc=$?
  fi
  # Both sides print results, except in read_lat, where perftest's passive side (the server)
  # measures nothing and prints no table: there only the client's is required.
  local f files=("$hout" "$gout")
  if [[ $t == read_lat ]]; then
    [[ $role == client ]] && files=("$hout") || files=("$gout")
  fi
  for f in "${files[@]}"; do results "$f" | grep -q . || ok=0; done
  ((hrc == 0 && grc == 0)) || ok=0
  local fam=$([[ $gid == 1 ]] && echo IPv4 || echo IPv6-LL)
  local dir=$([[ $role == client ]] && echo "roce-perf client -> perftest server (rxe)" ||
    echo "perftest client (rxe) -> roce-perf server")
  local mtu=4096
  [[ " $* " == *" -m 1024 "* ]] && mtu=1024
  local repro="ctest -L interop -R interop_perftest  # case: ib_$t / roce-perf $t $args"
  if ((ok)); then
    rxe_log "PASS $name ($((SECONDS - t0)) s): ours: $(results "$hout" | tail -n 1 | tr -s ' ') | rxe: $(results "$gout" | tail -n 1 | tr -s ' ')"
    rxe_result "ib_$t" "$fam" "$dir" "$mtu" "-" PASS "$repro"
  else
    rxe_log "FAIL $name: roce-perf exit $hrc, perftest exit $grc"
    tail -n 6 "$hout" "$gout" | sed "s/^/    /" || true
    rxe_result "ib_$t" "$fam" "$dir" "$mtu" "-" FAIL "$repro"
  fi
}

for role in client server; do
  for gid in 1 0; do
    pt_case "$role" write_bw "$gid" -n 100
    pt_case "$role" read_bw "$gid" -n 100
    pt_case "$role" send_lat "$gid" -n 100
    pt_case "$role" atomic_bw "$gid" -n 100
  done
  pt_case "$role" write_bw 1 -n 100 -m 1024
  # perftest's other tests, once each per role (IPv4-mapped GID).
  pt_case "$role" send_bw 1 -n 100
  pt_case "$role" write_lat 1 -n 100
  pt_case "$role" read_lat 1 -n 100
done

rxe_capture_stop
icrc=$(rxe_icrc "$RXE_OUT/perftest.pcap") || rxe_die "ICRC check of the capture failed: $icrc"
rxe_log "capture: $icrc"
((RXE_FAILS == 0)) || rxe_die "$RXE_FAILS failed"
rxe_log "PASS"
