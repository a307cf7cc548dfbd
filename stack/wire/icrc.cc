#include "stack/wire/icrc.h"

#include <isa-l/crc.h>

#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "stack/wire/headers.h"

namespace roce::wire {

uint32_t crc32_ieee(uint32_t crc, const uint8_t* data, uint64_t len) {
  return crc32_gzip_refl(crc, data, len);
}

namespace {

// The headers the invariant CRC masks: IP (no options), UDP, BTH.
constexpr uint32_t masked_headers_len(bool ipv6) {
  return static_cast<uint32_t>((ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr)) + sizeof(UdpHdr) +
                               sizeof(Bth));
}

// The masks of the invariant CRC applied to a copy of the fixed headers at `ip`.
inline void mask_variant_fields(uint8_t* ip, bool ipv6) {
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
  uint8_t* udp = ip + (ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr));
  udp[offsetof(UdpHdr, checksum)] = 0xFF;
  udp[offsetof(UdpHdr, checksum) + 1] = 0xFF;
  udp[sizeof(UdpHdr) + offsetof(Bth, fecn_becn)] = 0xFF;
}

#if defined(__x86_64__)
// Fold constants: for a distance of D bits, x^(D+32) and x^(D-32) mod P, bit-reflected and
// shifted left by one (the low and high 64-bit lanes of a 128-bit block).
constexpr int64_t kX96 = 0x0ccaa009e, kX160 = 0x1751997d0;  // D = 128

// The 128 bits left after folding -> the 32-bit register: 128 -> 64 -> 32 bits and a Barrett
// reduction.
__attribute__((target("pclmul,sse4.1"))) inline uint32_t reduce128(__m128i x) {
  const __m128i k_fold = _mm_set_epi64x(kX96, kX160);
  const __m128i k_64 = _mm_set_epi64x(0, 0x163cd6124);              // x^64
  const __m128i k_poly = _mm_set_epi64x(0x1f7011641, 0x1db710641);  // mu, P (reflected)
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  // 128 -> 64 bits.
  x = _mm_xor_si128(_mm_clmulepi64_si128(x, k_fold, 0x10), _mm_srli_si128(x, 8));
  // 64 -> 32 bits.
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, mask32), k_64, 0x00),
                    _mm_srli_si128(x, 4));
  // Barrett reduction.
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), k_poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), k_poly, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
}

// CRC-32 (reflected, polynomial 0x04C11DB7) by carry-less multiplication, one 16-byte block at a
// time: each step folds the 128 bits so far across the next block (x^160 and x^96 mod P), then
// 128 -> 64 -> 32 bits and a Barrett reduction. `n` is a non-zero multiple of 16. The register
// starts at zero and is returned without the final inversion. For the short frames of a
// ping-pong (an ACK, a small SEND: 48-100 bytes) icrc_compute went from ~250 to ~120
// instructions (callgrind), against ISA-L's call padded to its 256-byte fast path.
__attribute__((target("pclmul,sse4.1"))) uint32_t crc32_fold16(const uint8_t* p, uint32_t n) {
  const __m128i k_fold = _mm_set_epi64x(kX96, kX160);
  __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  for (uint32_t off = 16; off < n; off += 16) {
    const __m128i lo = _mm_clmulepi64_si128(x, k_fold, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(x, k_fold, 0x11);
    x = _mm_xor_si128(_mm_xor_si128(lo, hi),
                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + off)));
  }
  return reduce128(x);
}

// Copy and CRC in one pass, 256 bytes per step: four 512-bit registers of four 128-bit lanes
// each, every lane folded 2048 bits forward onto the next 256 bytes while they are stored to
// `dst`. `n` is a non-zero multiple of 256. `reg` is the CRC register before these bytes (zlib's
// ~crc); the register after them is returned. A sender that copies its payload into the frame
// and then ran ISA-L over the frame passed over the payload twice.
#define ROCE_AVX512_CLMUL \
  __attribute__((target("avx512f,avx512bw,avx512vl,vpclmulqdq,pclmul,sse4.1")))
