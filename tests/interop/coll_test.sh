#!/usr/bin/env bash
# The collectives on a provider that is not ours: coll_check (tests/collectives) as rank 1 in
# the rxe guest, on Debian's libibverbs and Linux soft-RoCE, and as rank 0 on our stack over the
# shim; the same binary (its C++ runtime linked in, so the guest needs only libc and
# libibverbs). Every operation up to 1 MiB, results compared bit for bit on both sides; rank 0
# serves the TCP store on the namespace's kernel (10.79.0.1), which the guest reaches.
#
# Usage: coll_test.sh COLL_CHECK [RESULTS_DIR]
set -euo pipefail
BIN=${1:?coll_check binary}
RXE_NAME=coll
RXE_RESULTS=${2:-}
source "$(dirname "$0")/../../scripts/rxe/lib.sh"
rxe_require
[[ -x $BIN ]] || rxe_die "no coll_check at $BIN"
RXE_EXTRA_BINS=$BIN
rxe_up 9000
rxe_capture_start "$RXE_OUT/coll.pcap"

port=29511
bytes=${RXE_COLL_BYTES:-1048576}
launch="WORLD_SIZE=2 MASTER_ADDR=$RXE_HOST_IP MASTER_PORT=$port ROCE_COLL_TIMEOUT_MS=60000"
rxe_host_bg "$RXE_OUT/rank0.out" 400 env ROCE_DEVICE="$(rxe_device)" RANK=0 $launch \
  "$BIN" --max-bytes "$bytes"
hpid=$RXE_BG
grc=0 hrc=0
rxe_guest 380 "RANK=1 $launch /usr/local/bin/$(basename "$BIN") --max-bytes $bytes" \
  >"$RXE_OUT/rank1.out" 2>&1 || grc=$?
wait "$hpid" || hrc=$?
rxe_capture_stop
for r in 0 1; do
  line=$(grep -a '^coll_check: rank .* checks passed' "$RXE_OUT/rank$r.out" || true)
  rxe_log "rank $r ($([[ $r == 0 ]] && echo "our stack" || echo "rxe")): ${line:-no result}"
  [[ $line == *", 0 failed"* ]] || RXE_FAILS=$((RXE_FAILS + 1))
done
((hrc == 0 && grc == 0)) || rxe_die "rank 0 exited $hrc, rank 1 (rxe) $grc"
grep -aq "rxe0 port 1 GID 1 ::ffff:$RXE_GUEST_IP" "$RXE_OUT/rank1.out" ||
  rxe_die "rank 1 did not run on the guest's rxe0 (IPv4-mapped GID)"
icrc=$(rxe_icrc "$RXE_OUT/coll.pcap") || rxe_die "ICRC check of the capture failed: $icrc"
rxe_log "capture: $icrc"
((RXE_FAILS == 0)) || rxe_die "$RXE_FAILS failed"
rxe_log "PASS"
