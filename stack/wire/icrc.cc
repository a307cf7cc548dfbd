#include "stack/wire/icrc.h"

#include <isa-l/crc.h>

#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "stack/wire/headers.h"

namespace roce::wire {

namespace {

// The headers the invariant CRC masks: IP (no options), UDP, BTH.
constexpr uint32_t masked_headers_len(bool ipv6) {
  return static_cast<uint32_t>((ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr)) + sizeof(UdpHdr) +
                               sizeof(Bth));
}

// The ones of the invariant CRC by offset from the IP header, entry kOnesBefore + o: the LRH
// stand-in's last four bytes at o = -4..-1, then each header's variant fields.
constexpr uint32_t kOnesBefore = 32;
constexpr uint32_t kOnesLen = kOnesBefore + 64 + 16;
struct OnesTable {
  uint8_t v[kOnesLen];
  uint32_t end;  // blocks starting at o >= end need no ones
};
constexpr OnesTable make_ones(bool ipv6) {
  OnesTable t{};
  for (uint32_t i = kOnesBefore - 4; i < kOnesBefore; ++i) t.v[i] = 0xFF;
  uint8_t* ip = t.v + kOnesBefore;
  if (ipv6) {
    ip[0] = 0x0F;  // the traffic class's high nibble (the version is kept)
    ip[1] = ip[2] = ip[3] = 0xFF;
    ip[offsetof(Ipv6Hdr, hop_limit)] = 0xFF;
  } else {
    ip[offsetof(Ipv4Hdr, tos)] = 0xFF;
    ip[offsetof(Ipv4Hdr, ttl)] = 0xFF;
    ip[offsetof(Ipv4Hdr, checksum)] = 0xFF;
    ip[offsetof(Ipv4Hdr, checksum) + 1] = 0xFF;
  }
  const uint32_t udp = ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr);
  ip[udp + offsetof(UdpHdr, checksum)] = 0xFF;
  ip[udp + offsetof(UdpHdr, checksum) + 1] = 0xFF;
  ip[udp + sizeof(UdpHdr) + offsetof(Bth, fecn_becn)] = 0xFF;
  t.end = udp + sizeof(UdpHdr) + offsetof(Bth, fecn_becn) + 1;
  return t;
}
constexpr OnesTable kOnes4 = make_ones(false);
constexpr OnesTable kOnes6 = make_ones(true);
static_assert(kOnes6.end + 15 + kOnesBefore < kOnesLen);

// The masks applied to a copy of the fixed headers at `ip`, eight bytes at a time (the ones
// end within the headers' last eight bytes: ORing the table's zeros past them changes nothing).
inline void mask_variant_fields(uint8_t* ip, bool ipv6) {
  const OnesTable& ones = ipv6 ? kOnes6 : kOnes4;
  static_assert((kOnes4.end + 7) / 8 * 8 <= masked_headers_len(false) &&
                (kOnes6.end + 7) / 8 * 8 <= masked_headers_len(true));
  for (uint32_t i = 0; i < ones.end; i += 8) {
    uint64_t w, m;
    std::memcpy(&w, ip + i, 8);
    std::memcpy(&m, ones.v + kOnesBefore + i, 8);
    w |= m;
    std::memcpy(ip + i, &w, 8);
  }
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

// One step of the 16-byte fold: the 128 bits so far carried across the next block (x^160 and
// x^96 mod P) and XORed onto it.
__attribute__((target("pclmul,sse4.1"))) inline __m128i fold16(__m128i x, __m128i next) {
  const __m128i k_fold = _mm_set_epi64x(kX96, kX160);
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(x, k_fold, 0x00), _mm_clmulepi64_si128(x, k_fold, 0x11)),
      next);
}

// The ICRC of a short packet straight from the frame, 16 bytes at a time in registers (no copy).
// The byte stream is Z ‖ FF FF FF FF ‖ the covered bytes with their variant fields set to ones,
// from a zero register: Z is the zeros that bring it to a multiple of 16 bytes (see
// icrc_compute). Block k holds the covered bytes from offset o = 16k - |Z| - 4 on; a block that
// starts before the IP header (o < 0: the first, and the second when |Z| > 12) is the first 16
// covered bytes shifted into place by PSHUFB, so nothing outside [l3, l3 + covered_len) is read.
// The ones (the LRH stand-in and the variant fields) are ORed in from a table indexed by o, up
// to the last masked byte. The copy, mask and fold it replaces took 2.8 times as long for the
// frame of an 8-byte SEND (wire_bench BM_Icrc/8: 24-26 ns, now 8.7), likely because its 16-byte
// loads read bytes just written by narrower stores, which x86 cannot forward.
//
// kShift: PSHUFB controls; lane j of loadu(kShift + 32 + o) selects covered byte o + j, or zero
// where o + j < 0 (0x80).
alignas(64) constexpr uint8_t kShift[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15};

