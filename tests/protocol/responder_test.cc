// Responder protocol tests: crafted request packets into one RC QP, assertions on every packet
// it emits (IBA 9.7.5.1) and on memory and completions.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "../support/scripted_port.h"
#include "stack/wire/checksum.h"
#include "stack/wire/icrc.h"
#include "stack/wire/psn.h"

namespace {
using namespace roce;
using namespace roce::test;
namespace op = wire::op;
using wire::NakCode;
using wire::psn_add;

constexpr uint32_t P0 = ProtocolHarness::kPeerPsn;
constexpr uint8_t kAck = wire::kAethAckUnlimitedCredits;
uint8_t nak(NakCode c) { return static_cast<uint8_t>(c); }

TEST(Responder, SendOnlyIsAckedWithPsnAndMsn) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 100)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].psn(), P0);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_EQ(out[0].msn(), 1u);
  EXPECT_EQ(out[0].info.dest_qp, ProtocolHarness::kPeerQpn);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, 100u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(h.mem()[5], static_cast<uint8_t>(P0 + 5));
}

// A QP destroyed after it received requests acknowledges them once more: its last ACK may have
// been lost, and with the QP gone the peer's retransmissions go unanswered (with retry_cnt 7 for
// ever). Found with ibv_srq_pingpong -e over af_packet: the client exits as soon as its last
// receive completes, and the server retried a delivered SEND until it was killed.
TEST(Responder, DestroyReAcknowledgesEverythingReceived) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  h.post_recv(2, 256, 256);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 100),
                         h.peer_frame(op::kRcSendOnly, psn_add(P0, 1), {}, 100)});
  ASSERT_EQ(out.size(), 1u);  // coalesced; suppose it is lost
  ASSERT_EQ(h.engine().destroy_qp(h.qp()), 0);
  std::vector<std::vector<uint8_t>> sent = h.port().take_sent();
  ASSERT_EQ(sent.size(), 1u);
  wire::PacketInfo info;
  ASSERT_EQ(wire::parse_frame(sent[0].data(), static_cast<uint32_t>(sent[0].size()), info),
            wire::ParseError::kOk);
  EXPECT_EQ(info.opcode, op::kRcAck);
  EXPECT_EQ(info.dest_qp, ProtocolHarness::kPeerQpn);
  EXPECT_EQ(info.psn, psn_add(P0, 1));
  EXPECT_EQ(info.ext<wire::Aeth>(wire::Ext::kAeth).syndrome, kAck);
  EXPECT_EQ(info.ext<wire::Aeth>(wire::Ext::kAeth).msn.get(), 2u);
  EXPECT_EQ(h.engine().counters().farewell_acks, 1u);
}

TEST(Responder, DestroyWithNothingReceivedSendsNothing) {
  ProtocolHarness h;
  ASSERT_EQ(h.engine().destroy_qp(h.qp()), 0);
  EXPECT_TRUE(h.port().take_sent().empty());
  EXPECT_EQ(h.engine().counters().farewell_acks, 0u);
}

// Requests that arrive before the peer's MAC is resolved are executed, and their ACK leaves
// once the neighbour resolves. The responder used to leave its schedule with the ACK queued and
// never come back (on_neighbor_resolved rescheduled only the requester): found against rxe
// when our first ARP reply was lost.
TEST(Responder, AcksQueuedBeforeTheNeighbourResolvesAreSentAfterIt) {
  ProtocolHarness::Options o;
  o.peer_mac_known = false;
  ProtocolHarness h(o);
  h.post_recv(1, 0, 256);
  h.post_recv(2, 256, 256);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 100)});
  EXPECT_TRUE(out.empty()) << "no path to the peer yet";
  out = h.exchange({h.peer_frame(op::kRcSendOnly, psn_add(P0, 1), {}, 50)});
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.completions().size(), 2u);  // both executed
  h.resolve_peer();
  out = h.exchange();
  ASSERT_EQ(out.size(), 1u);  // the coalesced ACK
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].psn(), psn_add(P0, 1));
  EXPECT_EQ(out[0].msn(), 2u);
}

// A plain ACK waits for the engine's next poll, to share the reply's burst. But when the
// application answers within the poll that delivered the request (it runs on another thread
// and posted between the receive and the engine's doorbell check; here it posts from the CQ's
// notification, inside that poll), the reply must not leave ahead of the ACK: perftest's
// send_lat -e takes whichever completion event comes first, and with the peer's next SEND ahead
// of the ACK it read an empty send CQ and failed with a garbage status (1 run in 2 over our
// libibverbs, both sides perftest).
TEST(Responder, AReplyPostedInTheSamePollDoesNotOvertakeTheAck) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  struct Ctx {
    ProtocolHarness* h;
    int rc = -1;
  } ctx{&h};
  h.cq()->set_notify(
      [](void* p, CompletionQueue*) {
        auto* c = static_cast<Ctx*>(p);
        c->rc = c->h->post_send(WrOpcode::kSend, 7, 1024, 8);
      },
      &ctx);
  h.cq()->arm(false);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 100)});
  ASSERT_EQ(ctx.rc, 0);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].psn(), P0);
  EXPECT_EQ(out[1].opcode(), op::kRcSendOnly);
}

// Without a thread waiting for it, the ACK of a message's last packet waits for the next poll,
// where an application's reply (posted meanwhile) shares its burst.
TEST(Responder, WithoutAWaiterTheAckLeavesInTheNextPoll) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  h.exchange();  // the QP's set-up leaves it on the requester's schedule until a poll
  h.port().inject(h.peer_frame(op::kRcSendOnly, P0, {}, 100));
  ASSERT_TRUE(h.engine().poll());
  EXPECT_TRUE(h.port().take_sent().empty());
  h.engine().poll();
  auto sent = h.port().take_sent();
  ASSERT_EQ(sent.size(), 1u);
}

// An application blocked on a completion channel is woken by its receive's CQ event, and on a
// shared core the woken thread may take the engine thread's core at once: an ACK left for the
// next poll then waited for the scheduler, for milliseconds on a busy machine (Gloo's ibverbs
// transport, whose last WRITE WITH IMMEDIATE's send completion was still missing when its
// program tore down: it aborts). The poll that raises the event has put the ACK on the wire
// before it raises it, as a NIC's ACK does not wait for the host.
TEST(Responder, TheAckIsOnTheWireBeforeTheCompletionEvent) {
  ProtocolHarness h;
  h.post_recv(1, 0, 0);
  struct Ctx {
    ProtocolHarness* h;
    int events = 0;
    size_t sent_before = 0;
  } ctx{&h};
  h.cq()->set_notify(
      [](void* p, CompletionQueue*) {
        auto* c = static_cast<Ctx*>(p);
        ++c->events;
        c->sent_before = c->h->port().take_sent().size();
      },
      &ctx);
  h.cq()->arm(false);
  h.exchange();  // as above
  auto e = h.reth(h.addr(1000), h.rkey(), 4);
  e.imm.data = {0, 0, 0, 7};
  h.port().inject(h.peer_frame(op::kRcWriteOnlyImm, P0, e, 4));
  ASSERT_TRUE(h.engine().poll());  // one poll: the request, its completion, its ACK
  ASSERT_EQ(ctx.events, 1);
  EXPECT_EQ(ctx.sent_before, 1u) << "the ACK must be sent before the event is raised";
  EXPECT_EQ(h.completions().size(), 1u);
}

TEST(Responder, MultiPacketSendAckedOnceOnLast) {
  ProtocolHarness h;
  h.post_recv(1, 0, 4096);
  const uint32_t m = h.mtu();
  auto out = h.exchange({h.peer_frame(op::kRcSendFirst, P0, {}, m, false),
                         h.peer_frame(op::kRcSendMiddle, psn_add(P0, 1), {}, m, false),
                         h.peer_frame(op::kRcSendLast, psn_add(P0, 2), {}, 7, true)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), psn_add(P0, 2));  // crosses the 2^24 wrap
  EXPECT_EQ(out[0].msn(), 1u);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].byte_len, 2 * m + 7);
}

TEST(Responder, AcksInOneBurstCoalesce) {
  ProtocolHarness h;
  for (int i = 0; i < 4; ++i) h.post_recv(i, i * 256, 256);
  std::vector<std::vector<uint8_t>> in;
  for (int i = 0; i < 4; ++i) in.push_back(h.peer_frame(op::kRcSendOnly, psn_add(P0, i), {}, 16));
  auto out = h.exchange(std::move(in));
  ASSERT_EQ(out.size(), 1u);  // one ACK for the latest PSN
  EXPECT_EQ(out[0].psn(), psn_add(P0, 3));
  EXPECT_EQ(out[0].msn(), 4u);
  EXPECT_EQ(h.completions().size(), 4u);
}

