// Verbs conformance, data side: RC SEND / WRITE / READ / atomics with old-style ibv_post_send,
// the ibv_wr_* API, ibv_cq_ex polling, completion channels (a real pollable fd), UD with the GRH
// area, SRQ with its limit event, concurrent posters on one QP, and inline mode (the
// application's polling drives the engine). Only <infiniband/verbs.h>.
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>

#include <atomic>

#include "verbs_fixture.h"

namespace roce::verbs_test {
namespace {

void fill(Buffer& b, size_t off, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) b.p[off + i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
}

// Creation attributes of an RC QP for the ibv_wr_* builder on `a`'s PD and CQ, taking `ops`:
// 32 work requests, 2 SGEs each way, 128 bytes of inline data.
ibv_qp_init_attr_ex wr_api_attr(const Side& a, uint64_t ops) {
  ibv_qp_init_attr_ex xa{};
  xa.send_cq = xa.recv_cq = a.cq;
  xa.qp_type = IBV_QPT_RC;
  xa.cap.max_send_wr = xa.cap.max_recv_wr = 32;
  xa.cap.max_send_sge = xa.cap.max_recv_sge = 2;
  xa.cap.max_inline_data = 128;
  xa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  xa.pd = a.pd;
  xa.send_ops_flags = ops;
  return xa;
}

// A QP of `type` in `b`'s PD whose receives complete into the extended CQ `cqx` (its sends
// into b's CQ): 16 work requests of one SGE each way.
ibv_qp* qp_receiving_into(const Side& b, ibv_cq_ex* cqx, ibv_qp_type type) {
  ibv_qp_init_attr qa{};
  qa.send_cq = b.cq;
  qa.recv_cq = ibv_cq_ex_to_cq(cqx);
  qa.qp_type = type;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  return ibv_create_qp(b.pd, &qa);
}

// SEND, WRITE and READ of a multi-packet message, then both atomics; every byte checked.
void rc_operations(Side& a, Side& b) {
  using T = VerbsTest;
  constexpr uint32_t kLen = 100000;  // 25 packets at a 4096-byte MTU
  fill(*a.buf, 0, kLen, 1);
  ASSERT_EQ(T::post_recv(b.qp, 10, b, 0, kLen), 0);
  ASSERT_EQ(T::post_send(a.qp, IBV_WR_SEND, 1, a, 0, kLen), 0);
  auto wb = T::wait_wc(b.cq, 1);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wb[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wb[0].byte_len, kLen);
  EXPECT_EQ(wb[0].wr_id, 10u);
  EXPECT_EQ(wb[0].qp_num, b.qp->qp_num);
  EXPECT_EQ(std::memcmp(a.buf->p, b.buf->p, kLen), 0);
  auto wa = T::wait_wc(a.cq, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].opcode, IBV_WC_SEND);

