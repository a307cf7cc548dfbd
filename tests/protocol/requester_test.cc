// Requester and completer protocol tests: what one RC QP sends for each work request, and how it
// reacts to ACKs, NAKs, READ responses, lost responses and timeouts (IBA 9.7.4, 9.7.5.2).
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "../support/scripted_port.h"
#include "stack/wire/psn.h"

namespace {
using namespace roce;
using namespace roce::test;
namespace op = wire::op;
using wire::NakCode;
using wire::psn_add;

constexpr uint32_t S0 = ProtocolHarness::kLocalPsn;
constexpr uint8_t kAck = wire::kAethAckUnlimitedCredits;

// A signalled UD SEND of `len` bytes through address handle `ah` to QP 0x33, from `off` in the
// harness's memory (a UC QP ignores the address handle and the Q_Key).
int post_ud(ProtocolHarness& h, uint64_t wr_id, uint32_t ah, uint32_t qkey, uint64_t off = 0,
            uint32_t len = 16) {
  Sge s{h.addr(off), len, h.rkey()};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSendSignaled;
  wr.ah = ah;
  wr.remote_qpn = 0x33;
  wr.remote_qkey = qkey;
  return h.qp()->post_send(wr);
}

// An address handle to the harness's peer in protection domain `pd`.
uint32_t peer_ah_in(ProtocolHarness& h, uint32_t pd) {
  uint32_t ah = 0;
  AhAttr at;
  at.dgid = h.peer_gid();
  at.sgid_index = 1;
  EXPECT_EQ(h.engine().create_ah(pd, at, &ah), 0);
  return ah;
}

// An address handle to the harness's peer for a UD QP; 0 for the other types.
uint32_t peer_ah(ProtocolHarness& h) {
  return h.qp()->type() == QpType::kUd ? peer_ah_in(h, h.qp()->init_attr().pd) : 0;
}

// Runs f(harness, its Q_Key, peer_ah) on a fresh harness with a UD QP, then with a UC one.
template <typename F>
void for_ud_and_uc(F f) {
  for (QpType t : {QpType::kUd, QpType::kUc}) {
    SCOPED_TRACE(t == QpType::kUd ? "UD" : "UC");
    ProtocolHarness::Options o;
    o.qp_type = t;
    ProtocolHarness h(o);
    f(h, o.qkey, peer_ah(h));
  }
}

std::vector<uint8_t> opcodes(const std::vector<Emitted>& v) {
  std::vector<uint8_t> o;
  for (const auto& e : v) o.push_back(e.opcode());
  return o;
}

TEST(Requester, SendIsSegmentedWithAckReqOnLast) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  for (uint32_t i = 0; i < 4 * m; ++i) h.mem()[i] = static_cast<uint8_t>(i);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 3 * m + 1), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(opcodes(out), (std::vector<uint8_t>{op::kRcSendFirst, op::kRcSendMiddle,
                                                op::kRcSendMiddle, op::kRcSendLast}));
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].psn(), S0 + i);
    EXPECT_EQ(out[i].info.ack_req, i == 3);
    EXPECT_EQ(out[i].info.dest_qp, ProtocolHarness::kPeerQpn);
    EXPECT_EQ(out[i].info.payload_len, i < 3 ? m : 1u);
    EXPECT_EQ(std::memcmp(out[i].info.payload(), h.mem() + i * m, out[i].info.payload_len), 0);
  }
  EXPECT_TRUE(h.completions().empty());
  // A coalesced ACK for the last PSN completes it.
  h.exchange({h.peer_frame(op::kRcAck, S0 + 3, h.aeth(kAck, 1))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].opcode, WcOpcode::kSend);
  EXPECT_EQ(c[0].wr_id, 1u);
}

TEST(Requester, WriteCarriesRethOnFirstAndImmOnLast) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  Sge s{h.addr(), 2 * m, h.rkey()};
  SendWr wr{.wr_id = 3,
            .sg_list = &s,
            .num_sge = 1,
            .opcode = WrOpcode::kRdmaWriteWithImm,
            .send_flags = kSendSignaled | kSendSolicited,
            .imm_data = 0x04030201,
            .remote_addr = 0xABCD000,
            .rkey = 0x77};
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode(), op::kRcWriteFirst);
  EXPECT_FALSE(out[0].info.solicited);  // the Solicited Event bit goes on the last packet only
  const wire::Reth& r = out[0].info.ext<wire::Reth>(wire::Ext::kReth);
  EXPECT_EQ(r.va.get(), 0xABCD000u);
  EXPECT_EQ(r.rkey.get(), 0x77u);
  EXPECT_EQ(r.dma_length.get(), 2 * m);
  EXPECT_EQ(out[1].opcode(), op::kRcWriteLastImm);
  EXPECT_TRUE(out[1].info.solicited);
  const auto& imm = out[1].info.ext<wire::ImmDt>(wire::Ext::kImmDt).data;
  EXPECT_EQ(imm[0], 1);
  EXPECT_EQ(imm[3], 4);
}

// A SEND with immediate of several packets: FIRST, MIDDLE, then LAST with the immediate (the
// randomized sim workload caught its loss, but named no cause).
TEST(Requester, SendWithImmCarriesItsImmediateOnTheLastPacket) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  Sge s{h.addr(), 3 * m, h.rkey()};
  SendWr wr{.wr_id = 4,
            .sg_list = &s,
            .num_sge = 1,
            .opcode = WrOpcode::kSendWithImm,
            .send_flags = kSendSignaled,
            .imm_data = 0x08070605};
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  auto out = h.exchange();
  EXPECT_EQ(opcodes(out),
            (std::vector<uint8_t>{op::kRcSendFirst, op::kRcSendMiddle, op::kRcSendLastImm}));
  ASSERT_EQ(out.size(), 3u);
  const auto& imm = out[2].info.ext<wire::ImmDt>(wire::Ext::kImmDt).data;
  EXPECT_EQ(imm[0], 5);
  EXPECT_EQ(imm[3], 8);
}

// Payloads of 256 bytes and more are copied into the frame (and CRCed) by 32-byte stores: they
// go to a 32-byte boundary of the buffer, the frame starting up to 31 bytes into it, when the
// buffer has the room; without it, at the buffer's start as before. Either way the frames are
// whole (the harness parses them with their ICRC) and carry the data.
TEST(Requester, LargePayloadsStartOnA32ByteBoundaryWhenTheBufferHasRoom) {
  for (const bool tight : {false, true}) {
    ProtocolHarness::Options o;
    o.mtu = Mtu::k4096;
    ProtocolHarness h(o);
    const uint32_t m = h.mtu();
    // Headers of a WRITE First over IPv4: Ethernet, IP, UDP, BTH, RETH; a buffer of exactly
    // the frame's size (plus the builder's pad room) leaves no room to move the payload.
    constexpr uint32_t kHdr = 14 + 20 + 8 + 12 + 16;
    if (tight) h.port().buf_cap = kHdr + m + wire::kTrailerRoom;
    for (uint32_t i = 0; i < 2 * m; ++i) h.mem()[i] = static_cast<uint8_t>(i * 7);
    Sge s{h.addr(), m + 300, h.rkey()};
    SendWr wr{.wr_id = 1,
              .sg_list = &s,
              .num_sge = 1,
              .opcode = WrOpcode::kRdmaWrite,
              .send_flags = kSendSignaled,
              .remote_addr = 0x10000,
              .rkey = 0x77};
    ASSERT_EQ(h.qp()->post_send(wr), 0);
    auto out = h.exchange();
    const auto where = h.port().take_placements();
    ASSERT_EQ(out.size(), 2u);
    ASSERT_EQ(where.size(), 2u);
    for (uint32_t i = 0; i < 2; ++i) {
      const uint32_t payload_off = out[i].info.payload_off;
      const uintptr_t payload = where[i].frame + payload_off;
      if (tight && i == 0) {
        EXPECT_EQ(where[i].offset, 0u) << "no room: the frame stays at the buffer's start";
      } else {
        EXPECT_EQ(payload % 32, 0u) << "packet " << i << (tight ? " (tight buffer)" : "");
        EXPECT_LT(where[i].offset, 32u);
      }
      EXPECT_EQ(out[i].info.payload_len, i == 0 ? m : 300u);
      EXPECT_EQ(std::memcmp(out[i].info.payload(), h.mem() + i * m, out[i].info.payload_len), 0);
    }
  }
}

TEST(Requester, NakSequenceErrorGoesBackN) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 4 * m), 0);
  ASSERT_EQ(h.exchange().size(), 4u);
  // The responder saw S0 and S0+1, then a gap: NAK with the PSN it expects.
  auto out = h.exchange(
      {h.peer_frame(op::kRcAck, S0 + 2, h.aeth(static_cast<uint8_t>(NakCode::kPsnSeqError), 0))});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].psn(), S0 + 2);
  EXPECT_EQ(out[0].opcode(), op::kRcSendMiddle);
  EXPECT_EQ(std::memcmp(out[0].info.payload(), h.mem() + 2 * m, m), 0);
  EXPECT_EQ(out[1].opcode(), op::kRcSendLast);
  EXPECT_EQ(h.qp()->counters_.retransmitted_packets, 2u);
  h.exchange({h.peer_frame(op::kRcAck, S0 + 3, h.aeth(kAck, 1))});
  ASSERT_EQ(h.completions().size(), 1u);
}

