#!/usr/bin/python3
"""roce-pcap check must exit 1 and name the frame when a capture holds a corrupted RoCEv2 frame.

Copies SRC, flips one payload byte of frame 5, runs `TOOL check` on the copy."""
import struct
import subprocess
import sys

tool, src, work = sys.argv[1:4]
data = bytearray(open(src, "rb").read())
pos = 24
for _ in range(4):  # skip frames 1..4
    caplen = struct.unpack_from("<I", data, pos + 8)[0]
    pos += 16 + caplen
data[pos + 16 + 100] ^= 0xFF
out = work + "/corrupt.pcap"
open(out, "wb").write(data)
r = subprocess.run([tool, "check", out], capture_output=True, text=True)
print(r.stdout, r.stderr)
if r.returncode != 1:
    sys.exit(f"exit code {r.returncode}, expected 1")
if f"FAIL {out} frame 5: bad ICRC" not in r.stdout:
    sys.exit("frame 5's bad ICRC was not reported")
