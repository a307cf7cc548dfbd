// The neighbour protocol agent: ARP (RFC 826), IPv6 Neighbor Discovery (RFC 4861) and ICMP /
// ICMPv6 echo (RFC 792, RFC 4443) for the addresses of one port, so that the stack behaves on an
// Ethernet segment as a Linux host does: peers resolve our MAC, `ping` and `ping -6` (to
// all-nodes too) get answers, and the NeighborTable the engine reads gets filled by resolving the
// peers it wants.
//
// The agent sees the frames the RoCE parser rejected (kNotIp / kNotUdp / kWrongUdpPort) as raw
// bytes and parses them itself: every length comes from the wire and is checked before use.
// Replies are built in one buffer the agent owns and handed to SendFn, which copies them. Owning
// thread only; no allocation, logging or exceptions per frame (the table's storage is reserved
// up front for the entries the wire may create).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "stack/core/types.h"
#include "stack/net/neighbors.h"

namespace roce {

// Milliseconds since midnight UT by the system's real-time clock (the IPv4 timestamp option's
// unit, RFC 791).
uint32_t ms_since_midnight_utc();

struct NeighborConfig {
  uint64_t probe_interval_ns = 1'000'000'000;  // RFC 4861 RETRANS_TIMER default 1 s; ARP likewise
  uint32_t max_probes = 3;                     // MAX_MULTICAST_SOLICIT
  // How long a confirmed (REACHABLE) entry stays so without a new confirmation. When it runs out
  // the agent re-probes the neighbour with unicast solicitations (RFC 4861 7.3.3, Linux does the
  // same for ARP); the entry stays usable meanwhile and fails after max_probes unanswered ones. 0:
  // never re-probe.
  uint64_t reachable_ns = 30'000'000'000;
  // How long a STALE entry (learned from an unconfirmed message: an NS's source address, an
  // unsolicited NA, an ARP request or gratuitous reply) waits before its first unicast probe
  // (RFC 4861 DELAY_FIRST_PROBE_TIME). Only where reachable_ns is not 0.
  uint64_t delay_ns = 5'000'000'000;
  uint8_t hop_limit = 255;  // ND messages must use 255 (RFC 4861 7.1)
  // Most entries the wire may create (Linux gc_thresh3 is 1024): beyond it a peer's request is
  // still answered but its sender is not learned, so nobody can grow the table without bound.
  uint32_t max_entries = 1024;
  // The clock of the IPv4 timestamp option an echo reply updates: milliseconds since midnight
  // UT (RFC 791).
  uint32_t (*wall_clock_ms)() = &ms_since_midnight_utc;
};

// Every frame given to on_frame() lands in exactly one of: a *_rx counter (a valid message for
// us), ignored, or malformed.
struct NeighborCounters {
  uint64_t arp_requests_rx = 0;  // valid requests for one of our addresses (RFC 5227 probes too)
  uint64_t arp_replies_tx = 0;
  uint64_t arp_requests_tx = 0;
  uint64_t arp_replies_rx = 0;  // valid replies addressed to one of our addresses
  uint64_t ns_rx = 0;           // valid solicitations for one of our addresses
  uint64_t na_tx = 0;
  uint64_t ns_tx = 0;
  uint64_t na_rx = 0;  // valid advertisements sent to us or to all-nodes
  uint64_t echo_requests_rx = 0;
  uint64_t echo_replies_tx = 0;
  uint64_t echo6_requests_rx = 0;
  uint64_t echo6_replies_tx = 0;
  uint64_t resolved = 0;   // entries that became reachable or changed MAC (ResolvedFn calls)
  uint64_t failed = 0;     // entries marked failed after max_probes unanswered solicitations
  uint64_t ignored = 0;    // well-formed but not for us (other host, other address, other protocol)
  uint64_t malformed = 0;  // bad length, checksum, field value or RFC validity rule
  uint64_t learned = 0;    // entries created or updated from the wire
  uint64_t conflicts = 0;  // another station claims one of our addresses (RFC 5227, RFC 4862 5.4)
  uint64_t table_full = 0;  // senders not learned because the table holds max_entries
  uint64_t too_big = 0;     // echo requests whose reply would not fit kMaxFrame
  uint64_t tx_dropped = 0;  // frames SendFn refused; a lost solicitation is retried by tick()
};

class NeighborAgent {
 public:
  // Transmits one frame; the callee copies it. Returns false if it could not.
  using SendFn = bool (*)(void* ctx, const uint8_t* frame, uint32_t len);
  // An entry became reachable (or its MAC changed): paths waiting for it can be built.
  using ResolvedFn = void (*)(void* ctx, const Gid& ip);
  // An entry failed (max_probes solicitations unanswered): what waits for it must stop waiting.
  using FailedFn = void (*)(void* ctx, const Gid& ip);

