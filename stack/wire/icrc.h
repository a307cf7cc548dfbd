// Invariant CRC of RoCEv2 (IBA annex A17.4.1): CRC-32 (IEEE 802.3, reflected, zlib's crc32) over
// 8 bytes of 0xFF standing for the masked LRH, then the IP and UDP headers with their variant
// fields set to all ones, the BTH with byte 4 (FECN/BECN/reserved) set to all ones, and everything
// after the BTH up to the ICRC. The value travels little-endian.
//
// Packets up to 252 covered bytes (ACKs, short messages) are folded with PCLMULQDQ where the CPU
// has it, straight from the frame, the masks applied in registers. Larger ones go to a folding
// CRC (crc32_ieee: ISA-L's, or a 256-bit VPCLMULQDQ one on CPUs with AVX2 but not AVX-512); above
// 512 bytes the headers are folded as a short packet's are (copied and masked without PCLMULQDQ)
// and the payload is CRCed in place, never copied.
#pragma once

#include <cstdint>

namespace roce::wire {

// Plain CRC-32 (zlib convention: crc32(0, ...) starts, pass the result back in to chain).
uint32_t crc32_ieee(uint32_t crc, const uint8_t* data, uint64_t len);

// ICRC of a packet whose IP header starts at `l3`. `covered_len` counts the bytes from the start
// of the IP header to the end of the pad (i.e. excluding the 4-byte ICRC). The IPv4 header must
// have no options; the caller has checked that covered_len holds IP + UDP + BTH.
uint32_t icrc_compute(const uint8_t* l3, uint32_t covered_len, bool ipv6);

// The ICRC in pieces, for a sender that writes the headers first and copies the payload in
// after them: icrc_begin covers the 8-byte LRH stand-in and the masked IP, UDP and BTH headers
// at `l3` (IPv4 without options); chain what follows the BTH (extension headers, payload, pad)
// with crc32_ieee or crc32_copy. The result equals icrc_compute over the whole packet.
uint32_t icrc_begin(const uint8_t* l3, bool ipv6);
// icrc_begin chained over the bytes after the BTH too, up to `len` bytes from `l3` (at least the
// masked headers; the extension headers of a packet whose payload is copied in next). Folded in
// registers where the CPU has PCLMULQDQ and 4 + len <= 256.
uint32_t icrc_prefix(const uint8_t* l3, uint32_t len, bool ipv6);

// Copies `len` bytes from `src` to `dst` (not overlapping) and returns crc32_ieee(crc, src,
// len). With VPCLMULQDQ (AVX-512 or AVX2) the copy and the CRC are one pass over the bytes, 256
// at a time; otherwise (and for the last len % 256 bytes) memcpy, then ISA-L over the copy.
uint32_t crc32_copy(uint32_t crc, uint8_t* dst, const uint8_t* src, uint64_t len);

// The CRC-32 implementations, chosen once by what the CPU has (the last it supports):
// - kIsal: ISA-L (its own 512-bit fold on AVX-512 CPUs, a 128-bit one otherwise) and memcpy.
// - kAvx2Clmul: a 256-bit VPCLMULQDQ fold for crc32_ieee from 512 bytes and for crc32_copy's
//   one pass (CPUs with VPCLMULQDQ but not AVX-512: AMD Zen 3, Intel client cores).
// - kAvx512Clmul: a 512-bit fold for crc32_copy's one pass; crc32_ieee stays with ISA-L's.
enum class CrcImpl : uint8_t { kIsal = 0, kAvx2Clmul, kAvx512Clmul };
CrcImpl crc_impl();  // crc32_copy is one pass unless this is kIsal
bool crc_impl_supported(CrcImpl impl);
const char* crc_impl_name(CrcImpl impl);
// crc32_ieee and crc32_copy through a given implementation, which the CPU must support (tests
// and benchmarks: every path this CPU can run, beside the one it uses).
uint32_t crc32_ieee_with(CrcImpl impl, uint32_t crc, const uint8_t* data, uint64_t len);
uint32_t crc32_copy_with(CrcImpl impl, uint32_t crc, uint8_t* dst, const uint8_t* src,
                         uint64_t len);

// Reads / writes the 4-byte ICRC field (little-endian on the wire).
inline uint32_t icrc_read(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline void icrc_write(uint8_t* p, uint32_t icrc) {
  p[0] = static_cast<uint8_t>(icrc);
  p[1] = static_cast<uint8_t>(icrc >> 8);
  p[2] = static_cast<uint8_t>(icrc >> 16);
  p[3] = static_cast<uint8_t>(icrc >> 24);
}

}  // namespace roce::wire
