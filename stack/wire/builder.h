// Frame builder: writes Ethernet [802.1Q] / IP / UDP / BTH / extension headers in front of a
// payload that is already in place (the headroom of a packet buffer), then the pad and the ICRC
// behind it. The datapath builds a PathSpec once per QP and reuses it for every packet, and
// writes a connected QP's L2-L4 headers from a template made of it (L2L4Template).
#pragma once

#include <array>
#include <cstdint>

#include "stack/wire/headers.h"
#include "stack/wire/opcode.h"
#include "stack/wire/parser.h"

namespace roce::wire {

// Everything below the BTH that is fixed for a QP's path (plus the per-packet IPv4 ID).
struct PathSpec {
  MacAddr src_mac{};
  MacAddr dst_mac{};
  bool has_vlan = false;
  uint16_t vlan_tci = 0;  // PCP(3) DEI(1) VID(12)
  IpFamily family = IpFamily::kIpv4;
  std::array<uint8_t, 16> src_gid{};  // IPv4-mapped for IPv4
  std::array<uint8_t, 16> dst_gid{};
  uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class (DSCP + ECN)
  uint8_t hop_limit = 64;     // IPv4 TTL / IPv6 hop limit
  bool ipv4_df = true;
  uint16_t ipv4_id = 0;
  uint32_t flow_label = 0;
  uint16_t udp_sport = 0xC000;
  uint16_t udp_dport = kRoceUdpPort;
  uint16_t udp_checksum = 0;  // RoCEv2 senders put 0 here
};

// Extension header values; the builder copies the ones the opcode calls for.
struct ExtHeaders {
  Deth deth{};
  Reth reth{};
  AtomicEth atomic{};
  Aeth aeth{};
  AtomicAckEth atomic_ack{};
  ImmDt imm{};
  Ieth ieth{};
  CnpPayload cnp{};
};

// Bytes of Ethernet (+ VLAN) + IP + UDP for a path.
constexpr uint32_t l2l4_header_len(bool has_vlan, IpFamily family) {
  return static_cast<uint32_t>(sizeof(EthHdr) + (has_vlan ? sizeof(VlanTag) : 0) +
                               (family == IpFamily::kIpv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr)) +
                               sizeof(UdpHdr));
}
inline uint32_t l2l4_header_len(const PathSpec& p) { return l2l4_header_len(p.has_vlan, p.family); }

// All headers in front of the payload for `opcode` on `path`.
inline uint32_t headers_len(const PathSpec& p, uint8_t opcode) {
  return l2l4_header_len(p) + opcode_info(opcode).transport_hdr_len();
}

inline constexpr uint32_t kMaxHeadersLen =
    sizeof(EthHdr) + sizeof(VlanTag) + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth) + 28;
// Tailroom the builder needs behind the payload: up to 3 pad bytes and the ICRC.
inline constexpr uint32_t kTrailerRoom = 3 + kIcrcSize;

inline constexpr uint8_t pad_for(uint32_t payload_len) {
  return static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
}

// BTH fields the requester/responder chooses per packet. The pad count is derived from the
// payload length; TVer is 0.
struct BthFields {
  uint8_t opcode = 0;
  bool solicited = false;
  bool mig_req = false;
  uint16_t pkey = kDefaultPkey;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;
};

// Writes the L2-L4 headers at `frame` for a UDP payload (BTH .. ICRC) of `udp_payload_len`
// bytes; returns a pointer just past the UDP header.
uint8_t* write_l2l4(uint8_t* frame, const PathSpec& path, uint32_t udp_payload_len);

// A path's L2-L4 headers written out once, for a sender that builds many frames on one path (a
// connected QP): a frame's headers are then one copy with the fields that change per frame
// patched in (the IP and UDP lengths, the traffic class, the IPv4 ID and header checksum), not
// written field by field. Everything else comes from the PathSpec it was made from: a path whose
// other fields change needs a new template.
struct L2L4Template {
  std::array<uint8_t, 96> bytes{};  // the headers, then zeros (copied in 32-byte blocks)
  uint8_t len = 0;                  // l2l4_header_len(path)
  uint8_t l3_off = 0;               // Ethernet (+ VLAN)
  bool ipv6 = false;
  // IPv4: the sum of the header's 16-bit words (RFC 1071) but those of the TOS, total length,
  // ID and checksum, carries not yet folded.
  uint32_t ipv4_sum = 0;
};
L2L4Template make_l2l4_template(const PathSpec& path);

// write_l2l4 through a template, with the per-frame fields given: byte for byte what
// write_l2l4 writes for the template's path with those traffic_class and ipv4_id. Writes
// exactly t.len bytes.
uint8_t* write_l2l4(uint8_t* frame, const L2L4Template& t, uint8_t traffic_class, uint16_t ipv4_id,
                    uint32_t udp_payload_len);

// Builds a complete frame around a payload already at `payload` (payload_len bytes). The caller
// guarantees headers_len(path, opcode) bytes of headroom before `payload` and kTrailerRoom bytes
// after it. Writes pad bytes (zero) and the ICRC. Returns the frame start; *frame_len gets its
// length.
uint8_t* build_around_payload(uint8_t* payload, uint32_t payload_len, const PathSpec& path,
                              const BthFields& bth, const ExtHeaders& ext, uint32_t* frame_len);

// build_around_payload in two steps, for a sender that copies the payload in after the
// headers and CRCs it on the way (crc32_copy): build_headers writes everything before `payload`
// and returns the frame start, with *crc the ICRC so far (through the extension headers);
// finish_icrc chains `crc` (which by then covers the payload) over the pad, writes pad and ICRC
// and returns the frame length. The frame is byte for byte build_around_payload's.
uint8_t* build_headers(uint8_t* payload, uint32_t payload_len, const PathSpec& path,
                       const BthFields& bth, const ExtHeaders& ext, uint32_t* crc);

// build_around_payload and build_headers on a template's path, with the per-frame traffic class
// and IPv4 ID: the same frames as the PathSpec versions for the path the template was made of.
uint8_t* build_around_payload(uint8_t* payload, uint32_t payload_len, const L2L4Template& t,
                              uint8_t traffic_class, uint16_t ipv4_id, const BthFields& bth,
                              const ExtHeaders& ext, uint32_t* frame_len);
uint8_t* build_headers(uint8_t* payload, uint32_t payload_len, const L2L4Template& t,
                       uint8_t traffic_class, uint16_t ipv4_id, const BthFields& bth,
                       const ExtHeaders& ext, uint32_t* crc);
uint32_t finish_icrc(const uint8_t* frame, uint8_t* payload, uint32_t payload_len, uint32_t crc);

// Convenience for tests and tools: builds into `buf` (capacity `cap`) by copying the payload.
// Returns the frame length, or 0 if it does not fit.
uint32_t build_frame(uint8_t* buf, uint32_t cap, const PathSpec& path, const BthFields& bth,
                     const ExtHeaders& ext, const uint8_t* payload, uint32_t payload_len);

// Recovers the PathSpec, BthFields and extension headers from a parsed frame, such that
// building them again with the same payload reproduces the frame byte for byte (given that its
// pad bytes are zero).
void extract_spec(const PacketInfo& info, PathSpec& path, BthFields& bth, ExtHeaders& ext);

}  // namespace roce::wire
