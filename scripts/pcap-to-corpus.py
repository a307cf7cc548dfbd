#!/usr/bin/python3
"""Writes every frame of the given pcap files as one file in OUTDIR (a libFuzzer seed corpus).

usage: pcap-to-corpus.py OUTDIR FILE.pcap...

Reads classic pcap in either byte order, micro- or nanosecond. A file that is not pcap (pcapng
included), or whose last record is cut short, is refused with one line on stderr and exit 1;
nothing is written for it."""
import os
import struct
import sys

PROG = "pcap-to-corpus.py"


def fail(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(1)


def frames(path):
    """The frames of one pcap file; calls fail() on anything it cannot read through."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if len(data) < 24:
        fail(f"{path}: not a pcap file ({len(data)} bytes, shorter than a pcap header)")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        order = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        order = ">"
    elif magic == b"\x0a\x0d\x0d\x0a":
        fail(f"{path}: pcapng is not supported; convert it with 'editcap -F pcap'")
    else:
        fail(f"{path}: not a pcap file (magic {magic.hex()})")
    snaplen = struct.unpack_from(order + "I", data, 16)[0]
    out = []
    pos = 24
    while pos < len(data):
        if pos + 16 > len(data):
            fail(f"{path}: record {len(out) + 1} at offset {pos}: header cut short")
        caplen, origlen = struct.unpack_from(order + "II", data, pos + 8)
        if caplen > max(snaplen, 262144):
            fail(f"{path}: record {len(out) + 1} at offset {pos}: captured length {caplen} "
                 f"is larger than the snapshot length {snaplen}")
        if pos + 16 + caplen > len(data):
            fail(f"{path}: record {len(out) + 1} at offset {pos}: {caplen} bytes announced, "
                 f"{len(data) - pos - 16} present")
        out.append(data[pos + 16: pos + 16 + caplen])
        pos += 16 + caplen
    return out


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    out = sys.argv[1]
    # Read every input before writing anything, so a bad file leaves no partial corpus.
    inputs = [(path, frames(path)) for path in sys.argv[2:]]
    try:
        os.makedirs(out, exist_ok=True)
        n = 0
        for path, fs in inputs:
            for frame in fs:
                with open(os.path.join(out, f"{os.path.basename(path)}.{n:05d}"), "wb") as f:
                    f.write(frame)
                n += 1
    except OSError as e:
        fail(f"{e.filename}: {e.strerror}")
    print(f"{n} frames written to {out}")


main()
