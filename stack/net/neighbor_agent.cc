#include "stack/net/neighbor_agent.h"

#include <bit>
#include <cstring>
#include <ctime>

#include "stack/wire/checksum.h"
#include "stack/wire/headers.h"
#include "stack/wire/neighbor_headers.h"
#include "stack/wire/parser.h"

namespace roce {
namespace {

// IEEE 802.3: 60 bytes without the FCS. Linux drivers pad shorter frames with zeros (what a
// peer sees on the wire), so do we; received frames may carry such padding behind the packet.
constexpr uint32_t kMinEthFrame = 60;

// What Linux puts in replies it originates: default TTL / hop limit 64 (RFC 1700 value).
constexpr uint8_t kDefaultTtl = 64;

// Frames are read through copies: any byte offset is fine and no object is assumed to live in
// the caller's buffer.
template <typename T>
T read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void write(uint8_t* p, const T& v) {
  std::memcpy(p, &v, sizeof v);
}

bool mac_is_group(const uint8_t* m) { return m[0] & 0x01; }  // I/G bit: multicast or broadcast
bool mac_is_zero(const Mac& m) { return (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0; }

// Addresses that can never be a neighbour's source (RFC 1122 3.2.1.3, RFC 1112): 0/8 (0.0.0.0
// itself only as the ARP probe sender), 127/8, 224/4 multicast, 240/4 including the limited
// broadcast.
bool ipv4_is_martian(const uint8_t* a) { return a[0] == 0 || a[0] == 127 || a[0] >= 224; }
bool ipv4_is_zero(const uint8_t* a) { return (a[0] | a[1] | a[2] | a[3]) == 0; }

bool ipv6_is_multicast(const uint8_t* a) { return a[0] == 0xFF; }
bool ipv6_is_unspecified(const uint8_t* a) {
  for (int i = 0; i < 16; ++i) {
    if (a[i]) return false;
  }
  return true;
}
bool ipv6_is_loopback(const uint8_t* a) {
  for (int i = 0; i < 15; ++i) {
    if (a[i]) return false;
  }
  return a[15] == 1;
}
bool ipv6_is_link_local(const uint8_t* a) { return a[0] == 0xFE && (a[1] & 0xC0) == 0x80; }
// ff02::1:ffXX:XXXX (RFC 4291 2.7.1), with or without a particular target's low 24 bits.
bool ipv6_is_solicited_node(const uint8_t* a) {
  static constexpr uint8_t kPrefix[13] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF};
  return std::memcmp(a, kPrefix, sizeof kPrefix) == 0;
}
Gid solicited_node(const uint8_t* target) {
  Gid g{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF};
  std::memcpy(g.data() + 13, target + 13, 3);
  return g;
}
// RFC 2464 7: 33:33 followed by the low 32 bits of the IPv6 multicast address.
Mac ipv6_multicast_mac(const uint8_t* group) {
  return Mac{0x33, 0x33, group[12], group[13], group[14], group[15]};
}
constexpr Gid kAllNodes{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};

// Number of leading bits two addresses share: our stand-in for "on the same subnet", since the
// agent knows addresses but not prefix lengths.
int common_prefix_bits(const uint8_t* a, const uint8_t* b, int n) {
  for (int i = 0; i < n; ++i) {
    const uint8_t x = a[i] ^ b[i];
    if (x) return i * 8 + std::countl_zero(x);
  }
  return n * 8;
}

// Where a datagram's record-route and timestamp options start (offsets into its options), and
// whether it is source routed.
struct Ipv4Options {
  int rr = -1;
  int ts = -1;
  bool source_routed = false;
};

// Walks IPv4 options (RFC 791 3.1). False if one is malformed, with the checks Linux makes of a
// datagram it delivers (ip_options_compile): a record route or timestamp given twice, a pointer
// below the first slot, a slot the pointer says is free but that does not fit, a timestamp
// overflow count that would pass 15.
bool scan_ipv4_options(const uint8_t* p, uint32_t n, Ipv4Options* o) {
  uint32_t i = 0;
  while (i < n) {
    const uint8_t type = p[i];
    if (type == wire::kIpOptEnd) break;
    if (type == wire::kIpOptNop) {
      ++i;
      continue;
    }
    if (i + 1 >= n) return false;
    const uint32_t olen = p[i + 1];
    if (olen < 2 || olen > n - i) return false;
    if (type == wire::kIpOptLsrr || type == wire::kIpOptSsrr) o->source_routed = true;
    if (type == wire::kIpOptRr) {
      if (o->rr >= 0 || olen < 3 || p[i + 2] < 4) return false;
      const uint32_t ptr = p[i + 2];
      if (ptr <= olen && ptr + 3 > olen) return false;
      o->rr = static_cast<int>(i);
    } else if (type == wire::kIpOptTs) {
      if (o->ts >= 0 || olen < 4 || p[i + 2] < 5) return false;
      const uint32_t ptr = p[i + 2];
      const uint8_t flag = p[i + 3] & 0x0F;
      if (ptr <= olen) {
        if (ptr + 3 > olen) return false;
        if ((flag == wire::kTsAndAddr || flag == wire::kTsPrespec) && ptr + 7 > olen) return false;
      } else if (flag != wire::kTsPrespec && (p[i + 3] >> 4) == 15) {
        return false;
      }
      o->ts = static_cast<int>(i);
    }
    i += olen;
  }
  return true;
}

// The options of the reply to an echo request with options `p` (scanned into `o`), into `out`
// (40 bytes): RFC 1122 3.2.2.6 says a record route and a timestamp SHOULD be updated to include
// this host and echoed, so the reply's record covers the round trip. As Linux builds them
// (ip_options_echo): record route first, then timestamp, each updated once as the request is
// delivered and once as the reply leaves (our address twice in a record route, as from a Linux
// host), no other option, padded with end-of-list to a multiple of 4. `ours` is the address the
// request came to, is_ours(addr) whether a prespecified address is one of ours, `ts` the time
// (ms since midnight UT). Returns the length, or -1 where Linux sends no reply: room for the
// first update but a partial slot for the second.
template <typename IsOurs>
int echo_ipv4_options(const uint8_t* p, const Ipv4Options& o, const uint8_t* ours, IsOurs&& is_ours,
                      uint32_t ts, uint8_t* out) {
  uint32_t n = 0;
  uint8_t stamp[4];
  for (int k = 0; k < 4; ++k) stamp[k] = static_cast<uint8_t>(ts >> (24 - 8 * k));
  if (o.rr >= 0) {
    uint8_t* d = out + n;
    const uint32_t olen = p[o.rr + 1];
    std::memcpy(d, p + o.rr, olen);
    uint32_t ptr = d[2];
    for (int pass = 0; pass < 2 && ptr <= olen; ++pass) {
      if (ptr + 3 > olen) return -1;  // the first pass has room: scan_ipv4_options checked
      std::memcpy(d + ptr - 1, ours, 4);
      ptr += 4;
    }
    d[2] = static_cast<uint8_t>(ptr);
    n += olen;
  }
  if (o.ts >= 0) {
    uint8_t* d = out + n;
    const uint32_t olen = p[o.ts + 1];
    std::memcpy(d, p + o.ts, olen);
    uint32_t ptr = d[2];
    const uint8_t flag = d[3] & 0x0F;
    if (ptr > olen) {
      // Full: the overflow count goes up (scan_ipv4_options checked it stays below 16). A full
      // prespecified list has nothing left to stamp.
      if (flag != wire::kTsPrespec) d[3] = static_cast<uint8_t>(d[3] + 0x10);
    } else {
      // Delivery (its slots fit: scan_ipv4_options checked).
      bool need_addr = false, need_time = false;
      if (flag == wire::kTsOnly) {
        std::memcpy(d + ptr - 1, stamp, 4);
        need_time = true;
        ptr += 4;
      } else if (flag == wire::kTsAndAddr) {
        std::memcpy(d + ptr - 1, ours, 4);
        std::memcpy(d + ptr + 3, stamp, 4);
        need_addr = need_time = true;
        ptr += 8;
      } else if (flag == wire::kTsPrespec && is_ours(d + ptr - 1)) {
        std::memcpy(d + ptr + 3, stamp, 4);
        need_time = true;
        ptr += 8;
      }  // another flag value: left as it came (Linux too)
      // The reply leaving.
      if (ptr <= olen) {
        if (need_addr) {
          if (ptr + 3 > olen) return -1;
          std::memcpy(d + ptr - 1, ours, 4);
          ptr += 4;
        }
        if (need_time) {
          if (ptr + 3 > olen) return -1;
          if (flag != wire::kTsPrespec) {
            std::memcpy(d + ptr - 1, stamp, 4);
            ptr += 4;
          } else if (ptr + 7 <= olen && is_ours(d + ptr - 1)) {
            std::memcpy(d + ptr + 3, stamp, 4);
            ptr += 8;
          }
        }
      }
      d[2] = static_cast<uint8_t>(ptr);
    }
    n += olen;
  }
  while (n & 3) out[n++] = 0;
  return static_cast<int>(n);
}

}  // namespace

uint32_t ms_since_midnight_utc() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<uint32_t>((t.tv_sec % 86400) * 1000 + t.tv_nsec / 1'000'000);
}

