// The modify-QP state machine (IBA 10.3, table 91): required and optional attributes per
// transition; a refused modify returns EINVAL and changes nothing.
#include <gtest/gtest.h>

#include "../support/scripted_port.h"

namespace {
using namespace roce;
using namespace roce::test;

class QpStateTest : public ::testing::Test {
 protected:
  QpStateTest() {
    EngineConfig cfg;
    cfg.gids = {Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1}};
    cfg.max_mtu = Mtu::k1024;  // the port's active MTU
    engine_ = std::make_unique<Engine>(cfg, &port_, &clock_);
    pd_ = engine_->alloc_pd();
    int err = 0;
    cq_ = engine_->create_cq(64, &err);
    qp_ = make_qp(QpType::kRc);
  }
  Qp* make_qp(QpType t, CompletionQueue* cq = nullptr, SharedReceiveQueue* srq = nullptr) {
    QpInitAttr init;
    init.type = t;
    init.pd = pd_;
    init.send_cq = init.recv_cq = cq ? cq : cq_;
    init.srq = srq;
    init.cap.max_send_wr = init.cap.max_recv_wr = 8;
    int err = 0;
    return engine_->create_qp(init, &err);
  }
  QpAttr init_attr() {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qp_access_flags = kAccessRemoteWrite;
    return a;
  }
  static constexpr uint32_t kInitMask = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
  QpAttr rtr_attr() {
    QpAttr a;
    a.qp_state = QpState::kRtr;
    a.path_mtu = Mtu::k1024;
    a.dest_qp_num = 0x33;
    a.rq_psn = 0x1234;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dgid = Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 2};
    a.ah_attr.sgid_index = 1;
    return a;
  }
  static constexpr uint32_t kRtrMask =
      kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  QpAttr rts_attr() {
    QpAttr a;
    a.qp_state = QpState::kRts;
    a.sq_psn = 0x777;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return a;
  }
  static constexpr uint32_t kRtsMask =
      kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;

  // Takes the engine's asynchronous events; returns how many were `type` for `id`.
  int take_events(AsyncEventType type, uint32_t id) {
    int n = 0;
    while (std::optional<AsyncEvent> e = engine_->next_async_event()) {
      n += e->type == type && e->id == id;
    }
    return n;
  }
  int modify_state(Qp* qp, QpState s) {
    QpAttr a;
    a.qp_state = s;
    return engine_->modify_qp(qp, a, kQpState);
  }

  QpAttr query() {
    QpAttr a;
    engine_->query_qp(qp_, &a);
    return a;
  }

  VirtualClock clock_;
  ScriptedPort port_;
  std::unique_ptr<Engine> engine_;
  uint32_t pd_ = 0;
  CompletionQueue* cq_ = nullptr;
  Qp* qp_ = nullptr;
};

TEST_F(QpStateTest, TheNormalPath) {
  EXPECT_EQ(qp_->state(), QpState::kReset);
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  EXPECT_EQ(qp_->state(), QpState::kInit);
  ASSERT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), 0);
  EXPECT_EQ(qp_->state(), QpState::kRtr);
  ASSERT_EQ(engine_->modify_qp(qp_, rts_attr(), kRtsMask), 0);
  EXPECT_EQ(qp_->state(), QpState::kRts);
  const QpAttr q = query();
  EXPECT_EQ(q.dest_qp_num, 0x33u);
  EXPECT_EQ(q.rq_psn, 0x1234u);
  EXPECT_EQ(q.sq_psn, 0x777u);
  EXPECT_EQ(q.path_mtu, Mtu::k1024);
  EXPECT_EQ(q.min_rnr_timer, 12);
  EXPECT_EQ(q.qp_access_flags, kAccessRemoteWrite);
  EXPECT_EQ(q.cap.max_send_wr, 8u);
}

