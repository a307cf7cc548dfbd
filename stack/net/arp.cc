// ARP (RFC 826) for the agent's IPv4 addresses: answering requests, defending against RFC 5227
// probes, learning senders, and the requests that resolve and probe IPv4 neighbours.
#include <cstring>

#include "stack/net/neighbor_agent.h"
#include "stack/net/neighbor_frames.h"
#include "stack/wire/headers.h"
#include "stack/wire/neighbor_headers.h"
#include "stack/wire/parser.h"

namespace roce {

using neighbor::common_prefix_bits;
using neighbor::ipv4_is_martian;
using neighbor::ipv4_is_zero;
using neighbor::mac_is_group;
using neighbor::mac_is_zero;
using neighbor::read;
using neighbor::write;

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

namespace {

// An Ethernet / IPv4 ARP packet (RFC 826): hardware type 1, protocol 0x0800, lengths 6 and 4.
wire::ArpPkt arp_packet(uint16_t op, const Mac& sha, const uint8_t* spa, const Mac& tha,
                        const uint8_t* tpa) {
  wire::ArpPkt a{};
  a.htype.set(wire::kArpHrdEthernet);
  a.ptype.set(wire::kEtherTypeIpv4);
  a.hlen = 6;
  a.plen = 4;
  a.op.set(op);
  a.sha = sha;
  std::memcpy(a.spa.data(), spa, 4);
  a.tha = tha;
  std::memcpy(a.tpa.data(), tpa, 4);
  return a;
}

}  // namespace

void NeighborAgent::send_arp_reply(const Mac& dst_mac, const Ipv4Addr& our_ip,
                                   const Mac& target_mac, const Ipv4Addr& target_ip) {
  const uint32_t off = write_eth(dst_mac, wire::kEtherTypeArp);
  const wire::ArpPkt a =
      arp_packet(wire::kArpOpReply, mac_, our_ip.data(), target_mac, target_ip.data());
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
  // The target MAC is unknown, also in a unicast probe (Linux leaves it zero too).
  const wire::ArpPkt a =
      arp_packet(wire::kArpOpRequest, mac_, src->data(), Mac{}, target.data() + 12);
  write(&tx_[off], a);
  if (transmit(off + sizeof a)) ++ctr_.arp_requests_tx;
  return true;
}

}  // namespace roce
