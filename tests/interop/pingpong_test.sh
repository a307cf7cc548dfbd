#!/usr/bin/env bash
# Acceptance 1 and 4 of the interop issue: Debian's ibv_rc_pingpong / ibv_ud_pingpong over our
# verbs shim (the stack on DPDK net_af_packet) against the same tool on Linux rxe in a qemu
# guest, with our side as client and as server, over the IPv4-mapped (GID 1) and IPv6
# link-local (GID 0) GIDs; rc: 64 B and 64 KiB messages at path MTU 1024 and 4096; ud: 64 B and
# 2048 B datagrams. Every exchange validates the received bytes (-c). The capture of the whole
# run must pass scripts/icrc_check.py and hold both GID families.
#
# Usage: pingpong_test.sh rc|ud SHIM_DIR [RESULTS_DIR]
set -euo pipefail
KIND=${1:?rc or ud}
SHIM=${2:?directory of the shim libibverbs.so.1}
RXE_NAME=${KIND}_pingpong
RXE_RESULTS=${3:-}
source "$(dirname "$0")/../../scripts/rxe/lib.sh"
rxe_require
[[ -e $SHIM/libibverbs.so.1 ]] || rxe_die "no $SHIM/libibverbs.so.1 (ninja ibverbs)"
BIN=/usr/bin/ibv_${KIND}_pingpong
[[ -x $BIN ]] || rxe_skip "needs Debian's ibverbs-utils ($BIN)"
DEV=$(rxe_device)
rxe_up 9000
rxe_capture_start "$RXE_OUT/$KIND.pcap"
# UD: the guest's neighbour entry for the stack's link-local address is set by hand. When the
# guest's kernel resolves that address by ND inside ibv_ud_pingpong's ibv_create_ah (the first
# GID 0 case), the call failed ("Failed to create AH") in about one run in three, 5 ms after the
# stack's Neighbor Advertisement, which a capture shows correct and within 1 ms of the
# solicitation; the cause on the guest's side is not isolated. With the entry set, 16 runs
# passed. ND with rxe stays tested: rc_pingpong and the loss test resolve the address by ND.
if [[ $KIND == ud ]]; then
  rxe_guest 20 "/usr/bin/ip -6 neigh replace $(rxe_ll6 "$RXE_STACK_MAC") lladdr $RXE_STACK_MAC dev eth0 nud permanent" ||
    rxe_die "cannot set the guest's neighbour entry for the stack"
fi

# pp_case ROLE GID SIZE MTU ITERS: ROLE is our side's (client or server).
pp_case() {
  local role=$1 gid=$2 size=$3 mtu=$4 iters=$5
  local name="$KIND-$role-g$gid-s$size-m$mtu" mflag=() ok=1 hrc=0 grc=0
  [[ $KIND == rc ]] && mflag=(-m "$mtu")
  local args="-g $gid -s $size ${mflag[*]} -n $iters -c"
  local hcmd=(env LD_LIBRARY_PATH="$SHIM" ROCE_DEVICE="$DEV" "$BIN" -d roce0 $args)
  local gcmd="$BIN -d rxe0 $args"
  local hout=$RXE_OUT/$name.host.out gout=$RXE_OUT/$name.guest.out t0=$SECONDS
  if [[ $role == server ]]; then
    rxe_host_bg "$hout" 60 "${hcmd[@]}"
    local hpid=$RXE_BG
    if rxe_wait_listen 18515 20 "$hpid"; then
      rxe_guest 60 "$gcmd $RXE_HOST_IP" >"$gout" 2>&1 || grc=$?
    else
      grc=-1
    fi
    wait "$hpid" || hrc=$?
  else
    rxe_guest_bg "$gout" 60 "rxe-serve 18515 $gcmd"
    local gpid=$RXE_BG
    if rxe_wait_file "$gout" RXE-LISTENING 20 "$gpid"; then
      rxe_host 60 "${hcmd[@]}" "$RXE_GUEST_IP" >"$hout" 2>&1 || hrc=$?
    else
      hrc=-1
    fi
    wait "$gpid" || grc=$?
  fi
  local side
  for side in "$hout" "$gout"; do grep -q "bytes in .* seconds" "$side" || ok=0; done
  ((hrc == 0 && grc == 0)) || ok=0
  local fam=$([[ $gid == 1 ]] && echo IPv4 || echo IPv6-LL)
  local dir=$([[ $role == client ]] && echo "stack client -> rxe server" || echo "rxe client -> stack server")
  local repro="ctest -L interop -R interop_${KIND}_pingpong  # case: ibv_${KIND}_pingpong $args"
  if ((ok)); then
    rxe_log "PASS $name ($((SECONDS - t0)) s): $(grep -m1 "bytes in" "$hout" | tr -s ' ')"
    rxe_result "ibv_${KIND}_pingpong $size B" "$fam" "$dir" "${mtu}" "$size" PASS "$repro"
  else
    rxe_log "FAIL $name: host exit $hrc, guest exit $grc"
    tail -n 5 "$hout" "$gout" | sed "s/^/    /" || true
    rxe_result "ibv_${KIND}_pingpong $size B" "$fam" "$dir" "${mtu}" "$size" FAIL "$repro"
  fi
}

if [[ $KIND == rc ]]; then
  for role in client server; do
    for gid in 1 0; do
      for mtu in 1024 4096; do
        pp_case "$role" "$gid" 64 "$mtu" 200
        pp_case "$role" "$gid" 65536 "$mtu" 20
      done
    done
  done
else
  for role in client server; do
    for gid in 1 0; do
      pp_case "$role" "$gid" 64 4096 200
      pp_case "$role" "$gid" 2048 4096 200
    done
  done
fi

rxe_capture_stop
icrc=$(rxe_icrc "$RXE_OUT/$KIND.pcap") || rxe_die "ICRC check of the capture failed: $icrc"
rxe_log "capture: $icrc"
grep -q "([1-9][0-9]* IPv4" <<<"$icrc" || RXE_FAILS=$((RXE_FAILS + 1))
grep -q " [1-9][0-9]* IPv6;" <<<"$icrc" || RXE_FAILS=$((RXE_FAILS + 1))
((RXE_FAILS == 0)) || rxe_die "$RXE_FAILS failed"
rxe_log "PASS"