// SQD -> SQD (IBA table 91): a drained send queue's QP takes new transport attributes (the
// ACK timeout, retry counts, READ / atomic depths, ...) and stays in SQD; what the transition
// does not list (the SQ PSN, the destination QPN) is refused and nothing changes.
TEST_F(QpStateTest, SqdToSqdChangesTheTransportAttributes) {
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  ASSERT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), 0);
  ASSERT_EQ(engine_->modify_qp(qp_, rts_attr(), kRtsMask), 0);
  ASSERT_EQ(modify_state(qp_, QpState::kSqd), 0);
  QpAttr a;
  a.qp_state = QpState::kSqd;
  a.timeout = 18;
  a.retry_cnt = 3;
  a.rnr_retry = 2;
  a.max_rd_atomic = 4;
  a.min_rnr_timer = 20;
  a.sq_psn = 0x999;
  a.dest_qp_num = 0x44;
  const uint32_t allowed =
      kQpState | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic | kQpMinRnrTimer;
  EXPECT_EQ(engine_->modify_qp(qp_, a, allowed | kQpSqPsn), EINVAL);
  EXPECT_EQ(engine_->modify_qp(qp_, a, allowed | kQpDestQpn), EINVAL);
  EXPECT_EQ(query().timeout, 14);
  EXPECT_EQ(query().dest_qp_num, 0x33u);
  ASSERT_EQ(engine_->modify_qp(qp_, a, allowed), 0);
  EXPECT_EQ(qp_->state(), QpState::kSqd);
  const QpAttr q = query();
  EXPECT_EQ(q.timeout, 18);
  EXPECT_EQ(q.retry_cnt, 3);
  EXPECT_EQ(q.rnr_retry, 2);
  EXPECT_EQ(q.max_rd_atomic, 4);
  EXPECT_EQ(q.min_rnr_timer, 20);
  EXPECT_EQ(q.sq_psn, 0x777u);
  EXPECT_EQ(q.dest_qp_num, 0x33u);
  ASSERT_EQ(modify_state(qp_, QpState::kRts), 0);
}

TEST_F(QpStateTest, SkippingAStateIsRefused) {
  EXPECT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), EINVAL);
  EXPECT_EQ(engine_->modify_qp(qp_, rts_attr(), kRtsMask), EINVAL);
  EXPECT_EQ(qp_->state(), QpState::kReset);
}

TEST_F(QpStateTest, EveryMissingRequiredAttributeIsRefusedAndNothingChanges) {
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  for (uint32_t bit = 1; bit <= kQpMinRnrTimer << 3; bit <<= 1) {
    if (!(kRtrMask & bit) || bit == kQpState) continue;
    SCOPED_TRACE(bit);
    EXPECT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask & ~bit), EINVAL);
    EXPECT_EQ(qp_->state(), QpState::kInit);
    EXPECT_EQ(query().dest_qp_num, 0u);  // nothing applied
  }
  ASSERT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), 0);
  for (uint32_t bit = 1; bit <= kQpMaxDestRdAtomic; bit <<= 1) {
    if (!(kRtsMask & bit) || bit == kQpState) continue;
    SCOPED_TRACE(bit);
    EXPECT_EQ(engine_->modify_qp(qp_, rts_attr(), kRtsMask & ~bit), EINVAL);
    EXPECT_EQ(qp_->state(), QpState::kRtr);
  }
}

TEST_F(QpStateTest, AttributesNotAllowedForTheTransitionAreRefused) {
  // RESET->INIT does not take a destination QPN; INIT->RTR does not take an SQ PSN.
  EXPECT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask | kQpDestQpn), EINVAL);
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  EXPECT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask | kQpSqPsn), EINVAL);
  // UD-only Q_Key on an RC QP.
  EXPECT_EQ(engine_->modify_qp(qp_, init_attr(), kQpState | kQpQkey), EINVAL);
  EXPECT_EQ(qp_->state(), QpState::kInit);
}

