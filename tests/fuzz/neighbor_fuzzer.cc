// libFuzzer target for the neighbour agent (ARP, IPv6 neighbour discovery, ICMP / ICMPv6 echo:
// stack/net/neighbor_agent.*), the one part of the stack besides the RoCE parser that reads
// whole frames from the wire.
//
// The input is a program. Its first two bytes configure the agent:
//   byte 0: bit 0 an 802.1Q tag (TCI from byte 1, VID at least 1); bit 1 a table of 1-8 entries
//           (from byte 1) instead of 1024; bit 2 no reachability re-probing; bits 3-4 our
//           addresses: both families, IPv4 only, IPv6 only.
// Then steps, each led by one byte whose low three bits say what it is:
//   0  a frame: two bytes of length (little-endian, cut to what is left), then the frame. Its
//      IPv4 header, ICMP and ICMPv6 checksums are recomputed where the lengths allow, so that a
//      mutation anywhere in a valid frame reaches the code behind them; bit 3 of the step byte
//      keeps the checksums as given instead. Bit 4 pads the frame to 60 bytes.
//   1  time passes (next byte x 50 ms) and the agent's timer runs.
//   2  the engine wants a neighbour (next byte picks an address), then the timer runs.
//   3  a static entry (next byte picks the address and MAC).
//   4  the transmit path starts or stops refusing frames.
//   5-7 a frame, as 0.
//
// Beyond "no crash, no sanitizer report", after every step: each frame landed in exactly one
// receive counter; every frame sent is one the agent may send (checked field by field here,
// independently of its code: our source MAC and address, the configured tag, valid checksums,
// 60 bytes at least); an answer to a frame is at most one frame; the wire never grows the table
// past its limit; reachable entries hold station MACs and static ones never change; every
// resolution callback names an entry that is reachable.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../support/inet_frames.h"
#include "stack/net/neighbor_agent.h"

namespace {

using roce::Gid;
using roce::Mac;
using roce::NeighborAgent;
using roce::NeighborConfig;
using roce::NeighborTable;
using namespace roce::test;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "neighbour agent invariant broken: %s\n", what);
  std::abort();
}

const Mac kUs{0x02, 0, 0, 0, 0, 0x01};

// Addresses a step can name: peers on our subnets, an off-subnet one, and a few odd ones
// (multicast, our own), so that resolution and static entries meet every case.
const Gid kPicks[] = {
    v4(10, 0, 0, 2), v4(10, 0, 0, 9), v4(192, 168, 7, 9), v4(172, 16, 0, 1), v4(224, 0, 0, 1),
    v4(10, 0, 0, 1), v6(0xfd00, 2),   v6(0xfd00, 9),      v6(0xfe80, 2),     v6(0xfe80, 9),
    v6(0xff02, 1),   v6(0xfd00, 1),   v6(0x2001, 0x1234),
};
const Mac kMacs[] = {
    {0x02, 0, 0, 0, 0, 0x02},
    {0x02, 0, 0, 0, 0, 0x03},
    {0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc},
};

// --- an independent check of what the agent sends ---------------------------------------------

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

struct Setup {
  bool vlan = false;
  uint16_t tci = 0;
  std::vector<Gid> addrs;
  bool has_v4 = false, has_v6 = false;
};

bool ours(const Setup& s, const uint8_t* ip, bool is_v4) {
  for (const Gid& a : s.addrs) {
    if (is_v4 ? std::memcmp(a.data() + 12, ip, 4) == 0 && a[10] == 0xff
              : std::memcmp(a.data(), ip, 16) == 0) {
      return true;
    }
  }
  return false;
}

