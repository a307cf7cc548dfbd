#!/usr/bin/python3
"""Counts RoCEv2 retransmissions in a capture, per sender.

    retransmissions.py --stack-mac MAC FILE.pcap

A retransmission is a request packet (SEND, WRITE, READ request, atomic) or a READ response
whose (sender MAC, UDP source port, destination QP, opcode class, PSN) was already seen in the
capture: the same PSN sent again, by go-back-N or by a duplicate READ. ACKs are not counted
(re-ACKs are normal). NAKs (AETH syndrome 0x60..0x7f) are counted separately. The UDP source
port is in the key because it is fixed per QP pair: PSNs of different connections do not mix.

Prints one line per sender ("stack" = frames from --stack-mac, "peer" = the rest):
    stack: 1234 packets, 56 retransmitted (50 requests, 6 READ responses), 3 NAKs sent
and exits 0 (2 for an unreadable file). Reads classic pcap only (dumpcap -P). No scapy: fast.
"""
import argparse
import struct
import sys

ROCE_PORT = 4791
READ_RESPONSES = range(0x0D, 0x11)  # READ_RESP_FIRST .. READ_RESP_ONLY
ACK, ATOMIC_ACK = 0x11, 0x12


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError("too short for a pcap file")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError("not a classic pcap file (use dumpcap -P)")
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack_from(endian + "I", data, off + 8)[0]
        yield data[off + 16:off + 16 + incl]
        off += 16 + incl


def parse(frame):
    """(src_mac, sport, opcode, dqp, psn, aeth_syndrome or None) of a RoCEv2 frame, else None."""
    if len(frame) < 14:
        return None
    src = frame[6:12]
    etype = struct.unpack_from("!H", frame, 12)[0]
    l3 = 14
    if etype == 0x8100:
        etype = struct.unpack_from("!H", frame, 16)[0]
        l3 = 18
    if etype == 0x0800:
        if frame[l3 + 9] != 17:
            return None
        udp = l3 + (frame[l3] & 0x0F) * 4
    elif etype == 0x86DD:
        if frame[l3 + 6] != 17:
            return None
        udp = l3 + 40
    else:
        return None
    if len(frame) < udp + 8 + 12:
        return None
    sport, dport = struct.unpack_from("!HH", frame, udp)
    if dport != ROCE_PORT:
        return None
    bth = udp + 8
    opcode = frame[bth]
    dqp = struct.unpack_from("!I", frame, bth + 4)[0] & 0xFFFFFF
    psn = struct.unpack_from("!I", frame, bth + 8)[0] & 0xFFFFFF
    syndrome = None
    if opcode in (0x0D, 0x0F, 0x10, ACK, ATOMIC_ACK) and len(frame) >= bth + 13:
        syndrome = frame[bth + 12]
    return src, sport, opcode, dqp, psn, syndrome


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack-mac", required=True)
    ap.add_argument("pcap")
    a = ap.parse_args()
    stack_mac = bytes.fromhex(a.stack_mac.replace(":", ""))
    stats = {s: {"packets": 0, "requests": 0, "responses": 0, "naks": 0} for s in ("stack", "peer")}
    seen = set()
    try:
        for frame in frames(a.pcap):
            p = parse(frame)
            if p is None:
                continue
            src, sport, opcode, dqp, psn, syndrome = p
            who = "stack" if src == stack_mac else "peer"
            st = stats[who]
            st["packets"] += 1
            if syndrome is not None and syndrome & 0x60 == 0x60:
                st["naks"] += 1
            if opcode in (ACK, ATOMIC_ACK) or opcode >= 0x20:
                continue  # ACKs; UD and CNPs carry no retransmission
            kind = "responses" if opcode in READ_RESPONSES else "requests"
            key = (src, sport, dqp, kind, psn)
            if key in seen:
                st[kind] += 1
            else:
                seen.add(key)
    except (OSError, ValueError) as e:
        print("retransmissions.py: %s: %s" % (a.pcap, e), file=sys.stderr)
        return 2
    for who in ("stack", "peer"):
        st = stats[who]
        print("%s: %d packets, %d retransmitted (%d requests, %d READ responses), %d NAKs sent"
              % (who, st["packets"], st["requests"] + st["responses"], st["requests"],
                 st["responses"], st["naks"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
