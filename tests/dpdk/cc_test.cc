// DCQCN over real ports: two devices with cc = dcqcn on a veth pair; the sender's path marks
// half of its ECN-capable frames CE (the stack's own injection, as a congested switch would).
// The receiver's notification point answers with CNPs, the sender's reaction point cuts its rate,
// the counters show both, and the capture decodes: tshark shows every CNP's BTH (opcode 0x81)
// with nothing malformed, scapy's RoCE layer recognises each as a CNP with BECN set.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "device_pair.h"

namespace {
using namespace roce;
using namespace roce::test;
using roce::dpdk::Device;

TEST(DcqcnOverDpdk, CeMarksProduceCnpsAndRateCuts) {
  const std::string skip = private_veth_pair();
  if (!skip.empty()) GTEST_SKIP() << skip;
  const std::string pcap = "/tmp/roce-cc-test-" + std::to_string(getpid()) + ".pcap";
  std::string err;
  std::unique_ptr<Device> dev[2];
  for (int i = 0; i < 2; ++i) {
    DeviceConfig c = veth_device(i);
    ASSERT_TRUE(apply_setting(c, "cc", "dcqcn", &err)) << err;
    if (i == 0) {
      ASSERT_TRUE(apply_setting(c, "ce", "0.5", &err)) << err;
    }
    if (i == 1) c.pcap = pcap;
    dev[i] = Device::open(c, &err);
    ASSERT_TRUE(dev[i]) << err;
  }
  Side a{dev[0].get()}, b{dev[1].get()};
  ASSERT_TRUE(setup_side(a, 8 << 20));
  ASSERT_TRUE(setup_side(b, 8 << 20));
  ASSERT_EQ(connect_side(a, b, 1, Mtu::k4096), 0);
  ASSERT_EQ(connect_side(b, a, 1, Mtu::k4096), 0);
  // 16 WRITEs of 512 KiB: 8 MiB through a path that marks CE.
  for (int i = 0; i < 16; ++i) {
    Sge s{a.addr(), 512 << 10, a.key};
    ASSERT_EQ(a.qp->post_send({.wr_id = static_cast<uint64_t>(i),
                               .sg_list = &s,
                               .num_sge = 1,
                               .opcode = WrOpcode::kRdmaWrite,
                               .send_flags = kSendSignaled,
                               .remote_addr = b.addr(),
                               .rkey = b.key}),
              0);
  }
  for (int i = 0; i < 16; ++i) {
    Cqe c;
    ASSERT_TRUE(wait_cqe(a, &c, 30)) << a.d->counters_text();
    ASSERT_EQ(c.status, WcStatus::kSuccess);
  }
  const std::string ta = a.d->counters_text(), tb = b.d->counters_text();
  std::printf("%s%s", ta.c_str(), tb.c_str());
  const uint64_t cnps_sent = b.d->runner().run([&] { return b.d->engine().counters().cnps_sent; });
  const uint64_t rx_ce = b.d->runner().run([&] { return b.d->engine().counters().rx_ce; });
  const uint64_t cnps_rx = a.d->runner().run([&] { return a.qp->counters_.cnps_received; });
  const uint64_t cuts = a.d->runner().run([&] { return a.qp->cc_.rp.counters().rate_cuts; });
  const double rate = a.d->runner().run([&] { return a.qp->cc_.rp.rate_gbps(); });
  EXPECT_GT(rx_ce, 100u);
  EXPECT_GT(cnps_sent, 0u);
  EXPECT_GT(cnps_rx, 0u);
  EXPECT_GT(cuts, 0u);
  EXPECT_LT(rate, 100.0);  // below the line rate it started at
  b.d->flush_capture();
  a.release();
  b.release();
  dev[0].reset();
  dev[1].reset();

  if (std::system("tshark --version >/dev/null 2>&1") != 0) {
    std::printf("tshark not installed: the capture decode check is skipped\n");
  } else {
    // tshark 4.0 (Debian 12) decodes the CNP's BTH -- opcode 129, BECN, destination QP -- but
    // has no name for the opcode ("Unknown (129)"): count them and check nothing is malformed.
    const std::string cmd = "tshark -n -r " + pcap +
                            " -Y 'infiniband.bth.opcode == 129' -T fields -e infiniband.bth.opcode"
                            " 2>/dev/null | wc -l";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[256] = {};
    ASSERT_TRUE(p && std::fgets(buf, sizeof buf, p));
    pclose(p);
    EXPECT_EQ(static_cast<uint64_t>(std::atoll(buf)), cnps_sent) << "CNPs in the capture";
    const std::string v = "tshark -n -r " + pcap + " -V 2>/dev/null | grep -c Malformed";
    p = popen(v.c_str(), "r");
    ASSERT_TRUE(p && std::fgets(buf, sizeof buf, p));
    pclose(p);
    EXPECT_EQ(std::atoi(buf), 0) << "malformed frames in the capture";
  }
  // scapy's RoCE layer knows the CNP: every opcode-0x81 frame is a CNP with BECN and its
  // 16-byte padding.
  const std::string py =
      "/usr/bin/python3 -c \"import sys\n"
      "from scapy.all import rdpcap\n"
      "from scapy.contrib.roce import BTH, CNPPadding\n"
      "c = [p for p in rdpcap(sys.argv[1]) if p.haslayer(BTH) and p[BTH].opcode == 0x81]\n"
      "ok = [p for p in c if p.haslayer(CNPPadding) and p[BTH].becn == 1]\n"
      "print(len(c), len(ok))\" " +
      pcap + " 2>/dev/null";
  FILE* p = popen(py.c_str(), "r");
  char line[128] = {};
  if (p && std::fgets(line, sizeof line, p)) {
    unsigned long total = 0, good = 0;
    ASSERT_EQ(std::sscanf(line, "%lu %lu", &total, &good), 2) << line;
    EXPECT_EQ(total, cnps_sent);
    EXPECT_EQ(good, total) << "CNPs scapy does not decode as CNP with BECN";
  } else {
    std::printf("python3-scapy not available: the CNP decode check is skipped\n");
  }
  if (p) pclose(p);
  std::remove(pcap.c_str());
}
}  // namespace