TEST(Responder, OutOfSequenceNaksOnceWithExpectedPsn) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, psn_add(P0, 2), {}, 8),
                         h.peer_frame(op::kRcSendOnly, psn_add(P0, 3), {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kPsnSeqError));
  EXPECT_EQ(out[0].psn(), P0);  // the PSN it expected
  EXPECT_EQ(h.qp()->counters_.seq_naks_sent, 1u);
  EXPECT_TRUE(h.completions().empty());
  // The expected PSN arrives: processed and ACKed; the gap state is cleared.
  out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  out = h.exchange({h.peer_frame(op::kRcSendOnly, psn_add(P0, 5), {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kPsnSeqError));
  EXPECT_EQ(out[0].psn(), psn_add(P0, 1));
}

TEST(Responder, DuplicateSendIsReAckedNotRedelivered) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  h.post_recv(2, 256, 256);
  h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8)});
  ASSERT_EQ(h.completions().size(), 1u);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8, false)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_EQ(out[0].psn(), P0);
  EXPECT_EQ(out[0].msn(), 1u);
  EXPECT_TRUE(h.completions().empty());  // the second receive WQE was not consumed
  EXPECT_EQ(h.qp()->counters_.duplicate_requests, 1u);
}

// The receive a message under way has taken (its FIRST came, its LAST not yet) is flushed like the
// receives still queued when the QP enters the error state (IBA 10.3.1.7): it is not lost.
TEST(Responder, TheReceiveOfAMessageUnderWayIsFlushedByTheErrorState) {
  ProtocolHarness h;
  h.post_recv(1, 0, 4096);
  h.post_recv(2, 4096, 4096);
  h.exchange({h.peer_frame(op::kRcSendFirst, P0, {}, h.mtu(), false)});
  QpAttr a;
  a.qp_state = QpState::kErr;
  ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState), 0);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 2u);
  for (uint64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(c[i].wr_id, i + 1);
    EXPECT_EQ(c[i].status, WcStatus::kWrFlushErr);
  }
}

TEST(Responder, NoReceivePostedSendsRnrNakWithMinRnrTimer) {
  ProtocolHarness h;
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8),
                         h.peer_frame(op::kRcSendOnly, psn_add(P0, 1), {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), wire::kAethRnrNak | 14);
  EXPECT_EQ(out[0].psn(), P0);
  // The PSN did not advance: the retry after posting a receive succeeds.
  h.post_recv(1, 0, 64);
  out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_EQ(out[0].psn(), P0);
}

// The Solicited Event bit of a request reaches its receive completion (IBA 11.4.2.2): a CQ armed
// for solicited completions is woken by a SEND that sets it, and not by one that does not.
TEST(Responder, TheSolicitedBitWakesASolicitedArm) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  h.post_recv(2, 256, 256);
  int notified = 0;
  h.cq()->set_notify([](void* n, CompletionQueue*) { ++*static_cast<int*>(n); }, &notified);
  h.cq()->arm(true);
  h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8)});
  EXPECT_EQ(notified, 0);
  h.set_peer_solicited(true);
  h.exchange({h.peer_frame(op::kRcSendOnly, psn_add(P0, 1), {}, 8)});
  EXPECT_EQ(notified, 1);
  EXPECT_EQ(h.completions().size(), 2u);
}

