// RC QPs brought from RESET to RTS for the verbs tests: the attributes every test connects
// with (PSN 0x1234, four READs / atomics in flight each way, timeout 14, retry_cnt and
// rnr_retry 7), towards a peer known by its QP number and GID. verbs_fixture.h connects two QPs
// of one process with them; programs that talk to another process (memif_peer.cc) name the
// peer's IPv4 address instead.
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cstdint>

namespace roce::verbs_test {

inline constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
inline constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
inline constexpr int kRemoteAccess =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

inline ibv_qp_attr rtr_attr_to(uint32_t dest_qpn, const ibv_gid& dgid, int sgid_index,
                               ibv_mtu mtu = IBV_MTU_4096) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0x1234;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(sgid_index);
  a.ah_attr.grh.dgid = dgid;
  return a;
}

inline ibv_qp_attr rts_attr() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0x1234;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  return a;
}

// RESET -> INIT -> RTR -> RTS; 0 or the errno of the transition that failed.
inline int connect_rc_to(ibv_qp* qp, uint32_t dest_qpn, const ibv_gid& dgid, int sgid_index,
                         ibv_mtu mtu = IBV_MTU_4096, int access = kRemoteAccess) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = static_cast<unsigned>(access);
  if (int rc = ibv_modify_qp(
          qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return rc;
  }
  a = rtr_attr_to(dest_qpn, dgid, sgid_index, mtu);
  if (int rc = ibv_modify_qp(qp, &a, kRtrMask)) return rc;
  a = rts_attr();
  return ibv_modify_qp(qp, &a, kRtsMask);
}

// The IPv4-mapped GID of an address (::ffff:a.b.c.d, the stack's GID index 1); all zeros if
// `ipv4` is not an address.
inline ibv_gid ipv4_gid(const char* ipv4) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  if (inet_pton(AF_INET, ipv4, g.raw + 12) != 1) g = ibv_gid{};
  return g;
}

// A small RC QP on one CQ (4 work requests, 1 SGE each way); nullptr with errno on failure.
inline ibv_qp* small_rc_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  return ibv_create_qp(pd, &qa);
}

}  // namespace roce::verbs_test
