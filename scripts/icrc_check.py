#!/usr/bin/python3
"""Independent ICRC check of every RoCEv2 frame in pcap / pcapng captures.

    scripts/icrc_check.py [-v] FILE...

For each Ethernet / [802.1Q] / IPv4 or IPv6 / UDP (dst port 4791) frame it recomputes the
invariant CRC per IBA vol. 1 annex A17.4.1 with its own code and compares it with the last four
bytes of the UDP payload; IPv4 frames are also checked with scapy.contrib.roce's compute_icrc
(scapy does not do IPv6). Prints one line per file and exits 0 if every frame passes, 1 if any
fails, 2 on bad usage or an unreadable file. Independent of the stack's C++ ICRC code on purpose.

The ICRC (A17.4.1, RoCEv2): CRC-32 (IEEE 802.3, reflected, as zlib.crc32) over
  8 bytes of 0xFF (in place of the LRH)
  + the IP header with the fields routers change masked to ones:
      IPv4: type of service (DSCP+ECN), TTL, header checksum
      IPv6: traffic class, flow label, hop limit
  + the UDP header with its checksum masked to ones
  + the BTH with byte 4 (FECN, BECN, reserved) masked to ones
  + the rest of the transport packet up to the ICRC (extension headers, payload, pad);
stored on the wire least significant byte first.
"""
import os
import struct
import sys
import zlib

ROCE_PORT = 4791


def parse(frame):
    """Returns (family, l3_offset, udp_offset, udp_end) for a RoCEv2 frame, else None."""
    if len(frame) < 14:
        return None
    off = 12
    ethertype = struct.unpack_from("!H", frame, off)[0]
    off += 2
    if ethertype == 0x8100:
        if len(frame) < off + 4:
            return None
        ethertype = struct.unpack_from("!H", frame, off + 2)[0]
        off += 4
    l3 = off
    if ethertype == 0x0800:
        if len(frame) < l3 + 20:
            return None
        ihl = (frame[l3] & 0x0F) * 4
        total = struct.unpack_from("!H", frame, l3 + 2)[0]
        if frame[l3 + 9] != 17 or ihl < 20:
            return None
        udp, end, family = l3 + ihl, l3 + total, 4
    elif ethertype == 0x86DD:
        if len(frame) < l3 + 40:
            return None
        payload_len = struct.unpack_from("!H", frame, l3 + 4)[0]
        if frame[l3 + 6] != 17:
            return None
        udp, end, family = l3 + 40, l3 + 40 + payload_len, 6
    else:
        return None
    if len(frame) < udp + 8 or struct.unpack_from("!H", frame, udp + 2)[0] != ROCE_PORT:
        return None
    udp_len = struct.unpack_from("!H", frame, udp + 4)[0]
    udp_end = udp + udp_len
    if udp_end > end or udp_end > len(frame):
        raise ValueError("UDP length %d runs past the %s packet (frame of %d bytes)"
                         % (udp_len, "IP", len(frame)))
    if udp_len < 8 + 12 + 4:
        raise ValueError("UDP payload of %d bytes is shorter than BTH + ICRC" % (udp_len - 8))
    return family, l3, udp, udp_end


def icrc_a17(frame, family, l3, udp, udp_end):
    """Our own A17.4.1 computation: returns the four ICRC bytes as they go on the wire."""
    ip = bytearray(frame[l3:udp])
    if family == 4:
        ip[1] = 0xFF                  # type of service
        ip[8] = 0xFF                  # TTL
        ip[10:12] = b"\xff\xff"       # header checksum
    else:
        ip[0] |= 0x0F                 # traffic class (high nibble) ...
        ip[1:4] = b"\xff\xff\xff"     # ... traffic class (low nibble) + flow label
        ip[7] = 0xFF                  # hop limit
    udp_hdr = bytearray(frame[udp:udp + 8])
    udp_hdr[6:8] = b"\xff\xff"        # UDP checksum
    bth = bytearray(frame[udp + 8:udp + 20])
    bth[4] = 0xFF                     # FECN, BECN, reserved
    rest = frame[udp + 20:udp_end - 4]
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp_hdr) + bytes(bth) + rest) & 0xFFFFFFFF
    return struct.pack("<I", crc)


