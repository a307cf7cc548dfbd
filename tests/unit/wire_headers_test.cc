#include <gtest/gtest.h>

#include <set>
#include <string>

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
