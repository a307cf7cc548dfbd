#!/usr/bin/python3
"""Runs rdma-core's own test suite (Debian's python3-pyverbs ships it under
/usr/share/doc/rdma-core/tests), unmodified, over the stack's libibverbs.so.1.

The device is one stack device on a net_null port that receives nothing: the suite's server and
client are two sets of objects on the same device, whose QPs meet through the device's own GIDs
(loopback, as on a NIC), so no frame leaves the process and no network is needed.

Passes when no test fails or errs, some pass, and every skip's reason is one that
verbs_shim/README.md lists (section "rdma-core's test suite"; `*` there matches anything).
Exit 77 (ctest SKIP_RETURN_CODE) when python3-pyverbs is not installed.

    rdma_core_suite.py --shim DIR --readme verbs_shim/README.md [-k PATTERN]
"""
import argparse
import fnmatch
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
SUITE = "/usr/share/doc/rdma-core/tests"
PYTHON = "/usr/bin/python3"  # Debian's, where pyverbs is installed
DEVICE = "roceS"
TIMEOUT = 170  # seconds; the whole suite takes a few here
# unittest -v: "<name> (<id>)[\n<docstring line>] ... <outcome>", the outcome on a line of its
# own when the test printed something first.
OUTCOME = re.compile(
    r"(?:^| \.\.\. )(ok|skipped (.*)|ERROR|FAIL|expected failure|unexpected success)$")


def readme_reasons(path):
    """The `pattern`s in the first column of the README section's table."""
    text = open(path).read()
    m = re.search(r"^## rdma-core's test suite\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        raise RuntimeError(f"{path} has no section \"## rdma-core's test suite\"")
    pats = re.findall(r"^\| `([^`]+)` \|", m.group(1), re.M)
    if not pats:
        raise RuntimeError(f"{path}: no skip reasons in its rdma-core section")
    return pats


def copy_suite(dst):
    """The suite as installed, with the files Debian compressed (as documentation) expanded:
    Python does not import .py.gz."""
    for name in os.listdir(SUITE):
        src = os.path.join(SUITE, name)
        if name.endswith(".gz"):
            with gzip.open(src, "rb") as f, open(os.path.join(dst, name[:-3]), "wb") as out:
                shutil.copyfileobj(f, out)
        elif os.path.isfile(src):
            shutil.copy(src, dst)


def run(args, tmp):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = args.shim
    env["ROCE_DEVICE"] = (f"name={DEVICE}; port=net_null0,no-rx=1; mtu=4200; "
                          "ipv4=10.77.0.1/24; ipv6=fd77::1/64")
    env.pop("ROCE_CONFIG", None)
    preload = os.environ.get("ROCE_SANITIZER_PRELOAD")
    if preload:  # a shim built with the sanitizers: their runtimes first (tests/CMakeLists.txt)
        env["LD_PRELOAD"] = preload
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    cmd = [PYTHON, "run_tests.py", "--dev", DEVICE, "-v"]
    if args.k:
        cmd += ["-k", args.k]
    r = subprocess.run(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=TIMEOUT)
    return r.returncode, r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True, help="directory holding libibverbs.so.1")
    ap.add_argument("--readme", required=True, help="verbs_shim/README.md")
    ap.add_argument("-k", help="only tests matching this (unittest -k)")
    args = ap.parse_args()
    args.shim = os.path.abspath(args.shim)
    if not os.path.exists(os.path.join(SUITE, "run_tests.py")):
        print(f"SKIP: rdma-core's test suite is not installed ({SUITE}; apt-get install "
              "python3-pyverbs)")
        return SKIP
    if subprocess.run([PYTHON, "-c", "import pyverbs"], capture_output=True).returncode != 0:
        print("SKIP: pyverbs does not import (apt-get install python3-pyverbs)")
        return SKIP
    allowed = readme_reasons(args.readme)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="roce-rdma-core-tests-") as tmp:
        copy_suite(tmp)
        try:
            rc, out = run(args, tmp)
        except subprocess.TimeoutExpired as e:
            print(f"FAIL: the suite did not finish in {TIMEOUT} s:\n{e.output or ''}")
            return 1
    counts = {"pass": 0, "skip": 0, "fail": 0, "error": 0}
    unlisted = {}
    for line in out.splitlines():
        m = OUTCOME.search(line)
        if not m:
            continue
        kind = m.group(1)
        if kind == "ok" or kind == "expected failure":
            counts["pass"] += 1
        elif kind.startswith("skipped"):
            counts["skip"] += 1
            reason = m.group(2).strip()[1:-1]  # the repr's quotes
            if not any(fnmatch.fnmatchcase(reason, p) for p in allowed):
                unlisted.setdefault(reason, line)
        elif kind == "ERROR":
            counts["error"] += 1
        else:
            counts["fail"] += 1
    ran = re.search(r"^Ran (\d+) tests? in", out, re.M)
    summary = (f"{ran.group(1) if ran else '?'} tests: {counts['pass']} pass, {counts['skip']} "
               f"skip, {counts['fail']} fail, {counts['error']} error "
               f"({time.monotonic() - t0:.1f} s)")
    problems = []
    if not ran or sum(counts.values()) != int(ran.group(1)):
        problems.append("the suite's output does not account for every test")
    if counts["fail"] or counts["error"] or rc != 0:
        problems.append(f"failures or errors (exit {rc})")
    if counts["pass"] == 0:
        problems.append("nothing passed")
    if unlisted:
        problems.append("skip reasons verbs_shim/README.md does not list:\n  " +
                        "\n  ".join(unlisted))
    if problems:
        print(out)
        print("FAIL: " + summary + "\n" + "\n".join(problems))
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