  fill(*a.buf, 0, kLen, 2);
  ASSERT_EQ(T::post_send(a.qp, IBV_WR_RDMA_WRITE, 2, a, 0, kLen, b.buf->addr(200000), b.mr->rkey),
            0);
  wa = T::wait_wc(a.cq, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wa[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(std::memcmp(a.buf->p, b.buf->p + 200000, kLen), 0);
  ASSERT_EQ(
      T::post_send(a.qp, IBV_WR_RDMA_READ, 3, a, 400000, kLen, b.buf->addr(200000), b.mr->rkey), 0);
  wa = T::wait_wc(a.cq, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wa[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wa[0].byte_len, kLen);
  EXPECT_EQ(std::memcmp(a.buf->p, a.buf->p + 400000, kLen), 0);

  // Atomics on an 8-byte word of b: fetch-and-add, then compare-and-swap.
  uint64_t* word = reinterpret_cast<uint64_t*>(b.buf->p + 600000);
  *word = 40;
  ibv_sge sge{a.buf->addr(600000), 8, a.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 4;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = b.buf->addr(600000);
  wr.wr.atomic.rkey = b.mr->rkey;
  wr.wr.atomic.compare_add = 2;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  wa = T::wait_wc(a.cq, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wa[0].opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(a.buf->p + 600000), 40u);
  EXPECT_EQ(*word, 42u);
  wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  wr.wr.atomic.compare_add = 42;
  wr.wr.atomic.swap = 7;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  wa = T::wait_wc(a.cq, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(*word, 7u);
}

// rc_operations between a QP of device `dev_a` and one of `dev_b`, over each GID family.
void rc_operations_over_each_gid(VerbsTest& t, int dev_a, int dev_b) {
  for (int gid : {1, 2, 0}) {
    SCOPED_TRACE("GID index " + std::to_string(gid));
    Side a, b;
    t.make_side(a, dev_a);
    t.make_side(b, dev_b);
    VerbsTest::connect_pair(a, b, gid);
    rc_operations(a, b);
  }
}

TEST_F(VerbsTest, RcOperationsOverIpv4AndIpv6Gids) { rc_operations_over_each_gid(*this, 0, 1); }

// Loopback: two QPs of one device connected through its own GIDs, as programs (and rdma-core's
// own tests) connect them on an RDMA NIC or rxe. The engine hands the frames from its transmit
// side to its receive side; they used to wait for an ARP / ND answer for the device's own
// address and fail with RETRY_EXC_ERR.
TEST_F(VerbsTest, TwoQpsOfOneDeviceTalkThroughLoopback) {
  rc_operations_over_each_gid(*this, 0, 0);
}

// An RC QP towards an address nobody answers (10.9.0.77 on the veth: no such host): its send
// fails with RETRY_EXC_ERR once the device's ARP requests go unanswered (3 s), with retry_cnt 7,
// instead of waiting for ever. rdma-core fails ibv_modify_qp(RTR) with ETIMEDOUT there.
TEST_F(VerbsTest, ASendToAnAddressNobodyAnswersFails) {
  Side a;
  make_side(a, 0);
  ASSERT_EQ(connect_rc_to(a.qp, 0x99, ipv4_gid("10.9.0.77"), 1), 0);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 7, a, 0, 64), 0);
  auto wc = wait_wc(a.cq, 1, 15);
  ASSERT_EQ(wc.size(), 1u) << "the send neither completed nor failed";
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(wc[0].status);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(s, 1.5) << "failed before the ARP requests were given a chance";
  EXPECT_EQ(state_of(a.qp), IBV_QPS_ERR);
}

// SEND with Invalidate towards this stack: it has no memory windows or fast-registered regions,
// the only things a peer can invalidate, so both sides see the request fail
// (REM_INV_REQ_ERR) rather than a receive reported as IBV_WC_WITH_INV with nothing invalidated.
TEST_F(VerbsTest, SendWithInvalidateOfAnOrdinaryRegionFailsOnBothSides) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  ASSERT_EQ(post_recv(b.qp, 9, b, 0, 4096), 0);
  ASSERT_EQ(post_send(a.qp, IBV_WR_SEND_WITH_INV, 8, a, 0, 64, 0, 0, 0, b.mr->rkey), 0);
  auto sw = wait_wc(a.cq, 1);
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0].wr_id, 8u);
  EXPECT_EQ(sw[0].status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(sw[0].status);
  auto rw = wait_wc(b.cq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].wr_id, 9u);
  EXPECT_EQ(rw[0].status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(rw[0].status);
  EXPECT_EQ(rw[0].wc_flags & IBV_WC_WITH_INV, 0u);
  EXPECT_EQ(state_of(b.qp), IBV_QPS_ERR);
}

TEST_F(VerbsTest, PostListsImmediatesAndInlineData) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(post_recv(b.qp, 20 + i, b, i * 4096, 4096), 0);
  // A chain of three: inline SEND (unsignalled), SEND_WITH_IMM, WRITE_WITH_IMM (signalled).
  std::memcpy(a.buf->p, "inline payload", 15);
  ibv_sge s0{a.buf->addr(), 15, a.mr->lkey}, s1{a.buf->addr(), 100, a.mr->lkey},
      s2{a.buf->addr(), 3000, a.mr->lkey};
  ibv_send_wr w[3]{};
  w[0].wr_id = 1;
  w[0].sg_list = &s0;
  w[0].num_sge = 1;
  w[0].opcode = IBV_WR_SEND;
  w[0].send_flags = IBV_SEND_INLINE;
  w[0].next = &w[1];
  w[1].wr_id = 2;
  w[1].sg_list = &s1;
  w[1].num_sge = 1;
  w[1].opcode = IBV_WR_SEND_WITH_IMM;
  w[1].imm_data = htonl(0xabcdef01);
  w[1].send_flags = IBV_SEND_SIGNALED;
  w[1].next = &w[2];
  w[2].wr_id = 3;
  w[2].sg_list = &s2;
  w[2].num_sge = 1;
  w[2].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w[2].imm_data = htonl(7);
  w[2].send_flags = IBV_SEND_SIGNALED;
  w[2].wr.rdma.remote_addr = b.buf->addr(65536);
  w[2].wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, w, &bad), 0);
  std::memset(a.buf->p, 0, 15);  // inline data was copied at post time
  auto wb = wait_wc(b.cq, 3);
  ASSERT_EQ(wb.size(), 3u);
  EXPECT_EQ(wb[0].byte_len, 15u);
  EXPECT_EQ(std::memcmp(b.buf->p, "inline payload", 15), 0);
  EXPECT_TRUE(wb[1].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wb[1].imm_data), 0xabcdef01u);
  EXPECT_EQ(wb[2].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ntohl(wb[2].imm_data), 7u);
  // Only the signalled ones complete on the sender (sq_sig_all = 0).
  auto wa = wait_wc(a.cq, 2);
  ASSERT_EQ(wa.size(), 2u);
  EXPECT_EQ(wa[0].wr_id, 2u);
  EXPECT_EQ(wa[1].wr_id, 3u);
  // A bad WR in a chain: the ones before it are posted, *bad points at it.
  w[0].send_flags = IBV_SEND_SIGNALED;
  w[1].opcode = static_cast<ibv_wr_opcode>(77);
  EXPECT_EQ(post_recv(b.qp, 30, b, 0, 64), 0);
  EXPECT_EQ(ibv_post_send(a.qp, w, &bad), EINVAL);
  EXPECT_EQ(bad, &w[1]);
  EXPECT_EQ(wait_wc(a.cq, 1).size(), 1u);
}

