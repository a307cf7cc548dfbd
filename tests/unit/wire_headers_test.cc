#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "stack/wire/builder.h"
#include "stack/wire/opcode.h"

namespace {
using namespace roce::wire;

TEST(ByteOrder, FieldsAreBigEndian) {
  Be24 v;
  v.set(0x123456);
  EXPECT_EQ(v.b[0], 0x12);
  EXPECT_EQ(v.b[2], 0x56);
  EXPECT_EQ(v.get(), 0x123456u);
  Be64 w;
  w.set(0x0102030405060708ull);
  EXPECT_EQ(w.b[0], 1);
  EXPECT_EQ(w.b[7], 8);
  EXPECT_EQ(w.get(), 0x0102030405060708ull);
}

TEST(OpcodeTable, EveryValidEntryIsConsistent) {
  std::set<std::string_view> names;
  int valid = 0;
  for (int i = 0; i < 256; ++i) {
    const OpcodeInfo& o = opcode_info(static_cast<uint8_t>(i));
    if (!o.valid()) {
      EXPECT_EQ(o.name, "UNKNOWN");
      continue;
    }
    ++valid;
    EXPECT_TRUE(names.insert(o.name).second) << o.name;
    // Offsets are increasing, contiguous, and sum to ext_len.
    unsigned total = 0;
    for (unsigned e = 0; e < kExtCount; ++e) {
      if (o.ext_off[e] == 0xFF) continue;
      EXPECT_EQ(o.ext_off[e], total) << o.name;
      total += kExtSize[e];
    }
    EXPECT_EQ(total, o.ext_len) << o.name;
    // Exactly one position, or first+last (only).
    const bool first = o.flags & kOpFirst, middle = o.flags & kOpMiddle, last = o.flags & kOpLast;
    EXPECT_TRUE((first || middle || last) && !(middle && (first || last))) << o.name;
    // A packet is a request, a response, or a CNP.
    const int kinds = !!(o.flags & kOpRequest) + !!(o.flags & kOpResponse) + !!(o.flags & kOpCnp);
    EXPECT_EQ(kinds, 1) << o.name;
    // The transport bits (IBA table 38) agree with the transport.
    if (o.transport == Transport::kRc) {
      EXPECT_EQ(i >> 5, 0);
    }
    if (o.transport == Transport::kUc) {
      EXPECT_EQ(i >> 5, 1);
    }
    if (o.transport == Transport::kUd) {
      EXPECT_EQ(i >> 5, 3);
    }
    // Headers that come with message boundaries.
    if (o.has(kOpWrite | kOpFirst)) {
      EXPECT_TRUE(o.has_ext(Ext::kReth)) << o.name;
    }
    if (o.has(kOpImm)) {
      EXPECT_TRUE(o.has_ext(Ext::kImmDt)) << o.name;
    }
    if (o.has(kOpImm) || o.has(kOpInv)) {
      EXPECT_TRUE(o.flags & kOpLast) << o.name;
    }
  }
  EXPECT_EQ(valid, 23 + 12 + 2 + 1);  // RC, UC, UD, CNP
}

TEST(OpcodeTable, KnownEntries) {
  EXPECT_EQ(opcode_info(op::kRcReadRespMiddle).ext_len, 0);
  EXPECT_TRUE(opcode_info(op::kRcReadRespFirst).has_ext(Ext::kAeth));
  EXPECT_FALSE(opcode_info(op::kRcReadRespMiddle).has_ext(Ext::kAeth));
  EXPECT_EQ(opcode_info(op::kRcAtomicAck).off(Ext::kAtomicAckEth), 4);
  EXPECT_EQ(opcode_info(op::kRcSendOnlyInv).off(Ext::kIeth), 0);
  EXPECT_TRUE(opcode_info(op::kRcReadRequest).has(kOpRequest | kOpRead));
  EXPECT_FALSE(opcode_info(op::kRcReadRequest).has(kOpPayload));
  EXPECT_EQ(opcode_info(op::kCnp).transport_hdr_len(), 28u);
}

// Every opcode of IBA table 38 that the stack speaks, and annex A17's CNP, written out here
// independently of the table: what it is, where it sits in a message, whether it carries payload,
// and its extension headers in wire order. Every other opcode is invalid.
TEST(OpcodeTable, MatchesIbaTable38) {
  struct Row {
    uint8_t opcode;
    Transport transport;
    uint32_t what;   // request/response/CNP, operation, immediate/invalidate
    uint32_t where;  // first/middle/last/only
    bool payload;
    std::vector<Ext> exts;  // in wire order
  };
  constexpr uint32_t kReq = kOpRequest, kResp = kOpResponse;
  std::vector<Row> rows;
  // RC and UC share the SEND and RDMA WRITE opcodes (transport bits 000 and 001).
  for (auto [base, t] : {std::pair{0x00, Transport::kRc}, std::pair{0x20, Transport::kUc}}) {
    const auto b = static_cast<uint8_t>(base);
    rows.push_back({uint8_t(b + 0x00), t, kReq | kOpSend, kOpFirst, true, {}});
    rows.push_back({uint8_t(b + 0x01), t, kReq | kOpSend, kOpMiddle, true, {}});
    rows.push_back({uint8_t(b + 0x02), t, kReq | kOpSend, kOpLast, true, {}});
    rows.push_back({uint8_t(b + 0x03), t, kReq | kOpSend | kOpImm, kOpLast, true, {Ext::kImmDt}});
    rows.push_back({uint8_t(b + 0x04), t, kReq | kOpSend, kOpOnly, true, {}});
    rows.push_back({uint8_t(b + 0x05), t, kReq | kOpSend | kOpImm, kOpOnly, true, {Ext::kImmDt}});
    rows.push_back({uint8_t(b + 0x06), t, kReq | kOpWrite, kOpFirst, true, {Ext::kReth}});
    rows.push_back({uint8_t(b + 0x07), t, kReq | kOpWrite, kOpMiddle, true, {}});
    rows.push_back({uint8_t(b + 0x08), t, kReq | kOpWrite, kOpLast, true, {}});
    rows.push_back({uint8_t(b + 0x09), t, kReq | kOpWrite | kOpImm, kOpLast, true, {Ext::kImmDt}});
    rows.push_back({uint8_t(b + 0x0A), t, kReq | kOpWrite, kOpOnly, true, {Ext::kReth}});
    rows.push_back(
        {uint8_t(b + 0x0B), t, kReq | kOpWrite | kOpImm, kOpOnly, true, {Ext::kReth, Ext::kImmDt}});
  }
  const Transport rc = Transport::kRc;
  rows.push_back({0x0C, rc, kReq | kOpRead, kOpOnly, false, {Ext::kReth}});
  rows.push_back({0x0D, rc, kResp | kOpRead, kOpFirst, true, {Ext::kAeth}});
  rows.push_back({0x0E, rc, kResp | kOpRead, kOpMiddle, true, {}});
  rows.push_back({0x0F, rc, kResp | kOpRead, kOpLast, true, {Ext::kAeth}});
  rows.push_back({0x10, rc, kResp | kOpRead, kOpOnly, true, {Ext::kAeth}});
  rows.push_back({0x11, rc, kResp | kOpAck, kOpOnly, false, {Ext::kAeth}});
  rows.push_back(
      {0x12, rc, kResp | kOpAck | kOpAtomic, kOpOnly, false, {Ext::kAeth, Ext::kAtomicAckEth}});
  rows.push_back({0x13, rc, kReq | kOpAtomic, kOpOnly, false, {Ext::kAtomicEth}});
  rows.push_back({0x14, rc, kReq | kOpAtomic, kOpOnly, false, {Ext::kAtomicEth}});
  rows.push_back({0x16, rc, kReq | kOpSend | kOpInv, kOpLast, true, {Ext::kIeth}});
  rows.push_back({0x17, rc, kReq | kOpSend | kOpInv, kOpOnly, true, {Ext::kIeth}});
  const Transport ud = Transport::kUd;
  rows.push_back({0x64, ud, kReq | kOpSend, kOpOnly, true, {Ext::kDeth}});
  rows.push_back({0x65, ud, kReq | kOpSend | kOpImm, kOpOnly, true, {Ext::kDeth, Ext::kImmDt}});
  rows.push_back({0x81, Transport::kCnp, kOpCnp, kOpOnly, false, {Ext::kCnp}});

  // Sizes from IBA 9.3 / A17.9.2, not from the table's own kExtSize.
  const auto size_of = [](Ext e) -> unsigned {
    switch (e) {
      case Ext::kDeth:
        return 8;
      case Ext::kReth:
        return 16;
      case Ext::kAtomicEth:
        return 28;
      case Ext::kAeth:
        return 4;
      case Ext::kAtomicAckEth:
        return 8;
      case Ext::kImmDt:
        return 4;
      case Ext::kIeth:
        return 4;
      case Ext::kCnp:
        return 16;
      default:
        return 0;
    }
  };
  const auto has_bit = [](Ext e) -> uint32_t {
    switch (e) {
      case Ext::kDeth:
        return kOpHasDeth;
      case Ext::kReth:
        return kOpHasReth;
      case Ext::kAtomicEth:
        return kOpHasAtomicEth;
      case Ext::kAeth:
        return kOpHasAeth;
      case Ext::kAtomicAckEth:
        return kOpHasAtomicAckEth;
      case Ext::kImmDt:
        return kOpHasImm;
      case Ext::kIeth:
        return kOpHasIeth;
      case Ext::kCnp:
        return kOpHasCnp;
      default:
        return 0;
    }
  };
  std::set<int> listed;
  for (const Row& r : rows) {
    listed.insert(r.opcode);
    const OpcodeInfo& o = opcode_info(r.opcode);
    SCOPED_TRACE(::testing::Message() << "opcode 0x" << std::hex << int(r.opcode) << " " << o.name);
    ASSERT_TRUE(o.valid());
    EXPECT_EQ(o.transport, r.transport);
    uint32_t flags = kOpValid | r.what | r.where | (r.payload ? kOpPayload : 0u);
    unsigned off = 0;
    std::array<uint8_t, kExtCount> want_off{};
    want_off.fill(0xFF);
    for (Ext e : r.exts) {
      flags |= has_bit(e);
      want_off.at(static_cast<unsigned>(e)) = static_cast<uint8_t>(off);
      off += size_of(e);
    }
    EXPECT_EQ(o.flags, flags) << std::hex << (o.flags ^ flags);
    EXPECT_EQ(o.ext_off, want_off);
    EXPECT_EQ(o.ext_len, off);
  }
  EXPECT_EQ(listed.size(), 38u);
  for (int i = 0; i < 256; ++i) {
    if (!listed.count(i)) {
      EXPECT_FALSE(opcode_info(static_cast<uint8_t>(i)).valid()) << i;
    }
  }
}

// The bit fields of the headers, read back from their bytes.
TEST(Headers, BitFieldAccessors) {
  VlanTag tag{};
  tag.tci.set(0xA123);  // PCP 5, DEI 0, VID 0x123
  EXPECT_EQ(tag.pcp(), 5);
  EXPECT_EQ(tag.vid(), 0x123);
  tag.tci.set(0x1FFF);  // PCP 0, DEI 1, VID 0xFFF
  EXPECT_EQ(tag.pcp(), 0);
  EXPECT_EQ(tag.vid(), 0xFFF);

  Ipv6Hdr ip6{};
  ip6.ver_tc_flow.set(0x6ABFEDCBu);  // version 6, traffic class 0xAB, flow label 0xFEDCB
  EXPECT_EQ(ip6.traffic_class(), 0xAB);
  EXPECT_EQ(ip6.flow_label(), 0xFEDCBu);

  Bth bth{};
  bth.se_m_pad_tver = 0x80 | 0x30 | 0x08;  // SE, pad 3, TVer 8
  EXPECT_TRUE(bth.solicited());
  EXPECT_FALSE(bth.mig_req());
  EXPECT_EQ(bth.pad_count(), 3);
  EXPECT_EQ(bth.tver(), 8);
  bth.se_m_pad_tver = 0x40 | 0x10;  // MigReq, pad 1
  EXPECT_FALSE(bth.solicited());
  EXPECT_TRUE(bth.mig_req());
  EXPECT_EQ(bth.pad_count(), 1);
  EXPECT_EQ(bth.tver(), 0);
  bth.fecn_becn = 0x80;
  EXPECT_TRUE(bth.fecn());
  EXPECT_FALSE(bth.becn());
  bth.fecn_becn = 0x40;
  EXPECT_FALSE(bth.fecn());
  EXPECT_TRUE(bth.becn());
  bth.fecn_becn = 0x3F;  // reserved bits only
  EXPECT_FALSE(bth.fecn());
  EXPECT_FALSE(bth.becn());
  bth.ackreq = 0x7F;
  EXPECT_FALSE(bth.ack_req());
  bth.ackreq = 0x80;
  EXPECT_TRUE(bth.ack_req());
}

// AETH syndrome types by bits 6:5 (IBA 9.7.5.1), whatever the low five bits hold.
TEST(Headers, AethSyndromeTypes) {
  EXPECT_EQ(aeth_type(0x00), AethType::kAck);
  EXPECT_EQ(aeth_type(kAethAckUnlimitedCredits), AethType::kAck);
  EXPECT_EQ(aeth_type(kAethRnrNak), AethType::kRnrNak);
  EXPECT_EQ(aeth_type(kAethRnrNak | 0x1F), AethType::kRnrNak);
  EXPECT_EQ(aeth_type(0x40), AethType::kReserved);
  for (NakCode c : {NakCode::kPsnSeqError, NakCode::kInvalidRequest, NakCode::kRemoteAccessError,
                    NakCode::kRemoteOperationalError, NakCode::kInvalidRdRequest}) {
    EXPECT_EQ(aeth_type(static_cast<uint8_t>(c)), AethType::kNak) << int(c);
  }
  // Bit 7 is reserved: it does not change the type.
  EXPECT_EQ(aeth_type(0x80 | kAethRnrNak), AethType::kRnrNak);
}

TEST(Builder, HeaderLengths) {
  EXPECT_EQ(l2l4_header_len(false, IpFamily::kIpv4), 42u);
  EXPECT_EQ(l2l4_header_len(true, IpFamily::kIpv4), 46u);
  EXPECT_EQ(l2l4_header_len(false, IpFamily::kIpv6), 62u);
  EXPECT_EQ(pad_for(0), 0);
  EXPECT_EQ(pad_for(1), 3);
  EXPECT_EQ(pad_for(2), 2);
  EXPECT_EQ(pad_for(3), 1);
  EXPECT_EQ(pad_for(4), 0);
}
}  // namespace
