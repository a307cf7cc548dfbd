// Two devices in one process, on the two ends of a veth pair in a network namespace of the
// test's own (unshare), over net_af_packet: neighbour resolution by ARP / ND, then RDMA WRITE,
// READ, SEND and atomics through two engine threads, data verified; IPv4 and IPv6 GIDs.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "dpdk/device.h"
#include "stack/core/counters_format.h"

namespace {
using namespace roce;
using roce::dpdk::Device;

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

class DeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "needs root (network namespace and veth)";
      return;
    }
    if (unshare(CLONE_NEWNET) != 0) {
      skip_ = "unshare(CLONE_NEWNET) failed";
      return;
    }
    if (!sh("ip link add dA type veth peer name dB") || !sh("ip link set dA mtu 9000 up") ||
        !sh("ip link set dB mtu 9000 up") || !sh("ip link set lo up")) {
      skip_ = "cannot create a veth pair";
      return;
    }
    // The kernel must not answer for these addresses or send its own IPv6 traffic here.
    sh("sysctl -w net.ipv6.conf.dA.disable_ipv6=1");
    sh("sysctl -w net.ipv6.conf.dB.disable_ipv6=1");
    std::string err;
    for (int i = 0; i < 2; ++i) {
      DeviceConfig c;
      c.name = i ? "rB" : "rA";
      c.port = std::string("net_af_packet") + (i ? "1" : "0") + ",iface=" + (i ? "dB" : "dA") +
               ",blocksz=8192,framesz=8192,framecnt=512";
      c.mtu = 4200;
      apply_setting(c, "ipv4", i ? "10.9.0.2/24" : "10.9.0.1/24", &err);
      apply_setting(c, "ipv6", i ? "fd09::2/64" : "fd09::1/64", &err);
      c.mac = Mac{0x02, 0, 0, 0, 0x09, static_cast<uint8_t>(i + 1)};
      dev_[i] = Device::open(c, &err).release();
      if (!dev_[i]) {
        setup_error_ = err;
        return;
      }
    }
  }
  static void TearDownTestSuite() {
    for (auto& d : dev_) {
      delete d;
      d = nullptr;
    }
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  static inline std::string skip_;
  static inline std::string setup_error_;
  static inline Device* dev_[2] = {nullptr, nullptr};
};

struct Side {
  Device* d;
  uint32_t pd = 0, key = 0;
  CompletionQueue* cq = nullptr;
  Qp* qp = nullptr;
  std::vector<uint8_t> mem;
  uint64_t addr(uint64_t o = 0) { return reinterpret_cast<uint64_t>(mem.data()) + o; }
};

bool setup_side(Side& s, size_t bytes) {
  s.mem.assign(bytes, 0);
  return s.d->runner().run([&] {
    Engine& e = s.d->engine();
    s.pd = e.alloc_pd();
    if (e.reg_mr(s.pd, s.mem.data(), bytes, s.addr(),
                 kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
                 &s.key)) {
      return false;
    }
    int err = 0;
    s.cq = e.create_cq(1024, &err);
    QpInitAttr ia;
    ia.pd = s.pd;
    ia.send_cq = ia.recv_cq = s.cq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 256;
    s.qp = e.create_qp(ia, &err);
    return s.qp != nullptr;
  });
}