NeighborAgent::NeighborAgent(NeighborTable& table, const Mac& mac, std::vector<Gid> addrs,
                             bool vlan, uint16_t vlan_tci, const NeighborConfig& cfg, SendFn send,
                             ResolvedFn resolved, void* ctx, FailedFn failed)
    : table_(table),
      mac_(mac),
      vlan_(vlan),
      vlan_tci_(vlan_tci),
      cfg_(cfg),
      send_(send),
      resolved_(resolved),
      ctx_(ctx),
      failed_(failed),
      // Not 0 for every stack on the segment: start from the station's MAC.
      ipv4_id_(static_cast<uint16_t>(mac[4] << 8 | mac[5])) {
  for (const Gid& a : addrs) {
    if (wire::gid_is_ipv4_mapped(a.data())) {
      v4_.push_back(Ipv4Addr{a[12], a[13], a[14], a[15]});
    } else {
      v6_.push_back(a);
    }
  }
  // Entries the wire creates go into reserved storage: learning never allocates.
  table_.reserve(cfg_.max_entries);
}

int NeighborAgent::find_v4(const uint8_t* ip) const {
  for (size_t i = 0; i < v4_.size(); ++i) {
    if (std::memcmp(v4_[i].data(), ip, 4) == 0) return static_cast<int>(i);
  }
  return -1;
}

int NeighborAgent::find_v6(const uint8_t* ip) const {
  for (size_t i = 0; i < v6_.size(); ++i) {
    if (std::memcmp(v6_[i].data(), ip, 16) == 0) return static_cast<int>(i);
  }
  return -1;
}

// The groups a host joins (RFC 4861 7.2.1, RFC 4291 2.8): all-nodes and the solicited-node
// address of each of its addresses; plus its unicast addresses.
bool NeighborAgent::v6_dst_is_ours(const uint8_t* ip) const {
  if (std::memcmp(ip, kAllNodes.data(), 16) == 0) return true;
  if (ipv6_is_solicited_node(ip)) {
    for (const Gid& a : v6_) {
      if (std::memcmp(a.data() + 13, ip + 13, 3) == 0) return true;
    }
    return false;
  }
  return find_v6(ip) >= 0;
}