TEST_F(QpStateTest, BadValuesAreRefused) {
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  QpAttr a = rtr_attr();
  a.path_mtu = Mtu::k4096;  // above the port's active MTU (1024 here)
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtrMask), EINVAL);
  a = rtr_attr();
  a.ah_attr.sgid_index = 5;
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtrMask), EINVAL);
  a = rtr_attr();
  a.ah_attr.sgid_index = 0;  // IPv6 source, IPv4-mapped destination
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtrMask), EINVAL);
  a = rtr_attr();
  a.min_rnr_timer = 32;
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtrMask), EINVAL);
  a = rtr_attr();
  a.max_dest_rd_atomic = 200;
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtrMask), EINVAL);
  // The first value past the limit: the responder keeps kMaxRdAtomic READ / atomic resources.
  a.max_dest_rd_atomic = kMaxRdAtomic + 1;
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtrMask), EINVAL);
  QpAttr p = init_attr();
  p.qp_state = QpState::kInit;
  p.port_num = 2;
  EXPECT_EQ(engine_->modify_qp(qp_, p, kQpState | kQpPort), EINVAL);
  p.port_num = 1;
  p.pkey_index = 1;
  EXPECT_EQ(engine_->modify_qp(qp_, p, kQpState | kQpPkeyIndex), EINVAL);
  ASSERT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), 0);
  QpAttr r = rts_attr();
  r.retry_cnt = 8;
  EXPECT_EQ(engine_->modify_qp(qp_, r, kRtsMask), EINVAL);
  r = rts_attr();
  r.timeout = 32;
  EXPECT_EQ(engine_->modify_qp(qp_, r, kRtsMask), EINVAL);
  EXPECT_EQ(qp_->state(), QpState::kRtr);
}

// IBV_QP_RATE_LIMIT (kb/s): taken where the send queue starts or goes on (RTR->RTS, RTS->RTS,
// SQD->RTS) by RC, UC and UD QPs, from 1 Mb/s to 400 Gb/s or 0 (none); query_qp reports it and
// a reset clears it, with its burst and packet sizes (which need a limit). Not by INIT->RTR.
TEST_F(QpStateTest, RateLimitIsTakenWhereTheSendQueueStartsAndWithinItsRange) {
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  QpAttr r = rtr_attr();
  r.rate_limit = 1'000'000;
  EXPECT_EQ(engine_->modify_qp(qp_, r, kRtrMask | kQpRateLimit), EINVAL);
  ASSERT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), 0);
  QpAttr t = rts_attr();
  for (uint32_t bad : {kMinRateLimitKbps - 1, kMaxRateLimitKbps + 1}) {
    t.rate_limit = bad;
    EXPECT_EQ(engine_->modify_qp(qp_, t, kRtsMask | kQpRateLimit), EINVAL) << bad;
  }
  t.rate_limit = 2'500'000;
  ASSERT_EQ(engine_->modify_qp(qp_, t, kRtsMask | kQpRateLimit), 0);
  EXPECT_EQ(query().rate_limit, 2'500'000u);
  EXPECT_TRUE(qp_->cc_.limited);
  QpAttr again;
  again.qp_state = QpState::kRts;
  again.rate_limit = kMaxRateLimitKbps;
  ASSERT_EQ(engine_->modify_qp(qp_, again, kQpState | kQpRateLimit), 0);
  EXPECT_EQ(query().rate_limit, kMaxRateLimitKbps);
  again.rate_limit = 0;
  ASSERT_EQ(engine_->modify_qp(qp_, again, kQpState | kQpRateLimit), 0);
  EXPECT_FALSE(qp_->cc_.limited);
  again.max_burst_sz = 8192;  // shaping without a limit (ibv_modify_qp_rate_limit's fields)
  EXPECT_EQ(engine_->modify_qp(qp_, again, kQpRateLimit), EINVAL);
  again.max_burst_sz = 0;
  again.typical_pkt_sz = 1024;
  EXPECT_EQ(engine_->modify_qp(qp_, again, kQpRateLimit), EINVAL);
  again.rate_limit = kMinRateLimitKbps;
  again.max_burst_sz = 8192;
  ASSERT_EQ(engine_->modify_qp(qp_, again, kQpRateLimit), 0);  // without a state: RTS->RTS
  EXPECT_TRUE(qp_->cc_.limited);
  EXPECT_EQ(query().max_burst_sz, 8192u);
  EXPECT_EQ(query().typical_pkt_sz, 1024u);
  ASSERT_EQ(modify_state(qp_, QpState::kReset), 0);
  EXPECT_EQ(query().rate_limit, 0u);
  EXPECT_EQ(query().max_burst_sz, 0u);
  EXPECT_EQ(query().typical_pkt_sz, 0u);
  EXPECT_FALSE(qp_->cc_.limited);

  Qp* ud = make_qp(QpType::kUd);
  QpAttr u;
  u.qp_state = QpState::kInit;
  u.port_num = 1;
  u.qkey = 0x11;
  ASSERT_EQ(engine_->modify_qp(ud, u, kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
  ASSERT_EQ(modify_state(ud, QpState::kRtr), 0);
  QpAttr us;
  us.qp_state = QpState::kRts;
  us.rate_limit = 1'000'000;
  ASSERT_EQ(engine_->modify_qp(ud, us, kQpState | kQpSqPsn | kQpRateLimit), 0);
  EXPECT_TRUE(ud->cc_.limited);
}

TEST_F(QpStateTest, CurrentStateMustMatchWhenGiven) {
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  ASSERT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), 0);
  QpAttr a = rts_attr();
  a.cur_qp_state = QpState::kInit;
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtsMask | kQpCurState), EINVAL);
  a.cur_qp_state = QpState::kRtr;
  EXPECT_EQ(engine_->modify_qp(qp_, a, kRtsMask | kQpCurState), 0);
}