// End to end, the engine's rule: a zero-length SGE (its lkey naming no region) between two
// others, in a SEND and in the receive it lands in, is skipped; the bytes around it arrive.
TEST_F(VerbsTest, ZeroLengthSgesAreSkipped) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  const uint32_t bogus = a.mr->lkey ^ 0x5a5a00;
  ibv_sge r[3] = {{b.buf->addr(), 20, b.mr->lkey},
                  {b.buf->addr(500), 0, bogus},
                  {b.buf->addr(1000), 30, b.mr->lkey}};
  ibv_recv_wr rw{};
  rw.wr_id = 5;
  rw.sg_list = r;
  rw.num_sge = 3;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(ibv_post_recv(b.qp, &rw, &bad_r), 0);
  for (int i = 0; i < 2000; ++i) a.buf->p[i] = static_cast<uint8_t>(i * 7 + 1);
  ibv_sge s[3] = {{a.buf->addr(), 25, a.mr->lkey},
                  {a.buf->addr(300), 0, bogus},
                  {a.buf->addr(1200), 25, a.mr->lkey}};
  ibv_send_wr w{};
  w.wr_id = 6;
  w.sg_list = s;
  w.num_sge = 3;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  auto wa = wait_wc(a.cq, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wa[0].status);
  auto wb = wait_wc(b.cq, 1);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wb[0].status);
  EXPECT_EQ(wb[0].byte_len, 50u);
  uint8_t sent[50];
  std::memcpy(sent, a.buf->p, 25);
  std::memcpy(sent + 25, a.buf->p + 1200, 25);
  EXPECT_EQ(std::memcmp(b.buf->p, sent, 20), 0);
  EXPECT_EQ(std::memcmp(b.buf->p + 1000, sent + 20, 30), 0);
}