// A sequence NAK whose PSN is the first of the WQE after a READ still awaiting its response
// goes back to that WQE, not to the READ: the READ is not asked for again (at an offset past
// its end), only the SEND is sent again; the READ's late response still completes it.
TEST(Requester, NakAtTheWqeAfterAnUnansweredReadResendsThatWqeOnly) {
  ProtocolHarness h;
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 100, kSendSignaled, 0x10000, 0x55), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 200, 64), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 2u);
  // The responder took the READ (S0) and then missed something: it expects S0 + 1.
  out = h.exchange(
      {h.peer_frame(op::kRcAck, S0 + 1, h.aeth(static_cast<uint8_t>(NakCode::kPsnSeqError), 0))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcSendOnly);
  EXPECT_EQ(out[0].psn(), S0 + 1);
  ASSERT_EQ(out[0].info.payload_len, 64u);
  EXPECT_EQ(std::memcmp(out[0].info.payload(), h.mem() + 200, 64), 0);
  std::vector<uint8_t> data(100, 0x5a);
  h.exchange({h.peer_frame(op::kRcReadRespOnly, S0, h.aeth(kAck, 1), data.data(), 100),
              h.peer_frame(op::kRcAck, S0 + 1, h.aeth(kAck, 2))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(c[1].status, WcStatus::kSuccess);
  EXPECT_EQ(h.mem()[0], 0x5a);
}

// A message held by a full window, whose every packet sent so far is then acknowledged, goes on
// where it stopped: no rewind is counted, nothing is sent twice.
TEST(Requester, AWindowFullyAcknowledgedIsNoRewind) {
  ProtocolHarness::Options o;
  o.max_inflight_psns = 4;
  ProtocolHarness h(o);
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 10 * m), 0);
  uint32_t next = S0;
  auto expect_next = [&](const std::vector<Emitted>& out, size_t n) {
    ASSERT_EQ(out.size(), n);
    for (const Emitted& e : out) EXPECT_EQ(e.psn(), next++);
  };
  expect_next(h.exchange(), 4);
  expect_next(h.exchange({h.peer_frame(op::kRcAck, S0 + 3, h.aeth(kAck, 0))}), 4);
  expect_next(h.exchange({h.peer_frame(op::kRcAck, S0 + 7, h.aeth(kAck, 0))}), 2);
  h.exchange({h.peer_frame(op::kRcAck, S0 + 9, h.aeth(kAck, 1))});
  ASSERT_EQ(h.completions().size(), 1u);
  EXPECT_EQ(h.qp()->counters_.retransmit_events, 0u);
  EXPECT_EQ(h.qp()->counters_.retransmitted_packets, 0u);
}

TEST(Requester, LocalAckTimeoutRetransmitsFromOldestUnacked) {
  ProtocolHarness h;  // timeout 10: 4.19 ms
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 100), 0);
  ASSERT_EQ(h.exchange().size(), 2u);
  EXPECT_TRUE(h.advance(4'000'000).empty());  // not yet
  auto out = h.advance(400'000);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].psn(), S0);
  EXPECT_EQ(out[1].psn(), S0 + 1);
  EXPECT_EQ(h.qp()->counters_.local_ack_timeouts, 1u);
  // Progress stops the timer.
  h.exchange({h.peer_frame(op::kRcAck, S0 + 1, h.aeth(kAck, 2))});
  EXPECT_EQ(h.completions().size(), 2u);
  EXPECT_TRUE(h.advance(20'000'000).empty());
}

// The engine did not run for longer than the local ACK timeout (its thread descheduled on a
// loaded machine) while the ACK waited in the receive ring behind a full burst of other frames:
// the timer that expired meanwhile restarts (EngineConfig::stall_ns) instead of costing a retry
// and a retransmission. A peer that really is silent still times out a period later.
TEST(Requester, ATimerThatExpiredWhileTheEngineDidNotRunRestarts) {
  ProtocolHarness::Options o;  // timeout 10: 4.19 ms
  o.stall_ns = 1'000'000;
  ProtocolHarness h(o);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  ASSERT_EQ(h.exchange().size(), 1u);
  // 40 frames for a QP that does not exist, then the ACK: the first poll's burst (32) cannot
  // reach it.
  for (int i = 0; i < 40; ++i) {
    auto f = h.peer_frame(op::kRcAck, S0, h.aeth(kAck, 1));
    f[14 + 20 + 8 + 5] ^= 0x40;  // BTH destination QP: another (an unknown) QP
    h.port().inject(std::move(f));
  }
  h.port().inject(h.peer_frame(op::kRcAck, S0, h.aeth(kAck, 1)));
  h.clock().advance(10'000'000);
  EXPECT_TRUE(h.exchange().empty());
  EXPECT_EQ(h.qp()->counters_.local_ack_timeouts, 0u);
  EXPECT_EQ(h.qp()->counters_.retransmitted_packets, 0u);
  EXPECT_EQ(h.engine().counters().stall_restarted_timers, 1u);
  EXPECT_GE(h.engine().counters().longest_poll_gap_us, 10'000u);
  ASSERT_EQ(h.completions().size(), 1u);
  // Nothing answers this one: a stall restarts its timer once, then it times out as ever.
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 100), 0);
  ASSERT_EQ(h.exchange().size(), 1u);
  h.clock().advance(10'000'000);
  EXPECT_TRUE(h.exchange().empty());
  EXPECT_EQ(h.engine().counters().stall_restarted_timers, 2u);
  EXPECT_TRUE(h.advance(4'000'000).empty());
  EXPECT_EQ(h.advance(400'000).size(), 1u);
  EXPECT_EQ(h.qp()->counters_.local_ack_timeouts, 1u);
}

TEST(Requester, RetryExhaustionFailsWithRetryExcAndFlushes) {
  ProtocolHarness::Options o;
  o.retry_cnt = 2;
  ProtocolHarness h(o);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 2, 0, 100, 0), 0);  // unsignalled
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 3, 0, 100), 0);
  h.exchange();
  // First try + 2 retries, then the error.
  int sends = 0;
  for (int i = 0; i < 5; ++i) sends += static_cast<int>(h.advance(4'400'000).size());
  EXPECT_EQ(sends, 2 * 3);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(c[1].wr_id, 2u);  // unsignalled, but flushed WRs always complete
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(c[2].wr_id, 3u);
  EXPECT_EQ(c[2].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
  // Later work requests are flushed too, and receives.
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 4, 0, 8), 0);
  h.post_recv(5, 0, 8);
  h.exchange();
  c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(c[1].opcode, WcOpcode::kRecv);
}

// PSN sequence error NAKs spend the retry budget as local ACK timeouts do (IBA 9.7.5.2.2; rxe the
// same): a peer that NAKs every retransmission fails the WQE with RETRY_EXC_ERR after retry_cnt
// retries, instead of being retried for ever.
TEST(Requester, SequenceNaksSpendTheRetryBudget) {
  ProtocolHarness::Options o;
  o.retry_cnt = 2;
  ProtocolHarness h(o);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  ASSERT_EQ(h.exchange().size(), 1u);
  const auto seq_nak = [&] {
    return h.exchange(
        {h.peer_frame(op::kRcAck, S0, h.aeth(static_cast<uint8_t>(NakCode::kPsnSeqError)))});
  };
  for (int i = 0; i < 2; ++i) EXPECT_EQ(seq_nak().size(), 1u) << "retry " << i;
  EXPECT_TRUE(h.completions().empty());
  EXPECT_TRUE(seq_nak().empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

TEST(Requester, RnrNakWaitsTheTimerThenRetries) {
  ProtocolHarness h;
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  h.exchange();
  // RNR NAK with timer code 16: 2.56 ms.
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(wire::kAethRnrNak | 16))}).empty());
  EXPECT_TRUE(h.advance(2'400'000).empty());
  auto out = h.advance(300'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), S0);
  EXPECT_EQ(h.qp()->counters_.rnr_naks_received, 1u);
}

TEST(Requester, RnrRetryExhaustion) {
  ProtocolHarness::Options o;
  o.rnr_retry = 1;
  ProtocolHarness h(o);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 100), 0);
  h.exchange();
  h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(wire::kAethRnrNak | 1))});
  ASSERT_EQ(h.advance(100'000).size(), 2u);  // one retry (0.01 ms timer)
  h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(wire::kAethRnrNak | 1))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

// rnr_retry counts the RNR retries of the message being retried: forward progress refills it,
// as it does retry_cnt (rxe does the same). It used to be set once, at RTS, so a QP with
// rnr_retry N failed on its (N+1)th RNR NAK, however many messages had completed in between.
TEST(Requester, ForwardProgressRefillsTheRnrRetryBudget) {
  ProtocolHarness::Options o;
  o.rnr_retry = 1;
  ProtocolHarness h(o);
  for (uint32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const uint32_t psn = psn_add(S0, i);
    ASSERT_EQ(h.post_send(WrOpcode::kSend, 10 + i, 0, 100), 0);
    ASSERT_EQ(h.exchange().size(), 1u);
    EXPECT_TRUE(h.exchange({h.peer_frame(op::kRcAck, psn, h.aeth(wire::kAethRnrNak | 1))}).empty());
    auto out = h.advance(100'000);  // the one retry rnr_retry allows (0.01 ms timer)
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].psn(), psn);
    h.exchange({h.peer_frame(op::kRcAck, psn, h.aeth(kAck, i + 1))});
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 10u + i);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(h.qp()->state(), QpState::kRts);
}