// --- receive -------------------------------------------------------------------------------

void NeighborAgent::on_frame(const uint8_t* frame, uint32_t len, uint64_t now_ns) {
  if (frame == nullptr || len < sizeof(wire::EthHdr)) {
    ++ctr_.malformed;
    return;
  }
  const auto eth = read<wire::EthHdr>(frame);
  uint32_t off = sizeof(wire::EthHdr);
  uint16_t ethertype = eth.ethertype.get();
  if (ethertype == wire::kEtherTypeVlan) {
    if (len < off + sizeof(wire::VlanTag)) {
      ++ctr_.malformed;
      return;
    }
    const auto tag = read<wire::VlanTag>(frame + off);
    // VID 0 is a priority tag: the frame belongs to the untagged network (IEEE 802.1Q 9.6).
    // Another VID is another network, which a host only sees through its own VLAN interface.
    if (tag.vid() != 0 && !(vlan_ && tag.vid() == (vlan_tci_ & 0x0FFF))) {
      ++ctr_.ignored;
      return;
    }
    ethertype = tag.ethertype.get();
    off += sizeof(wire::VlanTag);
  }
  const bool l2_unicast = std::memcmp(eth.dst.data(), mac_.data(), 6) == 0;
  // A frame for another station (a flooding bridge), or a copy of our own (a looping vdev).
  if ((!l2_unicast && !mac_is_group(eth.dst.data())) ||
      std::memcmp(eth.src.data(), mac_.data(), 6) == 0) {
    ++ctr_.ignored;
    return;
  }
  // IEEE 802.3 3.2.3: a source address is never a group address. Nor is it all zeros, an
  // address no station has: an answer to it would reach nobody (see on_arp).
  if (mac_is_group(eth.src.data()) || mac_is_zero(eth.src)) {
    ++ctr_.malformed;
    return;
  }
  switch (ethertype) {
    case wire::kEtherTypeArp:
      on_arp(frame, off, len, now_ns);
      break;
    case wire::kEtherTypeIpv4:
      on_ipv4(frame, off, len, l2_unicast);
      break;
    case wire::kEtherTypeIpv6:
      on_ipv6(frame, off, len, l2_unicast, now_ns);
      break;
    default:
      ++ctr_.ignored;
      break;
  }
}

void NeighborAgent::on_arp(const uint8_t* frame, uint32_t off, uint32_t len, uint64_t now_ns) {
  if (len - off < sizeof(wire::ArpPkt)) {
    ++ctr_.malformed;
    return;
  }
  const auto a = read<wire::ArpPkt>(frame + off);
  const uint16_t op = a.op.get();
  // RFC 826: "Do I have the hardware type in ar$hrd? ... Do I speak the protocol in ar$pro?"
  // Anything but Ethernet / IPv4 request and reply (RARP, InARP, other media) is not ours.
  if (a.htype.get() != wire::kArpHrdEthernet || a.ptype.get() != wire::kEtherTypeIpv4 ||
      (op != wire::kArpOpRequest && op != wire::kArpOpReply)) {
    ++ctr_.ignored;
    return;
  }
  // Ethernet / IPv4 with other address lengths is a broken packet. A station's hardware address
  // is unicast; learning a group or zero one would blackhole the neighbour (RFC 1812 3.3.2
  // refuses the same). 127/8, multicast and broadcast senders are not neighbours either.
  if (a.hlen != 6 || a.plen != 4 || mac_is_group(a.sha.data()) || mac_is_zero(a.sha) ||
      (!ipv4_is_zero(a.spa.data()) && ipv4_is_martian(a.spa.data()))) {
    ++ctr_.malformed;
    return;
  }
  if (a.sha == mac_) {  // our own request, looped back
    ++ctr_.ignored;
    return;
  }
  const bool for_us = find_v4(a.tpa.data()) >= 0;
  if (ipv4_is_zero(a.spa.data())) {
    // An RFC 5227 probe (sender 0.0.0.0): nothing to learn. If it probes one of our addresses we
    // defend it with a reply to the prober, as Linux does: target IP 0.0.0.0, target MAC theirs.
    if (op == wire::kArpOpRequest && for_us) {
      ++ctr_.arp_requests_rx;
      send_arp_reply(a.sha, a.tpa, a.sha, a.spa);
    } else {
      ++ctr_.ignored;
    }
    return;
  }
  if (find_v4(a.spa.data()) >= 0) {
    // Someone else uses one of our addresses (RFC 5227 2.4): never learn it, never answer it.
    ++ctr_.conflicts;
    ++ctr_.ignored;
    return;
  }
  Gid sender;
  wire::ipv4_to_gid(a.spa.data(), sender.data());
  // RFC 826 merge: an existing entry for the sender is updated whatever the message; a new one
  // is created only for a request to us. Replies (solicited ones update the incomplete entry
  // we made) and gratuitous ARP never create entries, as Linux with arp_accept = 0: an
  // unsolicited reply cannot plant an entry.
  const bool create = for_us && op == wire::kArpOpRequest;
  // Only a reply sent to our MAC confirms the sender is reachable; requests and broadcast
  // (gratuitous) replies make a new or changed entry STALE (Linux's arp_process).
  const bool confirmed = op == wire::kArpOpReply && std::memcmp(frame, mac_.data(), 6) == 0;
  learn(sender, a.sha, create, /*override_mac=*/true, confirmed, now_ns);
  if (!for_us) {
    ++ctr_.ignored;
    return;
  }
  if (op == wire::kArpOpRequest) {
    ++ctr_.arp_requests_rx;
    // "Swap hardware and protocol fields ... send the packet to the (new) target hardware
    // address": unicast to the requester's sender MAC.
    send_arp_reply(a.sha, a.tpa, a.sha, a.spa);
  } else {
    ++ctr_.arp_replies_rx;
  }
}