TEST_F(VerbsTest, CompletionChannelFdIsPollable) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_[1]);
  ASSERT_NE(ch, nullptr);
  ASSERT_GE(ch->fd, 0);
  {
    Side a, b;
    make_side(a, 0);
    make_side(b, 1, 1 << 20, IBV_QPT_RC, 64, ch);
    connect_pair(a, b);
    ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);
    EXPECT_FALSE(readable(ch->fd, 50));  // nothing happened yet
    ASSERT_EQ(post_recv(b.qp, 1, b, 0, 64), 0);
    ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 2, a, 0, 64), 0);
    ASSERT_TRUE(readable(ch->fd, 5000)) << "no completion event";
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq, b.cq);
    EXPECT_EQ(ev_ctx, this);
    EXPECT_EQ(wait_wc(b.cq, 1).size(), 1u);
    // Not re-armed: another completion raises no event.
    ASSERT_EQ(post_recv(b.qp, 3, b, 0, 64), 0);
    ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 4, a, 0, 64), 0);
    EXPECT_EQ(wait_wc(b.cq, 1).size(), 1u);
    EXPECT_FALSE(readable(ch->fd, 50));
    // Non-blocking on request, as with the kernel's event file.
    const int flags = fcntl(ch->fd, F_GETFL);
    ASSERT_EQ(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK), 0);
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
    EXPECT_EQ(errno, EAGAIN);
    // Solicited-only arming ignores an unsolicited SEND and fires on a solicited one.
    ASSERT_EQ(ibv_req_notify_cq(b.cq, 1), 0);
    ASSERT_EQ(post_recv(b.qp, 5, b, 0, 64), 0);
    ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 6, a, 0, 64), 0);
    EXPECT_EQ(wait_wc(b.cq, 1).size(), 1u);
    EXPECT_FALSE(readable(ch->fd, 50));
    ASSERT_EQ(post_recv(b.qp, 7, b, 0, 64), 0);
    ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, 8, a, 0, 64, 0, 0, IBV_SEND_SOLICITED), 0);
    ASSERT_TRUE(readable(ch->fd, 5000));
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    ibv_ack_cq_events(b.cq, 2);  // destroy_cq waits for every event to be acknowledged
    wait_wc(a.cq, 4);
  }
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(VerbsTest, ExtendedCqPolling) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 64;
  ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx_[1], &ca);
  ASSERT_NE(cqx, nullptr) << std::strerror(errno);
  // The QP's receives complete into the extended CQ.
  ibv_qp* qp = qp_receiving_into(b, cqx, IBV_QPT_RC);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(connect_rc(a.qp, qp, ctx_[1], 1), 0);
  ASSERT_EQ(connect_rc(qp, a.qp, ctx_[0], 1), 0);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cqx, &pa), ENOENT);  // empty: no end_poll
  for (uint64_t i = 0; i < 2; ++i) ASSERT_EQ(post_recv(qp, 50 + i, b, i * 1024, 1024), 0);
  ibv_sge s{a.buf->addr(), 300, a.mr->lkey};
  ibv_send_wr w{};
  w.wr_id = 9;
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND_WITH_IMM;
  w.imm_data = htonl(99);
  ibv_send_wr* bad;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  ASSERT_EQ(wait_wc(a.cq, 1).size(), 1u);
  ASSERT_EQ(start_poll_within(cqx), 0);  // the receive's completion may come a little later
  EXPECT_EQ(cqx->status, IBV_WC_SUCCESS);
  EXPECT_EQ(cqx->wr_id, 50u);
  EXPECT_EQ(ibv_wc_read_opcode(cqx), IBV_WC_RECV);
  EXPECT_EQ(ibv_wc_read_byte_len(cqx), 300u);
  EXPECT_EQ(ibv_wc_read_qp_num(cqx), qp->qp_num);
  EXPECT_TRUE(ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(ibv_wc_read_imm_data(cqx)), 99u);
  const uint64_t ts1 = ibv_wc_read_completion_ts(cqx);
  ASSERT_EQ(ibv_next_poll(cqx), 0);
  EXPECT_EQ(cqx->wr_id, 51u);
  EXPECT_FALSE(ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM);
  EXPECT_GE(ibv_wc_read_completion_ts(cqx), ts1);
  EXPECT_EQ(ibv_next_poll(cqx), ENOENT);
  ibv_end_poll(cqx);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
  // Fields the port cannot produce are refused.
  ca.wc_flags = IBV_WC_EX_WITH_CVLAN;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(ctx_[1], &ca), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_F(VerbsTest, WorkRequestBuilderApi) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_qp_init_attr_ex xa = wr_api_attr(a, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                              IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
                                              IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
  ibv_qp* qp = ibv_create_qp_ex(ctx_[0], &xa);
  ASSERT_NE(qp, nullptr) << std::strerror(errno);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
  ASSERT_NE(qx, nullptr);
  ASSERT_EQ(connect_rc(qp, b.qp, ctx_[1], 1), 0);
  ASSERT_EQ(connect_rc(b.qp, qp, ctx_[0], 1), 0);
  for (uint64_t i = 0; i < 2; ++i) ASSERT_EQ(post_recv(b.qp, 60 + i, b, i * 8192, 8192), 0);
  fill(*a.buf, 0, 20000, 5);
  std::memcpy(a.buf->p + 30000, "built inline", 13);
  uint64_t* word = reinterpret_cast<uint64_t*>(b.buf->p + 500000);
  *word = 1000;

  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, a.mr->lkey, a.buf->addr(), 5000);
  qx->wr_id = 2;
  ibv_wr_rdma_write(qx, b.mr->rkey, b.buf->addr(100000));
  const ibv_sge two[2] = {{a.buf->addr(0), 6000, a.mr->lkey},
                          {a.buf->addr(6000), 4000, a.mr->lkey}};
  ibv_wr_set_sge_list(qx, 2, two);
  qx->wr_id = 3;
  ibv_wr_send_imm(qx, htonl(0x11));
  ibv_wr_set_inline_data(qx, a.buf->p + 30000, 13);
  qx->wr_id = 4;
  ibv_wr_rdma_read(qx, b.mr->rkey, b.buf->addr(100000));
  ibv_wr_set_sge(qx, a.mr->lkey, a.buf->addr(200000), 10000);
  qx->wr_id = 5;
  ibv_wr_atomic_fetch_add(qx, b.mr->rkey, b.buf->addr(500000), 5);
  ibv_wr_set_sge(qx, a.mr->lkey, a.buf->addr(300000), 8);
  std::memset(a.buf->p + 30000, 0, 13);  // inline data was taken when it was set
  ASSERT_EQ(ibv_wr_complete(qx), 0);

  auto wa = wait_wc(a.cq, 5);
  ASSERT_EQ(wa.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(wa[i].status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(wa[i].wr_id, i + 1);
  }
  EXPECT_EQ(wa[3].opcode, IBV_WC_RDMA_READ);
  auto wb = wait_wc(b.cq, 2);
  ASSERT_EQ(wb.size(), 2u);
  EXPECT_EQ(wb[0].byte_len, 5000u);
  EXPECT_EQ(std::memcmp(b.buf->p, a.buf->p, 5000), 0);
  EXPECT_EQ(std::memcmp(b.buf->p + 100000, a.buf->p, 10000), 0);
  EXPECT_EQ(std::memcmp(a.buf->p + 200000, a.buf->p, 10000), 0);
  EXPECT_EQ(wb[1].byte_len, 13u);
  EXPECT_EQ(ntohl(wb[1].imm_data), 0x11u);
  EXPECT_EQ(std::memcmp(b.buf->p + 8192, "built inline", 13), 0);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(a.buf->p + 300000), 1000u);
  EXPECT_EQ(*word, 1005u);

  // Abort drops the batch; an operation outside send_ops_flags fails the whole batch.
  ibv_wr_start(qx);
  qx->wr_id = 6;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, a.mr->lkey, a.buf->addr(), 8);
  ibv_wr_abort(qx);
  ibv_wr_start(qx);
  ibv_wr_rdma_write_imm(qx, b.mr->rkey, b.buf->addr(), htonl(1));
  ibv_wr_set_sge(qx, a.mr->lkey, a.buf->addr(), 8);
  EXPECT_EQ(ibv_wr_complete(qx), EOPNOTSUPP);
  EXPECT_EQ(wait_wc(a.cq, 1, 1).size(), 0u);
  EXPECT_EQ(wait_wc(b.cq, 1, 1).size(), 0u);

  // Memory windows are not offered.
  xa.send_ops_flags |= IBV_QP_EX_WITH_BIND_MW;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx_[0], &xa), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