// RESET returns a QP to its freshly created state (IBA 10.3.1), the transport state of its send
// queue slots included. A slot of a WQE flushed by the error state used to keep its PSNs, and
// the WQE that reused it after a reconnect took them for its own: an ACK for an earlier PSN
// completed it before it had been acknowledged.
TEST(Requester, ResetForgetsTheSendSlotsOfFlushedWorkRequests) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 100), 0);
  ASSERT_EQ(h.exchange().size(), 2u);
  h.exchange(
      {h.peer_frame(op::kRcAck, S0, h.aeth(static_cast<uint8_t>(NakCode::kRemoteAccessError)))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
  QpAttr a;
  a.qp_state = QpState::kReset;
  ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState), 0);
  h.connect();
  // Walk the send queue round to the flushed WQE's slot: every slot index is used once.
  const uint32_t slots = h.qp()->sq_.capacity();
  for (uint32_t i = 2; i < slots; ++i) {
    ASSERT_EQ(h.post_send(WrOpcode::kSend, 100 + i, 0, 8, 0), 0);
    ASSERT_EQ(h.exchange().size(), 1u);
    h.exchange({h.peer_frame(op::kRcAck, psn_add(S0, i - 2), h.aeth(kAck, i - 1))});
  }
  EXPECT_TRUE(h.completions().empty());  // unsignalled
  // Slot 0 held the failed WQE (completed, cleared); slot 1 the flushed one.
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 200, 0, 8, 0), 0);
  ASSERT_EQ(h.exchange().size(), 1u);
  const uint32_t next = psn_add(S0, slots - 1);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 99, 0, 3 * m), 0);  // slot 1
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].psn(), next);
  // The first of its three packets is acknowledged: it is not complete.
  h.exchange({h.peer_frame(op::kRcAck, next, h.aeth(kAck, slots - 1))});
  EXPECT_TRUE(h.completions().empty());
  h.exchange({h.peer_frame(op::kRcAck, psn_add(next, 2), h.aeth(kAck, slots))});
  c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 99u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

// A destination that never resolves fails the QP's work instead of holding it for ever (rdma-core
// fails the transition to RTR with ETIMEDOUT when it cannot resolve a RoCE peer): what is posted
// completes with RETRY_EXC_ERR, at once if it waits, or at the next post, whatever retry_cnt says.
// An RC QP goes to ERR, a UC QP to SQE (a UC send queue error).
TEST(Requester, ADestinationThatNeverResolvesFailsTheWorkPosted) {
  for (const auto& [type, posted_first] : {std::pair{QpType::kRc, true},
                                           {QpType::kRc, false},
                                           {QpType::kUc, true},
                                           {QpType::kUc, false}}) {
    SCOPED_TRACE(::testing::Message() << (type == QpType::kRc ? "RC " : "UC ") << posted_first);
    ProtocolHarness::Options o;
    o.qp_type = type;
    o.peer_mac_known = false;  // retry_cnt 7: retransmissions would never give up
    ProtocolHarness h(o);
    if (posted_first) {
      ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
      ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 2, 0, 100, 0), 0);
      EXPECT_TRUE(h.exchange().empty());
      EXPECT_TRUE(h.completions().empty());
      h.fail_peer();
    } else {
      h.fail_peer();
      EXPECT_TRUE(h.exchange().empty());
      EXPECT_EQ(h.qp()->state(), QpState::kRts);  // nothing posted: nothing fails yet
      ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
      ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 2, 0, 100, 0), 0);
    }
    EXPECT_TRUE(h.exchange().empty());
    auto c = h.completions();
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].wr_id, 1u);
    EXPECT_EQ(c[0].status, WcStatus::kRetryExcErr);
    EXPECT_EQ(c[1].wr_id, 2u);
    EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(h.qp()->state(), type == QpType::kRc ? QpState::kErr : QpState::kSqe);
    EXPECT_EQ(h.engine().counters().neighbor_failed_sends, 1u);
  }
}

// UD: a datagram for an address handle whose destination never resolved is dropped (UD promises
// no delivery) instead of holding the send queue, and the datagrams behind it to other
// destinations, for ever.
TEST(Requester, UdDatagramsToAnAddressThatNeverResolvedAreDropped) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUd;
  o.peer_mac_known = false;
  ProtocolHarness h(o);
  const uint32_t pd = h.qp()->init_attr().pd;
  AhAttr at;
  at.dgid = h.peer_gid();
  at.sgid_index = 1;
  uint32_t lost = 0, known = 0;
  ASSERT_EQ(h.engine().create_ah(pd, at, &lost), 0);
  at.dgid = Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 3};
  h.engine().neighbors().add_static(at.dgid, Mac{0x02, 0, 0, 0, 0, 0x03});
  ASSERT_EQ(h.engine().create_ah(pd, at, &known), 0);
  auto post = [&](uint64_t wr_id, uint32_t ah) { return post_ud(h, wr_id, ah, o.qkey); };
  ASSERT_EQ(post(1, lost), 0);
  ASSERT_EQ(post(2, known), 0);
  EXPECT_TRUE(h.exchange().empty());  // the first waits for its MAC, the second behind it
  h.fail_peer();
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].info.dest_qp, 0x33u);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[1].status, WcStatus::kSuccess);
  EXPECT_EQ(h.engine().counters().neighbor_failed_sends, 1u);
  // The address is asked again; once it resolves, datagrams go.
  h.resolve_peer();
  ASSERT_EQ(post(3, lost), 0);
  EXPECT_EQ(h.exchange().size(), 1u);
  EXPECT_EQ(h.engine().counters().neighbor_failed_sends, 1u);
}

// A peer whose MAC changes once connected (a gratuitous ARP or an override NA: its NIC or VM
// moved) is followed, by QPs and address handles alike, as rxe follows it through the kernel's
// neighbour table. Only paths still waiting for a MAC used to take the answer: the others kept
// sending to the old address until their retries ran out.
TEST(Requester, FollowsAPeerWhoseMacChanged) {
  const Mac moved{0x02, 0, 0, 0, 0, 0x09};
  auto dst_mac = [](const Emitted& e) {
    Mac m;
    std::memcpy(m.data(), e.bytes.data(), 6);
    return m;
  };
  {
    SCOPED_TRACE("RC");
    ProtocolHarness::Options o;
    o.peer_mac_known = false;  // learned, not a static entry (those the wire never changes)
    ProtocolHarness h(o);
    h.resolve_peer();
    ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
    auto out = h.exchange();
    ASSERT_EQ(out.size(), 1u);
    const Mac before = dst_mac(out[0]);
    EXPECT_NE(before, moved);
    h.engine().neighbors().learn(h.peer_gid(), moved);
    h.engine().on_neighbor_resolved(h.peer_gid());
    ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 100), 0);
    out = h.exchange();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(dst_mac(out[0]), moved);
  }
  {
    SCOPED_TRACE("UD address handle");
    ProtocolHarness::Options o;
    o.qp_type = QpType::kUd;
    ProtocolHarness h(o);
    AhAttr at;
    at.dgid = Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 3};
    at.sgid_index = 1;
    h.engine().neighbors().learn(at.dgid, Mac{0x02, 0, 0, 0, 0, 0x03});
    uint32_t ah = 0;
    ASSERT_EQ(h.engine().create_ah(h.qp()->init_attr().pd, at, &ah), 0);
    auto post = [&](uint64_t wr_id) { return post_ud(h, wr_id, ah, o.qkey); };
    ASSERT_EQ(post(1), 0);
    auto out = h.exchange();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(dst_mac(out[0]), (Mac{0x02, 0, 0, 0, 0, 0x03}));
    h.engine().neighbors().learn(at.dgid, moved);
    h.engine().on_neighbor_resolved(at.dgid);
    ASSERT_EQ(post(2), 0);
    out = h.exchange();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(dst_mac(out[0]), moved);
  }
}

// UD: the application's traffic class gives the DSCP; the ECN bits are the stack's, as for RC
// and UC (modify_qp): a datagram leaves Not-ECT. A sender never marks CE itself (RFC 3168 5);
// an address handle with traffic class 0x0B sent every datagram CE-marked.
TEST(Requester, UdDatagramsTakeTheDscpButNotTheEcnBitsOfTheAddressHandle) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUd;
  ProtocolHarness h(o);
  AhAttr at;
  at.dgid = h.peer_gid();
  at.sgid_index = 1;
  at.traffic_class = 2 << 2 | 3;  // DSCP 2, CE
  uint32_t ah = 0;
  ASSERT_EQ(h.engine().create_ah(h.qp()->init_attr().pd, at, &ah), 0);
  ASSERT_EQ(post_ud(h, 1, ah, o.qkey), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].info.traffic_class, 2 << 2);
  EXPECT_EQ(out[0].info.ecn(), wire::Ecn::kNotEct);
  ASSERT_EQ(h.completions().size(), 1u);
}

// A QP held by its pacer is scheduled at once when a rate increase lets it go now: the increase
// cancels its pacing timer, so nothing else would wake it (it would wait for its retransmission
// timer, 4 ms here). Four CNPs cut the rate to 6.25 Gb/s (alpha 1): a 4 KiB frame then costs
// 5.3 us, so the pacer holds the QP across timer ticks, and the increase timer (55 us) fires
// while a 128 KiB WRITE is being paced.
TEST(Requester, ARateIncreaseReleasesAQpHeldByItsPacer) {
  ProtocolHarness::Options o;
  o.cc = CcKind::kDcqcn;
  o.mtu = Mtu::k4096;
  ProtocolHarness h(o);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(h.exchange({h.peer_frame(op::kCnp, 0, {}, 0, false)}).empty());
  }
  ASSERT_EQ(h.qp()->cc_.rp.rate_gbps(), EngineConfig{}.dcqcn.line_gbps / 16);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 128 * 1024), 0);
  std::vector<Emitted> out = h.exchange();
  const std::vector<Emitted> later = h.advance(1'000'000);
  out.insert(out.end(), later.begin(), later.end());
  EXPECT_EQ(out.size(), 32u);
  EXPECT_GT(h.engine().counters().paced, 0u);
  EXPECT_GT(h.qp()->cc_.rp.counters().timer_events, 0u);
}