void NeighborAgent::on_ipv4(const uint8_t* frame, uint32_t off, uint32_t len, bool l2_unicast) {
  const uint32_t avail = len - off;
  if (avail < sizeof(wire::Ipv4Hdr)) {
    ++ctr_.malformed;
    return;
  }
  const uint8_t* l3 = frame + off;
  const auto ip = read<wire::Ipv4Hdr>(l3);
  const uint32_t ihl = (ip.version_ihl & 0x0Fu) * 4;
  const uint32_t total = ip.total_length.get();
  // RFC 1122 3.2.1.1-3.2.1.2: version 4, a header that fits, a total length that covers the
  // header and fits the frame (Ethernet padding may follow), and a correct header checksum.
  if ((ip.version_ihl >> 4) != 4 || ihl < sizeof(wire::Ipv4Hdr) || total < ihl || total > avail ||
      wire::inet_checksum(l3, ihl) != 0) {
    ++ctr_.malformed;
    return;
  }
  const uint16_t frag = ip.flags_frag.get();
  // Not ICMP, not to one of our addresses (broadcast and multicast included: never answered), to
  // a group MAC, or a fragment (no reassembly here): not for the agent.
  if (ip.protocol != wire::kIpProtoIcmp || find_v4(ip.dst.data()) < 0 || !l2_unicast ||
      (frag & (wire::kIpv4FlagMf | wire::kIpv4FragOffsetMask))) {
    ++ctr_.ignored;
    return;
  }
  const uint8_t* icmp = l3 + ihl;
  const uint32_t icmp_len = total - ihl;
  const uint8_t* opts = l3 + sizeof(wire::Ipv4Hdr);
  Ipv4Options o;
  if (icmp_len < 8 || wire::inet_checksum(icmp, icmp_len) != 0 ||
      !scan_ipv4_options(opts, ihl - sizeof(wire::Ipv4Hdr), &o) || ipv4_is_martian(ip.src.data())) {
    ++ctr_.malformed;
    return;
  }
  // A source-routed request: Linux drops it by default (accept_source_route = 0), and RFC 1122
  // 3.2.1.8 would otherwise oblige us to reverse the route.
  if (icmp[0] != wire::kIcmpEchoRequest || o.source_routed) {
    ++ctr_.ignored;
    return;
  }
  uint8_t reply_opts[40];
  int opt_len = 0;
  if (o.rr >= 0 || o.ts >= 0) {
    const uint32_t ts = cfg_.wall_clock_ms();
    opt_len = echo_ipv4_options(
        opts, o, ip.dst.data(), [this](const uint8_t* a) { return find_v4(a) >= 0; }, ts,
        reply_opts);
    if (opt_len < 0) {
      ++ctr_.malformed;
      return;
    }
  }
  ++ctr_.echo_requests_rx;
  const uint32_t l2_len = static_cast<uint32_t>(sizeof(wire::EthHdr)) + (vlan_ ? 4u : 0u);
  const uint32_t ip_hdr_len = static_cast<uint32_t>(sizeof(wire::Ipv4Hdr)) + opt_len;
  const uint32_t reply_len = l2_len + ip_hdr_len + icmp_len;
  if (reply_len > kMaxFrame) {
    ++ctr_.too_big;
    return;
  }
  // The reply goes back where the request came from: the sender's MAC, which is the peer on the
  // segment or the router it came through (the agent has no routing table). Like Linux: TOS
  // reflected, DF clear (its ICMP socket uses IP_PMTUDISC_DONT), TTL 64, and of the request's
  // options only a record route and a timestamp, updated (echo_ipv4_options).
  Mac peer;
  std::memcpy(peer.data(), frame + 6, 6);
  const uint32_t l3o = write_eth(peer, wire::kEtherTypeIpv4);
  wire::Ipv4Hdr r{};
  r.version_ihl = static_cast<uint8_t>(0x40 | ip_hdr_len / 4);
  r.tos = ip.tos;
  r.total_length.set(static_cast<uint16_t>(ip_hdr_len + icmp_len));
  r.id.set(ipv4_id_++);
  r.flags_frag.set(0);
  r.ttl = kDefaultTtl;
  r.protocol = wire::kIpProtoIcmp;
  r.src = ip.dst;
  r.dst = ip.src;
  write(&tx_[l3o], r);
  std::memcpy(&tx_[l3o + sizeof r], reply_opts, static_cast<size_t>(opt_len));
  const uint16_t ip_sum = wire::inet_checksum(&tx_[l3o], ip_hdr_len);
  tx_[l3o + 10] = static_cast<uint8_t>(ip_sum >> 8);
  tx_[l3o + 11] = static_cast<uint8_t>(ip_sum);
  // RFC 792: same identifier, sequence number and data; type 0, code 0, checksum recomputed.
  uint8_t* out = &tx_[l3o + ip_hdr_len];
  std::memcpy(out, icmp, icmp_len);
  out[0] = wire::kIcmpEchoReply;
  out[1] = 0;
  out[2] = out[3] = 0;
  const uint16_t sum = wire::inet_checksum(out, icmp_len);
  out[2] = static_cast<uint8_t>(sum >> 8);
  out[3] = static_cast<uint8_t>(sum);
  if (transmit(reply_len)) ++ctr_.echo_replies_tx;
}