// Block o (see above): covered bytes o .. o + 15, the ones ORed in.
__attribute__((target("pclmul,sse4.1"))) inline __m128i icrc_block(const uint8_t* l3, __m128i head,
                                                                   int o, const OnesTable& ones) {
  const __m128i d =
      o < 0 ? _mm_shuffle_epi8(head,
                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShift + 32 + o)))
            : _mm_loadu_si128(reinterpret_cast<const __m128i*>(l3 + o));
  if (o >= static_cast<int>(ones.end)) return d;
  return _mm_or_si128(d,
                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(ones.v + kOnesBefore + o)));
}

// `covered_len` is at least 16 (it holds IP, UDP and BTH) and 4 + covered_len at most 256.
// Returns the register, not inverted.
__attribute__((target("pclmul,sse4.1"))) uint32_t icrc_fold_short(const uint8_t* l3,
                                                                  uint32_t covered_len, bool ipv6) {
  const OnesTable& ones = ipv6 ? kOnes6 : kOnes4;
  const uint32_t n = (4 + covered_len + 15) & ~15u;
  const int first = -static_cast<int>(n - covered_len);  // block 0 starts at -(|Z| + 4)
  const __m128i head = _mm_loadu_si128(reinterpret_cast<const __m128i*>(l3));
  __m128i x = icrc_block(l3, head, first, ones);
  for (int o = first + 16; o < static_cast<int>(covered_len); o += 16) {
    x = fold16(x, icrc_block(l3, head, o, ones));
  }
  return reduce128(x);
}

// A 128-bit lane folded by a distance given as its two constants (x^(D+32), x^(D-32) mod P),
// for the wide folds' last steps.
__attribute__((target("pclmul,sse4.1"))) inline __m128i fold128(__m128i x, int64_t lo, int64_t hi) {
  const __m128i k = _mm_set_epi64x(hi, lo);
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
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

// The same fold on CPUs with VPCLMULQDQ but not AVX-512 (AMD Zen 3, Intel client cores): eight
// 256-bit registers of two 128-bit lanes, every lane folded 2048 bits forward, 256 bytes per step.
// Registers 2i and 2i+1 together hold what the 512-bit version's register i holds, so the ends
// reduce with the same constants. With kStore the bytes are copied to `dst` on the way. ISA-L has
// no such path: on a Zen 3 its 128-bit fold CRCed 4 KiB in 323 ns and this one in 181 (copy and
// CRC 268 ns, against memcpy then ISA-L's 372 ns or more).
#define ROCE_AVX2_CLMUL __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1")))
ROCE_AVX2_CLMUL inline __m256i lanes256(int64_t lo, int64_t hi) {
  return _mm256_set_epi64x(hi, lo, hi, lo);
}
ROCE_AVX2_CLMUL inline __m256i fold256(__m256i x, __m256i k) {
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00),
                          _mm256_clmulepi64_epi128(x, k, 0x11));
}

ROCE_AVX2_CLMUL inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
ROCE_AVX2_CLMUL inline void store256(uint8_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

template <bool kStore>
ROCE_AVX2_CLMUL uint32_t crc32_avx2(uint32_t reg, uint8_t* dst, const uint8_t* src, uint64_t n) {
  const __m256i k2048 = lanes256(0x11542778a, 0x1322d1430);
  const __m256i k1536 = lanes256(0x1821d8bc0, 0x12e958ac4);
  const __m256i k1024 = lanes256(0x1e88ef372, 0x14a7fe880);
  const __m256i k512 = lanes256(0x154442bd4, 0x1c6e41596);
  __m256i a[8];
  for (int i = 0; i < 8; ++i) {
    a[i] = load256(src + 32 * i);
    if constexpr (kStore) store256(dst + 32 * i, a[i]);
  }
  a[0] = _mm256_xor_si256(a[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(reg))));
  for (uint64_t off = 256; off < n; off += 256) {
    for (int i = 0; i < 8; ++i) {
      const __m256i d = load256(src + off + 32 * i);
      if constexpr (kStore) store256(dst + off + 32 * i, d);
      a[i] = _mm256_xor_si256(fold256(a[i], k2048), d);
    }
  }
  // Eight registers -> two (the low and high halves of the 512-bit version's one), then their
  // four lanes -> one, as there.
  const __m256i lo = _mm256_xor_si256(_mm256_xor_si256(fold256(a[0], k1536), fold256(a[2], k1024)),
                                      _mm256_xor_si256(fold256(a[4], k512), a[6]));
  const __m256i hi = _mm256_xor_si256(_mm256_xor_si256(fold256(a[1], k1536), fold256(a[3], k1024)),
                                      _mm256_xor_si256(fold256(a[5], k512), a[7]));
  const __m128i y = _mm_xor_si128(
      _mm_xor_si128(fold128(_mm256_castsi256_si128(lo), 0x3db1ecdc, 0x174359406),
                    fold128(_mm256_extracti128_si256(lo, 1), 0xf1da05aa, 0x15a546366)),
      _mm_xor_si128(fold128(_mm256_castsi256_si128(hi), kX160, kX96),
                    _mm256_extracti128_si256(hi, 1)));
  return reduce128(y);
}
#undef ROCE_AVX2_CLMUL

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
const bool kHaveAvx2Clmul = [] {
  __builtin_cpu_init();
  return kHaveClmul && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq");
}();
#endif

