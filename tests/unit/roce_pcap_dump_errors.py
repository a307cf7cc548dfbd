#!/usr/bin/python3
"""roce-pcap dump must not succeed silently on a capture it cannot read through.

Writes from SRC: a copy cut in the middle of its last frame, and a copy whose link type is Linux
cooked capture (113) instead of Ethernet; `TOOL dump` must exit 2 on each and say why on stderr."""
import struct
import subprocess
import sys

tool, src, work = sys.argv[1:4]
data = open(src, "rb").read()
cases = {
    "cut.pcap": (data[:-10], "read error: truncated dump file"),
    "sll.pcap": (data[:20] + struct.pack("<I", 113) + data[24:], "link type 113 is not Ethernet"),
}
failed = False
for name, (content, why) in cases.items():
    path = work + "/" + name
    open(path, "wb").write(content)
    r = subprocess.run([tool, "dump", path], capture_output=True, text=True)
    print(f"{name}: exit {r.returncode}, stderr: {r.stderr.strip()}")
    if r.returncode != 2 or f"roce-pcap: {path}: {why}" not in r.stderr:
        print(f"  expected exit 2 and 'roce-pcap: {path}: {why}' on stderr")
        failed = True
sys.exit(1 if failed else 0)