void NeighborAgent::on_ipv6(const uint8_t* frame, uint32_t off, uint32_t len, bool l2_unicast,
                            uint64_t now_ns) {
  const uint32_t avail = len - off;
  if (avail < sizeof(wire::Ipv6Hdr)) {
    ++ctr_.malformed;
    return;
  }
  const auto ip = read<wire::Ipv6Hdr>(frame + off);
  const uint32_t plen = ip.payload_length.get();
  // RFC 8200 3 (version, payload that fits; Ethernet padding may follow); RFC 4291 2.5.3 and
  // 2.7: a loopback or multicast source is never valid on a link. Nor is an IPv4-mapped one
  // (RFC 4291 2.5.5.2; Linux drops it): the table keeps IPv4 neighbours under exactly that GID.
  if ((ip.ver_tc_flow.get() >> 28) != 6 || plen > avail - sizeof(wire::Ipv6Hdr) ||
      ipv6_is_multicast(ip.src.data()) || ipv6_is_loopback(ip.src.data()) ||
      wire::gid_is_ipv4_mapped(ip.src.data())) {
    ++ctr_.malformed;
    return;
  }
  // Extension headers (hop-by-hop MLD queries among them), other protocols, other destinations.
  if (ip.next_header != wire::kIpProtoIcmpv6 || !v6_dst_is_ours(ip.dst.data())) {
    ++ctr_.ignored;
    return;
  }
  const uint8_t* icmp = frame + off + sizeof(wire::Ipv6Hdr);
  // RFC 4443 2.3: the checksum covers the pseudo-header and the whole message.
  if (plen < sizeof(wire::IcmpHdr) ||
      wire::icmpv6_checksum(ip.src.data(), ip.dst.data(), icmp, plen) != 0) {
    ++ctr_.malformed;
    return;
  }
  switch (icmp[0]) {
    case wire::kIcmp6EchoRequest:
      on_echo6(frame, off, plen, l2_unicast);
      break;
    case wire::kNdNeighborSolicit:
      on_ns(frame, off, plen, now_ns);
      break;
    case wire::kNdNeighborAdvert:
      on_na(frame, off, plen, now_ns);
      break;
    default:  // router discovery, MLD, redirects, errors: a host without them ignores them
      ++ctr_.ignored;
      break;
  }
}

void NeighborAgent::on_echo6(const uint8_t* frame, uint32_t off, uint32_t icmp_len,
                             bool l2_unicast) {
  const auto ip = read<wire::Ipv6Hdr>(frame + off);
  const uint8_t* icmp = frame + off + sizeof(wire::Ipv6Hdr);
  if (icmp_len < 8 || ipv6_is_unspecified(ip.src.data())) {  // RFC 4443 4.1; no one to answer
    ++ctr_.malformed;
    return;
  }
  // To one of our addresses in a frame to our MAC, or to a group we are in (all-nodes, one of
  // our solicited-node groups: on_ipv6 checked it), which RFC 4443 4.2 says SHOULD be answered,
  // as Linux does (ping -6 ff02::1%dev lists the stack), from a unicast address of ours. A
  // unicast address in a link-layer group frame is not answered (RFC 1122 3.3.6, Linux too).
  const bool to_group = ipv6_is_multicast(ip.dst.data());
  if (to_group ? v6_.empty() : !l2_unicast || find_v6(ip.dst.data()) < 0) {
    ++ctr_.ignored;
    return;
  }
  ++ctr_.echo6_requests_rx;
  const uint32_t l2_len = static_cast<uint32_t>(sizeof(wire::EthHdr)) + (vlan_ ? 4u : 0u);
  const uint32_t reply_len = l2_len + static_cast<uint32_t>(sizeof(wire::Ipv6Hdr)) + icmp_len;
  if (reply_len > kMaxFrame) {
    ++ctr_.too_big;
    return;
  }
  // RFC 4443 4.2. Like Linux: traffic class reflected, hop limit 64. Linux puts a hashed flow
  // label here; 0 is the RFC 6437 "not labelled" value and needs no per-flow state.
  Mac peer;
  std::memcpy(peer.data(), frame + 6, 6);
  const uint32_t l3o = write_eth(peer, wire::kEtherTypeIpv6);
  wire::Ipv6Hdr r{};
  r.ver_tc_flow.set(6u << 28 | static_cast<uint32_t>(ip.traffic_class()) << 20);
  r.payload_length.set(static_cast<uint16_t>(icmp_len));
  r.next_header = wire::kIpProtoIcmpv6;
  r.hop_limit = kDefaultTtl;
  r.src = to_group ? v6_source_for(ip.src.data()) : ip.dst;
  r.dst = ip.src;
  write(&tx_[l3o], r);
  uint8_t* out = &tx_[l3o + sizeof r];
  std::memcpy(out, icmp, icmp_len);
  out[0] = wire::kIcmp6EchoReply;
  out[1] = 0;
  out[2] = out[3] = 0;
  const uint16_t sum = wire::icmpv6_checksum(r.src.data(), r.dst.data(), out, icmp_len);
  out[2] = static_cast<uint8_t>(sum >> 8);
  out[3] = static_cast<uint8_t>(sum);
  if (transmit(reply_len)) ++ctr_.echo6_replies_tx;
}

namespace {

// The options of an ND message (RFC 4861 4.6): the first link-layer address option of `want`.
// False if an option has length 0 or runs past the message (7.1.1 / 7.1.2: the message is
// invalid), or a link-layer address option is not 8 bytes (not an Ethernet address, RFC 2464 8).
bool parse_nd_options(const uint8_t* p, uint32_t n, uint8_t want, const uint8_t** lla) {
  *lla = nullptr;
  uint32_t i = 0;
  while (i < n) {
    if (n - i < 2) return false;
    const uint32_t olen = p[i + 1] * 8u;
    if (olen == 0 || olen > n - i) return false;
    if (p[i] == want) {
      if (olen != sizeof(wire::NdLlaOption)) return false;
      if (*lla == nullptr) *lla = p + i + 2;  // later duplicates are ignored, as Linux does
    }
    i += olen;
  }
  return true;
}

}  // namespace