  // The largest frame the agent builds: a 9216-byte jumbo IP packet with a VLAN tag. Echo
  // requests whose reply would be longer are dropped (counted in too_big).
  static constexpr uint32_t kMaxFrame = 14 + 4 + 9216;

  // `addrs` are our addresses: IPv4 as ::ffff:a.b.c.d, IPv6 as they are. With `vlan`, every frame
  // sent carries an 802.1Q tag with `vlan_tci`; received frames may be untagged, priority-tagged
  // (VID 0) or tagged with our VID.
  NeighborAgent(NeighborTable& table, const Mac& mac, std::vector<Gid> addrs, bool vlan,
                uint16_t vlan_tci, const NeighborConfig& cfg, SendFn send, ResolvedFn resolved,
                void* ctx, FailedFn failed = nullptr);

  // A received frame that the RoCE parser rejected as kNotIp / kNotUdp / kWrongUdpPort: the raw
  // frame and its length. Answers, learns, or drops it.
  void on_frame(const uint8_t* frame, uint32_t len, uint64_t now_ns);

  // Sends solicitations for incomplete entries whose next_probe_ns has come (and unicast probes
  // for reachable entries past reachable_ns), marks entries failed after max_probes, and returns
  // the earliest time it needs to be called again (UINT64_MAX if nothing is pending). For a
  // reachable entry next_probe_ns holds the time its reachability runs out.
  uint64_t tick(uint64_t now_ns);

  const NeighborCounters& counters() const { return ctr_; }

 private:
  using Ipv4Addr = std::array<uint8_t, 4>;

  // Receive side, one function per protocol. `off` is the offset of the L3 header.
  void on_arp(const uint8_t* frame, uint32_t off, uint32_t len, uint64_t now_ns);
  void on_ipv4(const uint8_t* frame, uint32_t off, uint32_t len, bool l2_unicast);
  void on_ipv6(const uint8_t* frame, uint32_t off, uint32_t len, bool l2_unicast, uint64_t now_ns);
  void on_echo6(const uint8_t* frame, uint32_t off, uint32_t icmp_len, bool l2_unicast);
  void on_ns(const uint8_t* frame, uint32_t off, uint32_t icmp_len, uint64_t now_ns);
  void on_na(const uint8_t* frame, uint32_t off, uint32_t icmp_len, uint64_t now_ns);

  // Updates (or, with `create`, adds) the entry for `ip`; static entries are never touched.
  // Without `override_mac` a reachable entry keeps a different MAC (RFC 4861 7.2.5).
  // What the wire said of `ip` (RFC 4861 7.2.3 / 7.2.5, Linux's arp_process): a confirmation (a
  // solicited NA, an ARP reply to our MAC) makes the entry REACHABLE; anything else makes a new
  // or changed entry STALE (usable, probed after delay_ns) and leaves an unchanged one as it is.
  // `create`: a new entry may be made; `override_mac`: a known address may be replaced.
  void learn(const Gid& ip, const Mac& mac, bool create, bool override_mac, bool confirmed,
             uint64_t now_ns);

  // Transmit side. Each builds a frame in tx_ and sends it; false if there is no source address
  // for the target's family. `unicast` is the neighbour's MAC for a reachability probe, or null
  // for a broadcast / multicast resolution.
  bool send_arp_request(const Gid& target, const Mac* unicast);
  bool send_ns(const Gid& target, const Mac* unicast);
  void send_arp_reply(const Mac& dst_mac, const Ipv4Addr& our_ip, const Mac& target_mac,
                      const Ipv4Addr& target_ip);
  void send_na(const Mac& dst_mac, const uint8_t* dst_ip, const uint8_t* target, bool solicited);
  uint32_t write_eth(const Mac& dst, uint16_t ethertype);  // returns the L3 offset in tx_
  bool transmit(uint32_t len);

  int find_v4(const uint8_t* ip) const;  // index in v4_, or -1
  int find_v6(const uint8_t* ip) const;  // index in v6_, or -1
  bool v6_dst_is_ours(const uint8_t* ip) const;
  // Our address to send to `peer` from (v6_ not empty): a link-local peer gets a link-local
  // address (RFC 6724 rule 2, what Linux picks), any other peer the non-link-local address
  // sharing the longest prefix with it; failing both, the first address.
  const Gid& v6_source_for(const uint8_t* peer) const;

  NeighborTable& table_;
  Mac mac_;
  std::vector<Ipv4Addr> v4_;
  std::vector<Gid> v6_;
  bool vlan_;
  uint16_t vlan_tci_;
  NeighborConfig cfg_;
  SendFn send_;
  ResolvedFn resolved_;
  void* ctx_;
  FailedFn failed_;
  uint16_t ipv4_id_;
  NeighborCounters ctr_;
  std::array<uint8_t, kMaxFrame> tx_{};
};

}  // namespace roce
