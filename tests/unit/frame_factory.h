// Builds valid RoCEv2 frames for tests: a default path for each IP family and helpers to fill
// the extension headers an opcode needs.
#pragma once

#include <vector>

#include "stack/wire/builder.h"

namespace roce::test {

inline wire::PathSpec make_path(wire::IpFamily family, bool vlan = false) {
  wire::PathSpec p;
  p.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  p.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
  p.has_vlan = vlan;
  p.vlan_tci = vlan ? static_cast<uint16_t>(3u << 13 | 100) : 0;
  p.family = family;
  if (family == wire::IpFamily::kIpv6) {
    p.src_gid = {0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
    p.dst_gid = {0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};
    p.flow_label = 0x12345;
  } else {
    const uint8_t a[4] = {10, 0, 0, 1}, b[4] = {10, 0, 0, 2};
    wire::ipv4_to_gid(a, p.src_gid.data());
    wire::ipv4_to_gid(b, p.dst_gid.data());
    p.ipv4_id = 0x1234;
  }
  p.udp_sport = 0xC123;
  return p;
}

inline wire::ExtHeaders make_ext() {
  wire::ExtHeaders e;
  e.reth.va.set(0x0000'7f00'1234'5678ull);
  e.reth.rkey.set(0xabcd0102);
  e.reth.dma_length.set(4096);
  e.aeth.syndrome = wire::kAethAckUnlimitedCredits;
  e.aeth.msn.set(0x123456);
  e.deth.qkey.set(0x11111111);
  e.deth.src_qp.set(0x000abc);
  e.imm.data = {0xde, 0xad, 0xbe, 0xef};
  e.ieth.rkey.set(0x55667788);
  e.atomic.va.set(0x1000);
  e.atomic.rkey.set(0x99);
  e.atomic.swap_add.set(7);
  e.atomic.compare.set(9);
  e.atomic_ack.orig.set(0x0102030405060708ull);
  return e;
}

inline std::vector<uint8_t> make_frame(const wire::PathSpec& path, uint8_t opcode,
                                       uint32_t payload_len, uint32_t psn = 0x123456) {
  wire::BthFields bth;
  bth.opcode = opcode;
  bth.dest_qp = 0x000011;
  bth.psn = psn;
  bth.ack_req = true;
  std::vector<uint8_t> payload(payload_len);
  for (uint32_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<uint8_t> buf(payload_len + wire::kMaxHeadersLen + wire::kTrailerRoom);
  uint32_t n = wire::build_frame(buf.data(), static_cast<uint32_t>(buf.size()), path, bth,
                                 make_ext(), payload.data(), payload_len);
  buf.resize(n);
  return buf;
}

}  // namespace roce::test