// A QP's rate limit paces what it sends: at 1 Gb/s a 4 KiB-MTU frame (4,154 bytes on the wire)
// takes 33.2 us, so a 64 KiB WRITE's 16 frames take 0.53 ms where they went at once without the
// limit; the burst tolerance (8.2 us at this rate) lets at most one frame more go early. Lifting
// the limit (0) mid-message lets the rest go at once.
TEST(Requester, ARateLimitPacesTheQpAndLiftingItReleasesIt) {
  ProtocolHarness::Options o;
  o.mtu = Mtu::k4096;
  o.cc = CcKind::kNone;
  for (const bool limited : {false, true}) {
    ProtocolHarness h(o);
    if (limited) {
      ASSERT_EQ(h.set_rate_limit(1'000'000), 0);  // kb/s
    }
    ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 64 * 1024), 0);
    std::vector<Emitted> out = h.exchange();
    if (!limited) {
      EXPECT_EQ(out.size(), 16u);
      EXPECT_EQ(h.engine().counters().paced, 0u);
      continue;
    }
    EXPECT_LE(out.size(), 2u);
    // After 200 us: at most 200 / 33.2 frames more, and one for the tolerance.
    const std::vector<Emitted> in_200us = h.advance(200'000);
    EXPECT_LE(out.size() + in_200us.size(), 2u + 7u);
    EXPECT_GE(out.size() + in_200us.size(), 2u + 5u);
    EXPECT_GT(h.engine().counters().paced, 0u);
    ASSERT_EQ(h.set_rate_limit(0), 0);
    const std::vector<Emitted> rest = h.exchange();
    EXPECT_EQ(out.size() + in_200us.size() + rest.size(), 16u);
  }
}

// UC and UD QPs are paced by a rate limit too: they send through ud_send, which once took the
// limit (UC) and sent at full speed. UC: a 64 KiB WRITE at 1 Gb/s, as the RC test above. UD: ten
// 16-byte SENDs at 10 Mb/s, a frame (90 bytes: Ethernet, IPv4, UDP, BTH, DETH, payload, ICRC)
// every 72 us; lifting the limit releases the rest.
TEST(Requester, ARateLimitPacesUcAndUdQps) {
  for (const QpType t : {QpType::kUc, QpType::kUd}) {
    SCOPED_TRACE(t == QpType::kUc ? "UC" : "UD");
    ProtocolHarness::Options o;
    o.mtu = Mtu::k4096;
    o.cc = CcKind::kNone;
    o.qp_type = t;
    ProtocolHarness h(o);
    const uint32_t ah = peer_ah(h);
    size_t total = 0;
    if (t == QpType::kUc) {
      ASSERT_EQ(h.set_rate_limit(1'000'000), 0);
      ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 64 * 1024), 0);
      total = 16;
    } else {
      ASSERT_EQ(h.set_rate_limit(10'000), 0);
      for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(post_ud(h, i, ah, o.qkey), 0);
      total = 10;
    }
    const std::vector<Emitted> out = h.exchange();
    EXPECT_LE(out.size(), 2u);
    const uint64_t window_ns = t == QpType::kUc ? 200'000 : 300'000;  // 6.0 and 4.2 frames' time
    const std::vector<Emitted> later = h.advance(window_ns);
    EXPECT_LE(out.size() + later.size(), t == QpType::kUc ? 9u : 7u);
    EXPECT_GE(out.size() + later.size(), t == QpType::kUc ? 7u : 5u);
    EXPECT_GT(h.engine().counters().paced, 0u);
    ASSERT_EQ(h.set_rate_limit(0), 0);
    const std::vector<Emitted> rest = h.exchange();
    EXPECT_EQ(out.size() + later.size() + rest.size(), total);
  }
}

// ibv_modify_qp_rate_limit's burst cap: frames of the typical size leave at most max_burst_sz
// bytes back to back. At 1 Gb/s a 4 KiB frame takes 33 us, so the default tolerance lets one go at
// once; the QP's largest data frame here is 42 (Ethernet, IPv4, UDP) + 32 (BTH, RETH, ImmDt) +
// 4096 + 4 (ICRC) = 4174 bytes, the typical size by default.
TEST(Requester, ARateLimitsBurstCapSetsHowManyFramesLeaveAtOnce) {
  ProtocolHarness::Options o;
  o.mtu = Mtu::k4096;
  o.cc = CcKind::kNone;
  struct Case {
    uint32_t burst;
    uint16_t pkt;
    size_t at_once;
  };
  // At 2 x 4174 - 5 bytes the tolerance, 4169 bytes, is one short of what the first frame
  // charged (4170: a WRITE's first frame has no ImmDt), so the second waits.
  for (const Case c : {Case{0, 0, 1}, Case{4 * 4174, 0, 4}, Case{2 * 4174, 0, 2},
                       Case{2 * 4174 - 5, 0, 1}, Case{4 * 4174, 8000, 3}, Case{1000, 0, 1}}) {
    SCOPED_TRACE(testing::Message() << "burst " << c.burst << ", packet " << c.pkt);
    ProtocolHarness h(o);
    ASSERT_EQ(h.set_rate_limit(1'000'000, c.burst, c.pkt), 0);
    ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 64 * 1024), 0);
    const std::vector<Emitted> out = h.exchange();
    EXPECT_EQ(out.size(), c.at_once);
    // The burst spent, frames follow at the rate: 200 us hold 6 of 33.2 us, give or take one.
    const std::vector<Emitted> in_200us = h.advance(200'000);
    EXPECT_GE(in_200us.size(), 5u);
    EXPECT_LE(in_200us.size(), 7u);
  }
}

// A UD QP's default typical packet is a whole datagram at the port's MTU, with the longer
// (IPv6) headers since each address handle picks its own path: 62 + 24 (BTH, DETH, ImmDt) +
// 4096 + 4 = 4186 bytes. A cap of that plus three 82-byte datagrams lets four of them go at
// once. (Taken from a connected path, which a UD QP has none of, the default was 1,060 bytes and
// all ten went.)
TEST(Requester, AUdQpsBurstCapCountsWholeDatagramsByDefault) {
  ProtocolHarness::Options o;
  o.mtu = Mtu::k4096;
  o.cc = CcKind::kNone;
  o.qp_type = QpType::kUd;
  ProtocolHarness h(o);
  const uint32_t ah = peer_ah(h);
  ASSERT_EQ(h.set_rate_limit(10'000, 4186 + 3 * 82), 0);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(post_ud(h, i, ah, o.qkey), 0);
  const std::vector<Emitted> out = h.exchange();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].bytes.size(), 82u);
  EXPECT_EQ(out.size(), 4u);
}

// Under DCQCN the rate limit caps what the reaction point allows: at line rate (no CNP yet) the
// limit paces alone, 2 Gb/s here: 16 frames in about 0.27 ms, not at once.
TEST(Requester, ARateLimitCapsDcqcnsRate) {
  ProtocolHarness::Options o;
  o.mtu = Mtu::k4096;
  o.cc = CcKind::kDcqcn;
  ProtocolHarness h(o);
  ASSERT_EQ(h.set_rate_limit(2'000'000), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 64 * 1024), 0);
  std::vector<Emitted> out = h.exchange();
  EXPECT_LE(out.size(), 2u);
  const std::vector<Emitted> in_100us = h.advance(100'000);
  EXPECT_LE(out.size() + in_100us.size(), 2u + 7u);  // 100 us / 16.6 us, and the tolerance
  const std::vector<Emitted> later = h.advance(1'000'000);
  EXPECT_EQ(out.size() + in_100us.size() + later.size(), 16u);
}

// The port's line rate (Engine::set_line_rate: the device saw its NIC's link speed) is where a
// DCQCN QP's rate starts and stops: a QP already running moves to it, and one connected later
// starts at it. 2 Gb/s here: a 64 KiB WRITE's 16 frames go in about 0.27 ms, not at once. QPs
// without DCQCN are not paced by it.
TEST(Requester, TheLinksLineRatePacesDcqcnQpsRunningAndConnectedLater) {
  auto paced = [](ProtocolHarness& h) {
    ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 64 * 1024), 0);
    const std::vector<Emitted> out = h.exchange();
    EXPECT_LE(out.size(), 2u);
    const std::vector<Emitted> in_100us = h.advance(100'000);
    EXPECT_LE(out.size() + in_100us.size(), 2u + 7u);  // 100 us / 16.7 us, and the tolerance
    const std::vector<Emitted> later = h.advance(1'000'000);
    EXPECT_EQ(out.size() + in_100us.size() + later.size(), 16u);
  };
  ProtocolHarness::Options o;
  o.mtu = Mtu::k4096;
  o.cc = CcKind::kDcqcn;
  {
    SCOPED_TRACE("running");
    ProtocolHarness h(o);
    EXPECT_EQ(h.engine().line_rate_gbps(), 100);
    h.engine().set_line_rate(2);
    EXPECT_EQ(h.engine().line_rate_gbps(), 2);
    paced(h);
  }
  {
    SCOPED_TRACE("connected later");
    ProtocolHarness h(o);
    h.engine().set_line_rate(2);
    QpAttr a;
    a.qp_state = QpState::kReset;
    ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState), 0);
    h.connect();
    paced(h);
  }
  {
    SCOPED_TRACE("no DCQCN");
    o.cc = CcKind::kNone;
    ProtocolHarness h(o);
    h.engine().set_line_rate(2);
    ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 64 * 1024), 0);
    EXPECT_EQ(h.exchange().size(), 16u);
  }
}