// The builder's limits are the QP's granted capabilities, inclusive: inline data of exactly
// max_inline_data bytes is posted; inline data one byte longer, or an SGE list one longer than
// max_send_sge, fails the batch with EINVAL and posts nothing.
TEST_F(VerbsTest, WorkRequestBuilderLimitsAreTheGrantedOnes) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_qp_init_attr_ex xa = wr_api_attr(a, IBV_QP_EX_WITH_SEND);
  ibv_qp* qp = ibv_create_qp_ex(ctx_[0], &xa);
  ASSERT_NE(qp, nullptr) << std::strerror(errno);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
  ASSERT_EQ(connect_rc(qp, b.qp, ctx_[1], 1), 0);
  ASSERT_EQ(connect_rc(b.qp, qp, ctx_[0], 1), 0);
  const uint32_t max_inline = xa.cap.max_inline_data;
  ASSERT_GE(max_inline, 128u);
  ASSERT_LT(max_inline, 8192u);
  for (uint64_t i = 0; i < 2; ++i) ASSERT_EQ(post_recv(b.qp, i, b, i * 8192, 8192), 0);

  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_inline_data(qx, a.buf->p, max_inline);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto wb = wait_wc(b.cq, 1);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].byte_len, max_inline);
  ASSERT_EQ(wait_wc(a.cq, 1).size(), 1u);

  ibv_wr_start(qx);
  ibv_wr_send(qx);
  ibv_wr_set_inline_data(qx, a.buf->p, max_inline + 1);
  EXPECT_EQ(ibv_wr_complete(qx), EINVAL);
  const std::vector<ibv_sge> sges(xa.cap.max_send_sge + 1, ibv_sge{a.buf->addr(), 8, a.mr->lkey});
  ibv_wr_start(qx);
  ibv_wr_send(qx);
  ibv_wr_set_sge_list(qx, sges.size(), sges.data());
  EXPECT_EQ(ibv_wr_complete(qx), EINVAL);
  EXPECT_EQ(wait_wc(b.cq, 1, 1).size(), 0u);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