void check_sent(const Setup& s, const std::vector<uint8_t>& f) {
  if (f.size() < 60) fail("a frame sent shorter than 60 bytes");
  if (f.size() > NeighborAgent::kMaxFrame) fail("a frame sent longer than kMaxFrame");
  if (std::memcmp(f.data() + 6, kUs.data(), 6) != 0) fail("a frame sent from another MAC");
  if (std::all_of(f.begin(), f.begin() + 6, [](uint8_t b) { return b == 0; })) {
    fail("a frame sent to the zero MAC");
  }
  size_t off = 12;
  if (s.vlan) {
    if (be16(&f[12]) != 0x8100 || be16(&f[14]) != s.tci) fail("a frame sent without our tag");
    off = 16;
  }
  const uint16_t type = be16(&f[off]);
  const uint8_t* l3 = &f[off + 2];
  const size_t room = f.size() - off - 2;
  if (type == 0x0806) {
    if (!s.has_v4) fail("ARP sent without an IPv4 address");
    if (room < 28 || be16(l3) != 1 || be16(l3 + 2) != 0x0800 || l3[4] != 6 || l3[5] != 4) {
      fail("a malformed ARP frame sent");
    }
    const uint16_t op = be16(l3 + 6);
    if (op != 1 && op != 2) fail("an ARP frame sent with a bad operation");
    if (std::memcmp(l3 + 8, kUs.data(), 6) != 0) fail("ARP sent with another sender MAC");
    if (!ours(s, l3 + 14, true)) fail("ARP sent with a sender address not ours");
    return;
  }
  if (type == 0x0800) {
    const size_t ihl = room < 20 ? 0 : (l3[0] & 15) * 4u;
    if (room < 20 || (l3[0] >> 4) != 4 || ihl < 20 || l3[9] != 1) {
      fail("a sent IPv4 frame is not ICMP");
    }
    const size_t total = be16(l3 + 2);
    if (total < ihl + 8 || total > room) fail("a sent IPv4 frame's length does not fit");
    if (!ipv4_header_ok(f, off + 2)) fail("a sent IPv4 header checksum is wrong");
    if (!icmp4_ok(f, off + 2)) fail("a sent ICMP checksum is wrong");
    if (!ours(s, l3 + 12, true)) fail("ICMP sent from an address not ours");
    if (l3[ihl] != 0) fail("a sent ICMP message is not an echo reply");
    // Options: only a record route and a timestamp, each once, whole, then end-of-list bytes.
    bool rr = false, ts = false;
    for (size_t i = 20; i < ihl;) {
      const uint8_t o = l3[i];
      if (o == 0) {
        for (; i < ihl; ++i) {
          if (l3[i] != 0) fail("a sent IPv4 option follows the end of the list");
        }
        break;
      }
      if ((o != 7 && o != 68) || (o == 7 ? rr : ts) || i + 1 >= ihl) {
        fail("a sent IPv4 option is not a record route or timestamp echoed once");
      }
      (o == 7 ? rr : ts) = true;
      const size_t len = l3[i + 1];
      if (len < 4 - (o == 7) || i + len > ihl || l3[i + 2] < 4 + (o == 68)) {
        fail("a sent IPv4 option is malformed");
      }
      i += len;
    }
    return;
  }
  if (type == 0x86dd) {
    if (room < 44 || (l3[0] >> 4) != 6 || l3[6] != 58) fail("a sent IPv6 frame is not ICMPv6");
    const size_t plen = be16(l3 + 4);
    if (plen < 4 || 40 + plen > room) fail("a sent IPv6 frame's length does not fit");
    if (!icmp6_ok(f, off + 2)) fail("a sent ICMPv6 checksum is wrong");
    const uint8_t t = l3[40];
    if (t != 129 && t != 135 && t != 136) fail("a sent ICMPv6 type is not ours to send");
    if (!ours(s, l3 + 8, false)) fail("ICMPv6 sent from an address not ours");
    if ((t == 135 || t == 136) && l3[7] != 255) fail("ND sent with a hop limit other than 255");
    return;
  }
  fail("a frame sent with an EtherType the agent does not speak");
}

// --- checksums fixed in a fuzzed frame, so that deeper code runs --------------------------------

void fix_checksums(std::vector<uint8_t>& f) {
  const size_t l3 = f.size() >= 18 && be16(&f[12]) == 0x8100 ? 18 : 14;
  if (f.size() < l3) return;
  const uint16_t type = be16(&f[l3 - 2]);
  if (type == 0x0800) fix_ipv4(f, l3);
  if (type == 0x86dd && f.size() > l3 + 6 && f[l3 + 6] == 58) fix_icmp6(f, l3);
}

// --- the program -------------------------------------------------------------------------------

struct Sink {
  std::vector<std::vector<uint8_t>> sent;
  bool refuse = false;
  NeighborTable* table = nullptr;
  static bool send(void* ctx, const uint8_t* f, uint32_t n) {
    auto* s = static_cast<Sink*>(ctx);
    if (s->refuse) return false;
    s->sent.emplace_back(f, f + n);
    return true;
  }
  static void on_resolved(void* ctx, const Gid& ip) {
    auto* s = static_cast<Sink*>(ctx);
    if (!s->table->lookup(ip)) fail("a resolution callback for an entry that is not usable");
  }
};

uint64_t rx_total(const roce::NeighborCounters& c) {
  return c.arp_requests_rx + c.arp_replies_rx + c.ns_rx + c.na_rx + c.echo_requests_rx +
         c.echo6_requests_rx + c.ignored + c.malformed;
}
uint64_t tx_total(const roce::NeighborCounters& c) {
  return c.arp_replies_tx + c.arp_requests_tx + c.na_tx + c.ns_tx + c.echo_replies_tx +
         c.echo6_replies_tx;
}

