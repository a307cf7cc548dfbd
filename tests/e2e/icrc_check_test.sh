#!/usr/bin/env bash
# scripts/icrc_check.py on the real rxe captures of tests/data: every one of the 1016 RoCEv2
# frames (IPv4 and IPv6) passes; then a copy with one payload byte flipped in an IPv4 and in an
# IPv6 frame must fail (so the check can fail at all), naming the frame as tshark numbers it.
#
# Usage: icrc_check_test.sh DATA_DIR
set -euo pipefail
DATA=${1:?tests/data}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
$PY -c 'import scapy.contrib.roce' 2>/dev/null || { echo "SKIP: needs python3-scapy"; exit 77; }
out=$($PY "$REPO/scripts/icrc_check.py" "$DATA"/*.pcap)
tail -n 1 <<<"$out"
grep -qx "total: 1016 RoCEv2 frames, 0 bad" <<<"$out" || { echo "$out"; exit 1; }
grep -q "also checked by scapy" <<<"$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in write_bw_ipv4_8KiB rc_pingpong_ipv6_64B; do
  # The last record's last payload byte before its ICRC (the last 4 bytes of the file).
  $PY - "$DATA/$f.pcap" "$tmp/$f.pcap" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[-5] ^= 0x01
open(sys.argv[2], "wb").write(data)
PY
  if $PY "$REPO/scripts/icrc_check.py" "$tmp/$f.pcap" >"$tmp/out" 2>&1; then
    echo "FAIL: a corrupted $f passed"; cat "$tmp/out"; exit 1
  fi
  grep -q "^FAIL .* frame" "$tmp/out" || { cat "$tmp/out"; exit 1; }
  # Frames are numbered from 1, as tshark and roce-pcap number them: the last is the count.
  n=$(sed -n 's/^.*: \([0-9]*\) frames, .*/\1/p' "$tmp/out")
  grep -q "^FAIL $tmp/$f.pcap frame $n " "$tmp/out" || {
    echo "FAIL: the corrupted frame is not reported as frame $n"; cat "$tmp/out"; exit 1
  }
  echo "corrupted $f: $(grep -c '^FAIL' "$tmp/out") frame(s) rejected"
done
# A capture cut short (in a record's header, in its data), one whose record length runs past
# the file, and one of another link type than Ethernet are unreadable: exit 2, never a pass.
$PY - "$DATA/write_bw_ipv4_8KiB.pcap" "$tmp" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
last = pos = 24  # the last record's offset
while pos + 16 < len(data):
    last = pos
    pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
big = bytearray(data)
struct.pack_into("<I", big, 24 + 8, 300000)
cases = {"cut_header": data[:last + 8], "cut_data": data[:-10], "caplen": bytes(big),
         "sll": data[:20] + struct.pack("<I", 113) + data[24:]}
for name, content in cases.items():
    open("%s/%s.pcap" % (sys.argv[2], name), "wb").write(content)
PY
for f in cut_header cut_data caplen sll; do
  rc=0
  $PY "$REPO/scripts/icrc_check.py" "$tmp/$f.pcap" >"$tmp/out" 2>&1 || rc=$?
  if [[ $rc -ne 2 ]] || ! grep -q "^$tmp/$f.pcap: cannot read: " "$tmp/out"; then
    echo "FAIL: $f.pcap: exit $rc (want 2 and 'cannot read')"; cat "$tmp/out"; exit 1
  fi
  echo "$f: $(cat "$tmp/out")"
done
echo "PASS"
