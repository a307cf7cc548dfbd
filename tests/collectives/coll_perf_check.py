#!/usr/bin/python3
"""Checks roce-coll-perf's output against nccl-tests' layout and arithmetic.

Usage: coll_perf_check.py OUTPUT OP RANKS [--expect-wrong]
Every result row has 13 columns (size, count, type, redop, root, then time, algbw, busbw,
#wrong out of place and in place); size = count x the type's size; algbw = size / time
(GB/s = 1e9 B/s, time in us); busbw = algbw x nccl-tests' factor for OP and RANKS; the
footer's average is the mean of every busbw; #wrong is 0 (or, with --expect-wrong, the
out-of-bounds count is positive and says FAILED); the admission lines (one per rank) say no
peer ever had more than the window (grants x chunk) in flight. Prints one line per problem;
exit 1 if any.
"""
import re
import sys

SIZES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
         "half": 2, "bfloat16": 2, "float": 4, "double": 8}


def factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall", "alltoallv"):
        return (n - 1) / n
    return 1.0


def close(a, b, scale=1.0):
    # Both printed with 2 decimals (fewer when wide): each off by up to half a unit of the last
    # digit, the expected one after being multiplied by `scale`; and 1 % for the wide ones.
    return abs(a - b) <= 0.0051 * (1 + scale) + 0.01 * abs(b)


def main():
    path, op, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    expect_wrong = "--expect-wrong" in sys.argv
    text = open(path).read()
    problems, busbws = [], []
    rows = [l for l in text.splitlines() if re.match(r"^ +\d+ ", l)]
    if not rows:
        problems.append("no result rows")
    header = [l for l in text.splitlines() if "#wrong" in l and "size" in l]
    if len(header) != 1 or header[0].split()[1:] != [
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
            "time", "algbw", "busbw", "#wrong"]:
        problems.append("the column header is not nccl-tests'")
    for line in rows:
        f = line.split()
        if len(f) != 13:
            problems.append(f"row with {len(f)} columns: {line}")
            continue
        size, count, typ = int(f[0]), int(f[1]), f[2]
        if size != count * SIZES.get(typ, 0):
            problems.append(f"size {size} is not {count} x {typ}")
        for t, alg, bus, wrong in (f[5:9], f[9:13]):
            t, alg, bus = float(t), float(alg), float(bus)
            busbws.append(bus)
            if t > 0 and not close(alg, size / t / 1e3):
                problems.append(f"algbw {alg} is not {size} B / {t} us")
            if not close(bus, alg * factor(op, n), factor(op, n)):
                problems.append(f"busbw {bus} is not algbw {alg} x {factor(op, n):.4f}")
            if not expect_wrong and wrong != "0":
                problems.append(f"#wrong {wrong} in: {line}")
    m = re.search(r"^# Out of bounds values : (\d+) (OK|FAILED)$", text, re.M)
    if not m:
        problems.append("no out-of-bounds line")
    elif expect_wrong != (int(m.group(1)) > 0 and m.group(2) == "FAILED"):
        problems.append(f"out of bounds: {m.group(1)} {m.group(2)}")
    m = re.search(r"^# Avg bus bandwidth    : ([0-9.e+-]+)", text, re.M)
    if not m:
        problems.append("no average bus bandwidth line")
    elif busbws and not close(float(m.group(1)), sum(busbws) / len(busbws)):
        problems.append(f"average {m.group(1)} is not the mean of the busbw column")
    m = re.search(r"^# Admission: window (\d+) x (\d+) B per peer", text, re.M)
    peaks = [int(x) for x in re.findall(r"^#  Rank +\d+: .* peak in flight (\d+) B", text, re.M)]
    if not m or len(peaks) != n:
        problems.append(f"no admission header or not {n} rank lines")
    else:
        window = int(m.group(1)) * int(m.group(2))
        problems += [f"peak in flight {p} B over the window {window} B" for p in peaks if p > window]
    for p in problems:
        print(f"coll_perf_check: {p}")
    if not problems:
        print(f"coll_perf_check: {len(rows)} rows of {op} on {n} ranks check out")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