struct Static {
  Gid ip;
  Mac mac;
};

void check_table(const NeighborTable& t, const std::vector<Static>& statics) {
  for (const auto& e : t.entries()) {
    if (e.learned_usable() && ((e.mac[0] & 1) || e.mac == Mac{} || e.mac == kUs)) {
      fail("a usable learned entry holds a group, zero or our own MAC");
    }
  }
  for (const Static& s : statics) {
    auto m = t.lookup(s.ip);
    if (!m || *m != s.mac) fail("a static entry changed");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 65536) return 0;
  Setup s;
  NeighborConfig cfg;
  const uint8_t c0 = data[0], c1 = data[1];
  s.vlan = c0 & 1;
  s.tci = static_cast<uint16_t>((c1 << 4 | c1) & 0xEFFF);  // PCP and VID from the byte, DEI 0
  if ((s.tci & 0x0FFF) == 0) s.tci |= 1;
  if (c0 & 2) cfg.max_entries = 1 + (c1 & 7);
  if (c0 & 4) cfg.reachable_ns = 0;
  const unsigned families = (c0 >> 3) & 3;
  if (families != 2) s.addrs.insert(s.addrs.end(), {v4(10, 0, 0, 1), v4(192, 168, 7, 1)});
  if (families != 1) s.addrs.insert(s.addrs.end(), {v6(0xfd00, 1), v6(0xfe80, 1)});
  for (const Gid& a : s.addrs) (a[10] == 0xff ? s.has_v4 : s.has_v6) = true;

  NeighborTable table;
  Sink sink;
  sink.table = &table;
  NeighborAgent agent(table, kUs, s.addrs, s.vlan, s.tci, cfg, &Sink::send, &Sink::on_resolved,
                      &sink);
  std::vector<Static> statics;
  uint64_t now = 0;
  size_t pos = 2;
  auto next = [&]() -> uint8_t { return pos < size ? data[pos++] : 0; };

  while (pos < size) {
    const uint8_t step = next();
    const unsigned kind = step & 7;
    const roce::NeighborCounters before = agent.counters();
    const size_t entries_before = table.entries().size();
    sink.sent.clear();
    if (kind == 0 || kind >= 5) {
      size_t len = next();
      len |= size_t{next()} << 8;
      len = std::min(len, size - pos);
      std::vector<uint8_t> f(data + pos, data + pos + len);
      pos += len;
      if ((step & 0x10) && f.size() < 60) f.resize(60, 0);
      if (!(step & 0x08)) fix_checksums(f);
      // An exact-size heap copy (empty: no buffer at all), so that ASan sees any over-read.
      agent.on_frame(f.empty() ? nullptr : f.data(), static_cast<uint32_t>(f.size()), now);
      if (rx_total(agent.counters()) != rx_total(before) + 1) {
        fail("a frame did not land in exactly one receive counter");
      }
      if (sink.sent.size() > 1) fail("one frame was answered with more than one");
      if (table.entries().size() > entries_before && table.entries().size() > cfg.max_entries) {
        fail("the wire grew the table past max_entries");
      }
    } else if (kind == 1) {
      now += uint64_t{next()} * 50'000'000;
      agent.tick(now);
      if (rx_total(agent.counters()) != rx_total(before)) fail("the timer counted a frame");
    } else if (kind == 2) {
      table.want(kPicks[next() % std::size(kPicks)]);
      agent.tick(now);
    } else if (kind == 3) {
      const uint8_t b = next();
      const Static st{kPicks[b % std::size(kPicks)], kMacs[(b >> 4) % std::size(kMacs)]};
      table.add_static(st.ip, st.mac);
      auto it = std::find_if(statics.begin(), statics.end(),
                             [&](const Static& o) { return o.ip == st.ip; });
      if (it != statics.end()) {
        it->mac = st.mac;
      } else {
        statics.push_back(st);
      }
    } else if (kind == 4) {
      sink.refuse = !sink.refuse;
    }
    for (const auto& f : sink.sent) check_sent(s, f);
    const roce::NeighborCounters& after = agent.counters();
    if (tx_total(after) - tx_total(before) != sink.sent.size()) {
      fail("the transmit counters do not match the frames sent");
    }
    if (after.tx_dropped - before.tx_dropped != 0 && !sink.refuse) {
      fail("a frame counted as dropped that the port took");
    }
    check_table(table, statics);
  }
  return 0;
}