TEST_F(VerbsTest, WorkRequestBuilderImmediatesAtomicsAndUd) {
  // RC: WRITE_WITH_IMM with an inline list, compare-and-swap.
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_qp_init_attr_ex xa =
      wr_api_attr(a, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
  ibv_qp* qp = ibv_create_qp_ex(ctx_[0], &xa);
  ASSERT_NE(qp, nullptr) << std::strerror(errno);
  ASSERT_EQ(connect_rc(qp, b.qp, ctx_[1], 1), 0);
  ASSERT_EQ(connect_rc(b.qp, qp, ctx_[0], 1), 0);
  ASSERT_EQ(post_recv(b.qp, 80, b, 0, 64), 0);
  uint64_t* word = reinterpret_cast<uint64_t*>(b.buf->p + 4096);
  *word = 5;
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(qp);
  char part1[] = "two ", part2[] = "pieces";
  const ibv_data_buf parts[2] = {{part1, 4}, {part2, 6}};
  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write_imm(qx, b.mr->rkey, b.buf->addr(1024), htonl(0x42));
  ibv_wr_set_inline_data_list(qx, 2, parts);
  qx->wr_id = 2;
  ibv_wr_atomic_cmp_swp(qx, b.mr->rkey, b.buf->addr(4096), 5, 9);
  ibv_wr_set_sge(qx, a.mr->lkey, a.buf->addr(8192), 8);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto wa = wait_wc(a.cq, 2);
  ASSERT_EQ(wa.size(), 2u);
  EXPECT_EQ(wa[1].opcode, IBV_WC_COMP_SWAP);
  auto wb = wait_wc(b.cq, 1);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ntohl(wb[0].imm_data), 0x42u);
  EXPECT_EQ(std::memcmp(b.buf->p + 1024, "two pieces", 10), 0);
  EXPECT_EQ(*word, 9u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(a.buf->p + 8192), 5u);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);

  // UD: ibv_wr_set_ud_addr.
  Side u, v;
  make_side(u, 0, 1 << 16, IBV_QPT_UD);
  make_side(v, 1, 1 << 16, IBV_QPT_UD);
  xa = ibv_qp_init_attr_ex{};
  xa.send_cq = xa.recv_cq = u.cq;
  xa.qp_type = IBV_QPT_UD;
  xa.cap.max_send_wr = xa.cap.max_recv_wr = 8;
  xa.cap.max_send_sge = xa.cap.max_recv_sge = 1;
  xa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  xa.pd = u.pd;
  xa.send_ops_flags = IBV_QP_EX_WITH_SEND;
  ibv_qp* uq = ibv_create_qp_ex(ctx_[0], &xa);
  ASSERT_NE(uq, nullptr);
  for (ibv_qp* q : {uq, v.qp}) ASSERT_EQ(ud_up(q, 0x1234), 0);
  ibv_ah* to_v = ah_to(u.pd, ctx_[1], 1);
  ASSERT_NE(to_v, nullptr);
  ASSERT_EQ(post_recv(v.qp, 90, v, 0, 40 + 256), 0);
  std::memcpy(u.buf->p, "datagram", 8);
  qx = ibv_qp_to_qp_ex(uq);
  ibv_wr_start(qx);
  qx->wr_id = 3;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_ud_addr(qx, to_v, v.qp->qp_num, 0x1234);
  ibv_wr_set_sge(qx, u.mr->lkey, u.buf->addr(), 8);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto wv = wait_wc(v.cq, 1);
  ASSERT_EQ(wv.size(), 1u);
  EXPECT_EQ(wv[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wv[0].byte_len, 48u);
  EXPECT_EQ(wv[0].src_qp, uq->qp_num);
  EXPECT_EQ(std::memcmp(v.buf->p + 40, "datagram", 8), 0);
  EXPECT_EQ(wait_wc(u.cq, 1).size(), 1u);
  // An address handle of another protection domain is refused, as by ibv_post_send.
  ibv_ah* foreign = ah_to(v.pd, ctx_[1], 1);
  ASSERT_NE(foreign, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 4;
  ibv_wr_send(qx);
  ibv_wr_set_ud_addr(qx, foreign, v.qp->qp_num, 0x1234);
  ibv_wr_set_sge(qx, u.mr->lkey, u.buf->addr(), 8);
  EXPECT_EQ(ibv_wr_complete(qx), EINVAL);
  EXPECT_EQ(ibv_destroy_ah(foreign), 0);
  EXPECT_EQ(ibv_destroy_ah(to_v), 0);
  EXPECT_EQ(ibv_destroy_qp(uq), 0);
}

TEST_F(VerbsTest, UdCarriesTheGrhArea) {
  for (int gid : {1, 2}) {
    SCOPED_TRACE("GID index " + std::to_string(gid));
    Side a, b;
    make_side(a, 0, 1 << 16, IBV_QPT_UD);
    make_side(b, 1, 1 << 16, IBV_QPT_UD);
    for (Side* s : {&a, &b}) ASSERT_EQ(ud_up(s->qp, 0x11111111), 0);
    ibv_ah* to_b = ah_to(a.pd, ctx_[1], gid);
    ASSERT_NE(to_b, nullptr);
    ibv_ah_attr ah{};
    ah.port_num = 1;
    ah.is_global = 0;
    EXPECT_EQ(ibv_create_ah(a.pd, &ah), nullptr);  // RoCE needs the GRH
    ASSERT_EQ(post_recv(b.qp, 1, b, 0, 40 + 4096), 0);
    fill(*a.buf, 0, 4096, 9);
    ibv_sge s{a.buf->addr(), 4096, a.mr->lkey};
    ibv_send_wr w{};
    w.wr_id = 2;
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND_WITH_IMM;
    w.imm_data = htonl(0x77);
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.ud.ah = to_b;
    w.wr.ud.remote_qpn = b.qp->qp_num;
    w.wr.ud.remote_qkey = 0x11111111;
    ibv_send_wr* bad;
    ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
    auto wb = wait_wc(b.cq, 1);
    ASSERT_EQ(wb.size(), 1u);
    EXPECT_EQ(wb[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wb[0].byte_len, 40u + 4096u);
    EXPECT_TRUE(wb[0].wc_flags & IBV_WC_GRH);
    EXPECT_EQ(wb[0].src_qp, a.qp->qp_num);
    EXPECT_EQ(ntohl(wb[0].imm_data), 0x77u);
    EXPECT_EQ(std::memcmp(b.buf->p + 40, a.buf->p, 4096), 0);
    // sl: the L3 header type as mlx5 reports it (2 IPv4, 1 IPv6), which UCX's ud_verbs reads.
    if (gid == 1) {
      EXPECT_EQ(b.buf->p[20], 0x45);  // IPv4 header at offset 20 of the GRH area
      EXPECT_EQ(wb[0].sl, 2);
    } else {
      EXPECT_EQ(b.buf->p[0] >> 4, 6);  // the IPv6 header
      EXPECT_EQ(wb[0].sl, 1);
    }
    // An answer built from the completion goes back to a.
    ibv_ah* back = ibv_create_ah_from_wc(b.pd, &wb[0], reinterpret_cast<ibv_grh*>(b.buf->p), 1);
    ASSERT_NE(back, nullptr) << std::strerror(errno);
    ASSERT_EQ(post_recv(a.qp, 3, a, 8192, 40 + 64), 0);
    ibv_sge s2{b.buf->addr(40), 64, b.mr->lkey};
    w.sg_list = &s2;
    w.opcode = IBV_WR_SEND;
    w.wr.ud.ah = back;
    w.wr.ud.remote_qpn = wb[0].src_qp;
    ASSERT_EQ(ibv_post_send(b.qp, &w, &bad), 0);
    auto wa = wait_wc(a.cq, 2);
    ASSERT_EQ(wa.size(), 2u);
    EXPECT_EQ(wa[1].byte_len, 40u + 64u);
    EXPECT_EQ(std::memcmp(a.buf->p + 8192 + 40, a.buf->p, 64), 0);
    wait_wc(b.cq, 1);
    EXPECT_EQ(ibv_destroy_ah(back), 0);
    EXPECT_EQ(ibv_destroy_ah(to_b), 0);
  }
}

// A UD send that completes in error moves the QP to SQE (IBA 10.3.1): later sends flush until
// ibv_modify_qp to RTS, then they go again. An address handle of another protection domain is
// refused at post with EINVAL (as rdmavt does).
TEST_F(VerbsTest, UdSendErrorsMoveTheQpToSqeUntilRts) {
  Side a, b;
  make_side(a, 0, 1 << 16, IBV_QPT_UD);
  make_side(b, 1, 1 << 16, IBV_QPT_UD);
  for (Side* s : {&a, &b}) ASSERT_EQ(ud_up(s->qp, 0x1234), 0);
  ibv_ah* to_b = ah_to(a.pd, ctx_[1], 1);
  ASSERT_NE(to_b, nullptr);
  ibv_pd* other_pd = ibv_alloc_pd(a.ctx);
  ASSERT_NE(other_pd, nullptr);
  ibv_ah* foreign = ah_to(other_pd, ctx_[1], 1);
  ASSERT_NE(foreign, nullptr);

  ibv_sge s{a.buf->addr(), 8, a.mr->lkey};
  ibv_send_wr w{};
  w.wr_id = 1;
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.ud.ah = foreign;
  w.wr.ud.remote_qpn = b.qp->qp_num;
  w.wr.ud.remote_qkey = 0x1234;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);
  EXPECT_EQ(bad, &w);

  // 8 bytes from 4 before the region's end: a local protection error.
  w.wr.ud.ah = to_b;
  s.addr = a.buf->addr((1 << 16) - 4);
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  s.addr = a.buf->addr();
  w.wr_id = 2;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  auto wa = wait_wc(a.cq, 2);
  ASSERT_EQ(wa.size(), 2u);
  EXPECT_EQ(wa[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(wa[1].status, IBV_WC_WR_FLUSH_ERR);
  ibv_qp_attr at{};
  ibv_qp_init_attr ia{};
  ASSERT_EQ(ibv_query_qp(a.qp, &at, IBV_QP_STATE, &ia), 0);
  EXPECT_EQ(at.qp_state, IBV_QPS_SQE);

  at = ibv_qp_attr{};
  at.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), 0);
  ASSERT_EQ(post_recv(b.qp, 3, b, 0, 40 + 8), 0);
  std::memcpy(a.buf->p, "datagram", 8);
  w.wr_id = 4;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  auto wb = wait_wc(b.cq, 1);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wb[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b.buf->p + 40, "datagram", 8), 0);
  wa = wait_wc(a.cq, 1);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_destroy_ah(foreign), 0);
  EXPECT_EQ(ibv_destroy_ah(to_b), 0);
  EXPECT_EQ(ibv_dealloc_pd(other_pd), 0);
}

