#!/usr/bin/python3
"""scripts/pcap-to-corpus.py and scripts/hex-to-corpus.py refuse bad input with one line and
exit 1, writing nothing; they read a big-endian pcap as a little-endian one.

usage: corpus_scripts_test.py SCRIPTS_DIR SRC.pcap WORKDIR"""
import os
import shutil
import struct
import subprocess
import sys

scripts, src, work = sys.argv[1:4]
pcap_tool = os.path.join(scripts, "pcap-to-corpus.py")
hex_tool = os.path.join(scripts, "hex-to-corpus.py")
work = os.path.join(work, "corpus_scripts_test")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
data = open(src, "rb").read()
failed = False


def run(tool, args):
    return subprocess.run(["/usr/bin/python3", tool] + args, capture_output=True, text=True)


def expect_refusal(label, tool, inputs, why):
    """Writes INPUTS (name -> bytes), runs TOOL on them, expects exit 1, WHY on stderr and no
    output directory."""
    global failed
    paths = []
    for name, content in inputs.items():
        path = os.path.join(work, name)
        if content is not None:
            open(path, "wb").write(content)
        paths.append(path)
    out = os.path.join(work, "out-" + label)
    r = run(tool, [out] + paths)
    print(f"{label}: exit {r.returncode}, stderr: {r.stderr.strip()}")
    if r.returncode != 1 or why not in r.stderr or len(r.stderr.strip().split("\n")) != 1:
        print(f"  FAIL: expected exit 1 and one line containing '{why}'")
        failed = True
    if os.path.exists(out):
        print(f"  FAIL: {out} was created")
        failed = True


def to_big_endian(le):
    """The same capture, written in big-endian byte order."""
    hdr = struct.unpack_from("<IHHiIII", le, 0)
    be = bytearray(struct.pack(">IHHiIII", *hdr))
    pos = 24
    while pos < len(le):
        rec = struct.unpack_from("<IIII", le, pos)
        be += struct.pack(">IIII", *rec) + le[pos + 16: pos + 16 + rec[2]]
        pos += 16 + rec[2]
    return bytes(be)


good = {"good.pcap": data}
expect_refusal("empty", pcap_tool, {"empty.pcap": b""}, "shorter than a pcap header")
expect_refusal("pcapng", pcap_tool, {"ng.pcap": b"\x0a\x0d\x0d\x0a" + data[4:]}, "pcapng")
expect_refusal("magic", pcap_tool, {"junk.pcap": b"x" * 40}, "not a pcap file (magic 78787878)")
expect_refusal("cut-record", pcap_tool, {**good, "cut.pcap": data[:-10]}, "bytes announced")
expect_refusal("cut-header", pcap_tool, {"cuth.pcap": data[:24 + 8]}, "header cut short")
expect_refusal("missing", pcap_tool, {"absent.pcap": None}, "No such file or directory")

# Big-endian: the same frames, byte for byte.
open(os.path.join(work, "be.pcap"), "wb").write(to_big_endian(data))
open(os.path.join(work, "le.pcap"), "wb").write(data)
r1 = run(pcap_tool, [os.path.join(work, "out-le"), os.path.join(work, "le.pcap")])
r2 = run(pcap_tool, [os.path.join(work, "out-be"), os.path.join(work, "be.pcap")])
le_files = sorted(os.listdir(os.path.join(work, "out-le")))
be_files = sorted(os.listdir(os.path.join(work, "out-be")))
same = len(le_files) == len(be_files) and all(
    open(os.path.join(work, "out-le", a), "rb").read() == open(os.path.join(work, "out-be", b), "rb").read()
    for a, b in zip(le_files, be_files))
print(f"big-endian: exit {r2.returncode}, {len(be_files)} frames; little-endian {len(le_files)} frames")
if r1.returncode != 0 or r2.returncode != 0 or not le_files or not same:
    print("  FAIL: a big-endian pcap must give the same frames as the little-endian original")
    failed = True

expect_refusal("hex-odd", hex_tool, {"odd.txt": b"# c\n\nseed1 0a0\n"}, "odd.txt:3: 'seed1': not an even number")
expect_refusal("hex-fields", hex_tool, {"f.txt": b"seed1 00 11\n"}, "f.txt:1: expected 'NAME HEX', found 3 fields")
expect_refusal("hex-slash", hex_tool, {"s.txt": b"../escape 00\n"}, "s.txt:1: '../escape' is not a plain file name")
expect_refusal("hex-dup", hex_tool, {"d.txt": b"a 00\na 01\n"}, "d.txt:2: 'a' was already given")
expect_refusal("hex-missing", hex_tool, {"absent.txt": None}, "No such file or directory")
r = run(hex_tool, [os.path.join(work, "out-hex"), "/dev/null", "extra"])
print(f"hex-usage: exit {r.returncode}")
if r.returncode != 2 or "usage:" not in r.stderr:
    print("  FAIL: a wrong argument count must print the usage and exit 2")
    failed = True
sys.exit(1 if failed else 0)