// SQD (IBA 10.3.1): the send queue drains; no new message starts until the QP is back in RTS.
// UD and UC QPs kept sending every WQE posted while in SQD.
TEST(Requester, UdAndUcStartNothingNewInSqd) {
  for_ud_and_uc([](ProtocolHarness& h, uint32_t qkey, uint32_t ah) {
    auto post = [&](uint64_t wr_id) { return post_ud(h, wr_id, ah, qkey); };
    QpAttr a;
    a.qp_state = QpState::kSqd;
    a.en_sqd_async_notify = 1;
    ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState | kQpEnSqdAsyncNotify), 0);
    ASSERT_EQ(post(1), 0);
    EXPECT_TRUE(h.exchange().empty());
    EXPECT_TRUE(h.completions().empty());
    const std::optional<AsyncEvent> e = h.engine().next_async_event();  // nothing was in flight
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->type, AsyncEventType::kSqDrained);
    a.qp_state = QpState::kRts;
    ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState), 0);
    EXPECT_EQ(h.exchange().size(), 1u);
    EXPECT_EQ(h.completions().size(), 1u);
  });
}

// SQD's drained event (IBA 11.6.3) comes once the message under way has left: a UC message cut
// short by a port that takes nothing is still sending when the QP enters SQD. The event came at
// once, before the rest of the message.
TEST(Requester, UcSqDrainedComesAfterTheMessageUnderWay) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUc;
  ProtocolHarness h(o);
  const uint32_t packets = 512;  // more than the engine's transmit queue holds
  h.port().tx_limit = 1;
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, packets * h.mtu()), 0);
  const size_t first = h.exchange().size();
  ASSERT_GE(first, 1u);
  ASSERT_TRUE(h.completions().empty()) << "the message should still be under way";
  QpAttr a;
  a.qp_state = QpState::kSqd;
  a.en_sqd_async_notify = 1;
  ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState | kQpEnSqdAsyncNotify), 0);
  EXPECT_FALSE(h.engine().next_async_event().has_value()) << "drained with a message under way";
  h.port().tx_limit = 1u << 30;
  EXPECT_EQ(first + h.exchange().size(), packets);
  const std::optional<AsyncEvent> e = h.engine().next_async_event();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, AsyncEventType::kSqDrained);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

// The same for RC: a message held by the go-back-N window, whose packets sent so far are all
// acknowledged, is still under way.
TEST(Requester, RcSqDrainedComesAfterTheMessageUnderWay) {
  ProtocolHarness::Options o;
  o.max_inflight_psns = 4;
  ProtocolHarness h(o);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 8 * h.mtu()), 0);
  ASSERT_EQ(h.exchange().size(), 4u);
  QpAttr a;
  a.qp_state = QpState::kSqd;
  a.en_sqd_async_notify = 1;
  ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState | kQpEnSqdAsyncNotify), 0);
  EXPECT_FALSE(h.engine().next_async_event().has_value());
  // The first four packets are acknowledged: the other four leave.
  EXPECT_EQ(h.exchange({h.peer_frame(op::kRcAck, psn_add(S0, 3), h.aeth(kAck, 0))}).size(), 4u);
  EXPECT_FALSE(h.engine().next_async_event().has_value()) << "drained with a message under way";
  h.exchange({h.peer_frame(op::kRcAck, psn_add(S0, 7), h.aeth(kAck, 1))});
  const std::optional<AsyncEvent> e = h.engine().next_async_event();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, AsyncEventType::kSqDrained);
  EXPECT_EQ(h.completions().size(), 1u);
}

// IBA 10.2.5: a UD send whose Q_Key has the high bit set carries the QP's own Q_Key instead.
TEST(Requester, UdControlledQkeyMeansTheQpsOwn) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUd;
  ProtocolHarness h(o);
  const uint32_t ah = peer_ah(h);
  ASSERT_EQ(post_ud(h, 1, ah, 0x80000000u), 0);
  ASSERT_EQ(post_ud(h, 2, ah, 0x1234), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].info.ext<wire::Deth>(wire::Ext::kDeth).qkey.get(), o.qkey);
  EXPECT_EQ(out[1].info.ext<wire::Deth>(wire::Ext::kDeth).qkey.get(), 0x1234u);
}

// A UD datagram to one of the port's own GIDs (here the QP's own number) is looped back: it is
// received by the port's own engine and never reaches the port. It used to wait for the port's
// own address to resolve.
TEST(Requester, UdDatagramToAnOwnGidIsLoopedBack) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUd;
  ProtocolHarness h(o);
  for (uint32_t i = 0; i < 16; ++i) h.mem()[i] = static_cast<uint8_t>(0xC0 + i);
  h.post_recv(7, 4096, 40 + 16);
  uint32_t ah = 0;
  AhAttr at;
  at.dgid = h.engine().config().gids[1];
  at.sgid_index = 1;
  ASSERT_EQ(h.engine().create_ah(h.qp()->init_attr().pd, at, &ah), 0);
  Sge s{h.addr(0), 16, h.rkey()};
  SendWr wr;
  wr.wr_id = 1;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSendSignaled;
  wr.ah = ah;
  wr.remote_qpn = h.qp()->qpn();
  wr.remote_qkey = o.qkey;
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  h.engine().poll();  // builds the datagram and loops it back; the next poll receives it
  EXPECT_TRUE(h.engine().has_pending_output()) << "a simulator would skip time or call it done";
  EXPECT_TRUE(h.exchange().empty()) << "a frame reached the port";
  EXPECT_FALSE(h.engine().has_pending_output());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  for (const Cqe& e : c) EXPECT_EQ(e.status, WcStatus::kSuccess);
  const Cqe& recv = c[0].wr_id == 7 ? c[0] : c[1];
  EXPECT_EQ(recv.wr_id, 7u);
  EXPECT_EQ(recv.byte_len, 40u + 16u);
  EXPECT_EQ(recv.src_qp, h.qp()->qpn());
  EXPECT_EQ(std::memcmp(h.mem() + 4096 + 40, h.mem(), 16), 0);
  EXPECT_EQ(h.engine().counters().loopback_frames, 1u);
  EXPECT_EQ(h.engine().counters().neighbor_wait, 0u);
  // Another station claiming the address (an ARP or NA the agent learned) changes nothing: the
  // port's own address stays its own.
  h.engine().neighbors().add_static(at.dgid, Mac{0x02, 0, 0, 0, 0, 0x77});
  h.engine().on_neighbor_resolved(at.dgid);
  h.post_recv(8, 8192, 40 + 16);
  wr.wr_id = 2;
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  EXPECT_TRUE(h.exchange().empty()) << "a frame reached the port";
  EXPECT_EQ(h.completions().size(), 2u);
  EXPECT_EQ(h.engine().counters().loopback_frames, 2u);
}

// A UD QP sends only through address handles of its own protection domain (as rdmavt checks):
// one of another PD is a local QP operation error, and the QP goes to SQE. It was sent.
TEST(Requester, UdAddressHandleOfAnotherPdIsRefused) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUd;
  ProtocolHarness h(o);
  ASSERT_EQ(post_ud(h, 1, peer_ah_in(h, h.engine().alloc_pd()), o.qkey), 0);
  EXPECT_TRUE(h.exchange().empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(h.qp()->state(), QpState::kSqe);
}

// IBA 10.3.1: a UD or UC send that completes in error moves the QP to SQE, not ERR. The failed
// WQE completes with its error, every later send is flushed, receives go on, and modify to RTS
// resumes sending. (Every UD local error left the QP in RTS, sending the next WQE; UC went to ERR.)
TEST(Requester, UdAndUcLocalSendErrorsMoveTheQpToSqe) {
  for (QpType t : {QpType::kUd, QpType::kUc}) {
    SCOPED_TRACE(t == QpType::kUd ? "UD" : "UC");
    ProtocolHarness::Options o;
    o.qp_type = t;
    ProtocolHarness h(o);
    const uint32_t ah = peer_ah(h);
    auto post = [&](uint64_t wr_id, uint64_t off) { return post_ud(h, wr_id, ah, o.qkey, off); };
    const uint64_t bad = h.mem_size() - 8;  // 16 bytes from there pass the region's end
    ASSERT_EQ(post(1, bad), 0);
    ASSERT_EQ(post(2, 0), 0);
    EXPECT_TRUE(h.exchange().empty());
    auto c = h.completions();
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].wr_id, 1u);
    EXPECT_EQ(c[0].status, WcStatus::kLocProtErr);
    EXPECT_EQ(c[1].wr_id, 2u);
    EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(h.qp()->state(), QpState::kSqe);
    // A send posted in SQE is flushed.
    ASSERT_EQ(post(3, 0), 0);
    EXPECT_TRUE(h.exchange().empty());
    c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 3u);
    EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
    // The receive queue still works.
    h.post_recv(10, 0, 256);
    wire::ExtHeaders e;
    e.deth.qkey.set(o.qkey);
    e.deth.src_qp.set(0x33);
    EXPECT_TRUE(h.exchange({h.peer_frame(t == QpType::kUd ? op::kUdSendOnly : op::kUcBase + 0x04,
                                         ProtocolHarness::kPeerPsn, e, 8, false)})
                    .empty());
    c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 10u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    // Back to RTS: sending resumes.
    QpAttr a;
    a.qp_state = QpState::kRts;
    ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState), 0);
    ASSERT_EQ(post(4, 0), 0);
    EXPECT_EQ(h.exchange().size(), 1u);
    c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 4u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  }
}

TEST(Requester, RnrRetrySevenNeverGivesUp) {
  ProtocolHarness h;  // rnr_retry 7
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  h.exchange();
  for (int i = 0; i < 200; ++i) {
    h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(wire::kAethRnrNak | 1))});
    ASSERT_EQ(h.advance(20'000).size(), 1u) << "gave up after " << i << " RNR NAKs";
  }
  EXPECT_TRUE(h.completions().empty());
  EXPECT_EQ(h.qp()->state(), QpState::kRts);
  h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(kAck, 1))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