void NeighborAgent::on_ns(const uint8_t* frame, uint32_t off, uint32_t icmp_len, uint64_t now_ns) {
  const auto ip = read<wire::Ipv6Hdr>(frame + off);
  const uint8_t* icmp = frame + off + sizeof(wire::Ipv6Hdr);
  if (icmp_len < sizeof(wire::NdMsg)) {
    ++ctr_.malformed;
    return;
  }
  const auto ns = read<wire::NdMsg>(icmp);
  const uint8_t* slla = nullptr;
  const bool dad = ipv6_is_unspecified(ip.src.data());
  // RFC 4861 7.1.1: hop limit 255, code 0, at least 24 bytes, target not multicast, options of
  // non-zero length; from the unspecified address only to a solicited-node group and without a
  // source link-layer address option.
  if (ip.hop_limit != wire::kNdHopLimit || ns.icmp.code != 0 ||
      ipv6_is_multicast(ns.target.data()) ||
      !parse_nd_options(icmp + sizeof(wire::NdMsg), icmp_len - sizeof(wire::NdMsg),
                        wire::kNdOptSourceLla, &slla) ||
      (dad && (!ipv6_is_solicited_node(ip.dst.data()) || slla))) {
    ++ctr_.malformed;
    return;
  }
  // 7.2.3: a solicitation for an address that is not ours is silently discarded.
  if (find_v6(ns.target.data()) < 0) {
    ++ctr_.ignored;
    return;
  }
  if (dad) {
    // Someone runs duplicate address detection on our address: defend it (RFC 4862 5.4.3) with
    // an unsolicited advertisement to all-nodes (RFC 4861 7.2.4).
    ++ctr_.ns_rx;
    send_na(ipv6_multicast_mac(kAllNodes.data()), kAllNodes.data(), ns.target.data(), false);
    return;
  }
  if (find_v6(ip.src.data()) >= 0) {  // our own address as another station's source
    ++ctr_.conflicts;
    ++ctr_.ignored;
    return;
  }
  Mac dst_mac;
  if (slla) std::memcpy(dst_mac.data(), slla, 6);
  if (slla && (mac_is_group(dst_mac.data()) || mac_is_zero(dst_mac) || dst_mac == mac_)) {
    ++ctr_.malformed;  // not a station's address (see on_arp)
    return;
  }
  ++ctr_.ns_rx;
  if (slla) {
    // 7.2.3: the source link-layer address option creates or updates the sender's entry (STALE
    // if new or changed).
    learn(ip.src, dst_mac, /*create=*/true, /*override_mac=*/true, /*confirmed=*/false, now_ns);
  } else if (auto known = table_.lookup(ip.src)) {
    dst_mac = *known;  // a unicast reachability probe: the peer left the option out (7.2.2)
  } else {
    // No option and no entry: Linux would resolve the peer before answering; its frame's
    // source address is where the answer belongs on Ethernet.
    std::memcpy(dst_mac.data(), frame + 6, 6);
  }
  // 7.2.4: solicited advertisement, unicast to the solicitation's source.
  send_na(dst_mac, ip.src.data(), ns.target.data(), true);
}

void NeighborAgent::on_na(const uint8_t* frame, uint32_t off, uint32_t icmp_len, uint64_t now_ns) {
  const auto ip = read<wire::Ipv6Hdr>(frame + off);
  const uint8_t* icmp = frame + off + sizeof(wire::Ipv6Hdr);
  if (icmp_len < sizeof(wire::NdMsg)) {
    ++ctr_.malformed;
    return;
  }
  const auto na = read<wire::NdMsg>(icmp);
  const uint8_t* tlla = nullptr;
  // RFC 4861 7.1.2: hop limit 255, code 0, at least 24 bytes, target not multicast, options of
  // non-zero length, and the Solicited flag clear when sent to a multicast address. An
  // IPv4-mapped target is no IPv6 neighbour: learning it would rewrite an ARP entry.
  if (ip.hop_limit != wire::kNdHopLimit || na.icmp.code != 0 ||
      ipv6_is_multicast(na.target.data()) || wire::gid_is_ipv4_mapped(na.target.data()) ||
      !parse_nd_options(icmp + sizeof(wire::NdMsg), icmp_len - sizeof(wire::NdMsg),
                        wire::kNdOptTargetLla, &tlla) ||
      (ipv6_is_multicast(ip.dst.data()) && (na.flags & wire::kNaFlagSolicited))) {
    ++ctr_.malformed;
    return;
  }
  if (find_v6(na.target.data()) >= 0) {  // another station advertises our address (RFC 4862 5.4.4)
    ++ctr_.conflicts;
    ++ctr_.ignored;
    return;
  }
  Mac m{};
  if (tlla) std::memcpy(m.data(), tlla, 6);
  if (tlla && (mac_is_group(m.data()) || mac_is_zero(m) || m == mac_)) {
    ++ctr_.malformed;  // not a station's address (see on_arp)
    return;
  }
  ++ctr_.na_rx;
  // 7.2.5: no entry, no update. A solicited advertisement confirms the entry (REACHABLE), an
  // unsolicited one makes a new or changed address STALE. Without the option the message has no
  // address to record; solicited, it still confirms a usable entry's (a unicast probe's answer
  // may leave the option out, 7.2.4).
  const bool solicited = (na.flags & wire::kNaFlagSolicited) != 0;
  if (tlla == nullptr) {
    NeighborTable::Entry* e = table_.find(na.target);
    if (solicited && e && e->learned_usable()) {
      learn(na.target, e->mac, /*create=*/false, /*override_mac=*/false, /*confirmed=*/true,
            now_ns);
    }
    return;
  }
  learn(na.target, m, /*create=*/false, (na.flags & wire::kNaFlagOverride) != 0, solicited, now_ns);
}