ROCE_AVX512_CLMUL inline __m512i lanes512(int64_t lo, int64_t hi) {
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}
ROCE_AVX512_CLMUL inline __m512i fold512(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00),
                          _mm512_clmulepi64_epi128(x, k, 0x11));
}
ROCE_AVX512_CLMUL inline __m128i fold128(__m128i x, int64_t lo, int64_t hi) {
  const __m128i k = _mm_set_epi64x(hi, lo);
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

ROCE_AVX512_CLMUL uint32_t crc32_copy_avx512(uint32_t reg, uint8_t* dst, const uint8_t* src,
                                             uint64_t n) {
  const __m512i k2048 = lanes512(0x11542778a, 0x1322d1430);
  const __m512i k1536 = lanes512(0x1821d8bc0, 0x12e958ac4);
  const __m512i k1024 = lanes512(0x1e88ef372, 0x14a7fe880);
  const __m512i k512 = lanes512(0x154442bd4, 0x1c6e41596);

  __m512i a0 = _mm512_loadu_si512(src), a1 = _mm512_loadu_si512(src + 64),
          a2 = _mm512_loadu_si512(src + 128), a3 = _mm512_loadu_si512(src + 192);
  _mm512_storeu_si512(dst, a0);
  _mm512_storeu_si512(dst + 64, a1);
  _mm512_storeu_si512(dst + 128, a2);
  _mm512_storeu_si512(dst + 192, a3);
  a0 = _mm512_xor_si512(a0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(reg))));
  for (uint64_t off = 256; off < n; off += 256) {
    const __m512i d0 = _mm512_loadu_si512(src + off), d1 = _mm512_loadu_si512(src + off + 64),
                  d2 = _mm512_loadu_si512(src + off + 128),
                  d3 = _mm512_loadu_si512(src + off + 192);
    _mm512_storeu_si512(dst + off, d0);
    _mm512_storeu_si512(dst + off + 64, d1);
    _mm512_storeu_si512(dst + off + 128, d2);
    _mm512_storeu_si512(dst + off + 192, d3);
    a0 = _mm512_xor_si512(fold512(a0, k2048), d0);
    a1 = _mm512_xor_si512(fold512(a1, k2048), d1);
    a2 = _mm512_xor_si512(fold512(a2, k2048), d2);
    a3 = _mm512_xor_si512(fold512(a3, k2048), d3);
  }
  // Four registers -> one: each folded onto the last by its distance from it.
  const __m512i x = _mm512_xor_si512(_mm512_xor_si512(fold512(a0, k1536), fold512(a1, k1024)),
                                     _mm512_xor_si512(fold512(a2, k512), a3));
  // Four lanes -> one: lanes 0, 1 and 2 are 384, 256 and 128 bits before lane 3.
  const __m128i y = _mm_xor_si128(
      _mm_xor_si128(fold128(_mm512_maskz_extracti32x4_epi32(0xF, x, 0), 0x3db1ecdc, 0x174359406),
                    fold128(_mm512_maskz_extracti32x4_epi32(0xF, x, 1), 0xf1da05aa, 0x15a546366)),
      _mm_xor_si128(fold128(_mm512_maskz_extracti32x4_epi32(0xF, x, 2), kX160, kX96),
                    _mm512_maskz_extracti32x4_epi32(0xF, x, 3)));
  return reduce128(y);
}
#undef ROCE_AVX512_CLMUL

// A static initializer may run before libgcc's CPU detection: run it first.
const bool kHaveClmul = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}();
const bool kHaveAvx512Clmul = [] {
  __builtin_cpu_init();
  return kHaveClmul && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq");
}();
#endif

}  // namespace

bool crc32_copy_is_fused() {
#if defined(__x86_64__)
  return kHaveAvx512Clmul;
#else
  return false;
#endif
}

uint32_t crc32_copy(uint32_t crc, uint8_t* dst, const uint8_t* src, uint64_t len) {
  uint64_t done = 0;
#if defined(__x86_64__)
  if (kHaveAvx512Clmul && len >= 256) {
    done = len & ~uint64_t{255};
    crc = ~crc32_copy_avx512(~crc, dst, src, done);
  }
#endif
  if (done < len) {
    std::memcpy(dst + done, src + done, len - done);
    crc = crc32_ieee(crc, dst + done, len - done);
  }
  return crc;
}

uint32_t icrc_begin(const uint8_t* l3, bool ipv6) {
  const uint32_t hdr_len = masked_headers_len(ipv6);
  alignas(16) uint8_t buf[8 + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth)];
  std::memset(buf, 0xFF, 8);
  std::memcpy(buf + 8, l3, hdr_len);
  mask_variant_fields(buf + 8, ipv6);
  return crc32_ieee(0, buf, 8 + hdr_len);
}

uint32_t icrc_compute(const uint8_t* l3, uint32_t covered_len, bool ipv6) {
  // The 8-byte LRH stand-in helps twice: after its first four 0xFF bytes the CRC register is
  // exactly zero (the init value ~0 XOR 0xFF bytes clears it), and zero bytes fed into a zero
  // register leave it zero. So a CRC that starts from a zero register may skip those four bytes,
  // and zeros inserted in their place do not change it: short packets are padded at the front.
#if defined(__x86_64__)
  // Short packets: copied whole behind zeros up to a multiple of 16 bytes, folded by PCLMULQDQ.
  constexpr uint32_t kFoldMax = 256;
  if (kHaveClmul && 4 + covered_len <= kFoldMax) {
    alignas(16) uint8_t buf[kFoldMax];
    const uint32_t n = (4 + covered_len + 15) & ~15u;
    const uint32_t pad = n - 4 - covered_len;
    std::memset(buf, 0, 16);  // covers the pad, which is below 16 bytes
    std::memset(buf + pad, 0xFF, 4);
    std::memcpy(buf + pad + 4, l3, covered_len);
    mask_variant_fields(buf + pad + 4, ipv6);
    return ~crc32_fold16(buf, n);
  }
#endif

  // Otherwise ISA-L. Its folding CRC is fast from 256 bytes on; below, it runs a serial 16-byte
  // loop that costs more than the fold, so short packets are padded up to it with zeros as
  // above and copied whole, masked and CRCed in one call. Larger ones copy only the headers
  // (icrc_begin) and chain the rest in place.
  constexpr uint32_t kCopyWhole = 512;
  constexpr uint32_t kFastMin = 256;
  if (covered_len > kCopyWhole) {
    const uint32_t hdr_len = masked_headers_len(ipv6);
    return crc32_ieee(icrc_begin(l3, ipv6), l3 + hdr_len, covered_len - hdr_len);
  }
  alignas(64) uint8_t buf[kFastMin + kCopyWhole];
  const uint32_t zeros = 8 + covered_len < kFastMin ? kFastMin - 8 - covered_len : 0;
  std::memset(buf, 0xFF, 4);
  std::memset(buf + 4, 0, zeros);
  std::memset(buf + 4 + zeros, 0xFF, 4);
  uint8_t* ip = buf + 8 + zeros;
  std::memcpy(ip, l3, covered_len);
  mask_variant_fields(ip, ipv6);
  return crc32_gzip_refl(0, buf, 8 + zeros + covered_len);
}

}  // namespace roce::wire
