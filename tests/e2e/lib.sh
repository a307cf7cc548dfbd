# Shared by the end-to-end tests (sourced). Each test gets namespaces of its own (a prefix with
# the test's name and pid), tears them down on every exit path, bounds every process with
# `timeout`, and skips (exit 77, ctest SKIP_RETURN_CODE) where namespaces cannot be made.
#
# The caller sets E2E_NAME and passes the roce-perf binary as $1; repo scripts are found from
# this file's location.

set -euo pipefail

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$E2E_DIR/../.." && pwd)
TESTBED="$REPO/scripts/testbed.sh"
PYTHON=/usr/bin/python3
export ROCE_TB_PREFIX="e2e-${E2E_NAME:-t}-$$-"
WORK=$(mktemp -d "/tmp/roce-e2e-${E2E_NAME:-t}.XXXXXX")
PIDS=()
T0=$(date +%s%N)

log() {
  local ds=$((($(date +%s%N) - T0) / 100000000))
  printf '[%s %4d.%ds] %s\n' "${E2E_NAME:-e2e}" $((ds / 10)) $((ds % 10)) "$*"
}
skip() {
  echo "SKIP: $*"
  exit 77
}
die() {
  echo "FAIL: $*"
  exit 1
}

cleanup() {
  local rc=$?
  set +e
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  "$TESTBED" down >/dev/null 2>&1
  if [[ $rc -ne 0 && $rc -ne 77 && -d $WORK ]]; then
    echo "--- outputs of the failed test (kept in $WORK) ---"
    for f in "$WORK"/*.out; do [[ -f $f ]] && { echo "== $f"; tail -n 40 "$f"; }; done
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Skips unless this process may create network namespaces and veth pairs.
require_netns() {
  [[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
  command -v ip >/dev/null || skip "needs iproute2"
  local probe="${ROCE_TB_PREFIX}probe"
  ip netns add "$probe" 2>/dev/null || skip "cannot create network namespaces here"
  ip netns del "$probe"
}

# testbed_up [N]: namespaces 1..N joined by veth (N=2) or a bridge.
testbed_up() {
  "$TESTBED" up "${1:-2}" >"$WORK/testbed.out" 2>&1 || die "testbed up failed: $(cat "$WORK/testbed.out")"
}

# device I VDEV [extra "k=v; ..."]: the --device string of stack instance I.
device() {
  local s
  s=$("$TESTBED" env "$1" "$2" | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p")
  [[ -n ${3:-} ]] && s="$s; $3"
  echo "$s"
}

# run_pair NAME SECONDS "server args" "client args" [server extra device keys] [client extra]
# Runs roce-perf's server in namespace 1 and its client in namespace 2 (the client reaches the
# server's kernel at 10.78.0.1 on mg0), both bounded by SECONDS; fails unless both exit with
# $EXPECT_RC (default 0). Outputs: $WORK/NAME.server.out and $WORK/NAME.client.out.
# SDEV_OVERRIDE / CDEV_OVERRIDE, when set, are the server's / client's whole device string
# (instead of the testbed's); CLIENT_AFTER, a file the client waits up to 10 s for (a socket
# the server's port makes).
run_pair() {
  local name=$1 secs=$2 sargs=$3 cargs=$4 sdev cdev vdev=${VDEV:-af_packet}
  sdev=${SDEV_OVERRIDE:-$(device 1 "$vdev" "${5:-}")}
  cdev=${CDEV_OVERRIDE:-$(device 2 "$vdev" "${6:-}")}
  log "$name: roce-perf $sargs  <->  $cargs ($vdev)"
  # shellcheck disable=SC2086
  timeout -k 5 "$secs" ip netns exec "${ROCE_TB_PREFIX}1" "$PERF" $sargs --device "$sdev" \
    --timeout 30 >"$WORK/$name.server.out" 2>&1 &
  local spid=$!
  PIDS+=("$spid")
  if [[ -n ${CLIENT_AFTER:-} ]]; then
    for _ in $(seq 100); do [[ -e $CLIENT_AFTER ]] && break; sleep 0.1; done
  fi
  local crc=0 src=0
  # shellcheck disable=SC2086
  timeout -k 5 "$secs" ip netns exec "${ROCE_TB_PREFIX}2" "$PERF" $cargs --device "$cdev" \
    --timeout 30 10.78.0.1 >"$WORK/$name.client.out" 2>&1 || crc=$?
  wait "$spid" || src=$?
  if [[ $crc -ne ${EXPECT_RC:-0} || $src -ne ${EXPECT_RC:-0} ]]; then
    echo "--- server ($name) ---"
    tail -n 30 "$WORK/$name.server.out"
    echo "--- client ($name) ---"
    tail -n 30 "$WORK/$name.client.out"
    die "$name: client exit $crc, server exit $src"
  fi
  log "$name: done"
}

# verified_bytes FILE: the byte count of roce-perf's " Verified: N bytes" line (0 if none).
verified_bytes() {
  sed -n 's/^ Verified: \([0-9]*\) bytes.*: OK$/\1/p' "$1" | tail -n 1 | grep . || echo 0
}

# The bandwidth report lines (one per size) of a roce-perf output.
report_lines() { grep -E '^ [0-9]+ +[0-9]+ ' "$1" || true; }

# tshark's options for RoCE captures. Its heuristic payload dissectors (RPC over RDMA, iSER,
# SDP, ...) are turned off: they try to read the test pattern in SEND payloads as their protocols
# and call that malformed. RoCEv2 over IPv6 carries UDP checksum 0 (as Linux rxe does: see
# tests/data/*ipv6*.pcap, which tshark flags the same way); tshark's own preference for zero IPv6
# UDP checksums (RFC 6935 / 6936, udp.ignore_ipv6_zero_checksum) accepts that.
TSHARK_OPTS=(-o udp.ignore_ipv6_zero_checksum:TRUE)
for h in eth_over_ib fc_infiniband sdp_infiniband iser_infiniband rpcrdma_infiniband \
  smb_direct_infiniband smcr_infiniband nvme_rdma mellanox_eoib lnet_ib; do
  TSHARK_OPTS+=(--disable-heuristic "$h")
done

# Skips unless tshark and python3-scapy (for scripts/icrc_check.py) are there.
require_capture_tools() {
  command -v tshark >/dev/null || skip "needs tshark"
  [[ -x $PYTHON ]] && $PYTHON -c 'import scapy.contrib.roce' 2>/dev/null || skip "needs python3-scapy"
}

# check_capture LABEL FILE ROCE_PCAP: dies unless tshark decodes FILE with no malformed frame
# and no expert error, scripts/icrc_check.py (an ICRC of its own, and scapy's for IPv4) finds
# every frame's ICRC right, and roce-pcap check (the stack's own parser) parses and rebuilds
# every frame byte for byte. Sets CAPTURE_ICRC to icrc_check.py's summary.
check_capture() {
  local label=$1 cap=$2 roce_pcap=$3 expert malformed pcheck
  expert=$(tshark -r "$cap" "${TSHARK_OPTS[@]}" -z expert -q 2>/dev/null)
  if grep -q "^Errors (" <<<"$expert"; then
    echo "$expert"
    die "$label: tshark reports expert errors"
  fi
  malformed=$(tshark -r "$cap" "${TSHARK_OPTS[@]}" -V 2>/dev/null | grep -c "Malformed" || true)
  ((malformed == 0)) || die "$label: tshark finds $malformed malformed frames"
  CAPTURE_ICRC=$("$PYTHON" "$REPO/scripts/icrc_check.py" "$cap") || {
    echo "$CAPTURE_ICRC" | tail -n 20
    die "$label: icrc_check.py failed"
  }
  pcheck=$("$roce_pcap" check "$cap" 2>&1) || {
    echo "$pcheck" | tail -n 20
    die "$label: roce-pcap check failed"
  }
}