TEST(Requester, RetryCountSevenNeverGivesUp) {
  ProtocolHarness h;  // retry_cnt 7
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
  h.exchange();
  // 30 timeouts of 4.19 ms: 30 retransmissions, and the QP keeps trying.
  EXPECT_EQ(h.advance(30 * 4'194'304 + 100'000).size(), 30u);
  EXPECT_EQ(h.qp()->state(), QpState::kRts);
  EXPECT_TRUE(h.completions().empty());
}

// The failing WRITE is unsignalled: a work request that fails completes whatever its flags.
TEST(Requester, RemoteAccessNakCompletesInErrorAndFlushes) {
  ProtocolHarness h;
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 100, 0), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 100), 0);
  h.exchange();
  h.exchange(
      {h.peer_frame(op::kRcAck, S0, h.aeth(static_cast<uint8_t>(NakCode::kRemoteAccessError)))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(c[1].status, WcStatus::kWrFlushErr);
}

TEST(Requester, InvalidRequestAndRemoteOperationalNaks) {
  for (auto [code, want] : {std::pair{NakCode::kInvalidRequest, WcStatus::kRemInvReqErr},
                            std::pair{NakCode::kRemoteOperationalError, WcStatus::kRemOpErr}}) {
    ProtocolHarness h;
    ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 100), 0);
    h.exchange();
    h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(static_cast<uint8_t>(code)))});
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, want);
  }
}

TEST(Requester, ReadRequestAndResponsesIntoScatterList) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  Sge sg[2] = {{h.addr(0), 1000, h.rkey()}, {h.addr(5000), 2 * m - 1000 + 10, h.rkey()}};
  SendWr wr{.wr_id = 9,
            .sg_list = sg,
            .num_sge = 2,
            .opcode = WrOpcode::kRdmaRead,
            .send_flags = kSendSignaled,
            .remote_addr = 0x10000,
            .rkey = 0x55};
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  EXPECT_TRUE(out[0].info.ack_req);
  EXPECT_EQ(out[0].info.ext<wire::Reth>(wire::Ext::kReth).dma_length.get(), 2 * m + 10);
  std::vector<uint8_t> data(2 * m + 10);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 5 + 1);
  // Send the responses: first, middle... then the completion arrives after the last.
  h.exchange({h.peer_frame(op::kRcReadRespFirst, S0, h.aeth(kAck, 1), data.data(), m),
              h.peer_frame(op::kRcReadRespMiddle, S0 + 1, {}, data.data() + m, m),
              h.peer_frame(op::kRcReadRespLast, S0 + 2, h.aeth(kAck, 1), data.data() + 2 * m, 10)});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(h.mem(), data.data(), 1000), 0);
  EXPECT_EQ(std::memcmp(h.mem() + 5000, data.data() + 1000, data.size() - 1000), 0);
  // The next request uses the PSN after the READ's response PSNs.
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 10, 0, 8), 0);
  out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), S0 + 3);
}

TEST(Requester, MissingReadResponseReRequestsTheRest) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 3 * m, kSendSignaled, 0x10000, 0x55), 0);
  h.exchange();
  // The first response is lost; the second arrives.
  auto out = h.exchange({h.peer_frame(op::kRcReadRespMiddle, S0 + 1, {}, m)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  EXPECT_EQ(out[0].psn(), S0);
  // Now the first arrives, and nothing else (the re-requested stream is lost too): at the local
  // ACK timeout the requester asks for exactly what is still missing, the last 2 MTUs.
  h.exchange({h.peer_frame(op::kRcReadRespFirst, S0, h.aeth(kAck, 1), m)});
  out = h.advance(4'400'000);
  ASSERT_EQ(out.size(), 1u);
  const wire::Reth& r = out[0].info.ext<wire::Reth>(wire::Ext::kReth);
  EXPECT_EQ(out[0].psn(), S0 + 1);
  EXPECT_EQ(r.va.get(), 0x10000u + m);
  EXPECT_EQ(r.dma_length.get(), 2 * m);
}

// A peer slower than the gap hold-off: stragglers of the replaced stream keep showing the gap,
// but while nothing answers the re-request the requester does not ask again at the end of each
// hold-off (rxe under emulation got the whole READ window re-requested every millisecond); the
// hold-off doubles instead, and progress brings it back.
TEST(Requester, UnansweredGapRetriesBackOff) {
  ProtocolHarness h;  // timeout 10: 4.19 ms local ACK timeout, 262 us gap hold-off
  const uint64_t holdoff = 4'194'304 / 16;
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 8 * m, kSendSignaled, 0x10000, 0x55), 0);
  h.exchange();
  auto reads = [](const std::vector<Emitted>& out) {
    int n = 0;
    for (const Emitted& e : out) n += e.opcode() == op::kRcReadRequest;
    return n;
  };
  // The first response is lost: the gap is seen and the rest re-requested at once.
  auto out = h.exchange({h.peer_frame(op::kRcReadRespMiddle, S0 + 1, {}, m)});
  ASSERT_EQ(reads(out), 1);
  // Stragglers of the first stream keep arriving for longer than a hold-off; the peer has not
  // answered the re-request.
  int retries = 0;
  for (uint32_t i = 2; i < 7; ++i) {
    retries += reads(h.exchange({h.peer_frame(op::kRcReadRespMiddle, S0 + i, {}, m)}));
    retries += reads(h.advance(holdoff / 2 + 1000));
  }
  // 2.5 hold-offs passed: before, two more whole-window retries; now each hold-off that ends
  // unanswered doubles the next, and the local ACK timeout (4.19 ms after the READ was sent)
  // is what asks again.
  EXPECT_EQ(retries, 0);
  EXPECT_GE(h.qp()->snd_.gap_backoff, 1);
  retries += reads(h.advance(4'194'304 - 3 * holdoff - 10'000));
  EXPECT_EQ(retries, 0);
  retries += reads(h.advance(300'000));
  EXPECT_EQ(retries, 1) << "the local ACK timeout retries";
  EXPECT_EQ(h.qp()->counters_.local_ack_timeouts, 1u);
  // The re-request is answered from the start: progress resets the hold-off.
  h.exchange({h.peer_frame(op::kRcReadRespFirst, S0, h.aeth(kAck, 1), m)});
  out = h.exchange({h.peer_frame(op::kRcReadRespMiddle, S0 + 2, {}, m)});  // S0+1 is lost
  EXPECT_EQ(reads(out), 1) << "progress was made, the last retry is old: a retry at once";
  EXPECT_EQ(h.qp()->snd_.gap_backoff, 0);
  // A gap again, unanswered: held off for one (undoubled) hold-off, then retried.
  out = h.exchange({h.peer_frame(op::kRcReadRespMiddle, S0 + 3, {}, m)});
  EXPECT_EQ(reads(out), 0);
  h.exchange({h.peer_frame(op::kRcReadRespMiddle, S0 + 1, {}, m)});        // progress: S0+1 arrives
  out = h.exchange({h.peer_frame(op::kRcReadRespMiddle, S0 + 4, {}, m)});  // S0+2.. re-asked
  EXPECT_EQ(reads(out), 0) << "inside the hold-off";
  EXPECT_EQ(reads(h.advance(holdoff + 10'000)), 1) << "answered: retried after one hold-off";
}

// The responses to one READ request: ONLY, or FIRST, MIDDLE..., LAST; `data` holds the bytes of
// PSN `psn` onwards, `len` of them in all.
std::vector<std::vector<uint8_t>> read_responses(ProtocolHarness& h, uint32_t psn,
                                                 const uint8_t* data, uint32_t len) {
  const uint32_t m = h.mtu();
  const uint32_t n = len == 0 ? 1 : (len + m - 1) / m;
  std::vector<std::vector<uint8_t>> v;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t pay = std::min(m, len - i * m);
    const uint8_t opc = n == 1       ? op::kRcReadRespOnly
                        : i == 0     ? op::kRcReadRespFirst
                        : i + 1 == n ? op::kRcReadRespLast
                                     : op::kRcReadRespMiddle;
    const bool aeth = opc != op::kRcReadRespMiddle;
    v.push_back(
        h.peer_frame(opc, psn + i, aeth ? h.aeth(kAck, 1) : wire::ExtHeaders{}, data + i * m, pay));
  }
  return v;
}

ProtocolHarness::Options window_of(uint32_t psns) {
  ProtocolHarness::Options o;
  o.max_inflight_psns = psns;
  return o;
}

// A READ larger than the go-back-N window is asked for in pieces of at most the window, each
// once everything before it is answered: one READ never has more responses in flight than the
// window allows a WRITE (1 MiB at MTU 1024 overran an af_packet ring into timeouts).
TEST(Requester, ReadLargerThanTheWindowIsAskedForInPieces) {
  ProtocolHarness h(window_of(8));
  const uint32_t m = h.mtu();
  const uint32_t len = 20 * m - 100;  // 20 response packets, the last one short
  std::vector<uint8_t> data(len);
  for (uint32_t i = 0; i < len; ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, len, kSendSignaled, 0x10000, 0x55), 0);
  const auto request = [&](const Emitted& e, uint32_t piece, uint32_t bytes) {
    const wire::Reth& r = e.info.ext<wire::Reth>(wire::Ext::kReth);
    EXPECT_EQ(e.opcode(), op::kRcReadRequest);
    EXPECT_EQ(e.psn(), S0 + piece * 8);
    EXPECT_EQ(r.va.get(), 0x10000u + piece * 8 * m);
    EXPECT_EQ(r.dma_length.get(), bytes);
  };
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  request(out[0], 0, 8 * m);
  // All but the last response of the piece: the next piece waits.
  auto resp = read_responses(h, S0, data.data(), 8 * m);
  out = h.exchange({resp.begin(), resp.end() - 1});
  EXPECT_TRUE(out.empty());
  out = h.exchange({resp.back()});
  ASSERT_EQ(out.size(), 1u);
  request(out[0], 1, 8 * m);
  EXPECT_TRUE(h.completions().empty());
  out = h.exchange(read_responses(h, S0 + 8, data.data() + 8 * m, 8 * m));
  ASSERT_EQ(out.size(), 1u);
  request(out[0], 2, len - 16 * m);
  out = h.exchange(read_responses(h, S0 + 16, data.data() + 16 * m, len - 16 * m));
  EXPECT_TRUE(out.empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, len);
  EXPECT_EQ(std::memcmp(h.mem(), data.data(), len), 0);
  EXPECT_EQ(h.qp()->counters_.dropped_responses, 0u);
  // The READ consumed its 20 PSNs, no more.
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 8), 0);
  out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), S0 + 20);
}