// A datagram polled through an extended CQ: the source QP and the GRH flag, as ibv_poll_cq
// gives them (ibv_ud_pingpong and rdma-core's UD examples answer to the source QP).
TEST_F(VerbsTest, ExtendedCqReadsTheSourceQpAndGrhFlagOfADatagram) {
  Side a, b;
  make_side(a, 0, 1 << 16, IBV_QPT_UD);
  make_side(b, 1, 1 << 16, IBV_QPT_UD);
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx_[1], &ca);
  ASSERT_NE(cqx, nullptr) << std::strerror(errno);
  ibv_qp* qp = qp_receiving_into(b, cqx, IBV_QPT_UD);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(ud_up(a.qp, 0x1234), 0);
  ASSERT_EQ(ud_up(qp, 0x1234), 0);
  ASSERT_EQ(post_recv(qp, 7, b, 0, 40 + 64), 0);
  ibv_ah* ah = ah_to(a.pd, ctx_[1], 1);
  ASSERT_NE(ah, nullptr);
  ibv_sge s{a.buf->addr(), 64, a.mr->lkey};
  ibv_send_wr w{};
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND;
  w.wr.ud.ah = ah;
  w.wr.ud.remote_qpn = qp->qp_num;
  w.wr.ud.remote_qkey = 0x1234;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  ASSERT_EQ(start_poll_within(cqx), 0);
  EXPECT_EQ(cqx->status, IBV_WC_SUCCESS);
  EXPECT_EQ(cqx->wr_id, 7u);
  EXPECT_EQ(ibv_wc_read_byte_len(cqx), 40u + 64u);
  EXPECT_EQ(ibv_wc_read_qp_num(cqx), qp->qp_num);
  EXPECT_EQ(ibv_wc_read_src_qp(cqx), a.qp->qp_num);
  EXPECT_TRUE(ibv_wc_read_wc_flags(cqx) & IBV_WC_GRH);
  ibv_end_poll(cqx);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
}

