// Test support for the verbs conformance tests: a process of its own (ctest runs every test
// case as one) enters a new network namespace, makes a veth pair there and configures two stack
// devices on its ends (roceA, roceB, net_af_packet, MTU 4200). The tests then use nothing but
// <infiniband/verbs.h>, linked against the stack's libibverbs.so.1.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "rc_connect.h"

namespace roce::verbs_test {

inline bool sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

// Registered memory, page aligned.
struct Buffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t bytes) : n(bytes) {
    p = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095}));
    std::memset(p, 0, bytes);
  }
  ~Buffer() { std::free(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint64_t addr(size_t off = 0) const { return reinterpret_cast<uintptr_t>(p + off); }
};

// One side of a connection: PD, one MR over a buffer, a CQ, a QP.
struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  Buffer* buf = nullptr;
  ibv_mr* mr = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ~Side() {
    if (qp) ibv_destroy_qp(qp);
    if (cq) ibv_destroy_cq(cq);
    if (mr) ibv_dereg_mr(mr);
    if (pd) ibv_dealloc_pd(pd);
    delete buf;
  }
};

inline constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

class VerbsTest : public ::testing::Test {
 public:
  // mode: "thread" or "inline" (the device configuration's mode key).
  void start(const char* mode) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespace, veth, raw sockets)";
    static bool netns = false;
    if (!netns) {
      ASSERT_EQ(unshare(CLONE_NEWNET), 0) << "unshare(CLONE_NEWNET): " << std::strerror(errno);
      ASSERT_TRUE(sh("ip link add vA type veth peer name vB") && sh("ip link set lo up"));
      for (const char* v : {"vA", "vB"}) {
        sh(std::string("sysctl -qw net.ipv6.conf.") + v + ".disable_ipv6=1");
        ASSERT_TRUE(sh(std::string("ip link set ") + v + " mtu 9000 up"));
      }
      netns = true;
    }
    char path[] = "/tmp/roce-verbs-test-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    config_ = path;
    std::ofstream f(config_);
    for (int i = 0; i < 2; ++i) {
      f << "[device " << (i ? "roceB" : "roceA") << "]\n"
        << "port = net_af_packet" << i << ",iface=" << (i ? "vB" : "vA")
        << ",blocksz=8192,framesz=8192,framecnt=512\n"
        << "mtu = 4200\nmode = " << mode << "\n"
        << "mac = 02:00:00:09:00:0" << i + 1 << "\n"
        << "ipv4 = 10.9.0." << i + 1 << "/24\nipv6 = fd09::" << i + 1 << "/64\n";
    }
    f.close();
    setenv("ROCE_CONFIG", config_.c_str(), 1);
    unsetenv("ROCE_DEVICE");
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    ASSERT_EQ(n, 2);
    for (int i = 0; i < 2; ++i) {
      ASSERT_STREQ(ibv_get_device_name(list[i]), i ? "roceB" : "roceA");
      ctx_[i] = ibv_open_device(list[i]);
      ASSERT_NE(ctx_[i], nullptr) << "ibv_open_device: " << std::strerror(errno);
    }
    ibv_free_device_list(list);
  }
  void SetUp() override { start("thread"); }
  void TearDown() override {
    for (auto*& c : ctx_) {
      if (c) {
        EXPECT_EQ(ibv_close_device(c), 0);
      }
      c = nullptr;
    }
    if (!config_.empty()) unlink(config_.c_str());
  }

  // PD, MR over `bytes`, CQ of `cqe`, RC (or `type`) QP with `depth` WRs each way.
  void make_side(Side& s, int dev, size_t bytes = 1 << 20, ibv_qp_type type = IBV_QPT_RC,
                 uint32_t depth = 64, ibv_comp_channel* ch = nullptr) {
    s.ctx = ctx_[dev];
    s.pd = ibv_alloc_pd(s.ctx);
    ASSERT_NE(s.pd, nullptr);
    s.buf = new Buffer(bytes);
    s.mr = ibv_reg_mr(s.pd, s.buf->p, bytes, kAllAccess);
    ASSERT_NE(s.mr, nullptr) << std::strerror(errno);
    s.cq = ibv_create_cq(s.ctx, 2048, this, ch, 0);
    ASSERT_NE(s.cq, nullptr) << std::strerror(errno);
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = s.cq;
    a.qp_type = type;
    a.cap.max_send_wr = a.cap.max_recv_wr = depth;
    a.cap.max_send_sge = a.cap.max_recv_sge = 4;
    a.cap.max_inline_data = 64;
    s.qp = ibv_create_qp(s.pd, &a);
    ASSERT_NE(s.qp, nullptr) << std::strerror(errno);
  }

  // A QP of `type` on one CQ, `depth` WRs of one SGE each way; NULL if creation fails.
  static ibv_qp* plain_qp(ibv_pd* pd, ibv_cq* cq, ibv_qp_type type, uint32_t depth) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq;
    a.qp_type = type;
    a.cap.max_send_wr = a.cap.max_recv_wr = depth;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    return ibv_create_qp(pd, &a);
  }

  static ibv_gid gid_of(ibv_context* c, int index) {
    ibv_gid g{};
    EXPECT_EQ(ibv_query_gid(c, 1, index, &g), 0);
    return g;
  }

  // RESET -> INIT -> RTR -> RTS for a UD QP with Q_Key `qkey`; 0 or the failing call's error.
  static int ud_up(ibv_qp* qp, uint32_t qkey) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = qkey;
    int rc = ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    if (rc) return rc;
    at = ibv_qp_attr{};
    at.qp_state = IBV_QPS_RTR;
    if ((rc = ibv_modify_qp(qp, &at, IBV_QP_STATE))) return rc;
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 1;
    return ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN);
  }

  // An address handle in `pd` to `peer_ctx`'s GID of index `gid`.
  static ibv_ah* ah_to(ibv_pd* pd, ibv_context* peer_ctx, int gid) {
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.sgid_index = static_cast<uint8_t>(gid);
    ah.grh.hop_limit = 1;
    ah.grh.dgid = gid_of(peer_ctx, gid);
    return ibv_create_ah(pd, &ah);
  }

  // RESET -> INIT -> RTR -> RTS for an RC QP towards `peer` (its QPN and its GID of `gid`), with
  // rc_connect.h's attributes.
  static int connect_rc(ibv_qp* qp, ibv_qp* peer, ibv_context* peer_ctx, int gid,
                        int access = kRemoteAccess) {
    return connect_rc_to(qp, peer->qp_num, gid_of(peer_ctx, gid), gid, IBV_MTU_4096, access);
  }
  static ibv_qp_attr rtr_attr(ibv_qp* peer, ibv_context* peer_ctx, int gid) {
    return rtr_attr_to(peer->qp_num, gid_of(peer_ctx, gid), gid);
  }

  static void connect_pair(Side& a, Side& b, int gid = 1) {
    ASSERT_EQ(connect_rc(a.qp, b.qp, b.ctx, gid), 0);
    ASSERT_EQ(connect_rc(b.qp, a.qp, a.ctx, gid), 0);
  }

  // ibv_start_poll until a completion is there (0) or `seconds` passed (ENOENT), or its error.
  static int start_poll_within(ibv_cq_ex* cq, int seconds = 10) {
    ibv_poll_cq_attr pa{};
    int rc = ENOENT;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while ((rc = ibv_start_poll(cq, &pa)) == ENOENT && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return rc;
  }

  // Polls until n completions arrived (or the deadline); returns what it got.
  static std::vector<ibv_wc> wait_wc(ibv_cq* cq, size_t n, int seconds = 10) {
    std::vector<ibv_wc> out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
      ibv_wc wc[8];
      const int got = ibv_poll_cq(cq, 8, wc);
      EXPECT_GE(got, 0);
      for (int i = 0; i < got; ++i) out.push_back(wc[i]);
      if (got == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return out;
  }

  static int post_send(ibv_qp* qp, ibv_wr_opcode op, uint64_t wr_id, Side& s, size_t off,
                       uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0, int flags = 0,
                       uint32_t imm_or_inv_rkey = 0) {
    ibv_sge sge{s.buf->addr(off), len, s.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = static_cast<unsigned>(IBV_SEND_SIGNALED | flags);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    wr.imm_data = imm_or_inv_rkey;  // a union with invalidate_rkey
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
  }
  static int post_recv(ibv_qp* qp, uint64_t wr_id, Side& s, size_t off, uint32_t len) {
    ibv_sge sge{s.buf->addr(off), len, s.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
  }

  static ibv_qp_state state_of(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
    return a.qp_state;
  }

  // Waits (poll(2), with a timeout) for an fd to become readable.
  static bool readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
  }

  ibv_context* ctx_[2] = {nullptr, nullptr};
  std::string config_;
};

}  // namespace roce::verbs_test