// A response missing inside a piece: the re-request asks for the rest of that piece, and a piece
// that ends on a response without the LAST opcode is not taken as complete.
// The port reports a 64-frame receive ring: the port's requesters together keep at most 32
// PSNs outstanding (half the ring: the peer's requests share it), READ responses included, so
// the responses a READ asks for and a stream of WRITEs each stay within it (a 512-frame
// af_packet ring under 512 PSNs of READs each way overflowed into local ACK timeouts).
TEST(Requester, ThePortsBudgetKeepsWithinHalfTheReceiveRingItReports) {
  ProtocolHarness::Options o;
  o.rx_ring_frames = 64;
  ProtocolHarness h(o);
  EXPECT_EQ(h.engine().port_inflight_budget(), 32u);
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 100 * m, kSendSignaled, 0x10000, 0x55), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].info.ext<wire::Reth>(wire::Ext::kReth).dma_length.get(), 32 * m);
  // The piece's responses come back: the next piece is asked for, again at most 32 PSNs.
  std::vector<uint8_t> data(32 * m, 0x5a);
  out = h.exchange(read_responses(h, S0, data.data(), 32 * m));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), S0 + 32);
  EXPECT_EQ(out[0].info.ext<wire::Reth>(wire::Ext::kReth).dma_length.get(), 32 * m);

  ProtocolHarness w(o);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(w.post_send(WrOpcode::kRdmaWrite, i, 0, 20 * m), 0);
  EXPECT_EQ(w.exchange().size(), 32u);  // 80 packets posted, 32 in flight
  // Without a ring to go by, the configured budget (512) and the window (256) hold.
  ProtocolHarness u;
  EXPECT_EQ(u.engine().port_inflight_budget(), 512u);
}

TEST(Requester, LostReadResponseReRequestsTheRestOfItsPiece) {
  ProtocolHarness h(window_of(8));
  const uint32_t m = h.mtu();
  std::vector<uint8_t> data(12 * m);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 1);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 12 * m, kSendSignaled, 0x10000, 0x55), 0);
  h.exchange();
  auto resp = read_responses(h, S0, data.data(), 8 * m);
  auto out = h.exchange({resp[0], resp[2]});  // S0+1 is lost
  ASSERT_EQ(out.size(), 1u);
  const wire::Reth& r = out[0].info.ext<wire::Reth>(wire::Ext::kReth);
  EXPECT_EQ(out[0].psn(), S0 + 1);
  EXPECT_EQ(r.va.get(), 0x10000u + m);
  EXPECT_EQ(r.dma_length.get(), 7 * m);
  // The re-requested stream: S0+1 .. S0+7, but its last arrives as a MIDDLE: not the end.
  auto again = read_responses(h, S0 + 1, data.data() + m, 7 * m);
  again.back() = h.peer_frame(op::kRcReadRespMiddle, S0 + 7, {}, data.data() + 7 * m, m);
  out = h.exchange({again.begin(), again.end()});
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.qp()->counters_.dropped_responses, 1u);
  again = read_responses(h, S0 + 1, data.data() + m, 7 * m);
  out = h.exchange({again.back()});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), S0 + 8);
  EXPECT_EQ(out[0].info.ext<wire::Reth>(wire::Ext::kReth).dma_length.get(), 4 * m);
  h.exchange(read_responses(h, S0 + 8, data.data() + 8 * m, 4 * m));
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(h.mem(), data.data(), data.size()), 0);
}

// A READ response whose payload is not the length its place in the READ calls for (a full MTU but
// for the last) is malformed: dropped, nothing scattered, and the READ waits for a good one.
// Taken, it left a hole in the data and the READ completed as if whole.
TEST(Requester, ReadResponseOfTheWrongLengthIsDropped) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 2 * m, kSendSignaled, 0x10000, 0x55), 0);
  ASSERT_EQ(h.exchange().size(), 1u);
  std::vector<uint8_t> data(2 * m);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 3 + 1);
  h.exchange({h.peer_frame(op::kRcReadRespFirst, S0, h.aeth(kAck, 1), data.data(), m - 16)});
  EXPECT_EQ(h.qp()->counters_.dropped_responses, 1u);
  h.exchange(read_responses(h, S0, data.data(), 2 * m));
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(h.mem(), data.data(), data.size()), 0);
}

// A READ that does not fit the room left in the window waits for it (at most a quarter of the
// window when the READ is bigger than that), where before it went out and overshot the window.
TEST(Requester, ReadWaitsForRoomInTheWindow) {
  ProtocolHarness h(window_of(8));
  const uint32_t m = h.mtu();
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 7 * m), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 2, 0, 4 * m, kSendSignaled, 0x10000, 0x55), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 7u);
  for (const Emitted& e : out) EXPECT_NE(e.opcode(), op::kRcReadRequest);
  out = h.exchange({h.peer_frame(op::kRcAck, S0 + 6, h.aeth(kAck, 1))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  EXPECT_EQ(out[0].psn(), S0 + 7);
  EXPECT_EQ(out[0].info.ext<wire::Reth>(wire::Ext::kReth).dma_length.get(), 4 * m);
}

// A READ response carries an ACK in its AETH; one with a NAK syndrome is a bad response (IBA
// 9.7.5.2): the READ fails with BAD_RESP_ERR instead of taking the response's data.
TEST(Requester, ReadResponseWithANakSyndromeIsABadResponse) {
  ProtocolHarness h;
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 64, kSendSignaled, 0x10000, 0x55), 0);
  ASSERT_EQ(h.exchange().size(), 1u);
  h.exchange({h.peer_frame(op::kRcReadRespOnly, S0,
                           h.aeth(static_cast<uint8_t>(NakCode::kRemoteAccessError), 1), 64)});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kBadRespErr);
  EXPECT_EQ(h.mem()[1], 0);  // nothing scattered
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

TEST(Requester, AckBeyondAReadIsAnImplicitNak) {
  ProtocolHarness h;
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, 1, 0, 64, kSendSignaled, 0x10000, 0x55), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 2, 0, 8), 0);
  ASSERT_EQ(h.exchange().size(), 2u);
  // The responder ACKs the SEND: the READ response must have been lost.
  auto out = h.exchange({h.peer_frame(op::kRcAck, S0 + 1, h.aeth(kAck, 2))});
  ASSERT_GE(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  EXPECT_EQ(out[0].psn(), S0);
  EXPECT_EQ(h.qp()->counters_.implicit_naks, 1u);
  EXPECT_TRUE(h.completions().empty());  // nothing completes ahead of the READ
}

TEST(Requester, ReadAtomicLimitAndFence) {
  ProtocolHarness::Options o;
  o.max_rd_atomic = 2;
  ProtocolHarness h(o);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(h.post_send(WrOpcode::kRdmaRead, i, i * 64, 64, kSendSignaled, 0x10000, 0x55), 0);
  }
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 9, 0, 64, kSendSignaled | kSendFence), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 2u);  // only two READs in flight
  h.exchange({h.peer_frame(op::kRcReadRespOnly, S0, h.aeth(kAck, 1), 64)});
  out = h.exchange();
  ASSERT_EQ(out.size(), 0u);
  // (The third READ went out with the response processing above, see below.)
  h.exchange({h.peer_frame(op::kRcReadRespOnly, S0 + 1, h.aeth(kAck, 2), 64)});
  // The fenced WRITE waits for the third READ.
  out = h.exchange({h.peer_frame(op::kRcReadRespOnly, S0 + 2, h.aeth(kAck, 3), 64)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcWriteOnly);
  EXPECT_EQ(out[0].psn(), S0 + 3);
}

TEST(Requester, AtomicResultLandsInLocalBuffer) {
  ProtocolHarness h;
  ASSERT_EQ(h.post_send(WrOpcode::kAtomicFetchAndAdd, 1, 64, 8, kSendSignaled, 0x10000, 0x55, 3),
            0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcFetchAdd);
  EXPECT_EQ(out[0].info.ext<wire::AtomicEth>(wire::Ext::kAtomicEth).swap_add.get(), 3u);
  wire::ExtHeaders e = h.aeth(kAck, 1);
  e.atomic_ack.orig.set(0x1122334455667788ull);
  h.exchange({h.peer_frame(op::kRcAtomicAck, S0, e)});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kFetchAdd);
  uint64_t v;
  std::memcpy(&v, h.mem() + 64, 8);
  EXPECT_EQ(v, 0x1122334455667788ull);
}

TEST(Requester, UnsignalledWorkCompletesSilently) {
  ProtocolHarness h;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(h.post_send(WrOpcode::kSend, i, 0, 8, 0), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 3, 0, 8), 0);
  h.exchange();
  h.exchange({h.peer_frame(op::kRcAck, S0 + 3, h.aeth(kAck, 4))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);  // a signalled completion implies the earlier three are done
  EXPECT_EQ(c[0].wr_id, 3u);
  EXPECT_EQ(h.qp()->sq_.free_slots(), h.qp()->sq_.capacity());
}

