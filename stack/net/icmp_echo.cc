// ICMP echo (RFC 792) and ICMPv6 echo (RFC 4443 4.1, 4.2): `ping` and `ping -6` answered as a
// Linux host answers them, IPv4 record-route and timestamp options included (RFC 1122 3.2.2.6).
#include <cstring>

#include "stack/net/neighbor_agent.h"
#include "stack/net/neighbor_frames.h"
#include "stack/wire/checksum.h"
#include "stack/wire/headers.h"
#include "stack/wire/neighbor_headers.h"

namespace roce {

using neighbor::ipv4_is_martian;
using neighbor::ipv6_is_multicast;
using neighbor::ipv6_is_unspecified;
using neighbor::kDefaultTtl;
using neighbor::read;
using neighbor::write;

namespace {

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

}  // namespace roce
