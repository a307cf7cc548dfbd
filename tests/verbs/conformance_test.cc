// Verbs conformance, control side: what queries report, the modify-QP rules (invalid
// transitions and masks fail with EINVAL and change nothing), requester-side completion errors
// for remote access violations, flushing in the error state, destroy ordering (EBUSY while in
// use), asynchronous events through a pollable async_fd, and the verbs a software NIC does not
// offer failing cleanly. Only <infiniband/verbs.h> is used, against the stack's libibverbs.so.1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>

#include <cstring>

#include "verbs_fixture.h"
#include "verbs_shim/port_rate.h"

extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                  int* type);

namespace roce::verbs_test {
namespace {

TEST_F(VerbsTest, DeviceAndPortAttributes) {
  ibv_device_attr d{};
  ASSERT_EQ(ibv_query_device(ctx_[0], &d), 0);
  EXPECT_EQ(d.phys_port_cnt, 1);
  EXPECT_EQ(d.max_qp_wr, 16384);
  EXPECT_EQ(d.max_sge, 16);
  EXPECT_EQ(d.max_qp_rd_atom, 16);
  EXPECT_EQ(d.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_EQ(d.node_guid, ibv_get_device_guid(ctx_[0]->device));
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(ctx_[0], nullptr, &dx), 0);
  EXPECT_EQ(dx.orig_attr.max_cqe, d.max_cqe);
  EXPECT_NE(dx.completion_timestamp_mask, 0u);
  // Per-QP rate limits (IBV_QP_RATE_LIMIT, kb/s) for RC, UC and UD QPs.
  EXPECT_EQ(dx.packet_pacing_caps.qp_rate_limit_min, 1000u);
  EXPECT_EQ(dx.packet_pacing_caps.qp_rate_limit_max, 400'000'000u);
  EXPECT_EQ(dx.packet_pacing_caps.supported_qpts,
            (1u << IBV_QPT_RC) | (1u << IBV_QPT_UC) | (1u << IBV_QPT_UD));

  ibv_port_attr p{};
  ASSERT_EQ(ibv_query_port(ctx_[0], 1, &p), 0);
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(p.active_mtu, IBV_MTU_4096);
  EXPECT_EQ(p.max_mtu, IBV_MTU_4096);
  EXPECT_EQ(p.lid, 0);
  EXPECT_EQ(p.gid_tbl_len, 3);
  // The link's speed as the driver reports it: net_af_packet says 10 Gb/s, so 1X QDR.
  EXPECT_EQ(p.active_width, 1);
  EXPECT_EQ(p.active_speed, 4);
  EXPECT_NE(ibv_query_port(ctx_[0], 2, &p), 0);

  // GID 0: link-local from the MAC; 1: IPv4-mapped; 2: the IPv6 address. All RoCE v2.
  const ibv_gid g0 = gid_of(ctx_[0], 0), g1 = gid_of(ctx_[0], 1);
  EXPECT_EQ(g0.raw[0], 0xfe);
  EXPECT_EQ(g0.raw[1], 0x80);
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 9, 0, 1};
  EXPECT_EQ(std::memcmp(g1.raw, v4, 16), 0);
  int type = -1;
  EXPECT_EQ(ibv_query_gid_type(ctx_[0], 1, 1, &type), 0);
  EXPECT_EQ(type, 1);  // IBV_GID_TYPE_SYSFS_ROCE_V2
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(ctx_[0], 1, 2, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(e.gid_index, 2u);
  ibv_gid_entry all[8];
  EXPECT_EQ(ibv_query_gid_table(ctx_[0], all, 8, 0), 3);
  ibv_gid g{};
  EXPECT_EQ(ibv_query_gid(ctx_[0], 1, 3, &g), -1);
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(ctx_[0], 1, 0, &pkey), 0);
  EXPECT_EQ(ntohs(pkey), 0xffff);
  EXPECT_EQ(ibv_get_pkey_index(ctx_[0], 1, htons(0xffff)), 0);
}

TEST_F(VerbsTest, CreateQpReportsGrantedCapabilities) {
  Side s;
  make_side(s, 0);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = s.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 100;
  a.cap.max_recv_wr = 10;
  a.cap.max_send_sge = 3;
  a.cap.max_recv_sge = 2;
  ibv_qp* qp = ibv_create_qp(s.pd, &a);
  ASSERT_NE(qp, nullptr);
  EXPECT_GE(a.cap.max_send_wr, 100u);
  EXPECT_GE(a.cap.max_recv_wr, 10u);
  EXPECT_GE(a.cap.max_send_sge, 3u);
  EXPECT_GE(a.cap.max_inline_data, 48u);  // at least what the SGE array occupies
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi), 0);
  EXPECT_EQ(qi.cap.max_send_wr, a.cap.max_send_wr);
  EXPECT_EQ(qi.cap.max_inline_data, a.cap.max_inline_data);
  EXPECT_EQ(qa.cap.max_inline_data, a.cap.max_inline_data);
  EXPECT_EQ(qi.qp_type, IBV_QPT_RC);
  EXPECT_EQ(qi.send_cq, s.cq);
  EXPECT_NE(ibv_qp_to_qp_ex(qp), nullptr);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);

  a.cap.max_send_wr = 1 << 20;  // beyond max_qp_wr
  errno = 0;
  EXPECT_EQ(ibv_create_qp(s.pd, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  a.cap.max_send_wr = 8;
  a.qp_type = IBV_QPT_RAW_PACKET;
  EXPECT_EQ(ibv_create_qp(s.pd, &a), nullptr);
  EXPECT_NE(errno, 0);
}

// Puts `v` into an enum field of a verbs struct as a C program may (in C++ a value outside the
// enum's range may not be formed as one).
template <typename E>
void set_raw(E* field, uint32_t v) {
  static_assert(sizeof(E) == sizeof v);
  std::memcpy(field, &v, sizeof v);
}

TEST_F(VerbsTest, InvalidTransitionsAndMasksChangeNothing) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_qp_attr attr{};
  // RESET -> RTR skips INIT.
  attr = rtr_attr(b.qp, b.ctx, 1);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask), EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RESET);
  // RESET -> INIT without the required access flags, and with an attribute it does not take.
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
                              IBV_QP_SQ_PSN),
            EINVAL);
  attr.port_num = 2;  // no such port
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RESET);
  attr.port_num = 1;
  // A state no QP has, whose low 8 bits are INIT's: C lets any int into the field.
  set_raw(&attr.qp_state, 0x101);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RESET);
  attr.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
  EXPECT_EQ(a.qp->state, IBV_QPS_INIT);
  // INIT -> RTR without the destination QPN; with a path MTU the port does not offer; with a
  // wrong current state; with a GID index beyond the table.
  attr = rtr_attr(b.qp, b.ctx, 1);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask & ~IBV_QP_DEST_QPN), EINVAL);
  attr.path_mtu = static_cast<ibv_mtu>(6);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask), EINVAL);
  set_raw(&attr.path_mtu, 0x103);  // 1024's code in its low 8 bits
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask), EINVAL);
  attr = rtr_attr(b.qp, b.ctx, 1);
  attr.cur_qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask | IBV_QP_CUR_STATE), EINVAL);
  set_raw(&attr.cur_qp_state, 0x101);  // INIT's, the QP's state, in its low 8 bits
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask | IBV_QP_CUR_STATE), EINVAL);
  attr = rtr_attr(b.qp, b.ctx, 1);
  attr.ah_attr.grh.sgid_index = 7;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask), EINVAL);
  // An IPv4-mapped source towards an IPv6 destination.
  attr = rtr_attr(b.qp, b.ctx, 2);
  attr.ah_attr.grh.sgid_index = 1;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask), EINVAL);
  // Resizing queues through modify is not offered.
  attr = rtr_attr(b.qp, b.ctx, 1);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask | IBV_QP_CAP), EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_INIT);
  ASSERT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask), 0);
  // RTR -> RTS without the retry count; timeout out of range.
  attr = rts_attr();
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtsMask & ~IBV_QP_RETRY_CNT), EINVAL);
  attr.retry_cnt = 8;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtsMask), EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RTR);
  attr = rts_attr();
  ASSERT_EQ(ibv_modify_qp(a.qp, &attr, kRtsMask), 0);
  // RTS -> RTR and RTS -> INIT are not transitions.
  attr = rtr_attr(b.qp, b.ctx, 1);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, kRtrMask), EINVAL);
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_INIT;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE), EINVAL);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RTS);
  // What RTR set is still there.
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_AV | IBV_QP_DEST_QPN, &qi), 0);
  EXPECT_EQ(q.dest_qp_num, b.qp->qp_num);
  EXPECT_EQ(q.path_mtu, IBV_MTU_4096);
  EXPECT_EQ(q.ah_attr.grh.sgid_index, 1);
  EXPECT_EQ(q.max_rd_atomic, 4);
  // Any state -> RESET, then INIT again.
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE), 0);
  EXPECT_EQ(state_of(a.qp), IBV_QPS_RESET);
  // Posting a send in RESET is refused.
  EXPECT_EQ(post_send(a.qp, IBV_WR_SEND, 1, a, 0, 8), EINVAL);
}

