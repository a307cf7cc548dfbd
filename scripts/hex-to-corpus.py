#!/usr/bin/python3
"""Writes each line 'NAME HEX' of FILE as the file OUTDIR/NAME (a libFuzzer seed corpus);
blank lines and lines starting with '#' are skipped.

usage: hex-to-corpus.py OUTDIR FILE

NAME is a plain file name (no '/', not '.' or '..'), used once; HEX is an even number of hex
digits. A line that breaks either rule is refused with its line number on stderr and exit 1,
before anything is written."""
import os
import sys

PROG = "hex-to-corpus.py"


def fail(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(1)


def seeds(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except UnicodeDecodeError:
        fail(f"{path}: not a text file")
    out = {}
    for no, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            fail(f"{path}:{no}: expected 'NAME HEX', found {len(fields)} fields")
        name, hexdata = fields
        if "/" in name or name in (".", ".."):
            fail(f"{path}:{no}: '{name}' is not a plain file name")
        if name in out:
            fail(f"{path}:{no}: '{name}' was already given")
        try:
            out[name] = bytes.fromhex(hexdata)
        except ValueError:
            fail(f"{path}:{no}: '{name}': not an even number of hex digits")
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    out, path = sys.argv[1], sys.argv[2]
    data = seeds(path)
    try:
        os.makedirs(out, exist_ok=True)
        for name, content in data.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(content)
    except OSError as e:
        fail(f"{e.filename}: {e.strerror}")
    print(f"{len(data)} seeds written to {out}")


main()
