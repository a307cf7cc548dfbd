// Verbs conformance, events: what completion channels report around errors. A CQ armed for
// solicited completions also fires on an unsuccessful one. Only <infiniband/verbs.h>.
#include "verbs_fixture.h"

namespace roce::verbs_test {
namespace {

int to_error(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

// ibv_req_notify_cq(3): with solicited_only, an unsuccessful completion is solicited too. The
// flush of a receive when its QP enters the error state must wake a program waiting for
// solicited completions (IBA 11.4.2.2).
TEST_F(VerbsTest, SolicitedArmFiresOnAFlushedReceive) {
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx_[0]);
  ASSERT_NE(ch, nullptr);
  {
    Side a, b;
    make_side(a, 0, 1 << 20, IBV_QPT_RC, 64, ch);
    make_side(b, 1);
    connect_pair(a, b);
    ASSERT_EQ(post_recv(a.qp, 11, a, 0, 64), 0);
    ASSERT_EQ(ibv_req_notify_cq(a.cq, 1), 0);
    ASSERT_EQ(to_error(a.qp), 0);
    ASSERT_TRUE(readable(ch->fd, 2000)) << "no completion event for the flushed receive";
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq, a.cq);
    auto wc = wait_wc(a.cq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc[0].wr_id, 11u);
    ibv_ack_cq_events(a.cq, 1);
  }
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

}  // namespace
}  // namespace roce::verbs_test
