// The agent around the table it owns: the addresses it answers for, the Ethernet and VLAN
// layer every protocol shares, learning (RFC 4861 7.2, RFC 826 merge) and the probe timers
// (RFC 4861 7.3). The protocols are in arp.cc, icmp_echo.cc and nd.cc.
#include "stack/net/neighbor_agent.h"

#include <cstring>
#include <ctime>

#include "stack/net/neighbor_frames.h"
#include "stack/wire/checksum.h"
#include "stack/wire/headers.h"
#include "stack/wire/neighbor_headers.h"
#include "stack/wire/parser.h"

namespace roce {

using neighbor::common_prefix_bits;
using neighbor::ipv6_is_link_local;
using neighbor::ipv6_is_loopback;
using neighbor::ipv6_is_multicast;
using neighbor::ipv6_is_solicited_node;
using neighbor::kAllNodes;
using neighbor::kMinEthFrame;
using neighbor::mac_is_group;
using neighbor::mac_is_zero;
using neighbor::read;
using neighbor::write;

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