TEST(Responder, WriteWithImmediateNeedsAReceive) {
  ProtocolHarness h;
  auto e = h.reth(h.addr(1000), h.rkey(), 32);
  e.imm.data = {1, 2, 3, 4};
  auto out = h.exchange({h.peer_frame(op::kRcWriteOnlyImm, P0, e, 32)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), wire::kAethRnrNak | 14);
  EXPECT_EQ(h.mem()[1000], 0);  // nothing written before the RNR NAK
  h.post_recv(5, 0, 0);
  out = h.exchange({h.peer_frame(op::kRcWriteOnlyImm, P0, e, 32)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(c[0].byte_len, 32u);
  EXPECT_TRUE(c[0].wc_flags & kWcWithImm);
  const uint8_t imm[4] = {1, 2, 3, 4};
  EXPECT_EQ(std::memcmp(&c[0].imm_data, imm, 4), 0);
  EXPECT_EQ(h.mem()[1001], static_cast<uint8_t>(P0 + 1));
}

// --- access violations: NAK, zero bytes touched, QP to error ---

struct AccessCase {
  const char* name;
  uint64_t va_off;
  int rkey_delta;
  uint32_t len;
  uint32_t qp_access;
  uint32_t mr_access;
  NakCode want;
};

class WriteAccess : public ::testing::TestWithParam<AccessCase> {};

TEST_P(WriteAccess, NakedAndNothingWritten) {
  const AccessCase& c = GetParam();
  ProtocolHarness::Options o;
  o.qp_access = c.qp_access;
  o.mr_access = c.mr_access;
  ProtocolHarness h(o);
  const uint64_t va = h.addr() + c.va_off;
  auto out = h.exchange(
      {h.peer_frame(op::kRcWriteOnly, P0, h.reth(va, h.rkey() + c.rkey_delta, c.len), c.len)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].syndrome(), nak(c.want));
  EXPECT_EQ(out[0].psn(), P0);
  for (size_t i = 0; i < (1u << 20); ++i) ASSERT_EQ(h.mem()[i], 0) << "byte " << i << " touched";
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
  EXPECT_EQ(h.qp()->counters_.error_naks_sent, 1u);
}

constexpr uint32_t kAllQp = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
constexpr uint32_t kAllMr =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
INSTANTIATE_TEST_SUITE_P(
    Cases, WriteAccess,
    ::testing::Values(
        AccessCase{"BadRkey", 0, 0x10000, 64, kAllQp, kAllMr, NakCode::kRemoteAccessError},
        AccessCase{"PastTheEnd", (1u << 20) - 32, 0, 64, kAllQp, kAllMr,
                   NakCode::kRemoteAccessError},
        AccessCase{"BeforeTheStart", static_cast<uint64_t>(-64), 0, 64, kAllQp, kAllMr,
                   NakCode::kRemoteAccessError},
        AccessCase{"MrWithoutRemoteWrite", 0, 0, 64, kAllQp, kAccessLocalWrite | kAccessRemoteRead,
                   NakCode::kRemoteAccessError},
        AccessCase{"QpWithoutRemoteWrite", 0, 0, 64, kAccessRemoteRead, kAllMr,
                   NakCode::kInvalidRequest}),
    [](const auto& i) { return std::string(i.param.name); });

TEST(Responder, WriteLengthMustMatchDmaLength) {
  ProtocolHarness h;
  auto out = h.exchange({h.peer_frame(op::kRcWriteOnly, P0, h.reth(h.addr(), h.rkey(), 100), 64)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

// The whole range a WRITE's RETH names is checked at its FIRST packet (IBA 9.7.5.1.3): a WRITE
// whose DMA length runs past the region's end is NAKed there, before any byte is written, though
// the FIRST packet's own bytes lie inside the region.
TEST(Responder, WriteRangeIsCheckedWholeAtTheFirstPacket) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  const uint64_t off = h.mem_size() - 2 * m;  // room for two packets, not three
  auto out = h.exchange(
      {h.peer_frame(op::kRcWriteFirst, P0, h.reth(h.addr(off), h.rkey(), 3 * m), m, false)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kRemoteAccessError));
  EXPECT_EQ(out[0].psn(), P0);
  for (uint32_t i = 0; i < m; ++i) ASSERT_EQ(h.mem()[off + i], 0) << "byte " << i << " written";
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

TEST(Responder, ZeroLengthWriteChecksNoKey) {
  ProtocolHarness h;
  // IBA C9-88: a zero-length RDMA WRITE does not validate the R_Key.
  auto out = h.exchange({h.peer_frame(op::kRcWriteOnly, P0, h.reth(0, 0xdead, 0), 0)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_EQ(h.qp()->state(), QpState::kRts);
}

TEST(Responder, OpcodeOutOfSequenceIsInvalidRequest) {
  ProtocolHarness h;
  h.post_recv(1, 0, 4096);
  auto out = h.exchange({h.peer_frame(op::kRcSendMiddle, P0, {}, h.mtu(), false)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
  // The receive WQE is flushed.
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
}

TEST(Responder, WriteMiddleInsideASendIsInvalidRequest) {
  ProtocolHarness h;
  h.post_recv(1, 0, 4096);
  auto out = h.exchange({h.peer_frame(op::kRcSendFirst, P0, {}, h.mtu(), false),
                         h.peer_frame(op::kRcWriteMiddle, psn_add(P0, 1), {}, h.mtu(), false)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  EXPECT_EQ(out[0].psn(), psn_add(P0, 1));
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemInvReqErr);  // the receive in progress fails
}

TEST(Responder, FirstPacketShorterThanMtuIsInvalidRequest) {
  ProtocolHarness h;
  h.post_recv(1, 0, 4096);
  auto out = h.exchange({h.peer_frame(op::kRcSendFirst, P0, {}, h.mtu() - 4, false)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
}

// SEND with Invalidate names an R_Key for the responder to invalidate; this stack has no memory
// windows or fast-registered regions, the only kinds that can be invalidated remotely, so the
// request is refused (NAK invalid request, receive in error, QP to error), even when the key
// names an ordinary region. It used to complete with IBV_WC_WITH_INV as if the key had been
// invalidated, while the region stayed open to the peer.
TEST(Responder, SendWithInvalidateIsRefusedForKeysThatCannotBeInvalidated) {
  for (const bool multi : {false, true}) {
    SCOPED_TRACE(multi ? "FIRST + LAST_WITH_INVALIDATE" : "ONLY_WITH_INVALIDATE");
    ProtocolHarness h;
    const uint32_t m = h.mtu();
    h.post_recv(1, 0, 2 * m);
    wire::ExtHeaders inv;
    inv.ieth.rkey.set(h.rkey());
    std::vector<std::vector<uint8_t>> in;
    if (multi) in.push_back(h.peer_frame(op::kRcSendFirst, P0, {}, m, false));
    in.push_back(h.peer_frame(multi ? op::kRcSendLastInv : op::kRcSendOnlyInv,
                              psn_add(P0, multi ? 1 : 0), inv, 16));
    auto out = h.exchange(in);
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.back().opcode(), op::kRcAck);
    EXPECT_EQ(out.back().syndrome(), nak(NakCode::kInvalidRequest));
    EXPECT_EQ(out.back().psn(), psn_add(P0, multi ? 1 : 0));
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kRemInvReqErr);
    EXPECT_EQ(c[0].wc_flags & kWcWithInv, 0u);
    EXPECT_EQ(h.qp()->state(), QpState::kErr);
  }
}

// A LAST packet carries at least one byte (a message that ends on an MTU boundary ends with a full
// LAST, not an empty one): an empty SEND LAST is an invalid request, as rxe checks.
TEST(Responder, EmptyLastPacketIsInvalidRequest) {
  ProtocolHarness h;
  h.post_recv(1, 0, 4096);
  auto out = h.exchange({h.peer_frame(op::kRcSendFirst, P0, {}, h.mtu(), false),
                         h.peer_frame(op::kRcSendLast, psn_add(P0, 1), {}, 0)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  EXPECT_EQ(out[0].psn(), psn_add(P0, 1));
}

TEST(Responder, PacketLongerThanMtuIsInvalidRequest) {
  ProtocolHarness h;
  h.post_recv(1, 0, 4096);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, h.mtu() + 4)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
}

// A 50-byte SEND ONLY from the peer at P0 is acknowledged and completes the receive posted.
void expect_50_byte_send_taken(ProtocolHarness& h) {
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 50)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, 50u);
}

// The boundary of the check below: a SEND that fills its receive buffer exactly is taken.
TEST(Responder, SendFillingTheReceiveBufferExactlyIsTaken) {
  ProtocolHarness h;
  h.post_recv(1, 0, 50);
  expect_50_byte_send_taken(h);
}

// A zero-length SGE between two others is skipped: its key (here one that names no region) is
// not looked at, as rxe and mlx5 do, and the message lands in the SGEs around it.
TEST(Responder, AZeroLengthSgeInTheReceiveIsSkipped) {
  ProtocolHarness h;
  Sge sg[3] = {{h.addr(0), 20, h.rkey()}, {h.addr(500), 0, 0xdead00}, {h.addr(1000), 30, h.rkey()}};
  ASSERT_EQ(h.qp()->post_recv({.wr_id = 1, .sg_list = sg, .num_sge = 3}), 0);
  expect_50_byte_send_taken(h);
  for (uint32_t i = 0; i < 50; ++i) {
    EXPECT_EQ(h.mem()[i < 20 ? i : 1000 + i - 20], static_cast<uint8_t>(P0 + i)) << i;
  }
}

TEST(Responder, SendLongerThanReceiveBuffer) {
  ProtocolHarness h;
  h.post_recv(1, 0, 50);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 64)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(h.mem()[0], 0);  // nothing copied
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

// --- UC (IBA 9.7.5.1; rxe behaves the same): no ACK, NAK or RNR ever; a message that cannot
// complete is dropped, its receive WQE takes the next one, and the QP stays up. UC opcodes are
// the RC ones plus kUcBase.

ProtocolHarness uc_harness() {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUc;
  o.qp_access = kAccessRemoteWrite;
  return ProtocolHarness(o);
}
constexpr uint8_t uc(uint8_t rc_opcode) { return static_cast<uint8_t>(op::kUcBase + rc_opcode); }

TEST(UcResponder, AcknowledgesNothingEvenWhenAsked) {
  ProtocolHarness h = uc_harness();
  h.post_recv(1, 0, 256);
  EXPECT_TRUE(h.exchange({h.peer_frame(uc(op::kRcSendOnly), P0, {}, 100, true)}).empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, 100u);
}

TEST(UcResponder, AGapDropsTheCutMessageAndTheNextFirstResyncs) {
  ProtocolHarness h = uc_harness();
  h.post_recv(1, 0, 4096);
  const uint32_t m = h.mtu();
  // SEND FIRST, its MIDDLE lost, its LAST: the message is dropped, without a NAK.
  auto out = h.exchange({h.peer_frame(uc(op::kRcSendFirst), P0, {}, m, false),
                         h.peer_frame(uc(op::kRcSendLast), psn_add(P0, 2), {}, 8, false)});
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(h.completions().empty());
  EXPECT_EQ(h.qp()->counters_.out_of_sequence, 1u);
  EXPECT_EQ(h.qp()->counters_.uc_messages_dropped, 1u);
  EXPECT_EQ(h.qp()->counters_.seq_naks_sent, 0u);
  // The next message starts at a later PSN: it is taken, into the same receive WQE.
  out = h.exchange({h.peer_frame(uc(op::kRcSendOnly), psn_add(P0, 3), {}, 40, true)});
  EXPECT_TRUE(out.empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(c[0].byte_len, 40u);
  EXPECT_EQ(h.mem()[0], static_cast<uint8_t>(psn_add(P0, 3)));
  EXPECT_EQ(h.qp()->state(), QpState::kRts);
}

TEST(UcResponder, MiddleOrLastWithoutFirstIsDroppedUntilTheNextFirst) {
  ProtocolHarness h = uc_harness();
  h.post_recv(1, 0, 4096);
  const uint32_t m = h.mtu();
  auto out = h.exchange({h.peer_frame(uc(op::kRcSendMiddle), P0, {}, m, false),
                         h.peer_frame(uc(op::kRcSendLast), psn_add(P0, 1), {}, 8, false),
                         h.peer_frame(uc(op::kRcSendOnly), psn_add(P0, 2), {}, 16, false)});
  EXPECT_TRUE(out.empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].byte_len, 16u);
  EXPECT_EQ(h.qp()->counters_.uc_messages_dropped, 1u);
  EXPECT_EQ(h.qp()->counters_.out_of_sequence, 0u);  // refused in step, not a gap
}

TEST(UcResponder, AFirstInsideAMessageReplacesIt) {
  ProtocolHarness h = uc_harness();
  h.post_recv(1, 0, 4096);
  const uint32_t m = h.mtu();
  auto out = h.exchange({h.peer_frame(uc(op::kRcSendFirst), P0, {}, m, false),
                         h.peer_frame(uc(op::kRcSendOnly), psn_add(P0, 1), {}, 24, false)});
  EXPECT_TRUE(out.empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].byte_len, 24u);  // the cut message's bytes are not counted
  EXPECT_EQ(h.qp()->counters_.uc_messages_dropped, 1u);
}

TEST(UcResponder, NoReceiveLosesTheSendNotTheQp) {
  ProtocolHarness h = uc_harness();
  auto out = h.exchange({h.peer_frame(uc(op::kRcSendOnly), P0, {}, 8, true)});
  EXPECT_TRUE(out.empty());  // no RNR NAK
  EXPECT_EQ(h.qp()->counters_.rnr_naks_sent, 0u);
  EXPECT_EQ(h.qp()->counters_.uc_messages_dropped, 1u);
  h.post_recv(1, 0, 64);
  out = h.exchange({h.peer_frame(uc(op::kRcSendOnly), psn_add(P0, 1), {}, 8, true)});
  EXPECT_TRUE(out.empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(h.qp()->counters_.out_of_sequence, 0u);
}

TEST(UcResponder, ABadWriteLosesTheMessageNotTheQp) {
  ProtocolHarness h = uc_harness();
  const uint32_t m = h.mtu();
  // A bad R_Key, then a WRITE longer than its DMA length: both dropped, nothing written.
  auto out = h.exchange(
      {h.peer_frame(uc(op::kRcWriteOnly), P0, h.reth(h.addr(), h.rkey() + 0x10000, 64), 64),
       h.peer_frame(uc(op::kRcWriteFirst), psn_add(P0, 1), h.reth(h.addr(), h.rkey(), m), m, false),
       h.peer_frame(uc(op::kRcWriteLast), psn_add(P0, 2), {}, 8, false)});
  EXPECT_TRUE(out.empty());
  for (size_t i = 0; i < 2 * m; ++i) ASSERT_EQ(h.mem()[i], 0) << "byte " << i << " touched";
  EXPECT_EQ(h.qp()->counters_.uc_messages_dropped, 2u);
  EXPECT_EQ(h.qp()->counters_.error_naks_sent, 0u);
  // The QP is still up: a good WRITE lands.
  out = h.exchange(
      {h.peer_frame(uc(op::kRcWriteOnly), psn_add(P0, 3), h.reth(h.addr(), h.rkey(), 32), 32)});
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.mem()[1], static_cast<uint8_t>(psn_add(P0, 3) + 1));
  EXPECT_EQ(h.qp()->state(), QpState::kRts);
}

// --- READ ---

// MTU 4096 and no congestion control, for a READ paced by a rate limit alone.
ProtocolHarness::Options paced_read_options() {
  ProtocolHarness::Options o;
  o.mtu = Mtu::k4096;
  o.cc = CcKind::kNone;
  return o;
}

// Limits the QP to 1 Gb/s (a 4 KiB response frame takes 33 us, so 16 of them take 0.53 ms) and
// asks it for a READ of 16 MTUs; returns what left at once.
std::vector<Emitted> start_paced_read(ProtocolHarness& h) {
  EXPECT_EQ(h.set_rate_limit(1'000'000), 0);
  return h.exchange(
      {h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey(), 16 * h.mtu()))});
}

// A rate limit paces READ responses too (they are what this QP sends); lifting it lets the held
// rest go at once, though no work request of ours is waiting (nothing else schedules the
// responder).
TEST(Responder, ARateLimitPacesReadResponsesAndLiftingItReleasesThem) {
  ProtocolHarness h(paced_read_options());
  auto out = start_paced_read(h);
  EXPECT_LE(out.size(), 2u);
  const auto in_100us = h.advance(100'000);
  EXPECT_LE(out.size() + in_100us.size(), 2u + 4u);
  ASSERT_EQ(h.set_rate_limit(0), 0);
  const auto rest = h.exchange();
  EXPECT_EQ(out.size() + in_100us.size() + rest.size(), 16u);
}

TEST(Responder, ReadIsSegmentedByMtu) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  for (uint32_t i = 0; i < 4 * m; ++i) h.mem()[i] = static_cast<uint8_t>(i * 7);
  auto out =
      h.exchange({h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey(), 3 * m + 5))});
  ASSERT_EQ(out.size(), 4u);
  const uint8_t want_op[4] = {op::kRcReadRespFirst, op::kRcReadRespMiddle, op::kRcReadRespMiddle,
                              op::kRcReadRespLast};
  const uint32_t want_len[4] = {m, m, m, 5};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(out[i].opcode(), want_op[i]);
    EXPECT_EQ(out[i].psn(), psn_add(P0, i));
    EXPECT_EQ(out[i].info.payload_len, want_len[i]);
    EXPECT_EQ(std::memcmp(out[i].info.payload(), h.mem() + i * m, want_len[i]), 0);
    if (out[i].info.op->has_ext(wire::Ext::kAeth)) {
      EXPECT_EQ(out[i].syndrome(), kAck);
      EXPECT_EQ(out[i].msn(), 1u);
    }
  }
  // The next request must use the PSN after the response packets.
  h.post_recv(1, 8192, 64);
  out = h.exchange({h.peer_frame(op::kRcSendOnly, psn_add(P0, 4), {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_EQ(out[0].msn(), 2u);
}

TEST(Responder, ZeroLengthReadAnswersOneEmptyResponse) {
  ProtocolHarness h;
  auto out = h.exchange({h.peer_frame(op::kRcReadRequest, P0, h.reth(0, 0, 0))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRespOnly);
  EXPECT_EQ(out[0].info.payload_len, 0u);
}

TEST(Responder, DuplicateReadReexecutesFromTheRequestedPsn) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  for (uint32_t i = 0; i < 4 * m; ++i) h.mem()[i] = static_cast<uint8_t>(i * 3);
  auto out = h.exchange({h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey(), 3 * m))});
  ASSERT_EQ(out.size(), 3u);
  // The requester lost the second and third responses and asks again for the rest.
  out = h.exchange(
      {h.peer_frame(op::kRcReadRequest, psn_add(P0, 1), h.reth(h.addr(m), h.rkey(), 2 * m))});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRespFirst);
  EXPECT_EQ(out[0].psn(), psn_add(P0, 1));
  EXPECT_EQ(std::memcmp(out[0].info.payload(), h.mem() + m, m), 0);
  EXPECT_EQ(out[1].opcode(), op::kRcReadRespLast);
  EXPECT_EQ(out[1].psn(), psn_add(P0, 2));
  // A "duplicate" that does not match the saved READ is ignored.
  out = h.exchange(
      {h.peer_frame(op::kRcReadRequest, psn_add(P0, 1), h.reth(h.addr(5), h.rkey(), 2 * m))});
  EXPECT_TRUE(out.empty());
}

// The retried range may start at the READ's first PSN (all of it again) or at its last (its
// last packet alone, answered as an ONLY response).
TEST(Responder, DuplicateReadFromItsFirstOrItsLastPsnIsAnswered) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  for (uint32_t i = 0; i < 4 * m; ++i) h.mem()[i] = static_cast<uint8_t>(i * 5 + 1);
  auto out =
      h.exchange({h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey(), 2 * m + 9))});
  ASSERT_EQ(out.size(), 3u);
  out = h.exchange(
      {h.peer_frame(op::kRcReadRequest, psn_add(P0, 2), h.reth(h.addr(2 * m), h.rkey(), 9))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRespOnly);
  EXPECT_EQ(out[0].psn(), psn_add(P0, 2));
  ASSERT_EQ(out[0].info.payload_len, 9u);
  EXPECT_EQ(std::memcmp(out[0].info.payload(), h.mem() + 2 * m, 9), 0);
  out = h.exchange({h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey(), 2 * m + 9))});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRespFirst);
  EXPECT_EQ(out[0].psn(), P0);
  EXPECT_EQ(out[2].opcode(), op::kRcReadRespLast);
  EXPECT_EQ(out[2].psn(), psn_add(P0, 2));
  EXPECT_EQ(h.qp()->state(), QpState::kRts);
}

