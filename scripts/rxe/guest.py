#!/usr/bin/python3
"""Runs one command in the rxe guest through its agent (scripts/rxe/guest/rxe-agent).

    guest.py [--timeout S] [--connect S] HOST PORT COMMAND

Connects to the agent at HOST:PORT (retrying for --connect seconds while the guest boots),
sends COMMAND, copies the guest's output to stdout line by line as it comes, and exits with
the command's status inside the guest ("RXE-AGENT-EXIT n"). Exit 124 when --timeout passes,
125 when the connection ends without a status. Run it inside the test's network namespace.
"""
import argparse
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--connect", type=float, default=10)
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("command")
    a = ap.parse_args()
    deadline = time.monotonic() + a.connect
    while True:
        try:
            s = socket.create_connection((a.host, a.port), timeout=2)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                print(f"guest.py: cannot reach the agent at {a.host}:{a.port}: {e}", file=sys.stderr)
                return 125
            time.sleep(0.2)
    s.sendall(a.command.encode() + b"\n")
    end = time.monotonic() + a.timeout
    buf = b""
    while True:
        left = end - time.monotonic()
        if left <= 0:
            print(f"guest.py: timeout after {a.timeout:g} s: {a.command}", file=sys.stderr)
            return 124
        s.settimeout(min(left, 1.0))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode(errors="replace").rstrip("\r")
            if text.startswith("RXE-AGENT-EXIT "):
                return int(text.split()[1])
            print(text, flush=True)
    if buf:
        print(buf.decode(errors="replace"), flush=True)
    print("guest.py: the agent closed the connection without a status", file=sys.stderr)
    return 125


if __name__ == "__main__":
    sys.exit(main())