TEST_F(QpStateTest, AnyStateToErrorAndBackToReset) {
  QpAttr e;
  e.qp_state = QpState::kErr;
  ASSERT_EQ(engine_->modify_qp(qp_, e, kQpState), 0);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), EINVAL);  // ERR only to RESET
  QpAttr r;
  r.qp_state = QpState::kReset;
  ASSERT_EQ(engine_->modify_qp(qp_, r, kQpState), 0);
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
}

TEST_F(QpStateTest, PostingDependsOnState) {
  Sge s{0, 0, 0};
  EXPECT_EQ(qp_->post_recv({.wr_id = 1, .sg_list = &s, .num_sge = 0}), EINVAL);  // RESET
  EXPECT_EQ(qp_->post_send({.wr_id = 1, .opcode = WrOpcode::kSend}), EINVAL);
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  EXPECT_EQ(qp_->post_recv({.wr_id = 1, .sg_list = &s, .num_sge = 0}), 0);  // INIT: allowed
  EXPECT_EQ(qp_->post_send({.wr_id = 1, .opcode = WrOpcode::kSend}), EINVAL);
  QpAttr e;
  e.qp_state = QpState::kErr;
  ASSERT_EQ(engine_->modify_qp(qp_, e, kQpState), 0);
  // The posted receive was flushed by the transition.
  Cqe c[4];
  ASSERT_EQ(cq_->poll(c, 4), 1);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
  // Posting in ERR is allowed and flushes.
  EXPECT_EQ(qp_->post_send({.wr_id = 2, .opcode = WrOpcode::kSend, .send_flags = 0}), 0);
  engine_->poll();
  ASSERT_EQ(cq_->poll(c, 4), 1);
  EXPECT_EQ(c[0].wr_id, 2u);
  EXPECT_EQ(c[0].status, WcStatus::kWrFlushErr);
}

// IBA 11.6.3.1: a QP on an SRQ raises Last WQE Reached when it enters the error state, after
// what it had outstanding was flushed; once per entry. Posting to it in ERR (each post is
// flushed) raises nothing more.
TEST_F(QpStateTest, LastWqeReachedOncePerEntryIntoTheErrorState) {
  int err = 0;
  SharedReceiveQueue* srq = engine_->create_srq(pd_, 8, 1, &err);
  ASSERT_NE(srq, nullptr);
  Qp* qp = make_qp(QpType::kRc, nullptr, srq);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(modify_state(qp, QpState::kErr), 0);
  EXPECT_EQ(take_events(AsyncEventType::kQpLastWqeReached, qp->qpn()), 1);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_EQ(qp->post_send({.wr_id = i, .opcode = WrOpcode::kSend}), 0);
    engine_->poll();
  }
  Cqe c[8];
  ASSERT_EQ(cq_->poll(c, 8), 3);
  EXPECT_EQ(c[2].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(take_events(AsyncEventType::kQpLastWqeReached, qp->qpn()), 0);
  ASSERT_EQ(modify_state(qp, QpState::kErr), 0);  // ERR to ERR: no transition
  EXPECT_EQ(take_events(AsyncEventType::kQpLastWqeReached, qp->qpn()), 0);
  ASSERT_EQ(modify_state(qp, QpState::kReset), 0);
  ASSERT_EQ(modify_state(qp, QpState::kErr), 0);
  EXPECT_EQ(take_events(AsyncEventType::kQpLastWqeReached, qp->qpn()), 1);
}