TEST(Responder, ReadWithBadRkeyIsRemoteAccessError) {
  ProtocolHarness h;
  auto out =
      h.exchange({h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey() ^ 0x10000, 64))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kRemoteAccessError));
}

// --- atomics ---

wire::ExtHeaders atomic_eth(uint64_t va, uint32_t rkey, uint64_t swap_add, uint64_t cmp) {
  wire::ExtHeaders e;
  e.atomic.va.set(va);
  e.atomic.rkey.set(rkey);
  e.atomic.swap_add.set(swap_add);
  e.atomic.compare.set(cmp);
  return e;
}

TEST(Responder, FetchAddExecutesOnceAndDuplicatesReplayTheResult) {
  ProtocolHarness h;
  uint64_t v = 1000;
  std::memcpy(h.mem() + 64, &v, 8);
  auto req = h.peer_frame(op::kRcFetchAdd, P0, atomic_eth(h.addr(64), h.rkey(), 5, 0));
  auto out = h.exchange({req});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAtomicAck);
  EXPECT_EQ(out[0].info.ext<wire::AtomicAckEth>(wire::Ext::kAtomicAckEth).orig.get(), 1000u);
  EXPECT_EQ(out[0].msn(), 1u);
  out = h.exchange({req, req});  // the requester retries twice
  ASSERT_EQ(out.size(), 1u);     // one answer queued for both duplicates
  EXPECT_EQ(out[0].info.ext<wire::AtomicAckEth>(wire::Ext::kAtomicAckEth).orig.get(), 1000u);
  std::memcpy(&v, h.mem() + 64, 8);
  EXPECT_EQ(v, 1005u);  // executed exactly once
  EXPECT_EQ(h.qp()->counters_.atomics_executed, 1u);
}