CrcImpl best_impl() {
#if defined(__x86_64__)
  if (kHaveAvx512Clmul) return CrcImpl::kAvx512Clmul;
  if (kHaveAvx2Clmul) return CrcImpl::kAvx2Clmul;
#endif
  return CrcImpl::kIsal;
}
const CrcImpl kImpl = best_impl();

// Below this many bytes ISA-L's own CRC is as fast as the 256-bit fold (Zen 3: 22 against 26 ns
// at 256 bytes, 43 against 33 at 512).
constexpr uint64_t kAvx2CrcMin = 512;

}  // namespace

CrcImpl crc_impl() { return kImpl; }

bool crc_impl_supported(CrcImpl impl) {
  switch (impl) {
    case CrcImpl::kIsal:
      return true;
#if defined(__x86_64__)
    case CrcImpl::kAvx2Clmul:
      return kHaveAvx2Clmul;
    case CrcImpl::kAvx512Clmul:
      return kHaveAvx512Clmul;
#endif
    default:
      return false;
  }
}

const char* crc_impl_name(CrcImpl impl) {
  switch (impl) {
    case CrcImpl::kIsal:
      return "ISA-L";
    case CrcImpl::kAvx2Clmul:
      return "AVX2 + VPCLMULQDQ";
    case CrcImpl::kAvx512Clmul:
      return "AVX-512 + VPCLMULQDQ";
  }
  return "?";
}

uint32_t crc32_ieee_with(CrcImpl impl, uint32_t crc, const uint8_t* data, uint64_t len) {
  uint64_t done = 0;
#if defined(__x86_64__)
  if (impl == CrcImpl::kAvx2Clmul && len >= kAvx2CrcMin) {
    done = len & ~uint64_t{255};
    crc = ~crc32_avx2<false>(~crc, nullptr, data, done);
  }
#else
  (void)impl;
#endif
  // ISA-L runs its own 512-bit fold on AVX-512 CPUs.
  return done < len ? crc32_gzip_refl(crc, data + done, len - done) : crc;
}

uint32_t crc32_copy_with(CrcImpl impl, uint32_t crc, uint8_t* dst, const uint8_t* src,
                         uint64_t len) {
  uint64_t done = 0;
#if defined(__x86_64__)
  if (impl != CrcImpl::kIsal && len >= 256) {
    done = len & ~uint64_t{255};
    crc = impl == CrcImpl::kAvx512Clmul ? ~crc32_copy_avx512(~crc, dst, src, done)
                                        : ~crc32_avx2<true>(~crc, dst, src, done);
  }
#endif
  if (done < len) {
    std::memcpy(dst + done, src + done, len - done);
    crc = crc32_gzip_refl(crc, dst + done, len - done);
  }
  return crc;
}

uint32_t crc32_ieee(uint32_t crc, const uint8_t* data, uint64_t len) {
  return crc32_ieee_with(kImpl, crc, data, len);
}

uint32_t crc32_copy(uint32_t crc, uint8_t* dst, const uint8_t* src, uint64_t len) {
  return crc32_copy_with(kImpl, crc, dst, src, len);
}

uint32_t icrc_begin(const uint8_t* l3, bool ipv6) {
  return icrc_prefix(l3, masked_headers_len(ipv6), ipv6);
}

uint32_t icrc_prefix(const uint8_t* l3, uint32_t len, bool ipv6) {
#if defined(__x86_64__)
  // Folded in registers (ISA-L's serial loop for short inputs took ~3 % of write_bw's sender).
  if (kHaveClmul && 4 + len <= 256) return ~icrc_fold_short(l3, len, ipv6);
#endif
  const uint32_t hdr_len = masked_headers_len(ipv6);
  alignas(16) uint8_t buf[8 + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth)];
  std::memset(buf, 0xFF, 8);
  std::memcpy(buf + 8, l3, hdr_len);
  mask_variant_fields(buf + 8, ipv6);
  return crc32_ieee(crc32_ieee(0, buf, 8 + hdr_len), l3 + hdr_len, len - hdr_len);
}

uint32_t icrc_compute(const uint8_t* l3, uint32_t covered_len, bool ipv6) {
  // The 8-byte LRH stand-in helps twice: after its first four 0xFF bytes the CRC register is
  // exactly zero (the init value ~0 XOR 0xFF bytes clears it), and zero bytes fed into a zero
  // register leave it zero. So a CRC that starts from a zero register may skip those four bytes,
  // and zeros inserted in their place do not change it: short packets are padded at the front.
#if defined(__x86_64__)
  // Short packets: folded by PCLMULQDQ in place, behind zeros up to a multiple of 16 bytes.
  constexpr uint32_t kFoldMax = 256;
  if (kHaveClmul && 4 + covered_len <= kFoldMax) {
    return ~icrc_fold_short(l3, covered_len, ipv6);
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
