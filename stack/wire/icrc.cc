#include "stack/wire/icrc.h"

#include <isa-l/crc.h>

#include <cstddef>
#include <cstring>

#include "stack/wire/headers.h"

namespace roce::wire {

uint32_t crc32_ieee(uint32_t crc, const uint8_t* data, uint64_t len) {
  return crc32_gzip_refl(crc, data, len);
}

uint32_t icrc_compute(const uint8_t* l3, uint32_t covered_len, bool ipv6) {
  // Small packets (ACKs, short messages) are copied whole, masked and CRCed in one call; larger
  // ones copy only the headers and chain the payload in place.
  //
  // ISA-L's folding CRC is fast from 256 bytes on; below, it runs a serial 16-byte loop that
  // costs more than the fold. The 8-byte LRH stand-in helps: after its first four 0xFF bytes
  // the CRC register is exactly zero (the init value ~0 XOR 0xFF bytes clears it), and zero
  // bytes fed into a zero register leave it zero. So zeros inserted after those four bytes do
  // not change the CRC, and short packets are padded up to the fast path.
  constexpr uint32_t kCopyWhole = 512;
  constexpr uint32_t kFastMin = 256;
  alignas(64) uint8_t buf[kFastMin + kCopyWhole];
  const uint32_t ip_len = ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr);
  const uint32_t hdr_len = ip_len + sizeof(UdpHdr) + sizeof(Bth);
  const bool whole = covered_len <= kCopyWhole;
  const uint32_t copy_len = whole ? covered_len : hdr_len;
  const uint32_t zeros = whole && 8 + copy_len < kFastMin ? kFastMin - 8 - copy_len : 0;

  std::memset(buf, 0xFF, 4);
  std::memset(buf + 4, 0, zeros);
  std::memset(buf + 4 + zeros, 0xFF, 4);
  uint8_t* ip = buf + 8 + zeros;
  std::memcpy(ip, l3, copy_len);
  if (ipv6) {
    // Traffic class and flow label: all ones, version kept. Hop limit: all ones.
    ip[0] = static_cast<uint8_t>(ip[0] | 0x0F);
    ip[1] = 0xFF;
    ip[2] = 0xFF;
    ip[3] = 0xFF;
    ip[offsetof(Ipv6Hdr, hop_limit)] = 0xFF;
  } else {
    ip[offsetof(Ipv4Hdr, tos)] = 0xFF;
    ip[offsetof(Ipv4Hdr, ttl)] = 0xFF;
    ip[offsetof(Ipv4Hdr, checksum)] = 0xFF;
    ip[offsetof(Ipv4Hdr, checksum) + 1] = 0xFF;
  }
  uint8_t* udp = ip + ip_len;
  udp[offsetof(UdpHdr, checksum)] = 0xFF;
  udp[offsetof(UdpHdr, checksum) + 1] = 0xFF;
  uint8_t* bth = udp + sizeof(UdpHdr);
  bth[offsetof(Bth, fecn_becn)] = 0xFF;

  const uint32_t crc = crc32_gzip_refl(0, buf, 8 + zeros + copy_len);
  if (whole) return crc;
  return crc32_gzip_refl(crc, l3 + hdr_len, covered_len - hdr_len);
}

}  // namespace roce::wire