TEST(Responder, CompareSwap) {
  ProtocolHarness h;
  uint64_t v = 7;
  std::memcpy(h.mem() + 64, &v, 8);
  auto out = h.exchange(
      {h.peer_frame(op::kRcCmpSwap, P0, atomic_eth(h.addr(64), h.rkey(), 9, 7)),
       h.peer_frame(op::kRcCmpSwap, psn_add(P0, 1), atomic_eth(h.addr(64), h.rkey(), 11, 7))});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].info.ext<wire::AtomicAckEth>(wire::Ext::kAtomicAckEth).orig.get(), 7u);
  EXPECT_EQ(out[1].info.ext<wire::AtomicAckEth>(wire::Ext::kAtomicAckEth).orig.get(), 9u);
  std::memcpy(&v, h.mem() + 64, 8);
  EXPECT_EQ(v, 9u);  // the second compare failed
}

TEST(Responder, MisalignedAtomicIsInvalidRequest) {
  ProtocolHarness h;
  auto out =
      h.exchange({h.peer_frame(op::kRcFetchAdd, P0, atomic_eth(h.addr(68), h.rkey(), 1, 0))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
}

TEST(Responder, AtomicWithoutAtomicAccessIsRemoteAccessError) {
  ProtocolHarness::Options o;
  o.mr_access = kAccessLocalWrite | kAccessRemoteWrite;
  ProtocolHarness h(o);
  auto out =
      h.exchange({h.peer_frame(op::kRcFetchAdd, P0, atomic_eth(h.addr(64), h.rkey(), 1, 0))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kRemoteAccessError));
}

// The word an atomic names must be aligned in host memory, not only on the wire: a region may
// map an aligned iova onto an unaligned buffer.
TEST(Responder, AtomicOnAnUnalignedHostWordIsInvalidRequest) {
  ProtocolHarness h;
  uint32_t key = 0;
  ASSERT_EQ(h.engine().reg_mr(h.qp()->init_attr().pd, h.mem() + 4, 4096, 0x10000,
                              kAccessLocalWrite | kAccessRemoteAtomic, &key),
            0);
  auto out = h.exchange({h.peer_frame(op::kRcFetchAdd, P0, atomic_eth(0x10000, key, 1, 0))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  EXPECT_EQ(h.qp()->counters_.atomics_executed, 0u);
  for (int i = 4; i < 12; ++i) EXPECT_EQ(h.mem()[i], 0) << i;
}

// A READ or an atomic needs a responder resource and the QP's access for it: max_dest_rd_atomic 0
// grants the peer no resources, and a QP without REMOTE_READ (REMOTE_ATOMIC) takes no READ
// (atomic), whatever the region allows. Either way the request is invalid (rxe NAKs it the same
// way): nothing is read or executed.
TEST(Responder, ReadsAndAtomicsNeedAResponderResourceAndTheQpsAccess) {
  for (const uint8_t opcode : {op::kRcReadRequest, op::kRcFetchAdd}) {
    for (const bool no_resource : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << static_cast<int>(opcode) << (no_resource ? " no resource" : " no QP access"));
      const bool read = opcode == op::kRcReadRequest;
      ProtocolHarness::Options o;
      if (no_resource) {
        o.max_dest_rd_atomic = 0;
      } else {
        o.qp_access = kAllQp & ~(read ? kAccessRemoteRead : kAccessRemoteAtomic);
      }
      ProtocolHarness h(o);
      const wire::ExtHeaders ext =
          read ? h.reth(h.addr(), h.rkey(), 64) : atomic_eth(h.addr(64), h.rkey(), 1, 0);
      auto out = h.exchange({h.peer_frame(opcode, P0, ext)});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].opcode(), op::kRcAck);
      EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
      EXPECT_EQ(h.qp()->counters_.atomics_executed, 0u);
    }
  }
}

// A fatal error costs the failing request, not the ones before it: responses already queued for
// earlier requests (an atomic's result, a READ's data) leave before the NAK, in PSN order (IBA
// 9.5, 9.7.5.1.3), and nothing after the failing request is taken. The NAK used to go straight
// to the tx queue and the error state then dropped the queued responses: the requester saw its
// executed atomic fail with the original value lost.
TEST(Responder, AFatalNakLeavesAfterTheResponsesQueuedBeforeIt) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  uint64_t v = 1000;
  std::memcpy(h.mem() + 64, &v, 8);
  for (uint32_t i = 0; i < 2 * m; ++i) h.mem()[4096 + i] = static_cast<uint8_t>(i * 5);
  h.post_recv(1, 8192, 256);
  auto out = h.exchange({
      h.peer_frame(op::kRcFetchAdd, P0, atomic_eth(h.addr(64), h.rkey(), 5, 0)),
      h.peer_frame(op::kRcReadRequest, psn_add(P0, 1), h.reth(h.addr(4096), h.rkey(), 2 * m)),
      h.peer_frame(op::kRcWriteOnly, psn_add(P0, 3), h.reth(h.addr(128), h.rkey() ^ 0x10000, 8), 8),
      h.peer_frame(op::kRcSendOnly, psn_add(P0, 4), {}, 8),
  });
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].opcode(), op::kRcAtomicAck);
  EXPECT_EQ(out[0].psn(), P0);
  EXPECT_EQ(out[0].info.ext<wire::AtomicAckEth>(wire::Ext::kAtomicAckEth).orig.get(), 1000u);
  EXPECT_EQ(out[1].opcode(), op::kRcReadRespFirst);
  EXPECT_EQ(out[1].psn(), psn_add(P0, 1));
  EXPECT_EQ(std::memcmp(out[1].info.payload(), h.mem() + 4096, m), 0);
  EXPECT_EQ(out[2].opcode(), op::kRcReadRespLast);
  EXPECT_EQ(out[2].psn(), psn_add(P0, 2));
  EXPECT_EQ(out[3].opcode(), op::kRcAck);
  EXPECT_EQ(out[3].psn(), psn_add(P0, 3));
  EXPECT_EQ(out[3].syndrome(), nak(NakCode::kRemoteAccessError));
  std::memcpy(&v, h.mem() + 64, 8);
  EXPECT_EQ(v, 1005u);
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
  // The SEND behind the failing WRITE was not delivered: its receive is flushed.
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 1u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  EXPECT_TRUE(h.exchange().empty());
}

// --- packets that never reach the QP: counted per reason, nothing answered ---

// Frames that are not RoCEv2 go to the net handler (the neighbour agent), which validates them
// itself. An IPv4 packet with options is one of them unless it is UDP: a ping with IP options
// (ping -R, -T) is for the agent, which answers it (RFC 1122 3.2.1.8 / 3.2.2.6), while RoCEv2
// never carries options and stays a parse error.
TEST(EngineRx, NonUdpIpv4WithOptionsGoesToTheNetHandler) {
  ProtocolHarness h;
  struct Seen {
    std::vector<uint32_t> lens;  // of the frames handed to the net handler
  } seen;
  h.engine().set_net_handler(
      [](void* ctx, const wire::PacketInfo& info, wire::ParseError) {
        static_cast<Seen*>(ctx)->lens.push_back(info.frame_len);
      },
      &seen);
  const EngineCounters& c = h.engine().counters();
  // An echo request with a record-route option (IHL 6: type 7, length 3, pointer 4, end).
  std::vector<uint8_t> ping = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00};         // Ethernet
  ping.insert(ping.end(), {0x46, 0, 0, 32, 0, 1, 0, 0, 64, wire::kIpProtoIcmp, 0, 0});  // IPv4
  ping.insert(ping.end(), {10, 0, 0, 2, 10, 0, 0, 1});      // 10.0.0.2 -> 10.0.0.1
  ping.insert(ping.end(), {7, 3, 4, 0});                    // record route, end of options
  ping.insert(ping.end(), {8, 0, 0xf7, 0xfe, 0, 1, 0, 0});  // echo request
  const uint16_t sum = wire::inet_checksum(&ping[14], 24);  // over the 24-byte header
  ping[24] = static_cast<uint8_t>(sum >> 8);
  ping[25] = static_cast<uint8_t>(sum);
  ping.resize(60, 0);
  EXPECT_TRUE(h.exchange({ping}).empty());
  EXPECT_EQ(seen.lens, std::vector<uint32_t>{60});
  EXPECT_EQ(c.rx_not_roce, 1u);
  EXPECT_EQ(c.rx_parse_error[static_cast<unsigned>(wire::ParseError::kIpv4Options)], 0u);
  // The same options on a UDP datagram: not the agent's, a malformed RoCEv2 frame.
  ping[14 + 9] = wire::kIpProtoUdp;
  EXPECT_TRUE(h.exchange({ping}).empty());
  EXPECT_EQ(seen.lens.size(), 1u);
  EXPECT_EQ(c.rx_parse_error[static_cast<unsigned>(wire::ParseError::kIpv4Options)], 1u);
}