// A chain longer than the room in the send queue: the work requests that fit are posted, the
// call fails with ENOMEM and *bad_wr points at the first one refused. The QP is in SQD, where it
// takes work requests but starts none, so the room cannot change meanwhile.
TEST_F(VerbsTest, ASendQueueOverflowPointsBadWrAtTheFirstRefused) {
  Side a, b;
  make_side(a, 0, 1 << 16, IBV_QPT_RC, 4);
  make_side(b, 1, 1 << 16, IBV_QPT_RC, 4);
  connect_pair(a, b);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_SQD;
  ASSERT_EQ(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), 0);
  ibv_qp_init_attr ia{};
  ASSERT_EQ(ibv_query_qp(a.qp, &at, IBV_QP_CAP, &ia), 0);
  const uint32_t room = at.cap.max_send_wr;
  ASSERT_GE(room, 4u);
  ibv_sge s{a.buf->addr(), 8, a.mr->lkey};
  std::vector<ibv_send_wr> w(room + 2);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i].wr_id = i;
    w[i].sg_list = &s;
    w[i].num_sge = 1;
    w[i].opcode = IBV_WR_RDMA_WRITE;
    w[i].wr.rdma.remote_addr = b.buf->addr();
    w[i].wr.rdma.rkey = b.mr->rkey;
    w[i].next = i + 1 < w.size() ? &w[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(a.qp, w.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &w[room]);
}

TEST_F(VerbsTest, SrqLimitRaisesAnAsyncEvent) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  ibv_srq_init_attr sa{};
  sa.srq_context = this;
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(b.pd, &sa);
  ASSERT_NE(srq, nullptr);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = b.cq;
  qa.srq = srq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 8;
  qa.cap.max_send_sge = 1;
  ibv_qp* qp = ibv_create_qp(b.pd, &qa);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qa.cap.max_recv_wr, 0u);  // receives go to the SRQ
  ASSERT_EQ(connect_rc(a.qp, qp, ctx_[1], 1), 0);
  ASSERT_EQ(connect_rc(qp, a.qp, ctx_[0], 1), 0);
  for (uint64_t i = 0; i < 8; ++i) {
    ibv_sge s{b.buf->addr(i * 1024), 1024, b.mr->lkey};
    ibv_recv_wr r{};
    r.wr_id = 70 + i;
    r.sg_list = &s;
    r.num_sge = 1;
    ibv_recv_wr* bad;
    ASSERT_EQ(ibv_post_srq_recv(srq, &r, &bad), 0);
  }
  ibv_srq_attr at{};
  at.srq_limit = 4;
  ASSERT_EQ(ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT), 0);
  at.srq_limit = 100;  // beyond max_wr
  EXPECT_EQ(ibv_modify_srq(srq, &at, IBV_SRQ_LIMIT), EINVAL);
  ASSERT_EQ(ibv_query_srq(srq, &at), 0);
  EXPECT_EQ(at.srq_limit, 4u);
  EXPECT_GE(at.max_wr, 8u);
  // Three messages leave five WQEs: no event. The fifth leaves three: the event, once.
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, i, a, 0, 100), 0);
  ASSERT_EQ(wait_wc(b.cq, 3).size(), 3u);
  EXPECT_FALSE(readable(ctx_[1]->async_fd, 100));
  for (uint64_t i = 3; i < 6; ++i) ASSERT_EQ(post_send(a.qp, IBV_WR_SEND, i, a, 0, 100), 0);
  auto wb = wait_wc(b.cq, 3);
  ASSERT_EQ(wb.size(), 3u);
  EXPECT_EQ(wb[2].wr_id, 75u);
  ASSERT_TRUE(readable(ctx_[1]->async_fd, 5000)) << "no SRQ limit event";
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx_[1], &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  EXPECT_EQ(ev.element.srq->srq_context, this);
  ibv_ack_async_event(&ev);
  ASSERT_EQ(ibv_query_srq(srq, &at), 0);
  EXPECT_EQ(at.srq_limit, 0u);  // disarmed by the event
  EXPECT_FALSE(readable(ctx_[1]->async_fd, 100));
  wait_wc(a.cq, 6);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(VerbsTest, ConcurrentPostersOnOneQueuePair) {
  Side a, b;
  make_side(a, 0, 1 << 20, IBV_QPT_RC, 1024);
  make_side(b, 1, 1 << 20, IBV_QPT_RC, 1024);
  connect_pair(a, b);
  constexpr int kThreads = 4, kPerThread = 100;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    ASSERT_EQ(post_recv(b.qp, static_cast<uint64_t>(i), b, 0, 64), 0);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (post_send(a.qp, IBV_WR_SEND, static_cast<uint64_t>(t * 1000 + i), a, 0, 32)) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto wb = wait_wc(b.cq, kThreads * kPerThread, 30);
  EXPECT_EQ(wb.size(), static_cast<size_t>(kThreads * kPerThread));
  for (const auto& w : wb) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wait_wc(a.cq, kThreads * kPerThread, 30).size(),
            static_cast<size_t>(kThreads * kPerThread));
}

class InlineModeTest : public VerbsTest {
 public:
  void SetUp() override { start("inline"); }
};

TEST_F(InlineModeTest, PollingDrivesTheEngine) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  rc_operations(a, b);
}

}  // namespace
}  // namespace roce::verbs_test
