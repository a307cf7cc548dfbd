#!/usr/bin/python3
"""Writes each line 'NAME HEX' of FILE as the file OUTDIR/NAME (a libFuzzer seed corpus);
lines starting with '#' are comments.

usage: hex-to-corpus.py OUTDIR FILE"""
import os
import sys

out, path = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
n = 0
for line in open(path):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    name, hexdata = line.split()
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes.fromhex(hexdata))
    n += 1
print(f"{n} seeds written to {out}")