def icrc_scapy(frame):
    """scapy.contrib.roce's ICRC of an IPv4 RoCEv2 frame (wire byte order)."""
    from scapy.contrib.roce import BTH
    from scapy.layers.l2 import Ether
    pkt = Ether(bytes(frame))
    bth = pkt[BTH]
    return bth.compute_icrc(None)


PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<",  # us, ns
               b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}


def pcap_problem(path):
    """Why a classic pcap file cannot be read through, else None: scapy takes a record cut
    short for the end of the file, or reads what follows as its data. pcapng is left to scapy."""
    with open(path, "rb") as f:
        head = f.read(24)
        endian = PCAP_MAGICS.get(head[:4])
        if endian is None or len(head) < 24:
            return None
        linktype = struct.unpack_from(endian + "I", head, 20)[0] & 0x0FFFFFFF
        if linktype != 1:
            return "link type %d is not Ethernet" % linktype
        size = os.fstat(f.fileno()).st_size
        pos, index = 24, 0
        while pos < size:
            index += 1
            rec = f.read(16)
            if len(rec) < 16:
                return "frame %d: record header cut short (%d of 16 bytes)" % (index, len(rec))
            caplen = struct.unpack_from(endian + "I", rec, 8)[0]
            if caplen > 262144:
                return "frame %d: capture length %d is beyond any snap length" % (index, caplen)
            if pos + 16 + caplen > size:
                return "frame %d: cut short (%d of %d bytes)" % (index, size - pos - 16, caplen)
            pos += 16 + caplen
            f.seek(pos)
    return None


def check_file(path, verbose):
    from scapy.utils import PcapReader
    counts = {"frames": 0, "roce": 0, "v4": 0, "v6": 0, "bad": 0, "scapy": 0}
    try:
        problem = pcap_problem(path)
    except OSError as e:
        problem = str(e)
    if problem:
        print("%s: cannot read: %s" % (path, problem))
        return None
    try:
        reader = PcapReader(path)
    except (OSError, Exception) as e:  # scapy raises Scapy_Exception for non-captures
        print("%s: cannot read: %s" % (path, e))
        return None
    with reader:
        for index, pkt in enumerate(reader, 1):  # from 1, as tshark and roce-pcap number them
            counts["frames"] += 1
            frame = bytes(pkt)
            try:
                parsed = parse(frame)
            except ValueError as e:
                counts["roce"] += 1
                counts["bad"] += 1
                print("FAIL %s frame %d: %s" % (path, index, e))
                continue
            if parsed is None:
                continue
            family, l3, udp, udp_end = parsed
            counts["roce"] += 1
            counts["v4" if family == 4 else "v6"] += 1
            wire = frame[udp_end - 4:udp_end]
            ours = icrc_a17(frame, family, l3, udp, udp_end)
            problems = []
            if ours != wire:
                problems.append("ICRC on the wire %s, A17.4.1 gives %s" % (wire.hex(), ours.hex()))
            if family == 4:
                theirs = icrc_scapy(frame)
                counts["scapy"] += 1
                if theirs != wire:
                    problems.append("scapy.contrib.roce gives %s" % theirs.hex())
            if problems:
                counts["bad"] += 1
                print("FAIL %s frame %d (opcode 0x%02x): %s"
                      % (path, index, frame[udp + 8], "; ".join(problems)))
            elif verbose:
                print("ok   %s frame %d IPv%d opcode 0x%02x icrc %s"
                      % (path, index, family, frame[udp + 8], wire.hex()))
    print("%s: %d frames, %d RoCEv2 (%d IPv4, %d IPv6; %d also checked by scapy), %d bad ICRC"
          % (path, counts["frames"], counts["roce"], counts["v4"], counts["v6"], counts["scapy"],
             counts["bad"]))
    return counts


def main(argv):
    args = [a for a in argv[1:] if a != "-v"]
    verbose = len(args) != len(argv) - 1
    if not args or any(a.startswith("-") for a in args):
        sys.stderr.write("usage: icrc_check.py [-v] FILE...\n")
        return 2
    try:
        import scapy.contrib.roce  # noqa: F401
    except ImportError:
        sys.stderr.write("icrc_check: needs scapy (Debian: python3-scapy; run /usr/bin/python3)\n")
        return 2
    bad = roce = 0
    for path in args:
        counts = check_file(path, verbose)
        if counts is None:
            return 2
        bad += counts["bad"]
        roce += counts["roce"]
    print("total: %d RoCEv2 frames, %d bad" % (roce, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
