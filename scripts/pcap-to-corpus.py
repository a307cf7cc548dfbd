#!/usr/bin/python3
"""Writes every frame of the given pcap files as one file in OUTDIR (a libFuzzer seed corpus).

usage: pcap-to-corpus.py OUTDIR FILE.pcap..."""
import os
import struct
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        sys.exit(f"{path}: not a little-endian pcap file")
    pos = 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        frame = data[pos + 16: pos + 16 + caplen]
        pos += 16 + caplen
        with open(os.path.join(out, f"{os.path.basename(path)}.{n:05d}"), "wb") as f:
            f.write(frame)
        n += 1
print(f"{n} frames written to {out}")