void NeighborAgent::learn(const Gid& ip, const Mac& mac, bool create, bool override_mac,
                          bool confirmed, uint64_t now_ns) {
  using State = NeighborTable::State;
  NeighborTable::Entry* e = table_.find(ip);
  if (e == nullptr) {
    if (!create) return;
    if (table_.entries().size() >= cfg_.max_entries) {
      ++ctr_.table_full;
      return;
    }
    e = &table_.want(ip);
  } else if (e->state == State::kStatic) {
    return;  // configured entries win over anything the wire says
  }
  const bool usable = e->learned_usable();
  const auto stale = [&] {
    e->state = State::kStale;
    e->probes = 0;
    e->next_probe_ns = cfg_.reachable_ns ? now_ns + cfg_.delay_ns : 0;
  };
  if (usable && e->mac != mac && !override_mac) {
    // RFC 4861 7.2.5: a non-override advertisement does not replace a known address; it makes
    // a REACHABLE entry STALE, so that the address in use gets probed.
    if (e->state == State::kReachable) stale();
    return;
  }
  // Became usable, or another address: what the engine's paths must follow.
  const bool changed = !usable || e->mac != mac;
  e->mac = mac;
  if (confirmed) {
    e->state = State::kReachable;
    e->probes = 0;
    e->next_probe_ns = cfg_.reachable_ns ? now_ns + cfg_.reachable_ns : 0;
  } else if (changed) {
    stale();
  }  // unconfirmed and nothing new: the entry keeps its state and its timer
  if (!changed) return;
  ++ctr_.learned;
  ++ctr_.resolved;
  // `e` may dangle once the callback runs (it may add entries): pass a copy.
  const Gid resolved_ip = ip;
  if (resolved_) resolved_(ctx_, resolved_ip);
}

// --- transmit ------------------------------------------------------------------------------

uint32_t NeighborAgent::write_eth(const Mac& dst, uint16_t ethertype) {
  wire::EthHdr eth{};
  eth.dst = dst;
  eth.src = mac_;
  uint32_t off = sizeof eth;
  if (vlan_) {
    eth.ethertype.set(wire::kEtherTypeVlan);
    wire::VlanTag tag{};
    tag.tci.set(vlan_tci_);
    tag.ethertype.set(ethertype);
    write(&tx_[off], tag);
    off += sizeof tag;
  } else {
    eth.ethertype.set(ethertype);
  }
  write(&tx_[0], eth);
  return off;
}

bool NeighborAgent::transmit(uint32_t len) {
  if (len < kMinEthFrame) {
    std::memset(&tx_[len], 0, kMinEthFrame - len);
    len = kMinEthFrame;
  }
  if (send_ == nullptr || !send_(ctx_, tx_.data(), len)) {
    ++ctr_.tx_dropped;
    return false;
  }
  return true;
}

void NeighborAgent::send_arp_reply(const Mac& dst_mac, const Ipv4Addr& our_ip,
                                   const Mac& target_mac, const Ipv4Addr& target_ip) {
  const uint32_t off = write_eth(dst_mac, wire::kEtherTypeArp);
  wire::ArpPkt a{};
  a.htype.set(wire::kArpHrdEthernet);
  a.ptype.set(wire::kEtherTypeIpv4);
  a.hlen = 6;
  a.plen = 4;
  a.op.set(wire::kArpOpReply);
  a.sha = mac_;
  a.spa = our_ip;
  a.tha = target_mac;
  a.tpa = target_ip;
  write(&tx_[off], a);
  if (transmit(off + sizeof a)) ++ctr_.arp_replies_tx;
}

