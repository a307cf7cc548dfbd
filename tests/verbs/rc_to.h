// A small RC QP, and an RC QP brought from RESET to RTS towards a peer known by its QP number and
// IPv4 address (GID index 1, the IPv4-mapped GID, on both sides), for programs that talk to another
// process and have no ibv_qp of the peer's to look at (see verbs_fixture.h's connect_rc otherwise).
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

namespace roce::verbs_test {

// A small RC QP on one CQ (4 work requests, 1 SGE each way); nullptr with errno on failure.
inline ibv_qp* small_rc_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  return ibv_create_qp(pd, &qa);
}

// 0 or the errno of the transition that failed.
inline int connect_rc_to(ibv_qp* qp, uint32_t dest_qpn, const char* peer_ipv4) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (int rc = ibv_modify_qp(
          qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return rc;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.sgid_index = 1;
  uint8_t* g = a.ah_attr.grh.dgid.raw;  // ::ffff:a.b.c.d
  g[10] = g[11] = 0xff;
  if (inet_pton(AF_INET, peer_ipv4, g + 12) != 1) return EINVAL;
  if (int rc =
          ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return rc;
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

}  // namespace roce::verbs_test