// IBA 11.4.2.1: a CQ overrun is a CQ error, reported once: the completions that do not fit
// after it raise no further IBV_EVENT_CQ_ERR.
TEST_F(QpStateTest, CqOverrunRaisesOneCqError) {
  int err = 0;
  CompletionQueue* tiny = engine_->create_cq(1, &err);
  ASSERT_NE(tiny, nullptr);
  Qp* qp = make_qp(QpType::kRc, tiny);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(modify_state(qp, QpState::kErr), 0);
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_EQ(qp->post_send({.wr_id = i, .opcode = WrOpcode::kSend}), 0);
  }
  engine_->poll();  // four flushes into one entry
  Cqe c[8];
  EXPECT_EQ(tiny->poll(c, 8), 1);
  EXPECT_TRUE(tiny->overflowed());
  EXPECT_EQ(take_events(AsyncEventType::kCqErr, tiny->cqn()), 1);
  for (uint64_t i = 0; i < 2; ++i) {
    ASSERT_EQ(qp->post_send({.wr_id = i, .opcode = WrOpcode::kSend}), 0);
  }
  engine_->poll();
  EXPECT_EQ(tiny->poll(c, 8), 1);
  EXPECT_EQ(take_events(AsyncEventType::kCqErr, tiny->cqn()), 0);
}

TEST_F(QpStateTest, PostSendAndPostRecvCheckTheRequest) {
  ASSERT_EQ(engine_->modify_qp(qp_, init_attr(), kInitMask), 0);
  ASSERT_EQ(engine_->modify_qp(qp_, rtr_attr(), kRtrMask), 0);
  ASSERT_EQ(engine_->modify_qp(qp_, rts_attr(), kRtsMask), 0);
  Sge s[3] = {};
  EXPECT_EQ(qp_->post_send({.sg_list = s, .num_sge = 3, .opcode = WrOpcode::kSend}), EINVAL);
  s[0].length = 4;
  EXPECT_EQ(qp_->post_send({.sg_list = s, .num_sge = 1, .opcode = WrOpcode::kAtomicFetchAndAdd}),
            EINVAL);  // an atomic needs exactly 8 bytes
  EXPECT_EQ(qp_->post_send({.sg_list = s, .num_sge = 1, .opcode = WrOpcode::kBindMw}), EINVAL);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(qp_->post_send({.sg_list = s, .num_sge = 0, .opcode = WrOpcode::kSend}), 0);
  }
  EXPECT_EQ(qp_->post_send({.sg_list = s, .num_sge = 0, .opcode = WrOpcode::kSend}), ENOMEM);
  // A receive with more SGEs than the QP was created with (one): its slot has room for no more.
  EXPECT_EQ(qp_->post_recv({.sg_list = s, .num_sge = 2}), EINVAL);
  EXPECT_EQ(qp_->post_recv({.sg_list = s, .num_sge = 1}), 0);
}

TEST_F(QpStateTest, UdNeedsQkeyAndNoRemoteAttributes) {
  Qp* ud = make_qp(QpType::kUd);
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qkey = 0x11111111;
  EXPECT_EQ(engine_->modify_qp(ud, a, kQpState | kQpPkeyIndex | kQpPort), EINVAL);
  ASSERT_EQ(engine_->modify_qp(ud, a, kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
  a.qp_state = QpState::kRtr;
  ASSERT_EQ(engine_->modify_qp(ud, a, kQpState), 0);
  a.qp_state = QpState::kRts;
  a.sq_psn = 5;
  EXPECT_EQ(engine_->modify_qp(ud, a, kQpState | kQpSqPsn | kQpTimeout), EINVAL);
  ASSERT_EQ(engine_->modify_qp(ud, a, kQpState | kQpSqPsn), 0);
}

TEST_F(QpStateTest, DestroyOrderIsEnforced) {
  EXPECT_EQ(engine_->destroy_cq(cq_), EBUSY);  // a QP uses it
  EXPECT_EQ(engine_->dealloc_pd(pd_), EBUSY);  // the QP is in it
  ASSERT_EQ(engine_->destroy_qp(qp_), 0);
  EXPECT_EQ(engine_->destroy_cq(cq_), 0);
  EXPECT_EQ(engine_->dealloc_pd(pd_), 0);
  EXPECT_EQ(engine_->dealloc_pd(pd_), EINVAL);  // already gone
}
}  // namespace