// The port's IB rate from its Ethernet speed: the largest lanes x lane speed within it, 1X EDR
// (25 Gb/s) where the driver reports no speed.
TEST(PortRate, TheLargestIbRateWithinTheLinkSpeed) {
  using roce::verbs::port_rate_for_mbps;
  struct Case {
    uint32_t mbps;
    uint8_t width, speed;
  };
  for (const Case c :
       {Case{0, 1, 32}, Case{1'000, 1, 1}, Case{10'000, 1, 4}, Case{24'999, 1, 16},
        Case{25'000, 1, 32}, Case{40'000, 2, 4}, Case{50'000, 1, 64}, Case{100'000, 2, 32},
        Case{200'000, 2, 64}, Case{400'000, 2, 128}, Case{800'000, 4, 128}}) {
    const auto r = port_rate_for_mbps(c.mbps);
    EXPECT_EQ(r.width, c.width) << c.mbps;
    EXPECT_EQ(r.speed, c.speed) << c.mbps;
  }
}

// ibv_modify_qp_rate_limit (the extended op, inline in verbs.h): a limit with a burst cap in the
// QP's current state. It needs a send queue that runs (RTS), the limit in range, a limit for any
// burst or packet size, and no comp_mask bits; a limit of 0 lifts it. The pacing itself is shown
// by the protocol tests (Requester.ARateLimitsBurstCap...).
TEST_F(VerbsTest, ModifyQpRateLimitSetsALimitWithABurstCap) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_qp_rate_limit_attr rl{};
  rl.rate_limit = 1'000'000;
  rl.max_burst_sz = 16 * 1024;
  rl.typical_pkt_sz = 4096;
  EXPECT_EQ(ibv_modify_qp_rate_limit(a.qp, &rl), EINVAL);  // RESET: no send queue runs
  connect_pair(a, b);
  ASSERT_EQ(ibv_modify_qp_rate_limit(a.qp, &rl), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_RATE_LIMIT | IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.rate_limit, 1'000'000u);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);

  ibv_qp_rate_limit_attr bad = rl;
  bad.comp_mask = 1;
  EXPECT_EQ(ibv_modify_qp_rate_limit(a.qp, &bad), EINVAL);
  bad = rl;
  bad.rate_limit = 999;  // under 1 Mb/s
  EXPECT_EQ(ibv_modify_qp_rate_limit(a.qp, &bad), EINVAL);
  bad.rate_limit = 0;  // a burst for no limit
  EXPECT_EQ(ibv_modify_qp_rate_limit(a.qp, &bad), EINVAL);
  ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_RATE_LIMIT, &qi), 0);
  EXPECT_EQ(q.rate_limit, 1'000'000u);  // the refusals changed nothing

  ibv_qp_rate_limit_attr off{};
  ASSERT_EQ(ibv_modify_qp_rate_limit(a.qp, &off), 0);
  ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_RATE_LIMIT, &qi), 0);
  EXPECT_EQ(q.rate_limit, 0u);
}