TEST(Responder, MalformedAndMisaddressedPacketsAreCountedAndDropped) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  const EngineCounters& c = h.engine().counters();
  // Unknown QPN.
  auto f = h.peer_frame(op::kRcSendOnly, P0, {}, 8);
  f[42 + 5] ^= 0x40;  // BTH dest QP byte
  auto fixed = f;
  {
    wire::PacketInfo info;
    wire::parse_frame(fixed.data(), static_cast<uint32_t>(fixed.size()), info, {false, false});
    const uint32_t icrc_off = static_cast<uint32_t>(fixed.size()) - 4;
    wire::icrc_write(fixed.data() + icrc_off,
                     wire::icrc_compute(fixed.data() + 14, icrc_off - 14, false));
  }
  EXPECT_TRUE(h.exchange({fixed}).empty());
  EXPECT_EQ(c.rx_unknown_qp, 1u);
  // Bad ICRC.
  auto bad = h.peer_frame(op::kRcSendOnly, P0, {}, 8);
  bad[bad.size() - 10] ^= 1;
  EXPECT_TRUE(h.exchange({bad}).empty());
  EXPECT_EQ(c.rx_parse_error[static_cast<unsigned>(wire::ParseError::kBadIcrc)], 1u);
  // Not for our MAC.
  auto other = h.peer_frame(op::kRcSendOnly, P0, {}, 8);
  other[5] = 0x77;
  EXPECT_TRUE(h.exchange({other}).empty());
  EXPECT_EQ(c.rx_not_our_mac, 1u);
  // A UD opcode for an RC QP.
  wire::ExtHeaders ud;
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kUdSendOnly, P0, ud, 8)}).empty());
  EXPECT_EQ(c.rx_wrong_transport, 1u);
  // Truncated garbage.
  EXPECT_TRUE(h.exchange({std::vector<uint8_t>(30, 0xAB)}).empty());
  EXPECT_EQ(h.completions().size(), 0u);
  // After all that, the QP still works.
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  // Every buffer comes back: the engine keeps a cache of spare tx buffers while it runs and
  // returns them when it goes.
  h.destroy_engine();
  EXPECT_EQ(h.port().outstanding(), 0u) << "buffers leaked";
}

// Another VLAN is another network (IEEE 802.1Q): a frame tagged with a VID that is not the
// port's is counted and dropped before any QP sees it, even one with our MAC and the QP's
// addresses, since tenants on different VLANs may use the same addresses. Untagged and
// priority-tagged (VID 0) frames are ours, as they are the neighbour agent's, and our own frames
// carry the port's tag whatever the request's. The engine used to take any VID.
TEST(Responder, FramesOfAnotherVlanAreDropped) {
  constexpr uint16_t kTci = 3 << 13 | 100;  // PCP 3, VID 100
  ProtocolHarness::Options o;
  o.vlan_tci = kTci;
  o.cc = CcKind::kDcqcn;
  ProtocolHarness h(o);
  const EngineCounters& c = h.engine().counters();
  for (uint64_t i = 0; i < 4; ++i) h.post_recv(i, i * 256, 256);
  uint32_t psn = P0;
  // Ours: our VID (another priority), untagged, priority-tagged.
  for (std::optional<uint16_t> tag :
       {std::optional<uint16_t>(5 << 13 | 100), std::optional<uint16_t>(),
        std::optional<uint16_t>(5 << 13)}) {
    h.set_peer_vlan(tag);
    auto out = h.exchange({h.peer_frame(op::kRcSendOnly, psn, {}, 16)});
    ASSERT_EQ(out.size(), 1u) << "tag " << (tag ? *tag : -1);
    EXPECT_EQ(out[0].opcode(), op::kRcAck);
    EXPECT_EQ(out[0].psn(), psn);
    EXPECT_TRUE(out[0].info.has_vlan);
    EXPECT_EQ(out[0].info.vlan_tci, kTci);
    psn = psn_add(psn, 1);
  }
  EXPECT_EQ(h.completions().size(), 3u);
  EXPECT_EQ(c.rx_other_vlan, 0u);
  // Another VID, with everything else right: no ACK, no completion, no effect on the QP's rate.
  const double line = EngineConfig{}.dcqcn.line_gbps;
  h.set_peer_vlan(5 << 13 | 200);
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kRcSendOnly, psn, {}, 16)}).empty());
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kCnp, 0, {}, 0, false)}).empty());
  EXPECT_EQ(c.rx_other_vlan, 2u);
  EXPECT_EQ(c.cnps_received, 0u);
  EXPECT_EQ(h.qp()->cc_.rp.rate_gbps(), line);
  EXPECT_TRUE(h.completions().empty());
  EXPECT_EQ(h.qp()->counters_.rx_packets, 3u);
  // The same SEND on our VLAN is the next in sequence: the dropped one did not count.
  h.set_peer_vlan(kTci);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, psn, {}, 16)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_EQ(out[0].psn(), psn);
  EXPECT_EQ(h.completions().size(), 1u);
}

// A port without a VLAN takes untagged and priority-tagged frames only.
TEST(Responder, AnUntaggedPortDropsTaggedFrames) {
  ProtocolHarness h;
  const EngineCounters& c = h.engine().counters();
  h.post_recv(1, 0, 256);
  h.post_recv(2, 256, 256);
  h.set_peer_vlan(100);
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 16)}).empty());
  EXPECT_EQ(c.rx_other_vlan, 1u);
  h.set_peer_vlan(7 << 13);  // VID 0, PCP 7
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 16)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_FALSE(out[0].info.has_vlan);
  EXPECT_EQ(h.completions().size(), 1u);
  EXPECT_EQ(c.rx_other_vlan, 1u);
}

// A QP in RTR receives but has no send queue running: responses (ACKs, READ responses) for it
// are dropped and counted, and requests are still taken.
TEST(Responder, ResponsesToAQpInRtrAreDropped) {
  ProtocolHarness::Options o;
  o.stop_at_rtr = true;
  ProtocolHarness h(o);
  ASSERT_EQ(h.qp()->state(), QpState::kRtr);
  const uint8_t data[8] = {};
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kRcAck, ProtocolHarness::kLocalPsn, h.aeth(kAck, 1)),
                          h.peer_frame(op::kRcReadRespOnly, ProtocolHarness::kLocalPsn,
                                       h.aeth(kAck, 1), data, 8)})
                  .empty());
  EXPECT_EQ(h.engine().counters().rx_bad_qp_state, 2u);
  EXPECT_TRUE(h.completions().empty());
  h.post_recv(1, 0, 64);
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), kAck);
  EXPECT_EQ(h.completions().size(), 1u);
}

TEST(Responder, PacketsToQpInResetOrInitAreDropped) {
  ProtocolHarness h;
  QpAttr a;
  a.qp_state = QpState::kReset;
  ASSERT_EQ(h.engine().modify_qp(h.qp(), a, kQpState), 0);
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8)}).empty());
  EXPECT_EQ(h.engine().counters().rx_bad_qp_state, 1u);
}
}  // namespace

