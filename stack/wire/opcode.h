// The 256-entry opcode table (IBA 9.2.2 / table 38): for every BTH opcode, which extension
// headers follow the BTH and where, its place in a message, and what it is. Parsing and building
// are table lookups; nothing else in the stack switches on raw opcode bits.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "stack/wire/headers.h"

namespace roce::wire {

namespace op {
// RC (transport bits 000)
inline constexpr uint8_t kRcSendFirst = 0x00;
inline constexpr uint8_t kRcSendMiddle = 0x01;
inline constexpr uint8_t kRcSendLast = 0x02;
inline constexpr uint8_t kRcSendLastImm = 0x03;
inline constexpr uint8_t kRcSendOnly = 0x04;
inline constexpr uint8_t kRcSendOnlyImm = 0x05;
inline constexpr uint8_t kRcWriteFirst = 0x06;
inline constexpr uint8_t kRcWriteMiddle = 0x07;
inline constexpr uint8_t kRcWriteLast = 0x08;
inline constexpr uint8_t kRcWriteLastImm = 0x09;
inline constexpr uint8_t kRcWriteOnly = 0x0A;
inline constexpr uint8_t kRcWriteOnlyImm = 0x0B;
inline constexpr uint8_t kRcReadRequest = 0x0C;
inline constexpr uint8_t kRcReadRespFirst = 0x0D;
inline constexpr uint8_t kRcReadRespMiddle = 0x0E;
inline constexpr uint8_t kRcReadRespLast = 0x0F;
inline constexpr uint8_t kRcReadRespOnly = 0x10;
inline constexpr uint8_t kRcAck = 0x11;
inline constexpr uint8_t kRcAtomicAck = 0x12;
inline constexpr uint8_t kRcCmpSwap = 0x13;
inline constexpr uint8_t kRcFetchAdd = 0x14;
inline constexpr uint8_t kRcSendLastInv = 0x16;
inline constexpr uint8_t kRcSendOnlyInv = 0x17;
// UC (transport bits 001): the RC send/write subset.
inline constexpr uint8_t kUcBase = 0x20;
// UD (transport bits 011)
inline constexpr uint8_t kUdSendOnly = 0x64;
inline constexpr uint8_t kUdSendOnlyImm = 0x65;
// RoCEv2 Congestion Notification Packet (annex A17.9.2).
inline constexpr uint8_t kCnp = 0x81;
}  // namespace op

enum class Transport : uint8_t { kNone, kRc, kUc, kUd, kCnp };

// Extension headers in the order they follow the BTH.
enum class Ext : uint8_t {
  kDeth,
  kReth,
  kAtomicEth,
  kAeth,
  kAtomicAckEth,
  kImmDt,
  kIeth,
  kCnp,
  kCount
};
inline constexpr unsigned kExtCount = static_cast<unsigned>(Ext::kCount);
inline constexpr uint8_t kExtSize[kExtCount] = {
    sizeof(Deth),         sizeof(Reth),  sizeof(AtomicEth), sizeof(Aeth),
    sizeof(AtomicAckEth), sizeof(ImmDt), sizeof(Ieth),      sizeof(CnpPayload)};

enum OpFlags : uint32_t {
  kOpValid = 1u << 0,
  kOpRequest = 1u << 1,   // sent by a requester, consumed by a responder
  kOpResponse = 1u << 2,  // sent by a responder, consumed by a completer
  kOpFirst = 1u << 3,
  kOpMiddle = 1u << 4,
  kOpLast = 1u << 5,
  kOpOnly = kOpFirst | kOpLast,
  kOpPayload = 1u << 6,  // carries payload bytes
  kOpSend = 1u << 7,
  kOpWrite = 1u << 8,
  kOpRead = 1u << 9,  // READ request or READ response
  kOpAtomic = 1u << 10,
  kOpAck = 1u << 11,  // ACKNOWLEDGE / ATOMIC ACKNOWLEDGE
  kOpImm = 1u << 12,
  kOpInv = 1u << 13,
  kOpCnp = 1u << 14,
  kOpHasReth = 1u << 16,
  kOpHasAeth = 1u << 17,
  kOpHasDeth = 1u << 18,
  kOpHasImm = 1u << 19,
  kOpHasIeth = 1u << 20,
  kOpHasAtomicEth = 1u << 21,
  kOpHasAtomicAckEth = 1u << 22,
  kOpHasCnp = 1u << 23,
};

struct OpcodeInfo {
  uint32_t flags = 0;
  Transport transport = Transport::kNone;
  uint8_t ext_len = 0;  // bytes of extension headers between BTH and payload
  // Offset of each extension header from the end of the BTH, or 0xFF if absent.
  std::array<uint8_t, kExtCount> ext_off{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  std::string_view name = "UNKNOWN";

  constexpr bool valid() const { return flags & kOpValid; }
  constexpr bool has(uint32_t f) const { return (flags & f) == f; }
  constexpr bool has_ext(Ext e) const { return ext_off[static_cast<unsigned>(e)] != 0xFF; }
  constexpr uint8_t off(Ext e) const { return ext_off[static_cast<unsigned>(e)]; }
  // BTH + extension headers.
  constexpr uint32_t transport_hdr_len() const { return sizeof(Bth) + ext_len; }
};

namespace detail {
constexpr OpcodeInfo make_op(std::string_view name, Transport t, uint32_t flags) {
  OpcodeInfo o;
  o.name = name;
  o.transport = t;
  o.flags = flags | kOpValid;
  // Order on the wire: DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH (IBA 9.2).
  constexpr uint32_t has_bits[kExtCount] = {kOpHasDeth, kOpHasReth,         kOpHasAtomicEth,
                                            kOpHasAeth, kOpHasAtomicAckEth, kOpHasImm,
                                            kOpHasIeth, kOpHasCnp};
  uint8_t off = 0;
  for (unsigned e = 0; e < kExtCount; ++e) {
    if (flags & has_bits[e]) {
      o.ext_off[e] = off;
      off = static_cast<uint8_t>(off + kExtSize[e]);
    }
  }
  o.ext_len = off;
  return o;
}

constexpr std::array<OpcodeInfo, 256> build_opcode_table() {
  std::array<OpcodeInfo, 256> t{};
  constexpr uint32_t kReq = kOpRequest;
  constexpr uint32_t kPay = kOpPayload;
  // Reliable Connected.
  constexpr Transport rc = Transport::kRc;
  t[op::kRcSendFirst] = make_op("RC_SEND_FIRST", rc, kReq | kOpSend | kOpFirst | kPay);
  t[op::kRcSendMiddle] = make_op("RC_SEND_MIDDLE", rc, kReq | kOpSend | kOpMiddle | kPay);
  t[op::kRcSendLast] = make_op("RC_SEND_LAST", rc, kReq | kOpSend | kOpLast | kPay);
  t[op::kRcSendLastImm] = make_op("RC_SEND_LAST_WITH_IMMEDIATE", rc,
                                  kReq | kOpSend | kOpLast | kPay | kOpImm | kOpHasImm);
  t[op::kRcSendOnly] = make_op("RC_SEND_ONLY", rc, kReq | kOpSend | kOpOnly | kPay);
  t[op::kRcSendOnlyImm] = make_op("RC_SEND_ONLY_WITH_IMMEDIATE", rc,
                                  kReq | kOpSend | kOpOnly | kPay | kOpImm | kOpHasImm);
  t[op::kRcWriteFirst] =
      make_op("RC_RDMA_WRITE_FIRST", rc, kReq | kOpWrite | kOpFirst | kPay | kOpHasReth);
  t[op::kRcWriteMiddle] = make_op("RC_RDMA_WRITE_MIDDLE", rc, kReq | kOpWrite | kOpMiddle | kPay);
  t[op::kRcWriteLast] = make_op("RC_RDMA_WRITE_LAST", rc, kReq | kOpWrite | kOpLast | kPay);
  t[op::kRcWriteLastImm] = make_op("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", rc,
                                   kReq | kOpWrite | kOpLast | kPay | kOpImm | kOpHasImm);
  t[op::kRcWriteOnly] =
      make_op("RC_RDMA_WRITE_ONLY", rc, kReq | kOpWrite | kOpOnly | kPay | kOpHasReth);
  t[op::kRcWriteOnlyImm] =
      make_op("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", rc,
              kReq | kOpWrite | kOpOnly | kPay | kOpImm | kOpHasReth | kOpHasImm);
  t[op::kRcReadRequest] =
      make_op("RC_RDMA_READ_REQUEST", rc, kReq | kOpRead | kOpOnly | kOpHasReth);
  t[op::kRcReadRespFirst] = make_op("RC_RDMA_READ_RESPONSE_FIRST", rc,
                                    kOpResponse | kOpRead | kOpFirst | kPay | kOpHasAeth);
  t[op::kRcReadRespMiddle] =
      make_op("RC_RDMA_READ_RESPONSE_MIDDLE", rc, kOpResponse | kOpRead | kOpMiddle | kPay);
  t[op::kRcReadRespLast] = make_op("RC_RDMA_READ_RESPONSE_LAST", rc,
                                   kOpResponse | kOpRead | kOpLast | kPay | kOpHasAeth);
  t[op::kRcReadRespOnly] = make_op("RC_RDMA_READ_RESPONSE_ONLY", rc,
                                   kOpResponse | kOpRead | kOpOnly | kPay | kOpHasAeth);
  t[op::kRcAck] = make_op("RC_ACKNOWLEDGE", rc, kOpResponse | kOpAck | kOpOnly | kOpHasAeth);
  t[op::kRcAtomicAck] =
      make_op("RC_ATOMIC_ACKNOWLEDGE", rc,
              kOpResponse | kOpAck | kOpAtomic | kOpOnly | kOpHasAeth | kOpHasAtomicAckEth);
  t[op::kRcCmpSwap] = make_op("RC_CMP_SWAP", rc, kReq | kOpAtomic | kOpOnly | kOpHasAtomicEth);
  t[op::kRcFetchAdd] = make_op("RC_FETCH_ADD", rc, kReq | kOpAtomic | kOpOnly | kOpHasAtomicEth);
  t[op::kRcSendLastInv] = make_op("RC_SEND_LAST_WITH_INVALIDATE", rc,
                                  kReq | kOpSend | kOpLast | kPay | kOpInv | kOpHasIeth);
  t[op::kRcSendOnlyInv] = make_op("RC_SEND_ONLY_WITH_INVALIDATE", rc,
                                  kReq | kOpSend | kOpOnly | kPay | kOpInv | kOpHasIeth);
  // Unreliable Connected: the same send/write opcodes, offset by 0x20, no responses.
  constexpr Transport uc = Transport::kUc;
  t[op::kUcBase + 0x00] = make_op("UC_SEND_FIRST", uc, kReq | kOpSend | kOpFirst | kPay);
  t[op::kUcBase + 0x01] = make_op("UC_SEND_MIDDLE", uc, kReq | kOpSend | kOpMiddle | kPay);
  t[op::kUcBase + 0x02] = make_op("UC_SEND_LAST", uc, kReq | kOpSend | kOpLast | kPay);
  t[op::kUcBase + 0x03] = make_op("UC_SEND_LAST_WITH_IMMEDIATE", uc,
                                  kReq | kOpSend | kOpLast | kPay | kOpImm | kOpHasImm);
  t[op::kUcBase + 0x04] = make_op("UC_SEND_ONLY", uc, kReq | kOpSend | kOpOnly | kPay);
  t[op::kUcBase + 0x05] = make_op("UC_SEND_ONLY_WITH_IMMEDIATE", uc,
                                  kReq | kOpSend | kOpOnly | kPay | kOpImm | kOpHasImm);
  t[op::kUcBase + 0x06] =
      make_op("UC_RDMA_WRITE_FIRST", uc, kReq | kOpWrite | kOpFirst | kPay | kOpHasReth);
  t[op::kUcBase + 0x07] = make_op("UC_RDMA_WRITE_MIDDLE", uc, kReq | kOpWrite | kOpMiddle | kPay);
  t[op::kUcBase + 0x08] = make_op("UC_RDMA_WRITE_LAST", uc, kReq | kOpWrite | kOpLast | kPay);
  t[op::kUcBase + 0x09] = make_op("UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", uc,
                                  kReq | kOpWrite | kOpLast | kPay | kOpImm | kOpHasImm);
  t[op::kUcBase + 0x0A] =
      make_op("UC_RDMA_WRITE_ONLY", uc, kReq | kOpWrite | kOpOnly | kPay | kOpHasReth);
  t[op::kUcBase + 0x0B] =
      make_op("UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", uc,
              kReq | kOpWrite | kOpOnly | kPay | kOpImm | kOpHasReth | kOpHasImm);
  // Unreliable Datagram.
  constexpr Transport ud = Transport::kUd;
  t[op::kUdSendOnly] = make_op("UD_SEND_ONLY", ud, kReq | kOpSend | kOpOnly | kPay | kOpHasDeth);
  t[op::kUdSendOnlyImm] =
      make_op("UD_SEND_ONLY_WITH_IMMEDIATE", ud,
              kReq | kOpSend | kOpOnly | kPay | kOpImm | kOpHasDeth | kOpHasImm);
  // RoCEv2 CNP: BTH + 16 reserved bytes, no payload.
  t[op::kCnp] = make_op("CNP", Transport::kCnp, kOpCnp | kOpOnly | kOpHasCnp);
  return t;
}
}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::build_opcode_table();

inline constexpr const OpcodeInfo& opcode_info(uint8_t opcode) { return kOpcodeTable[opcode]; }

// Compile-time spot checks against IBA table 38.
static_assert(kOpcodeTable[op::kRcWriteFirst].ext_len == 16);
static_assert(kOpcodeTable[op::kRcWriteOnlyImm].off(Ext::kImmDt) == 16);
static_assert(kOpcodeTable[op::kRcAtomicAck].ext_len == 12);
static_assert(kOpcodeTable[op::kRcCmpSwap].ext_len == 28);
static_assert(kOpcodeTable[op::kUdSendOnlyImm].off(Ext::kImmDt) == 8);
static_assert(kOpcodeTable[op::kCnp].ext_len == 16);
static_assert(!kOpcodeTable[0x15].valid() && !kOpcodeTable[0xFF].valid());

}  // namespace roce::wire
