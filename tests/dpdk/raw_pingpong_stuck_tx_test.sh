#!/usr/bin/env bash
# roce-raw-pingpong's pong side must give up within its --timeout when the driver takes none of
# its echoes, with an error line and exit 1. It retried a refused tx burst for ever (a busy loop
# that only a signal ended), e.g. when the memif peer left between the pong's receive and its
# echo. Here the refusal is made certain: net_pcap replays one 1514-byte frame of the tool's
# from a file and sends its echo on a veth whose MTU is 1000, which the kernel refuses
# (EMSGSIZE), so every tx burst takes nothing. Everything runs in a network namespace of its
# own (removed on exit by tests/e2e/lib.sh); nothing leaves it.
#
#   raw_pingpong_stuck_tx_test.sh TOOL
E2E_NAME=ppstuck
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/../e2e/lib.sh"
TOOL=${1:?usage: raw_pingpong_stuck_tx_test.sh TOOL}
require_netns

NS=${ROCE_TB_PREFIX}1 # the prefix's: lib.sh's cleanup removes it
ip netns add "$NS"
ip -n "$NS" link add pp0 type veth peer name pp1
ip -n "$NS" link set pp0 mtu 1000 up
ip -n "$NS" link set pp1 up
# One frame as the ping side builds it (dst, src, EtherType 0x88B5, magic "RPPP", stop 0, seq 5),
# padded to 1514 bytes, in a pcap file.
"$PYTHON" - "$WORK/in.pcap" <<'PY'
import struct, sys
frame = bytes([2, 0, 0, 0x99, 0, 2, 2, 0, 0, 0x99, 0, 1]) + struct.pack(">H", 0x88B5)
frame += struct.pack("<IIQ", 0x52505050, 0, 5)
frame += bytes(1514 - len(frame))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    f.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)
PY

start=$SECONDS
rc=0
timeout 30 ip netns exec "$NS" "$TOOL" --no-huge -m 256 --no-pci --file-prefix "ppstuck-$$" \
  --log-level=4 --vdev "net_pcap0,rx_pcap=$WORK/in.pcap,tx_iface=pp0" -- --role pong \
  --timeout 2 >"$WORK/pong.out" 2>&1 || rc=$?
took=$((SECONDS - start))
((rc != 124)) || die "the pong side was still retrying its echo after 30 s (--timeout 2)"
((rc == 1)) || die "the pong side exited with $rc, not 1"
grep -q '^roce-raw-pingpong: .*echo' "$WORK/pong.out" || die "no error line about the echo"
[[ ! -e /var/run/dpdk/ppstuck-$$ ]] || die "runtime directory left behind"
log "PASS: the pong side gave up on its echo after ${took} s"