namespace {
TEST(Responder, WrongSourceAddressAndPkeyAreDropped) {
  ProtocolHarness h;
  h.post_recv(1, 0, 256);
  // From an IP that is not the QP's peer: fix the IPv4 checksum and ICRC after the change.
  auto f = h.peer_frame(roce::wire::op::kRcSendOnly, ProtocolHarness::kPeerPsn, {}, 8);
  f[14 + 15] = 9;  // last byte of the source IP
  f[24] = f[25] = 0;
  uint16_t cs = static_cast<uint16_t>(~roce::wire::ipv4_header_checksum(f.data() + 14));
  f[24] = static_cast<uint8_t>(cs >> 8);
  f[25] = static_cast<uint8_t>(cs);
  const uint32_t icrc_off = static_cast<uint32_t>(f.size()) - 4;
  roce::wire::icrc_write(f.data() + icrc_off,
                         roce::wire::icrc_compute(f.data() + 14, icrc_off - 14, false));
  EXPECT_TRUE(h.exchange({f}).empty());
  EXPECT_EQ(h.engine().counters().rx_addr_mismatch, 1u);
  // A P_Key of another partition.
  auto g = h.peer_frame(roce::wire::op::kRcSendOnly, ProtocolHarness::kPeerPsn, {}, 8);
  g[42 + 2] = 0x80;
  g[42 + 3] = 0x05;
  roce::wire::icrc_write(g.data() + icrc_off,
                         roce::wire::icrc_compute(g.data() + 14, icrc_off - 14, false));
  EXPECT_TRUE(h.exchange({g}).empty());
  EXPECT_EQ(h.engine().counters().rx_pkey_mismatch, 1u);
  // A limited member of the default partition (0x7FFF) matches our full-member 0xFFFF: one
  // side's full membership is enough (IBA 10.9.3).
  auto l = h.peer_frame(roce::wire::op::kRcSendOnly, ProtocolHarness::kPeerPsn, {}, 8);
  l[42 + 2] = 0x7F;
  l[42 + 3] = 0xFF;
  roce::wire::icrc_write(l.data() + icrc_off,
                         roce::wire::icrc_compute(l.data() + 14, icrc_off - 14, false));
  auto out = h.exchange({l});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), roce::wire::kAethAckUnlimitedCredits);
  EXPECT_EQ(h.engine().counters().rx_pkey_mismatch, 1u);
}

// Two CE-marked 8-byte SENDs from the peer, each with a receive posted; what the QP sent back.
std::vector<Emitted> two_ce_marked_sends(ProtocolHarness& h) {
  h.post_recv(1, 0, 256);
  h.post_recv(2, 256, 256);
  h.set_peer_traffic_class(0x3);  // CE
  auto out = h.exchange({h.peer_frame(op::kRcSendOnly, P0, {}, 8),
                         h.peer_frame(op::kRcSendOnly, psn_add(P0, 1), {}, 8)});
  h.set_peer_traffic_class(0);
  return out;
}

// DCQCN starts with the responder, at RTR: a QP that only receives (or has not reached RTS yet)
// answers CE marks with at most one CNP per interval, and a CNP cuts the rate of its READ
// responses by alpha/2. Before, the notification and reaction points were set up at RTS only: in
// RTR every CE-marked packet drew a CNP, and a CNP cut an RP that had never started (Rc 0) to
// the floor rate.
TEST(Responder, DcqcnRunsFromRtr) {
  ProtocolHarness::Options o;
  o.cc = CcKind::kDcqcn;
  o.stop_at_rtr = true;
  ProtocolHarness h(o);
  ASSERT_EQ(h.qp()->state(), QpState::kRtr);
  const std::vector<Emitted> out = two_ce_marked_sends(h);
  int cnps = 0;
  for (const Emitted& e : out) cnps += e.opcode() == op::kCnp;
  EXPECT_EQ(cnps, 1);  // the engine's default interval: 50 us
  EXPECT_EQ(h.qp()->counters_.cnps_sent, 1u);
  h.set_peer_traffic_class(0);
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kCnp, 0, {}, 0, false)}).empty());
  EXPECT_EQ(h.qp()->counters_.cnps_received, 1u);
  EXPECT_EQ(h.qp()->cc_.rp.rate_gbps(), EngineConfig{}.dcqcn.line_gbps / 2);  // alpha 1
}

// The notification point does not depend on the QP's own congestion control: a QP that does not
// run DCQCN still answers CE marks with CNPs (rate-limited alike), as a NIC's NP does, so that a
// peer running DCQCN is slowed by a congested switch. Only DCQCN QPs used to send them.
TEST(Responder, CeMarksDrawCnpsWhateverTheQpsOwnCongestionControl) {
  ProtocolHarness::Options o;
  o.cc = CcKind::kNone;
  ProtocolHarness h(o);
  const std::vector<Emitted> out = two_ce_marked_sends(h);
  int cnps = 0;
  for (const Emitted& e : out) {
    if (e.opcode() != op::kCnp) continue;
    ++cnps;
    EXPECT_EQ(e.info.dest_qp, ProtocolHarness::kPeerQpn);
    EXPECT_EQ(e.info.ecn(), wire::Ecn::kNotEct);
  }
  EXPECT_EQ(cnps, 1);  // one per 50 us
  EXPECT_EQ(h.qp()->counters_.cnps_sent, 1u);
  EXPECT_EQ(h.completions().size(), 2u);
}

// A DCQCN QP's own data leaves ECT(0) and, at line rate, at once (its pacer holds nothing back);
// the CNP it sends for a CE mark carries BECN (annex A17.9.2) and the control traffic class,
// Not-ECT, even right after that ECT data.
TEST(Responder, ADcqcnQpsCnpHasBecnAndTheControlTrafficClassAfterEctData) {
  ProtocolHarness::Options o;
  o.cc = CcKind::kDcqcn;
  ProtocolHarness h(o);
  ASSERT_EQ(h.post_send(WrOpcode::kRdmaWrite, 1, 0, 8), 0);
  std::vector<Emitted> out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].info.ecn(), wire::Ecn::kEct0);
  EXPECT_EQ(h.engine().counters().paced, 0u);
  out = two_ce_marked_sends(h);
  int cnps = 0;
  for (const Emitted& e : out) {
    if (e.opcode() != op::kCnp) continue;
    ++cnps;
    EXPECT_TRUE(e.info.becn);
    EXPECT_EQ(e.info.traffic_class, 0);  // DSCP 0 (the QP's), Not-ECT
  }
  EXPECT_EQ(cnps, 1);
}

// A CNP slows its QP down only if the QP's peer could have sent it: one from another address
// (any host that guessed a QP number) is counted and ignored, as other packets from the wrong
// address are. It used to halve the QP's rate like the peer's own.
TEST(Responder, ACnpFromAnotherHostIsIgnored) {
  ProtocolHarness::Options o;
  o.cc = CcKind::kDcqcn;
  ProtocolHarness h(o);
  const double line = EngineConfig{}.dcqcn.line_gbps;
  const Gid peer = h.peer_gid();
  Gid other = peer;
  other[15] ^= 0x40;
  h.set_peer_source(other);
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kCnp, 0, {}, 0, false)}).empty());
  EXPECT_EQ(h.engine().counters().cnps_received, 1u);
  EXPECT_EQ(h.engine().counters().cnps_ignored, 1u);
  EXPECT_EQ(h.qp()->cc_.rp.rate_gbps(), line);
  h.set_peer_source(peer);
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kCnp, 0, {}, 0, false)}).empty());
  EXPECT_EQ(h.engine().counters().cnps_ignored, 1u);
  EXPECT_EQ(h.qp()->cc_.rp.rate_gbps(), line / 2);  // alpha 1
}

ProtocolHarness::Options ud_options(bool ipv6 = false) {
  ProtocolHarness::Options o;
  o.qp_type = QpType::kUd;
  o.ipv6 = ipv6;
  return o;
}

// A DETH with the harness's Q_Key, from source QP 0x345.
wire::ExtHeaders ud_deth(uint32_t qkey) {
  wire::ExtHeaders e;
  e.deth.qkey.set(qkey);
  e.deth.src_qp.set(0x345);
  return e;
}

// UD (IBA 9.8): the receive buffer gets the 40-byte GRH area (RoCEv2 over IPv4: 20 zero bytes,
// then the IPv4 header), then the payload; the completion carries the source QP from the DETH,
// the GRH flag, the immediate, and in sl the packet's IP version as mlx5 reports it (UdSl). The
// QP counts the datagram and its bytes, as it does for RC and UC (rx_bytes stayed 0 for UD).
TEST(Responder, UdDatagramCompletesWithTheGrhAreaAndIsCounted) {
  for (bool ipv6 : {false, true}) {
    SCOPED_TRACE(ipv6 ? "IPv6" : "IPv4");
    const ProtocolHarness::Options o = ud_options(ipv6);
    ProtocolHarness h(o);
    h.post_recv(1, 0, 40 + 100);
    wire::ExtHeaders e = ud_deth(o.qkey);
    const uint8_t imm[4] = {0x11, 0x22, 0x33, 0x44};
    std::memcpy(e.imm.data.data(), imm, 4);
    const auto f = h.peer_frame(op::kUdSendOnlyImm, 7, e, 100, false);
    EXPECT_TRUE(h.exchange({f}).empty());  // UD answers nothing
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    EXPECT_EQ(c[0].opcode, WcOpcode::kRecv);
    EXPECT_EQ(c[0].byte_len, 140u);
    EXPECT_EQ(c[0].src_qp, 0x345u);
    EXPECT_EQ(c[0].wc_flags, kWcGrh | kWcWithImm);
    EXPECT_EQ(c[0].sl, ipv6 ? kUdSlIpv6 : kUdSlIpv4);
    EXPECT_EQ(std::memcmp(&c[0].imm_data, imm, 4), 0);
    if (ipv6) {
      EXPECT_EQ(std::memcmp(h.mem(), f.data() + 14, 40), 0);
    } else {
      EXPECT_EQ(std::memcmp(h.mem(), std::vector<uint8_t>(20, 0).data(), 20), 0);
      EXPECT_EQ(std::memcmp(h.mem() + 20, f.data() + 14, 20), 0);
    }
    EXPECT_EQ(h.mem()[40], 7);  // the payload's first byte (peer_frame: psn + i)
    EXPECT_EQ(h.qp()->counters_.rx_packets, 1u);
    EXPECT_EQ(h.qp()->counters_.rx_bytes, f.size());
  }
}