bool NeighborAgent::send_arp_request(const Gid& target, const Mac* unicast) {
  if (v4_.empty()) return false;
  // Linux asks with the address on the target's subnet (inet_select_addr); without prefix
  // lengths, the one sharing the longest prefix with the target, the first on a tie.
  const Ipv4Addr* src = &v4_[0];
  int best = -1;
  for (const Ipv4Addr& a : v4_) {
    const int bits = common_prefix_bits(a.data(), target.data() + 12, 4);
    if (bits > best) {
      best = bits;
      src = &a;
    }
  }
  static constexpr Mac kBroadcast{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const uint32_t off = write_eth(unicast ? *unicast : kBroadcast, wire::kEtherTypeArp);
  wire::ArpPkt a{};
  a.htype.set(wire::kArpHrdEthernet);
  a.ptype.set(wire::kEtherTypeIpv4);
  a.hlen = 6;
  a.plen = 4;
  a.op.set(wire::kArpOpRequest);
  a.sha = mac_;
  a.spa = *src;
  a.tha = Mac{};  // unknown, also in a unicast probe (Linux leaves it zero too)
  std::memcpy(a.tpa.data(), target.data() + 12, 4);
  write(&tx_[off], a);
  if (transmit(off + sizeof a)) ++ctr_.arp_requests_tx;
  return true;
}

const Gid& NeighborAgent::v6_source_for(const uint8_t* peer) const {
  const bool ll_peer = ipv6_is_link_local(peer);
  const Gid* src = &v6_[0];
  int best = -1;
  for (const Gid& a : v6_) {
    if (ipv6_is_link_local(a.data()) != ll_peer) continue;
    const int bits = common_prefix_bits(a.data(), peer, 16);
    if (bits > best) {
      best = bits;
      src = &a;
    }
  }
  return *src;
}

bool NeighborAgent::send_ns(const Gid& target, const Mac* unicast) {
  if (v6_.empty()) return false;
  // RFC 4861 7.2.2 lets any of our addresses be the source.
  const Gid* src = &v6_source_for(target.data());
  // Resolution goes to the target's solicited-node group; a reachability probe to the target.
  const Gid dst_ip = unicast ? target : solicited_node(target.data());
  const Mac dst_mac = unicast ? *unicast : ipv6_multicast_mac(dst_ip.data());
  const uint32_t l3o = write_eth(dst_mac, wire::kEtherTypeIpv6);
  constexpr uint32_t kBodyLen = sizeof(wire::NdMsg) + sizeof(wire::NdLlaOption);
  wire::Ipv6Hdr ip{};
  ip.ver_tc_flow.set(6u << 28);
  ip.payload_length.set(kBodyLen);
  ip.next_header = wire::kIpProtoIcmpv6;
  ip.hop_limit = cfg_.hop_limit;
  ip.src = *src;
  ip.dst = dst_ip;
  write(&tx_[l3o], ip);
  wire::NdMsg ns{};
  ns.icmp.type = wire::kNdNeighborSolicit;
  ns.target = target;
  // The source link-layer address option, so the target can answer without asking back.
  const wire::NdLlaOption opt{wire::kNdOptSourceLla, 1, mac_};
  uint8_t* body = &tx_[l3o + sizeof ip];
  write(body, ns);
  write(body + sizeof ns, opt);
  const uint16_t sum = wire::icmpv6_checksum(ip.src.data(), ip.dst.data(), body, kBodyLen);
  body[2] = static_cast<uint8_t>(sum >> 8);
  body[3] = static_cast<uint8_t>(sum);
  if (transmit(l3o + sizeof ip + kBodyLen)) ++ctr_.ns_tx;
  return true;
}

void NeighborAgent::send_na(const Mac& dst_mac, const uint8_t* dst_ip, const uint8_t* target,
                            bool solicited) {
  const uint32_t l3o = write_eth(dst_mac, wire::kEtherTypeIpv6);
  constexpr uint32_t kBodyLen = sizeof(wire::NdMsg) + sizeof(wire::NdLlaOption);
  wire::Ipv6Hdr ip{};
  ip.ver_tc_flow.set(6u << 28);
  ip.payload_length.set(kBodyLen);
  ip.next_header = wire::kIpProtoIcmpv6;
  ip.hop_limit = cfg_.hop_limit;
  std::memcpy(ip.src.data(), target, 16);  // the address asked about is ours: answer from it
  std::memcpy(ip.dst.data(), dst_ip, 16);
  write(&tx_[l3o], ip);
  wire::NdMsg na{};
  na.icmp.type = wire::kNdNeighborAdvert;
  // 7.2.4: Override set (the address is ours, not an anycast or proxied one), Router clear.
  na.flags = static_cast<uint8_t>(wire::kNaFlagOverride | (solicited ? wire::kNaFlagSolicited : 0));
  std::memcpy(na.target.data(), target, 16);
  const wire::NdLlaOption opt{wire::kNdOptTargetLla, 1, mac_};
  uint8_t* body = &tx_[l3o + sizeof ip];
  write(body, na);
  write(body + sizeof na, opt);
  const uint16_t sum = wire::icmpv6_checksum(ip.src.data(), ip.dst.data(), body, kBodyLen);
  body[2] = static_cast<uint8_t>(sum >> 8);
  body[3] = static_cast<uint8_t>(sum);
  if (transmit(l3o + sizeof ip + kBodyLen)) ++ctr_.na_tx;
}

// --- timers --------------------------------------------------------------------------------

uint64_t NeighborAgent::tick(uint64_t now_ns) {
  uint64_t next = UINT64_MAX;
  const auto entries = table_.entries();  // a span: the entries change, their number not
  for (size_t i = 0; i < entries.size(); ++i) {
    NeighborTable::Entry& e = entries[i];
    const bool incomplete = e.state == NeighborTable::State::kIncomplete;
    // Incomplete entries are being resolved (RFC 4861 7.3.2 INCOMPLETE); reachable ones past
    // their reachable time, and stale ones after the first-probe delay (7.3.3 DELAY, counted
    // from when they became stale rather than from their first use: the engine's paths hold
    // the address itself), are probed by unicast (PROBE) while they remain usable.
    if (!incomplete && !(e.learned_usable() && cfg_.reachable_ns)) continue;
    if (now_ns >= e.next_probe_ns) {
      if (e.probes >= cfg_.max_probes) {
        // 7.3.3: after MAX_*CAST_SOLICIT unanswered solicitations, each RetransTimer apart.
        e.state = NeighborTable::State::kFailed;
        ++ctr_.failed;
        if (failed_) failed_(ctx_, e.ip);
        continue;
      }
      const bool v4 = wire::gid_is_ipv4_mapped(e.ip.data());
      const Mac* unicast = incomplete ? nullptr : &e.mac;
      const bool sent = v4 ? send_arp_request(e.ip, unicast) : send_ns(e.ip, unicast);
      if (!sent) {  // no address of that family to ask from: it can never resolve
        e.state = NeighborTable::State::kFailed;
        ++ctr_.failed;
        if (failed_) failed_(ctx_, e.ip);
        continue;
      }
      ++e.probes;
      e.next_probe_ns = now_ns + cfg_.probe_interval_ns;
    }
    if (e.next_probe_ns < next) next = e.next_probe_ns;
  }
  return next;
}

}  // namespace roce