// A QP created with sq_sig_all signals every work request, whatever its flags (ibv_create_qp(3)).
TEST(Requester, SqSigAllSignalsEveryWorkRequest) {
  ProtocolHarness::Options o;
  o.sq_sig_all = true;
  ProtocolHarness h(o);
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 8, 0), 0);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 2, 0, 8, 0), 0);
  ASSERT_EQ(h.exchange().size(), 2u);
  h.exchange({h.peer_frame(op::kRcAck, S0 + 1, h.aeth(kAck, 2))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[1].wr_id, 2u);
}

TEST(Requester, GhostAndStaleResponsesAreDropped) {
  ProtocolHarness h;
  ASSERT_EQ(h.post_send(WrOpcode::kSend, 1, 0, 8), 0);
  h.exchange();
  h.exchange({h.peer_frame(op::kRcAck, S0 + 50, h.aeth(kAck, 1))});  // never sent
  h.exchange({h.peer_frame(op::kRcAck, S0 + 1, h.aeth(kAck, 1))});   // the next PSN: not sent yet
  h.exchange({h.peer_frame(op::kRcAck, S0 - 1, h.aeth(kAck, 0))});   // before the window
  EXPECT_TRUE(h.completions().empty());
  EXPECT_EQ(h.qp()->counters_.dropped_responses, 3u);
  h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(kAck, 1))});
  EXPECT_EQ(h.completions().size(), 1u);
}

TEST(Requester, InlineDataIsCopiedAtPostTime) {
  ProtocolHarness h;
  std::memcpy(h.mem(), "inline!", 8);
  Sge s{h.addr(), 8, 0 /* lkey ignored for inline */};
  SendWr wr{.wr_id = 1,
            .sg_list = &s,
            .num_sge = 1,
            .opcode = WrOpcode::kSend,
            .send_flags = kSendSignaled | kSendInline};
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  std::memcpy(h.mem(), "changed", 8);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::memcmp(out[0].info.payload(), "inline!", 8), 0);
}

// A zero-length SGE between two others is skipped: its key (one that names no region) is not
// looked at, as rxe and mlx5 do; the SEND carries the bytes of the SGEs around it.
TEST(Requester, AZeroLengthSgeIsSkipped) {
  ProtocolHarness h;
  for (uint32_t i = 0; i < 2000; ++i) h.mem()[i] = static_cast<uint8_t>(i * 3);
  Sge sg[3] = {{h.addr(0), 16, h.rkey()}, {h.addr(500), 0, 0xdead00}, {h.addr(1000), 16, h.rkey()}};
  SendWr wr{.wr_id = 1,
            .sg_list = sg,
            .num_sge = 3,
            .opcode = WrOpcode::kSend,
            .send_flags = kSendSignaled};
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  auto out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].info.payload_len, 32u);
  EXPECT_EQ(std::memcmp(out[0].info.payload(), h.mem(), 16), 0);
  EXPECT_EQ(std::memcmp(out[0].info.payload() + 16, h.mem() + 1000, 16), 0);
  h.exchange({h.peer_frame(op::kRcAck, S0, h.aeth(kAck, 1))});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}

// The same for the local buffers of a READ: its data lands in the SGEs around the empty one.
TEST(Requester, AZeroLengthSgeOfAReadIsSkipped) {
  ProtocolHarness h;
  Sge sg[3] = {{h.addr(0), 16, h.rkey()}, {h.addr(500), 0, 0xdead00}, {h.addr(1000), 16, h.rkey()}};
  SendWr wr{.wr_id = 1,
            .sg_list = sg,
            .num_sge = 3,
            .opcode = WrOpcode::kRdmaRead,
            .send_flags = kSendSignaled,
            .remote_addr = 0x10000,
            .rkey = 0x55};
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  ASSERT_EQ(h.exchange().size(), 1u);
  std::vector<uint8_t> data(32);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i + 7);
  h.exchange({h.peer_frame(op::kRcReadRespOnly, S0, h.aeth(kAck, 1), data.data(), 32)});
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(h.mem(), data.data(), 16), 0);
  EXPECT_EQ(std::memcmp(h.mem() + 1000, data.data() + 16, 16), 0);
}

TEST(Requester, BadLkeyIsLocalProtectionError) {
  ProtocolHarness h;
  Sge s{h.addr(), 8, h.rkey() ^ 0x10000};
  SendWr wr{.wr_id = 1,
            .sg_list = &s,
            .num_sge = 1,
            .opcode = WrOpcode::kSend,
            .send_flags = kSendSignaled};
  ASSERT_EQ(h.qp()->post_send(wr), 0);
  EXPECT_TRUE(h.exchange().empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}
// A READ or atomic whose local buffer lacks LOCAL_WRITE (the responses would be written into
// it) fails with a local protection error before its request leaves.
TEST(Requester, AReadIntoARegionWithoutLocalWriteIsLocalProtectionError) {
  for (WrOpcode opc : {WrOpcode::kRdmaRead, WrOpcode::kAtomicFetchAndAdd}) {
    SCOPED_TRACE(opc == WrOpcode::kRdmaRead ? "READ" : "FETCH_ADD");
    ProtocolHarness::Options o;
    o.mr_access = kAccessRemoteRead;  // (remote write and atomics need local write: reg_mr)
    ProtocolHarness h(o);
    ASSERT_EQ(h.post_send(opc, 1, 0, 8, kSendSignaled, 0x10000, 0x55), 0);
    EXPECT_TRUE(h.exchange().empty());
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 1u);
    EXPECT_EQ(c[0].status, WcStatus::kLocProtErr);
    EXPECT_EQ(h.qp()->state(), QpState::kErr);
  }
}

// The local region of a READ or atomic deregistered while its request is out: the response
// that would land in it completes the work request with a local protection error, and nothing
// is written.
TEST(Requester, AResponseForADeregisteredLocalRegionIsLocalProtectionError) {
  for (WrOpcode opc : {WrOpcode::kRdmaRead, WrOpcode::kAtomicFetchAndAdd}) {
    SCOPED_TRACE(opc == WrOpcode::kRdmaRead ? "READ" : "FETCH_ADD");
    ProtocolHarness h;
    ASSERT_EQ(h.post_send(opc, 1, 0, 8, kSendSignaled, 0x10000, 0x55), 0);
    ASSERT_EQ(h.exchange().size(), 1u);
    ASSERT_EQ(h.engine().dereg_mr(h.rkey()), 0);
    const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    wire::ExtHeaders e = h.aeth(kAck, 1);
    if (opc == WrOpcode::kRdmaRead) {
      h.exchange({h.peer_frame(op::kRcReadRespOnly, S0, e, data, 8)});
    } else {
      e.atomic_ack.orig.set(0x0102030405060708ull);
      h.exchange({h.peer_frame(op::kRcAtomicAck, S0, e)});
    }
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kLocProtErr);
    EXPECT_EQ(h.qp()->state(), QpState::kErr);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(h.mem()[i], 0) << "byte " << i << " written";
  }
}

// A UD datagram longer than the port's MTU cannot leave in one packet: it completes with a
// local length error and the QP goes to SQE (IBA 10.3.1), as the other local send errors do.
TEST(Requester, AUdDatagramLongerThanThePortsMtuIsALocalLengthError) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUd;
  ProtocolHarness h(o);
  const uint32_t ah = peer_ah(h);
  const uint32_t mtu = mtu_bytes(h.engine().active_mtu());
  ASSERT_EQ(post_ud(h, 1, ah, o.qkey, 0, mtu + 1), 0);
  EXPECT_TRUE(h.exchange().empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(h.qp()->state(), QpState::kSqe);
  // One MTU exactly leaves.
  ASSERT_EQ(h.engine().modify_qp(h.qp(), QpAttr{.qp_state = QpState::kRts}, kQpState), 0);
  ASSERT_EQ(post_ud(h, 2, ah, o.qkey, 0, mtu), 0);
  EXPECT_EQ(h.exchange().size(), 1u);
  c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
}
// Frame buffers run out (an exhausted mbuf pool: the NIC still holds the ones it sent): what
// could not be built waits, counted, and leaves once buffers come back, with nothing else to
// wake the QP (no ACK due, no timer armed, no new post). It used to wait for the next post.
TEST(Requester, WorkDeferredForWantOfBuffersLeavesWhenTheyComeBack) {
  {  // RC: a WRITE cut after its first packet
    ProtocolHarness h;
    const uint32_t m = h.mtu();
    h.port().alloc_limit = 1;
    ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 3 * m), 0);
    auto out = h.exchange();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].opcode(), op::kRcWriteFirst);
    EXPECT_GT(h.engine().counters().tx_no_buffer, 0u);
    // Still scheduled, but a poll that builds nothing for want of buffers is an idle one (the
    // engine thread backs off), as one facing a port that takes nothing is.
    EXPECT_TRUE(h.engine().has_pending_output());
    EXPECT_FALSE(h.engine().poll());
    h.port().alloc_limit = 1u << 30;
    out = h.exchange();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].opcode(), op::kRcWriteMiddle);
    EXPECT_EQ(out[0].psn(), S0 + 1);
    EXPECT_EQ(out[1].opcode(), op::kRcWriteLast);
    EXPECT_EQ(out[1].psn(), S0 + 2);
  }
}

// The same for UD and UC, whose sends complete as they leave.
TEST(Requester, DatagramsDeferredForWantOfBuffersLeaveWhenTheyComeBack) {
  for_ud_and_uc([](ProtocolHarness& h, uint32_t qkey, uint32_t ah) {
    h.port().alloc_limit = 1;
    ASSERT_EQ(post_ud(h, 1, ah, qkey), 0);
    ASSERT_EQ(post_ud(h, 2, ah, qkey), 0);
    EXPECT_EQ(h.exchange().size(), 1u);
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 1u);
    h.port().alloc_limit = 1u << 30;
    EXPECT_EQ(h.exchange().size(), 1u);
    c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].wr_id, 2u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  });
}
}  // namespace