// A datagram longer than its receive buffer, with the 40-byte GRH area, completes the receive
// with LOC_LEN_ERR and is counted; nothing is written.
TEST(Responder, UdDatagramLongerThanTheReceiveIsALengthError) {
  const ProtocolHarness::Options o = ud_options();
  ProtocolHarness h(o);
  h.post_recv(1, 0, 40 + 99);
  const wire::ExtHeaders e = ud_deth(o.qkey);
  EXPECT_TRUE(h.exchange({h.peer_frame(op::kUdSendOnly, 7, e, 100, false)}).empty());
  auto c = h.completions();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(h.engine().counters().ud_too_long, 1u);
  EXPECT_EQ(h.mem()[20], 0);  // where the GRH area's IPv4 header would start
}

// A UD QP takes datagrams from anyone, but only to the port's own addresses (rxe's
// rxe_chk_dgid): one sent to our MAC for another IP, or to a multicast group, is counted and
// dropped, its receive left posted. Any such datagram used to complete a receive.
TEST(Responder, UdDatagramToAnotherAddressIsDropped) {
  for (bool ipv6 : {false, true}) {
    SCOPED_TRACE(ipv6 ? "IPv6" : "IPv4");
    const ProtocolHarness::Options o = ud_options(ipv6);
    ProtocolHarness h(o);
    h.post_recv(1, 0, 40 + 100);
    wire::ExtHeaders e = ud_deth(o.qkey);
    const Gid ours = ipv6 ? h.engine().config().gids[0] : h.engine().config().gids[1];
    Gid other = ours;
    other[15] ^= 0x10;
    Gid group = ipv6 ? Gid{0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
                     : Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 239, 1, 1, 1};
    for (const Gid& dst : {other, group}) {
      h.set_peer_destination(dst);
      EXPECT_TRUE(h.exchange({h.peer_frame(op::kUdSendOnly, 7, e, 100, false)}).empty());
    }
    EXPECT_EQ(h.engine().counters().ud_not_our_address, 2u);
    EXPECT_TRUE(h.completions().empty());
    EXPECT_EQ(h.qp()->counters_.rx_packets, 0u);
    // The receive is still there for a datagram to us.
    h.set_peer_destination(ours);
    EXPECT_TRUE(h.exchange({h.peer_frame(op::kUdSendOnly, 8, e, 100, false)}).empty());
    auto c = h.completions();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].status, WcStatus::kSuccess);
    EXPECT_EQ(h.mem()[40], 8);
  }
}
// --- what a region's keys allow once a message is under way (paths the other tests leave) ---

// `out` is one NAK with `code` for the PSN after P0, the QP is in error, and bytes [m, 2m) of
// the memory (where the second packet of a WRITE at its start would land) were not written.
void expect_second_packet_naked(ProtocolHarness& h, const std::vector<Emitted>& out, NakCode code) {
  const uint32_t m = h.mtu();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(code));
  EXPECT_EQ(out[0].psn(), psn_add(P0, 1));
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
  for (uint32_t i = m; i < 2 * m; ++i) ASSERT_EQ(h.mem()[i], 0) << "byte " << i << " written";
}

// The range a WRITE's FIRST packet names bounds every packet after it: a MIDDLE or LAST that
// carries more than is left of it is an invalid request, and none of its bytes lands, inside
// the region or past the range.
TEST(Responder, AWritePacketPastTheFirstPacketsRangeIsInvalidRequest) {
  for (uint8_t next : {op::kRcWriteMiddle, op::kRcWriteLast}) {
    SCOPED_TRACE(next == op::kRcWriteMiddle ? "MIDDLE" : "LAST");
    ProtocolHarness h;
    const uint32_t m = h.mtu();
    std::vector<uint8_t> data(2 * m, 0x5C);
    auto out = h.exchange({h.peer_frame(op::kRcWriteFirst, P0, h.reth(h.addr(), h.rkey(), m + 10),
                                        data.data(), m, false)});
    EXPECT_TRUE(out.empty());
    out = h.exchange({h.peer_frame(next, psn_add(P0, 1), {}, data.data() + m, m)});
    expect_second_packet_naked(h, out, NakCode::kInvalidRequest);
  }
}

// A LAST packet shorter than what is left of the range is invalid too: the WRITE would end
// with bytes of its range never written.
TEST(Responder, AWriteLastShorterThanTheRestOfTheRangeIsInvalidRequest) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  auto out = h.exchange(
      {h.peer_frame(op::kRcWriteFirst, P0, h.reth(h.addr(), h.rkey(), m + 10), m, false)});
  EXPECT_TRUE(out.empty());
  out = h.exchange({h.peer_frame(op::kRcWriteLast, psn_add(P0, 1), {}, 9)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

// A region deregistered while a WRITE into it is under way: the next packet is a remote access
// error, and its bytes do not land (the memory may belong to something else by then).
TEST(Responder, ARegionDeregisteredUnderAWriteFailsItsNextPacket) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  std::vector<uint8_t> data(2 * m, 0x3E);
  auto out = h.exchange({h.peer_frame(op::kRcWriteFirst, P0, h.reth(h.addr(), h.rkey(), 2 * m),
                                      data.data(), m, false)});
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.mem()[0], 0x3E);
  ASSERT_EQ(h.engine().dereg_mr(h.rkey()), 0);
  out = h.exchange({h.peer_frame(op::kRcWriteLast, psn_add(P0, 1), {}, data.data() + m, m)});
  expect_second_packet_naked(h, out, NakCode::kRemoteAccessError);
}

// IBA's largest message is 2^31 bytes: a READ asking for more is an invalid request, whatever
// the key says.
TEST(Responder, AReadLongerThanTheLargestMessageIsInvalidRequest) {
  ProtocolHarness h;
  auto out = h.exchange(
      {h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey(), kMaxMsgSize + 1))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kInvalidRequest));
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

// A READ retried after its region was deregistered is answered with a remote access error,
// not with whatever the memory holds now. (The retry's own check and the response stream's
// each give this; the test fails only without both.)
TEST(Responder, ADuplicateReadOfADeregisteredRegionIsRemoteAccessError) {
  ProtocolHarness h;
  const uint32_t m = h.mtu();
  auto out = h.exchange({h.peer_frame(op::kRcReadRequest, P0, h.reth(h.addr(), h.rkey(), 3 * m))});
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(h.engine().dereg_mr(h.rkey()), 0);
  out = h.exchange(
      {h.peer_frame(op::kRcReadRequest, psn_add(P0, 1), h.reth(h.addr(m), h.rkey(), 2 * m))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kRemoteAccessError));
  EXPECT_EQ(out[0].psn(), psn_add(P0, 1));
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
}

// A region deregistered while its READ's responses are still leaving (held here by a rate
// limit): the rest of the stream is replaced by a remote access error at the next response's
// PSN, and nothing more of the memory is sent.
TEST(Responder, ARegionDeregisteredUnderAReadStreamEndsItWithRemoteAccessError) {
  ProtocolHarness h(paced_read_options());
  auto out = start_paced_read(h);
  ASSERT_GE(out.size(), 1u);
  ASSERT_LT(out.size(), 16u);
  const uint32_t sent = static_cast<uint32_t>(out.size());
  ASSERT_EQ(h.engine().dereg_mr(h.rkey()), 0);
  ASSERT_EQ(h.set_rate_limit(0), 0);
  out = h.exchange();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAck);
  EXPECT_EQ(out[0].syndrome(), nak(NakCode::kRemoteAccessError));
  EXPECT_EQ(out[0].psn(), psn_add(P0, sent));
  EXPECT_EQ(h.qp()->state(), QpState::kErr);
  EXPECT_EQ(h.qp()->counters_.error_naks_sent, 1u);
}
}  // namespace
