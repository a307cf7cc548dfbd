// IPv6 Neighbor Discovery (RFC 4861): answering solicitations for our addresses (duplicate
// address detection included, RFC 4862 5.4), learning from advertisements, and the
// solicitations that resolve and probe IPv6 neighbours.
#include <cstring>

#include "stack/net/neighbor_agent.h"
#include "stack/net/neighbor_frames.h"
#include "stack/wire/checksum.h"
#include "stack/wire/headers.h"
#include "stack/wire/neighbor_headers.h"
#include "stack/wire/parser.h"

namespace roce {

using neighbor::ipv6_is_multicast;
using neighbor::ipv6_is_solicited_node;
using neighbor::ipv6_is_unspecified;
using neighbor::ipv6_multicast_mac;
using neighbor::kAllNodes;
using neighbor::mac_is_group;
using neighbor::mac_is_zero;
using neighbor::read;
using neighbor::solicited_node;
using neighbor::write;

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

// An ND message and its one link-layer address option in an IPv6 header from `src` to `dst`,
// written at `l3` with the ICMPv6 checksum (RFC 4443 2.3). Returns the bytes written.
uint32_t write_nd(uint8_t* l3, const uint8_t* src, const uint8_t* dst, uint8_t hop_limit,
                  const wire::NdMsg& msg, const wire::NdLlaOption& opt) {
  constexpr uint32_t kBodyLen = sizeof(wire::NdMsg) + sizeof(wire::NdLlaOption);
  wire::Ipv6Hdr ip{};
  ip.ver_tc_flow.set(6u << 28);
  ip.payload_length.set(kBodyLen);
  ip.next_header = wire::kIpProtoIcmpv6;
  ip.hop_limit = hop_limit;
  std::memcpy(ip.src.data(), src, 16);
  std::memcpy(ip.dst.data(), dst, 16);
  write(l3, ip);
  uint8_t* body = l3 + sizeof ip;
  write(body, msg);
  write(body + sizeof msg, opt);
  const uint16_t sum = wire::icmpv6_checksum(src, dst, body, kBodyLen);
  body[2] = static_cast<uint8_t>(sum >> 8);
  body[3] = static_cast<uint8_t>(sum);
  return sizeof ip + kBodyLen;
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

bool NeighborAgent::send_ns(const Gid& target, const Mac* unicast) {
  if (v6_.empty()) return false;
  // RFC 4861 7.2.2 lets any of our addresses be the source.
  const Gid* src = &v6_source_for(target.data());
  // Resolution goes to the target's solicited-node group; a reachability probe to the target.
  const Gid dst_ip = unicast ? target : solicited_node(target.data());
  const Mac dst_mac = unicast ? *unicast : ipv6_multicast_mac(dst_ip.data());
  const uint32_t l3o = write_eth(dst_mac, wire::kEtherTypeIpv6);
  wire::NdMsg ns{};
  ns.icmp.type = wire::kNdNeighborSolicit;
  ns.target = target;
  // The source link-layer address option, so the target can answer without asking back.
  const wire::NdLlaOption opt{wire::kNdOptSourceLla, 1, mac_};
  const uint32_t n = write_nd(&tx_[l3o], src->data(), dst_ip.data(), cfg_.hop_limit, ns, opt);
  if (transmit(l3o + n)) ++ctr_.ns_tx;
  return true;
}

void NeighborAgent::send_na(const Mac& dst_mac, const uint8_t* dst_ip, const uint8_t* target,
                            bool solicited) {
  const uint32_t l3o = write_eth(dst_mac, wire::kEtherTypeIpv6);
  wire::NdMsg na{};
  na.icmp.type = wire::kNdNeighborAdvert;
  // 7.2.4: Override set (the address is ours, not an anycast or proxied one), Router clear.
  na.flags = static_cast<uint8_t>(wire::kNaFlagOverride | (solicited ? wire::kNaFlagSolicited : 0));
  std::memcpy(na.target.data(), target, 16);
  const wire::NdLlaOption opt{wire::kNdOptTargetLla, 1, mac_};
  // The address asked about is ours: answer from it.
  const uint32_t n = write_nd(&tx_[l3o], target, dst_ip, cfg_.hop_limit, na, opt);
  if (transmit(l3o + n)) ++ctr_.na_tx;
}

}  // namespace roce