// ibv_query_qp reports every attribute ibv_modify_qp set, each from its own field (the shim
// converts field by field both ways), and ibv_qp_init_attr as the QP was created. The values
// differ from each other and from rc_connect.h's, so that a field lost or taken from another
// shows.
TEST_F(VerbsTest, QueryQpReportsEveryAttributeModifySet) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  constexpr unsigned kAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qp_access_flags = kAccess;
  ASSERT_EQ(ibv_modify_qp(a.qp, &at,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
  at = rtr_attr(b.qp, b.ctx, 1);
  at.path_mtu = IBV_MTU_2048;
  at.rq_psn = 0x2345;
  at.max_dest_rd_atomic = 3;
  at.min_rnr_timer = 12;
  at.ah_attr.grh.hop_limit = 17;
  at.ah_attr.grh.traffic_class = 0x20;
  ASSERT_EQ(ibv_modify_qp(a.qp, &at, kRtrMask), 0);
  at = rts_attr();
  at.sq_psn = 0x3456;
  at.timeout = 15;
  at.retry_cnt = 5;
  at.rnr_retry = 6;
  at.max_rd_atomic = 2;
  at.rate_limit = 2'500'000;  // 2.5 Gb/s
  ASSERT_EQ(ibv_modify_qp(a.qp, &at, kRtsMask | IBV_QP_RATE_LIMIT), 0);

  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &q, kRtrMask | kRtsMask | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT, &qi),
            0);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(q.path_mtu, IBV_MTU_2048);
  EXPECT_EQ(q.qp_access_flags, kAccess);
  EXPECT_EQ(q.rq_psn, 0x2345u);
  EXPECT_EQ(q.sq_psn, 0x3456u);
  EXPECT_EQ(q.dest_qp_num, b.qp->qp_num);
  EXPECT_EQ(q.max_dest_rd_atomic, 3);
  EXPECT_EQ(q.max_rd_atomic, 2);
  EXPECT_EQ(q.min_rnr_timer, 12);
  EXPECT_EQ(q.timeout, 15);
  EXPECT_EQ(q.retry_cnt, 5);
  EXPECT_EQ(q.rnr_retry, 6);
  EXPECT_EQ(q.rate_limit, 2'500'000u);
  EXPECT_EQ(q.port_num, 1);
  EXPECT_EQ(q.ah_attr.is_global, 1);
  EXPECT_EQ(q.ah_attr.port_num, 1);
  EXPECT_EQ(q.ah_attr.grh.sgid_index, 1);
  EXPECT_EQ(q.ah_attr.grh.hop_limit, 17);
  EXPECT_EQ(q.ah_attr.grh.traffic_class, 0x20);
  const ibv_gid dgid = gid_of(b.ctx, 1);
  EXPECT_EQ(std::memcmp(q.ah_attr.grh.dgid.raw, dgid.raw, 16), 0);
  EXPECT_EQ(qi.qp_type, IBV_QPT_RC);
  EXPECT_EQ(qi.send_cq, a.cq);
  EXPECT_EQ(qi.recv_cq, a.cq);
  EXPECT_EQ(qi.srq, nullptr);
  EXPECT_EQ(qi.sq_sig_all, 0);
  EXPECT_GE(qi.cap.max_recv_wr, 64u);
  EXPECT_EQ(q.cap.max_recv_wr, qi.cap.max_recv_wr);

  // A QP on a shared receive queue has no receive queue of its own; one that signals every send
  // says so.
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(a.pd, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_qp_init_attr ca{};
  ca.qp_context = this;
  ca.send_cq = ca.recv_cq = a.cq;
  ca.srq = srq;
  ca.qp_type = IBV_QPT_RC;
  ca.sq_sig_all = 1;
  ca.cap.max_send_wr = ca.cap.max_recv_wr = 8;
  ca.cap.max_send_sge = ca.cap.max_recv_sge = 1;
  ibv_qp* sq = ibv_create_qp(a.pd, &ca);
  ASSERT_NE(sq, nullptr);
  EXPECT_EQ(ca.cap.max_recv_wr, 0u);
  q = ibv_qp_attr{};
  qi = ibv_qp_init_attr{};
  ASSERT_EQ(ibv_query_qp(sq, &q, IBV_QP_CAP, &qi), 0);
  EXPECT_EQ(q.cap.max_recv_wr, 0u);
  EXPECT_EQ(q.cap.max_recv_sge, 0u);
  EXPECT_EQ(qi.cap.max_recv_wr, 0u);
  EXPECT_EQ(qi.srq, srq);
  EXPECT_EQ(qi.qp_context, this);
  EXPECT_EQ(qi.sq_sig_all, 1);
  EXPECT_EQ(ibv_destroy_qp(sq), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

// Creation arguments just past their range are refused with EINVAL and create nothing: a
// completion vector equal to num_comp_vectors, an SRQ limit above max_wr, an address handle on a
// port the device does not have. Resizing a CQ to the size it has is no change.
TEST_F(VerbsTest, CreateVerbsRefuseArgumentsJustOutOfRange) {
  Side s;
  make_side(s, 0);
  EXPECT_EQ(ibv_resize_cq(s.cq, s.cq->cqe), 0);  // its own size: nothing to do
  errno = 0;
  EXPECT_EQ(ibv_create_cq(s.ctx, 16, nullptr, nullptr, s.ctx->num_comp_vectors), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_cq* cq = ibv_create_cq(s.ctx, 16, nullptr, nullptr, s.ctx->num_comp_vectors - 1);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);

  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  sa.attr.srq_limit = 17;
  errno = 0;
  EXPECT_EQ(ibv_create_srq(s.pd, &sa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  sa.attr.srq_limit = 16;
  ibv_srq* srq = ibv_create_srq(s.pd, &sa);
  ASSERT_NE(srq, nullptr);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);

  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 2;
  ah.grh.sgid_index = 1;
  ah.grh.hop_limit = 1;
  ah.grh.dgid = gid_of(ctx_[1], 1);
  errno = 0;
  EXPECT_EQ(ibv_create_ah(s.pd, &ah), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ah.port_num = 1;
  ibv_ah* h = ibv_create_ah(s.pd, &ah);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(ibv_destroy_ah(h), 0);
}

TEST_F(VerbsTest, RemoteAccessViolationsCompleteInErrorOnTheRequester) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  // A WRITE with a key that names no region.
  ASSERT_EQ(post_send(a.qp, IBV_WR_RDMA_WRITE, 1, a, 0, 64, b.buf->addr(), b.mr->rkey ^ 0x5a5a), 0);
  auto wc = wait_wc(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].qp_num, a.qp->qp_num);
  EXPECT_STREQ(ibv_wc_status_str(wc[0].status), "remote access error");
  // The requester's QP is now in the error state: what is posted next is flushed.
  EXPECT_EQ(state_of(a.qp), IBV_QPS_ERR);
  ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 2, a, 0, 8), 0);
  wc = wait_wc(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc[0].wr_id, 2u);
  // The responder raised a local access violation event on its QP: async_fd becomes readable.
  ASSERT_TRUE(readable(b.ctx->async_fd, 5000)) << "no asynchronous event";
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(b.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << ibv_event_type_str(ev.event_type);
  EXPECT_EQ(ev.element.qp, b.qp);
  ibv_ack_async_event(&ev);
}

TEST_F(VerbsTest, ReadWithoutRemoteReadAccessFails) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  ibv_mr* wo = ibv_reg_mr(b.pd, b.buf->p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(wo, nullptr);
  ASSERT_EQ(post_send(a.qp, IBV_WR_RDMA_READ, 3, a, 0, 128, b.buf->addr(), wo->rkey), 0);
  auto wc = wait_wc(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(ibv_dereg_mr(wo), 0);
}

TEST_F(VerbsTest, ErrorStateFlushesEveryWorkRequest) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  for (uint64_t i = 0; i < 5; ++i) ASSERT_EQ(post_recv(a.qp, 100 + i, a, i * 64, 64), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE), 0);
  auto wc = wait_wc(a.cq, 5);
  ASSERT_EQ(wc.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc[i].wr_id, 100 + i);
    EXPECT_EQ(wc[i].qp_num, a.qp->qp_num);
  }
  // Posted in ERR: flushed too, sends and receives.
  ASSERT_EQ(post_recv(a.qp, 200, a, 0, 64), 0);
  ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 201, a, 0, 64), 0);
  wc = wait_wc(a.cq, 2);
  ASSERT_EQ(wc.size(), 2u);
  for (const auto& w : wc) EXPECT_EQ(w.status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(VerbsTest, DestroyOrderingIsEnforced) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_[0]);
  ASSERT_NE(ch, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx_[0]);
  ASSERT_NE(pd, nullptr);
  Buffer buf(8192);
  ibv_mr* mr = ibv_reg_mr(pd, buf.p, buf.n, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx_[0], 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.srq = srq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 4;
  qa.cap.max_send_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &qa);
  ASSERT_NE(qp, nullptr);
  ibv_ah_attr ah_attr{};
  ah_attr.is_global = 1;
  ah_attr.port_num = 1;
  ah_attr.grh.sgid_index = 1;
  ah_attr.grh.dgid = gid_of(ctx_[1], 1);
  ibv_ah* ah = ibv_create_ah(pd, &ah_attr);
  ASSERT_NE(ah, nullptr);

  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
  EXPECT_EQ(ibv_destroy_cq(cq), EBUSY);
  EXPECT_EQ(ibv_destroy_srq(srq), EBUSY);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // the MR and the AH
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // the AH
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(VerbsTest, ClosingAContextReleasesWhatItLeftBehind) {
  // A second context on the same device shares the stack instance; closing it with objects
  // still alive succeeds and leaves the first context working.
  ibv_context* extra = ibv_open_device(ctx_[0]->device);
  ASSERT_NE(extra, nullptr);
  ibv_pd* pd = ibv_alloc_pd(extra);
  ASSERT_NE(pd, nullptr);
  ibv_cq* cq = ibv_create_cq(extra, 8, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ASSERT_NE(ibv_create_qp(pd, &qa), nullptr);
  EXPECT_EQ(ibv_close_device(extra), 0);
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  ASSERT_EQ(post_recv(b.qp, 1, b, 0, 64), 0);
  ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 2, a, 0, 64), 0);
  ASSERT_EQ(wait_wc(b.cq, 1).size(), 1u);
}

