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
  // 8 (LRH stand-in) + 40 (largest IP header) + 8 (UDP) + 12 (BTH).
  constexpr uint32_t kMaxMasked = 8 + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth);
  uint8_t masked[kMaxMasked];
  const uint32_t ip_len = ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr);
  const uint32_t hdr_len = ip_len + sizeof(UdpHdr) + sizeof(Bth);

  std::memset(masked, 0xFF, 8);
  std::memcpy(masked + 8, l3, hdr_len);
  uint8_t* ip = masked + 8;
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

  uint32_t crc = crc32_gzip_refl(0, masked, 8 + hdr_len);
  return crc32_gzip_refl(crc, l3 + hdr_len, covered_len - hdr_len);
}

}  // namespace roce::wire