int connect_side(Side& s, const Side& peer, int gid, Mtu mtu) {
  return s.d->runner().run([&] {
    Engine& e = s.d->engine();
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    if (int rc = e.modify_qp(s.qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags))
      return rc;
    a = QpAttr{};
    a.qp_state = QpState::kRtr;
    a.path_mtu = mtu;
    a.dest_qp_num = peer.qp->qpn();
    a.rq_psn = 0x1000;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.dgid = peer.d->gids()[static_cast<size_t>(gid)];
    a.ah_attr.sgid_index = static_cast<uint8_t>(gid);
    if (int rc = e.modify_qp(s.qp, a,
                             kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                 kQpMaxDestRdAtomic | kQpMinRnrTimer)) {
      return rc;
    }
    a = QpAttr{};
    a.qp_state = QpState::kRts;
    a.sq_psn = 0x1000;
    a.timeout = 12;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    return e.modify_qp(
        s.qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
  });
}

bool wait_cqe(Side& s, Cqe* out, int seconds = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (s.cq->poll(out, 1) == 1) return true;
    s.d->runner().poll();  // drives the engine in inline mode; no-op with an engine thread
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return false;
}

void transfer_and_verify(Side& a, Side& b, const char* label) {
  SCOPED_TRACE(label);
  const uint32_t n = 1 << 20;
  for (uint32_t i = 0; i < n; ++i) a.mem[i] = static_cast<uint8_t>(i * 31 + 7);
  Sge s{a.addr(), n, a.key};
  ASSERT_EQ(a.qp->post_send({.wr_id = 1,
                             .sg_list = &s,
                             .num_sge = 1,
                             .opcode = WrOpcode::kRdmaWrite,
                             .send_flags = kSendSignaled,
                             .remote_addr = b.addr(),
                             .rkey = b.key}),
            0);
  Cqe c;
  ASSERT_TRUE(wait_cqe(a, &c)) << "no WRITE completion\n" << a.d->counters_text();
  ASSERT_EQ(c.status, WcStatus::kSuccess) << to_string(c.status);
  ASSERT_EQ(std::memcmp(a.mem.data(), b.mem.data(), n), 0);
  Sge r{a.addr(n), n, a.key};
  ASSERT_EQ(a.qp->post_send({.wr_id = 2,
                             .sg_list = &r,
                             .num_sge = 1,
                             .opcode = WrOpcode::kRdmaRead,
                             .send_flags = kSendSignaled,
                             .remote_addr = b.addr(),
                             .rkey = b.key}),
            0);
  ASSERT_TRUE(wait_cqe(a, &c));
  ASSERT_EQ(c.status, WcStatus::kSuccess);
  ASSERT_EQ(std::memcmp(a.mem.data(), a.mem.data() + n, n), 0);
  Sge rs{b.addr(2 * n), 100000, b.key};
  ASSERT_EQ(b.qp->post_recv({.wr_id = 3, .sg_list = &rs, .num_sge = 1}), 0);
  Sge ss{a.addr(0), 100000, a.key};
  ASSERT_EQ(a.qp->post_send({.wr_id = 4,
                             .sg_list = &ss,
                             .num_sge = 1,
                             .opcode = WrOpcode::kSend,
                             .send_flags = kSendSignaled}),
            0);
  ASSERT_TRUE(wait_cqe(b, &c));
  ASSERT_EQ(c.status, WcStatus::kSuccess);
  ASSERT_EQ(c.byte_len, 100000u);
  ASSERT_EQ(std::memcmp(b.mem.data() + 2 * n, a.mem.data(), 100000), 0);
  ASSERT_TRUE(wait_cqe(a, &c));
  ASSERT_EQ(c.status, WcStatus::kSuccess);
}

TEST_F(DeviceTest, GidTableLikeRxe) {
  const auto& g = dev_[0]->gids();
  ASSERT_GE(g.size(), 3u);
  EXPECT_EQ(g[0][0], 0xfe);   // link-local from the MAC
  EXPECT_EQ(g[0][8], 0x00);   // 02 ^ 02
  EXPECT_EQ(g[1][10], 0xff);  // IPv4-mapped 10.9.0.1
  EXPECT_EQ(g[1][15], 1);
  EXPECT_EQ(dev_[0]->active_mtu(), Mtu::k4096);
}

TEST_F(DeviceTest, RdmaOverIpv4AndIpv6WithArpAndNd) {
  for (int gid : {1, 2}) {
    Side a{dev_[0]}, b{dev_[1]};
    ASSERT_TRUE(setup_side(a, 3 << 20));
    ASSERT_TRUE(setup_side(b, 3 << 20));
    ASSERT_EQ(connect_side(a, b, gid, Mtu::k4096), 0);
    ASSERT_EQ(connect_side(b, a, gid, Mtu::k4096), 0);
    transfer_and_verify(a, b, gid == 1 ? "IPv4" : "IPv6");
    std::printf("%s", a.d->counters_text().c_str());
  }
}
}  // namespace