TEST_F(VerbsTest, MemoryRegistrationAccessFlags) {
  ibv_pd* pd = ibv_alloc_pd(ctx_[0]);
  ASSERT_NE(pd, nullptr);
  Buffer buf(1 << 16);
  // A flag value only known at run time takes the ibv_reg_mr_iova2 path; an optional flag
  // (relaxed ordering) is accepted and ignored.
  volatile int optional = IBV_ACCESS_RELAXED_ORDERING;
  ibv_mr* mr = ibv_reg_mr(pd, buf.p, buf.n, IBV_ACCESS_LOCAL_WRITE | optional);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  EXPECT_EQ(mr->addr, buf.p);
  EXPECT_EQ(mr->length, buf.n);
  EXPECT_EQ(mr->lkey, mr->rkey);
  ibv_mr* iova = ibv_reg_mr_iova(pd, buf.p, 4096, 0x100000, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(iova, nullptr);
  // Remote write without local write (IBA 10.6.3.1) and on-demand paging are refused.
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, buf.p, 4096, IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_reg_mr(pd, buf.p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  // Re-registration with new access: keys may change, the MR stays usable.
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ),
            0);
  EXPECT_EQ(ibv_dereg_mr(iova), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// rdma-core pins a region's pages as it registers it (ib_uverbs / ib_umem_get), writable when
// the access flags let anyone write it: memory the process may not access that way fails with
// EFAULT. The engine would otherwise fault on it later, and kill the process.
TEST_F(VerbsTest, MemoryRegistrationNeedsAccessibleMemory) {
  ibv_pd* pd = ibv_alloc_pd(ctx_[0]);
  ASSERT_NE(pd, nullptr);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Pages: read-write, read-only, no access, unmapped.
  // Far below where the kernel places mappings (top down from under the stack), so that no
  // other thread's mmap fills the hole the test makes: the highest hole that fits is taken
  // first, and one next to the newest mappings was (under ASan, about one run in ten on a
  // loaded machine). A hint only: elsewhere is fine if that address is taken.
  void* const hint = reinterpret_cast<void*>(uintptr_t{0x300000000000});
  auto* p = static_cast<uint8_t*>(
      mmap(hint, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  uint8_t* rw = p;
  uint8_t* ro = p + page;
  uint8_t* none = p + 2 * page;
  uint8_t* gone = p + 3 * page;
  ASSERT_EQ(mprotect(ro, page, PROT_READ), 0);
  ASSERT_EQ(mprotect(none, page, PROT_NONE), 0);
  ASSERT_EQ(munmap(gone, page), 0);
  auto refused = [&](void* addr, size_t len, int access) {
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
    if (mr) ibv_dereg_mr(mr);
    return mr == nullptr && errno == EFAULT;
  };
  auto accepted = [&](void* addr, size_t len, int access) {
    ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
    return mr && ibv_dereg_mr(mr) == 0;
  };
  EXPECT_TRUE(accepted(rw, page, kAllAccess));
  // Read-only memory: for regions nobody writes into.
  EXPECT_TRUE(accepted(ro, page, 0));
  EXPECT_TRUE(accepted(ro, page, IBV_ACCESS_REMOTE_READ));
  EXPECT_TRUE(accepted(rw, 2 * page, IBV_ACCESS_REMOTE_READ));
  EXPECT_TRUE(refused(ro, page, IBV_ACCESS_LOCAL_WRITE));
  EXPECT_TRUE(refused(rw + page / 2, page, IBV_ACCESS_LOCAL_WRITE));  // its second half
  EXPECT_TRUE(refused(ro, page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  EXPECT_TRUE(refused(ro, page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC));
  // No access, or nothing mapped: refused whatever the flags.
  EXPECT_TRUE(refused(none, page, 0));
  EXPECT_TRUE(refused(ro, 2 * page, IBV_ACCESS_REMOTE_READ));
  EXPECT_TRUE(refused(gone, page, 0));
  EXPECT_TRUE(refused(gone - 1, 2, 0));  // one byte past the end of a mapping
  // Re-registration checks the new access the same way.
  ibv_mr* mr = ibv_reg_mr(pd, ro, page, 0);
  ASSERT_NE(mr, nullptr);
  errno = 0;
  EXPECT_EQ(
      ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE),
      IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(munmap(p, 3 * page), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// Objects of two devices do not mix (each device is its own engine): a QP whose CQ, or a CQ
// whose completion channel, belongs to the other device is refused with EINVAL, as are a QP
// without CQs and a receive with a negative SGE count. Attribute bits the shim does not know
// (XRC, create flags, IGNORE_OVERRUN, unknown rereg flags) are refused, not ignored.
TEST_F(VerbsTest, ObjectsOfAnotherDeviceAndUnknownBitsAreRefused) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = b.cq;  // device B's CQ under device A's PD
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a.pd, &qa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  qa.send_cq = a.cq;
  qa.recv_cq = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a.pd, &qa), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ibv_comp_channel* ch_b = ibv_create_comp_channel(ctx_[1]);
  ASSERT_NE(ch_b, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(ctx_[0], 16, nullptr, ch_b, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_destroy_comp_channel(ch_b), 0);

  ibv_qp_init_attr_ex qx{};
  qx.send_cq = qx.recv_cq = a.cq;
  qx.qp_type = IBV_QPT_RC;
  qx.cap = qa.cap;
  qx.pd = a.pd;
  qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx_[0], &qx), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  qx.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx_[0], &qx), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  ibv_cq_init_attr_ex cx{};
  cx.cqe = 16;
  cx.wc_flags = IBV_WC_STANDARD_FLAGS;
  cx.comp_mask = 1u << 7;  // no such attribute
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_[0], &cx), nullptr);
  EXPECT_EQ(errno, EINVAL);
  cx.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  cx.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_[0], &cx), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  ibv_sge sge{a.buf->addr(), 64, a.mr->lkey};
  ibv_recv_wr bad_count{};
  bad_count.wr_id = 7;
  bad_count.sg_list = &sge;
  bad_count.num_sge = -1;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(a.qp, &bad_count, &bad), EINVAL);
  EXPECT_EQ(bad, &bad_count);

  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(a.mr, 1 << 10, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_rereg_mr(a.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 0, 0),
            IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(VerbsTest, UnsupportedVerbsFailCleanly) {
  ibv_pd* pd = ibv_alloc_pd(ctx_[0]);
  ASSERT_NE(pd, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd, IBV_MW_TYPE_1), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_xrcd_init_attr xa{};
  EXPECT_EQ(ibv_open_xrcd(ctx_[0], &xa), nullptr);
  ibv_alloc_dm_attr dma{};
  dma.length = 64;
  EXPECT_EQ(ibv_alloc_dm(ctx_[0], &dma), nullptr);
  ibv_wq_init_attr wa{};
  EXPECT_EQ(ibv_create_wq(ctx_[0], &wa), nullptr);
  ibv_td_init_attr ta{};
  EXPECT_EQ(ibv_alloc_td(ctx_[0], &ta), nullptr);
  EXPECT_EQ(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, 3, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_cq* cq = ibv_create_cq(ctx_[0], 8, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = plain_qp(pd, cq, IBV_QPT_UD, 4);
  ASSERT_NE(qp, nullptr);
  ibv_gid mgid{};
  mgid.raw[0] = 0xff;
  EXPECT_EQ(ibv_attach_mcast(qp, &mgid, 0), EOPNOTSUPP);
  ibv_ece ece{};
  EXPECT_EQ(ibv_query_ece(qp, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_import_device(3), nullptr);
  EXPECT_EQ(ibv_fork_init(), 0);
  EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
  EXPECT_STREQ(ibv_event_type_str(IBV_EVENT_SRQ_LIMIT_REACHED), "SRQ limit reached");
  EXPECT_STREQ(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
  EXPECT_EQ(ibv_rate_to_mbps(IBV_RATE_25_GBPS), 25781);
  EXPECT_EQ(mult_to_ibv_rate(4), IBV_RATE_10_GBPS);
}

// Key `counters`: a program that returns from main (or calls exit) with its device still open
// gets its counters file too, written as the shim unloads; with the engine on its own thread
// and inline. No network is needed: net_null's port makes frames out of nothing.
TEST(VerbsExit, CountersAndCaptureWrittenWhenAProgramExitsWithoutClosing) {
  for (const char* mode : {"thread", "inline"}) {
    SCOPED_TRACE(mode);
    const std::string base = ::testing::TempDir() + "roce-exit-" + std::to_string(getpid());
    const std::string config = base + ".conf", counters = base + ".counters", pcap = base + ".pcap";
    std::remove(counters.c_str());
    std::remove(pcap.c_str());
    {
      std::ofstream f(config);
      f << "[device roceX]\nport = net_null7\nipv4 = 192.0.2.7/24\nmode = " << mode
        << "\ncounters = " << counters << "\npcap = " << pcap << "\n";
    }
    const std::string cmd = "ROCE_CONFIG=" + config + " ROCE_DEVICE= " + ROCE_EXIT_WITHOUT_CLOSE;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream in(counters);
    ASSERT_TRUE(in.good()) << "no counters file " << counters;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("device roceX (net_null7"), std::string::npos) << text;
    EXPECT_NE(text.find("driver:"), std::string::npos) << text;
    EXPECT_EQ(text.find("engine thread") != std::string::npos, std::string(mode) == "thread")
        << text;
    // The capture's buffer is flushed too (its 24-byte file header at least: net_null carries
    // no frame).
    std::ifstream cap(pcap, std::ios::binary | std::ios::ate);
    EXPECT_GE(static_cast<long>(cap.tellg()), 24L) << pcap;
    std::remove(counters.c_str());
    std::remove(config.c_str());
    std::remove(pcap.c_str());
  }
}

// A child forked after the device was opened inherits none of the stack's threads: its verbs
// fail at once (EOPNOTSUPP) instead of waiting for ever on the parent's engine thread, and its
// exit does not wait on them either (it used to hang in the library's exit handler). The
// parent's device is unaffected.
TEST(VerbsExit, AForkedChildFailsCleanlyAndExits) {
  for (const char* mode : {"thread", "inline"}) {
    SCOPED_TRACE(mode);
    const std::string config =
        ::testing::TempDir() + "roce-fork-" + std::to_string(getpid()) + ".conf";
    {
      std::ofstream f(config);
      f << "[device roceX]\nport = net_null7\nipv4 = 192.0.2.7/24\nmode = " << mode << "\n";
    }
    const std::string cmd = "ROCE_CONFIG=" + config + " ROCE_DEVICE= timeout -s KILL 60 " +
                            ROCE_EXIT_WITHOUT_CLOSE + " fork";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::remove(config.c_str());
  }
}

}  // namespace
}  // namespace roce::verbs_test
