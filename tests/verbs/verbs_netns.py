#!/usr/bin/python3
"""Runs unmodified verbs programs (Debian's ibverbs-utils, our example) over the stack's
libibverbs.so.1 between two network namespaces of the test's own.

Topology, created per invocation (names carry the PID, so tests may run in parallel):

    namespace rv<pid>a                      namespace rv<pid>b
      rv<pid>da --- veth, MTU 9000 --- rv<pid>db      DPDK net_af_packet ports: RoCE only;
                                                      no kernel address, IPv6 off
      rv<pid>ca --- veth --------------- rv<pid>cb    kernel TCP for the programs' own
      10.201.0.1/24                      10.201.0.2   connection exchange

The stack instances own 10.200.0.1 / 10.200.0.2 and fd20::1 / fd20::2 (plus their link-local
GIDs from MACs 02:00:00:20:00:0{1,2}); no kernel owns those. Everything is torn down at exit,
also on failure or timeout. Exit 77 (ctest SKIP_RETURN_CODE) when not root.

    verbs_netns.py --shim DIR devices|devinfo
    verbs_netns.py --shim DIR pingpong --bin ibv_rc_pingpong --gid 1 --sizes 1,4096 [--events]
                   [--iters N] [--extra=-N]
    verbs_netns.py --shim DIR example --bin PATH --gid 1 --sizes 4096
    verbs_netns.py --shim DIR abi     (no namespaces: exported symbols and BIND_NOW loading)
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
PID = os.getpid()
NS = (f"rv{PID}a", f"rv{PID}b")
DATA = (f"rv{PID}da", f"rv{PID}db")
CTRL = (f"rv{PID}ca", f"rv{PID}cb")
CTRL_IP = ("10.201.0.1", "10.201.0.2")
ROCE_IP4 = ("10.200.0.1", "10.200.0.2")
ROCE_IP6 = ("fd20::1", "fd20::2")
MACS = ("02:00:00:20:00:01", "02:00:00:20:00:02")
DEV = ("roceA", "roceB")
RUN_TIMEOUT = 120  # seconds for one program run (both sides)


def log(msg):
    print(msg, flush=True)


def sh(*cmd, check=True, ns=None, timeout=30):
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} failed ({r.returncode}): {r.stdout.strip()}")
    return r


class Topology:
    def __enter__(self):
        try:
            for n in NS:
                sh("ip", "netns", "add", n)
            sh("ip", "link", "add", DATA[0], "netns", NS[0], "type", "veth", "peer", "name",
               DATA[1], "netns", NS[1])
            sh("ip", "link", "add", CTRL[0], "netns", NS[0], "type", "veth", "peer", "name",
               CTRL[1], "netns", NS[1])
            for i in (0, 1):
                ns = NS[i]
                sh("ip", "link", "set", "lo", "up", ns=ns)
                # The kernel must stay off the RoCE link: no IPv6 (no link-local address equal
                # to a stack GID, no ND / MLD chatter), no address.
                sh("sysctl", "-qw", f"net.ipv6.conf.{DATA[i]}.disable_ipv6=1", ns=ns)
                sh("ip", "link", "set", DATA[i], "mtu", "9000", "up", ns=ns)
                sh("ip", "addr", "add", f"{CTRL_IP[i]}/24", "dev", CTRL[i], ns=ns)
                sh("ip", "link", "set", CTRL[i], "up", ns=ns)
        except Exception:
            self.__exit__(None, None, None)
            raise
        self.tmp = tempfile.mkdtemp(prefix="roce-verbs-")
        return self

    def __exit__(self, *exc):
        for n in NS:
            pids = sh("ip", "netns", "pids", n, check=False).stdout.split()
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            sh("ip", "netns", "del", n, check=False)
        if hasattr(self, "tmp"):
            for f in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, f))
            os.rmdir(self.tmp)
        return False

    def env(self, i, shim, extra=""):
        e = dict(os.environ)
        e["LD_LIBRARY_PATH"] = shim
        e["ROCE_DEVICE"] = (
            f"name={DEV[i]}; port=net_af_packet{i},iface={DATA[i]},blocksz=8192,framesz=8192,"
            f"framecnt=512; mtu=4200; mac={MACS[i]}; ipv4={ROCE_IP4[i]}/24; "
            f"ipv6={ROCE_IP6[i]}/64{extra}")
        e.pop("ROCE_CONFIG", None)
        return e

    def spawn(self, i, shim, argv, extra=""):
        out = open(os.path.join(self.tmp, f"side{i}-{time.monotonic_ns()}.log"), "w+")
        # Line-buffered, so a run killed at its timeout still shows how far it got.
        p = subprocess.Popen(["ip", "netns", "exec", NS[i], "timeout", "-k", "5",
                              str(RUN_TIMEOUT), "stdbuf", "-oL", "-eL"] + argv,
                             env=self.env(i, shim, extra),
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        p.logfile = out
        return p

    def wait_listen(self, i, port, proc, seconds=60):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if proc.poll() is not None:
                return False
            r = sh("ss", "-Hltn", f"sport = :{port}", ns=NS[i], check=False)
            if r.stdout.strip():
                return True
            time.sleep(0.05)
        return False


def finish(p, deadline):
    try:
        p.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    p.logfile.seek(0)
    return p.returncode, p.logfile.read()


def run_pair(topo, shim, server_argv, client_argv, port, extra=""):
    """Starts the server in A, waits until it listens, runs the client in B; both must exit 0."""
    t0 = time.monotonic()
    srv = topo.spawn(0, shim, server_argv, extra)
    if not topo.wait_listen(0, port, srv):
        rc, out = finish(srv, time.monotonic() + 5)
        raise RuntimeError(f"server never listened on {port} (rc {rc}):\n{out}")
    cli = topo.spawn(1, shim, client_argv + [CTRL_IP[0]], extra)
    deadline = time.monotonic() + RUN_TIMEOUT + 10
    crc, cout = finish(cli, deadline)
    if crc != 0:  # the server may wait for a peer that is gone: a little grace, then kill
        deadline = min(deadline, time.monotonic() + 10)
    src, sout = finish(srv, deadline)
    return time.monotonic() - t0, (src, sout), (crc, cout)


def check_pair(server, client, want):
    """Both sides must exit 0 and print what `want` matches; on failure, show both."""
    bad = [n for n, (rc, out) in (("server", server), ("client", client))
           if rc != 0 or not all(re.search(w, out) for w in want)]
    if bad:
        raise RuntimeError(f"{' and '.join(bad)} failed (exit {server[0]} / {client[0]})\n"
                           f"--- server:\n{server[1]}--- client:\n{client[1]}")


def cmd_pingpong(args):
    sizes = [int(s) for s in args.sizes.split(",")]
    with Topology() as topo:
        for k, size in enumerate(sizes):
            port = 18515 + k
            common = ["-g", str(args.gid), "-s", str(size), "-n", str(args.iters), "-p", str(port)]
            if args.events:
                common.append("-e")
            common += args.extra
            dt, (src, sout), (crc, cout) = run_pair(
                topo, args.shim, [args.bin, "-d", DEV[0]] + common, [args.bin, "-d", DEV[1]] + common,
                port, f"; mode={args.mode}")
            want = [r"\d+ bytes in [\d.]+ seconds", r"\d+ iters in [\d.]+ seconds"]
            check_pair((src, sout), (crc, cout), want)
            line = [l for l in cout.splitlines() if "iters in" in l]
            log(f"{os.path.basename(args.bin)} -g {args.gid} -s {size} -n {args.iters}"
                f"{' -e' if args.events else ''} {' '.join(args.extra)}"
                f"{' (inline mode)' if args.mode == 'inline' else ''}: both sides exit 0 "
                f"in {dt:.1f} s; client: {line[0].strip() if line else '?'}")
    return 0


def cmd_example(args):
    with Topology() as topo:
        for k, size in enumerate(int(s) for s in args.sizes.split(",")):
            port = 18600 + k
            common = ["-g", str(args.gid), "-s", str(size), "-p", str(port)]
            dt, (src, sout), (crc, cout) = run_pair(
                topo, args.shim, [args.bin, "-d", DEV[0]] + common, [args.bin, "-d", DEV[1]] + common,
                port)
            check_pair((src, sout), (crc, cout), [r"verified"])
            log(f"example -g {args.gid} -s {size}: {cout.strip()} ({dt:.1f} s)")
    return 0


def cmd_devices(args):
    with Topology() as topo:
        r = subprocess.run(["ip", "netns", "exec", NS[0], "timeout", "30", "ibv_devices"],
                           env=topo.env(0, args.shim), capture_output=True, text=True)
        log(r.stdout + r.stderr)
        # node GUID: EUI-64 of 02:00:00:20:00:01.
        if r.returncode != 0 or not re.search(r"roceA\s+000000fffe200001", r.stdout):
            raise RuntimeError("ibv_devices does not list roceA with its GUID")
        # No configuration: an empty list, silently; with ROCE_DEBUG one hint line.
        env = dict(os.environ, LD_LIBRARY_PATH=args.shim)
        env.pop("ROCE_DEVICE", None)
        env.pop("ROCE_CONFIG", None)
        env.pop("ROCE_DEBUG", None)
        r = subprocess.run(["ibv_devices"], env=env, capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or "roce" in r.stdout or r.stderr:
            raise RuntimeError(f"without configuration: {r.returncode} {r.stdout} {r.stderr}")
        env["ROCE_DEBUG"] = "1"
        r = subprocess.run(["ibv_devices"], env=env, capture_output=True, text=True, timeout=30)
        if len(r.stderr.strip().splitlines()) != 1 or "ROCE_CONFIG" not in r.stderr:
            raise RuntimeError(f"ROCE_DEBUG hint missing: {r.stderr!r}")
        log("no configuration: empty list; ROCE_DEBUG: " + r.stderr.strip())
        # A configuration in error: one line naming the variable and the value, and no device.
        env.pop("ROCE_DEBUG", None)
        env["ROCE_DEVICE"] = "port=net_null0; ipv4=10.1.0.1; mtu=5"
        r = subprocess.run(["ibv_devices"], env=env, capture_output=True, text=True, timeout=30)
        lines = r.stderr.strip().splitlines()
        if (r.returncode != 0 or "roce" in r.stdout or len(lines) != 1 or
                not lines[0].startswith("libibverbs (roce): ROCE_DEVICE: mtu: '5'")):
            raise RuntimeError(f"ROCE_DEVICE in error: {r.returncode} {r.stdout!r} {r.stderr!r}")
        log("ROCE_DEVICE in error: " + lines[0])
        # A file whose second device has no address: that device is left out, named in one
        # line; the first is listed.
        del env["ROCE_DEVICE"]
        conf = os.path.join(topo.tmp, "two.conf")
        with open(conf, "w") as f:
            f.write("[device good0]\nport = net_null0\nipv4 = 10.1.0.1\n"
                    "[device bad1]\nport = net_null1\n")
        env["ROCE_CONFIG"] = conf
        r = subprocess.run(["ibv_devices"], env=env, capture_output=True, text=True, timeout=30)
        lines = r.stderr.strip().splitlines()
        if (r.returncode != 0 or "good0" not in r.stdout or "bad1" in r.stdout or
                lines != ["libibverbs (roce): bad1: no address given (ipv4 = ... and/or ipv6 = ...)"]):
            raise RuntimeError(f"a device in error: {r.returncode} {r.stdout!r} {r.stderr!r}")
        log("a device without an address: " + lines[0])
    return 0


def cmd_devinfo(args):
    with Topology() as topo:
        r = subprocess.run(["ip", "netns", "exec", NS[0], "timeout", "60", "ibv_devinfo", "-v"],
                           env=topo.env(0, args.shim), capture_output=True, text=True)
        log(r.stdout + r.stderr)
        want = [
            r"hca_id:\s+roceA", r"transport:\s+InfiniBand \(0\)", r"node_guid:\s+0000:00ff:fe20:0001",
            r"phys_port_cnt:\s+1", r"max_qp_wr:\s+16384", r"max_sge:\s+16", r"max_cqe:\s+1048576",
            r"max_qp_rd_atom:\s+16", r"atomic_cap:\s+ATOMIC_HCA", r"max_srq_wr:\s+16384",
            r"state:\s+PORT_ACTIVE \(4\)", r"max_mtu:\s+4096 \(5\)", r"active_mtu:\s+4096 \(5\)",
            r"port_lid:\s+0", r"link_layer:\s+Ethernet", r"gid_tbl_len:\s+3",
            r"GID\[\s*0\]:\s+fe80::ff:fe20:1, RoCE v2",
            r"GID\[\s*1\]:\s+::ffff:10.200.0.1, RoCE v2", r"GID\[\s*2\]:\s+fd20::1, RoCE v2",
        ]
        missing = [w for w in want if not re.search(w, r.stdout)]
        if r.returncode != 0 or missing:
            raise RuntimeError(f"ibv_devinfo -v (exit {r.returncode}) lacks: {missing}")
    return 0


def cmd_abi(args):
    """Every symbol of Debian's libibverbs (public and IBVERBS_PRIVATE_34) exists in ours at the
    same version and ours exports nothing else, and every ibverbs-utils binary, librdmacm and
    the provider libraries programs link directly (libmlx5, libefa) load against ours with
    BIND_NOW."""
    lib = os.path.join(args.shim, "libibverbs.so.1")
    real = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"

    def exports(path):
        out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True,
                             check=True).stdout
        syms = set()
        for line in out.splitlines():
            f = line.split()
            if len(f) < 6 or "*UND*" in line or not ("DF" in f or "DO" in f):
                continue
            ver = f[-2].strip("()")
            if ver.startswith("IBVERBS_"):
                syms.add((f[-1], ver))
        return syms

    theirs, ours = exports(real), exports(lib)
    missing = sorted(theirs - ours)
    if missing:
        raise RuntimeError(f"missing exports: {missing}")
    extra = sorted(ours - theirs)
    if extra:
        raise RuntimeError(f"unexpected exports: {extra}")
    private = [s for s in theirs if "PRIVATE" in s[1]]
    log(f"{len(theirs)} symbol versions of {real} all exported, nothing else "
        f"({len(private)} of them IBVERBS_PRIVATE_*)")
    bins = sorted(f"/usr/bin/{b}" for b in os.listdir("/usr/bin") if b.startswith("ibv_"))
    bins.append("/usr/lib/x86_64-linux-gnu/librdmacm.so.1")
    # Provider libraries with a direct-verbs API of their own, linked by programs (pyverbs).
    bins += [p for p in ("/usr/lib/x86_64-linux-gnu/libmlx5.so.1",
                         "/usr/lib/x86_64-linux-gnu/libefa.so.1",
                         "/usr/lib/x86_64-linux-gnu/libmlx4.so.1") if os.path.exists(p)]
    env = dict(os.environ, LD_LIBRARY_PATH=args.shim, LD_BIND_NOW="1")
    for b in bins:
        r = subprocess.run(["ldd", "-r", b], env=env, capture_output=True, text=True)
        text = r.stdout + r.stderr
        if r.returncode != 0 or re.search(r"undefined symbol|not found|version .* not", text) or \
                os.path.realpath(lib) not in [os.path.realpath(m) for m in
                                              re.findall(r"libibverbs.so.1 => (\S+)", text)]:
            raise RuntimeError(f"{b} does not load against {lib}:\n{text}")
    log(f"{len(bins)} binaries/libraries load with LD_BIND_NOW=1: {' '.join(bins)}")
    # The library must not pull in a provider or a shared DPDK (see verbs_shim/CMakeLists.txt).
    needed = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True).stdout
    bad = re.findall(r"\[(lib(?:rte_|mlx|efa|ibverbs)[^\]]*)\]", needed)
    if [b for b in bad if b != "libibverbs.so.1"]:
        raise RuntimeError(f"unexpected dependencies: {bad}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True, help="directory holding libibverbs.so.1")
    sub = ap.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("pingpong")
    pp.add_argument("--bin", required=True)
    pp.add_argument("--gid", type=int, default=1)
    pp.add_argument("--sizes", default="4096")
    pp.add_argument("--iters", type=int, default=1000)
    pp.add_argument("--events", action="store_true")
    pp.add_argument("--extra", action="append", default=[])
    pp.add_argument("--mode", choices=["thread", "inline"], default="thread")
    ex = sub.add_parser("example")
    ex.add_argument("--bin", required=True)
    ex.add_argument("--gid", type=int, default=1)
    ex.add_argument("--sizes", default="65536")
    sub.add_parser("devices")
    sub.add_parser("devinfo")
    sub.add_parser("abi")
    args = ap.parse_args()
    args.shim = os.path.abspath(args.shim)
    preload = os.environ.get("ROCE_SANITIZER_PRELOAD")
    if preload:
        # A shim built with the sanitizers (tests/CMakeLists.txt): their runtimes first in the
        # programs that load it, whose own leaks are not ours. Every environment below derives
        # from os.environ, so every program run gets them.
        os.environ["LD_PRELOAD"] = preload
        os.environ["ASAN_OPTIONS"] = "detect_leaks=0"
    if args.cmd != "abi" and os.geteuid() != 0:
        print("SKIP: needs root (network namespaces, veth pairs, raw sockets)")
        return SKIP
    t0 = time.monotonic()
    try:
        rc = {"pingpong": cmd_pingpong, "example": cmd_example, "devices": cmd_devices,
              "devinfo": cmd_devinfo, "abi": cmd_abi}[args.cmd](args)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    log(f"ok ({time.monotonic() - t0:.1f} s)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
