// Two devices in one process, on the two ends of a veth pair in a network namespace of the
// test's own (unshare), over net_af_packet: neighbour resolution by ARP / ND, then RDMA WRITE,
// READ, SEND and atomics through two engine threads, data verified; IPv4 and IPv6 GIDs.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "device_pair.h"
#include "dpdk/device.h"
#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "stack/core/counters_format.h"

namespace {
using namespace roce;
using roce::dpdk::Device;
using namespace roce::test;

class DeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = private_veth_pair();
    if (!skip_.empty()) return;
    std::string err;
    for (int i = 0; i < 2; ++i) {
      dev_[i] = Device::open(veth_device(i), &err).release();
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

namespace {

// A memif server's link stays down until a client connects: wait_link_up gives up after its
// timeout, and succeeds once the client (here in the same process) has connected. The link
// counts as lost only once it was up and went down: not while the server waits for its first
// client, and after the client leaves.
TEST(DeviceLink, MemifWaitLinkUpTimesOutAloneAndSucceedsWithAPeer) {
  const std::string sock = ::testing::TempDir() + "roce-devlink-" + std::to_string(getpid());
  std::remove(sock.c_str());
  std::string err;
  std::unique_ptr<Device> server = Device::open(memif_device(0, sock), &err);
  ASSERT_TRUE(server) << err;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(server->wait_link_up(std::chrono::milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_FALSE(server->link_up());
  EXPECT_FALSE(server->link_lost());

  std::unique_ptr<Device> client = Device::open(memif_device(1, sock), &err);
  ASSERT_TRUE(client) << err;
  EXPECT_TRUE(client->wait_link_up(std::chrono::seconds(10)));
  EXPECT_TRUE(server->wait_link_up(std::chrono::seconds(10)));
  EXPECT_TRUE(server->link_up());
  EXPECT_FALSE(server->link_lost());
  EXPECT_FALSE(client->link_lost());
  // Both engines stop before either port does. A stopping memif port makes the interrupt
  // thread unmap the shared regions, and with both devices in this process the server's engine
  // thread (prefaulting at link-up every memif region it finds in /proc/self/maps, the
  // client's included, or polling) touched them: SIGSEGV in 7 of 60 runs.
  server->runner().stop();
  client->runner().stop();
  client.reset();
  // The server's side of the link comes down on EAL's interrupt thread: its port stops once
  // that has begun (and DpdkPort::stop waits for it to end). Stopped at once, under it, the
  // process crashed in 45 of 150 runs on a loaded machine.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server->link_up() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(server->link_up());
  EXPECT_TRUE(server->link_lost());
  server.reset();
  std::remove(sock.c_str());
}

// The virtio PMD, the one cloud VMs' NICs run, over vhost-user (net_virtio_user facing
// net_vhost, both in this process; nothing leaves it): neighbour resolution, then RDMA WRITE,
// READ and SEND of 1 MiB verified at MTU 4096. virtio counts a VLAN tag and its 12-byte net
// header on top of the MTU and refuses an rx queue whose buffers cannot hold that: the port
// sizes its mbufs from what the driver reports (without it: "rx queue setup: Invalid argument").
TEST(DeviceLink, VirtioUserOverVhostUserCarriesVerifiedRdma) {
  const std::string sock = ::testing::TempDir() + "roce-vhost-" + std::to_string(getpid());
  std::remove(sock.c_str());
  auto config = [&](int i) {
    DeviceConfig c;
    std::string err;
    c.name = i ? "vB" : "vA";
    c.port = i ? "net_virtio_user0,queues=1,path=" + sock : "net_vhost0,queues=1,iface=" + sock;
    c.mtu = 4200;
    apply_setting(c, "ipv4", i ? "10.11.0.2/24" : "10.11.0.1/24", &err);
    c.mac = Mac{0x02, 0, 0, 0, 0x0b, static_cast<uint8_t>(i + 1)};
    return c;
  };
  std::string err;
  std::unique_ptr<Device> host = Device::open(config(0), &err);
  ASSERT_TRUE(host) << err;
  std::unique_ptr<Device> guest = Device::open(config(1), &err);
  ASSERT_TRUE(guest) << err;
  ASSERT_TRUE(guest->wait_link_up(std::chrono::seconds(10)));
  ASSERT_TRUE(host->wait_link_up(std::chrono::seconds(10)));
  {
    Side a{guest.get()}, b{host.get()};
    ASSERT_TRUE(setup_side(a, 3 << 20));
    ASSERT_TRUE(setup_side(b, 3 << 20));
    ASSERT_EQ(connect_side(a, b, 1, Mtu::k4096), 0);
    ASSERT_EQ(connect_side(b, a, 1, Mtu::k4096), 0);
    transfer_and_verify(a, b, "virtio_user -> vhost");
  }
  guest->runner().stop();
  host->runner().stop();
  guest.reset();
  host.reset();
  std::remove(sock.c_str());
}

std::string read_file(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// Key `counters`: the device writes its counters (port, engine thread, driver, neighbour) to the
// file when it closes; over net_null, which delivers a stream of frames that are not RoCE.
TEST(DeviceCounters, WrittenToTheConfiguredFileWhenTheDeviceCloses) {
  const std::string path = ::testing::TempDir() + "roce-counters-" + std::to_string(getpid());
  std::remove(path.c_str());
  for (const bool inline_mode : {false, true}) {
    SCOPED_TRACE(inline_mode ? "inline" : "threaded");
    DeviceConfig cfg;
    std::string err;
    ASSERT_TRUE(parse_device_string(std::string("port=net_null") + (inline_mode ? "31" : "30") +
                                        "; ipv4=192.0.2.1/24; counters=" + path +
                                        (inline_mode ? "; mode=inline" : ""),
                                    &cfg, &err))
        << err;
    std::unique_ptr<Device> d = Device::open(cfg, &err);
    ASSERT_TRUE(d) << err;
    for (int i = 0; i < 50 && d->engine().counters().rx_frames == 0; ++i) {
      if (inline_mode) d->runner().poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(read_file(path), "") << "written before the device closed";
    d.reset();
    const std::string text = read_file(path);
    EXPECT_NE(text.find("device roce0 (net_null"), std::string::npos) << text;
    EXPECT_NE(text.find("rx_not_roce (to neighbour)"), std::string::npos) << text;
    EXPECT_NE(text.find("driver:"), std::string::npos) << text;
    // The engine thread's polls and sleeps; an inline device has no engine thread.
    EXPECT_EQ(text.find("engine thread:\n  polls") != std::string::npos, !inline_mode) << text;
    std::remove(path.c_str());
  }
}

// DCQCN's line rate is a NIC's link speed, but not a virtual device's nominal one (net_null says
// 10 Gb/s), which keeps DeviceConfig::kLineGbps; cc_params' line_gbps wins over both. (No NIC
// here: line_gbps_for is what a NIC's open and the engine's timer take the link's rate from.)
TEST(DeviceLineRate, TheLinksSpeedOnANicNotAVirtualDevicesNominalOne) {
  EXPECT_EQ(Device::line_gbps_for(false, 25'000), 25);
  EXPECT_EQ(Device::line_gbps_for(false, 0), DeviceConfig::kLineGbps);  // down or unknown
  EXPECT_EQ(Device::line_gbps_for(true, 10'000), DeviceConfig::kLineGbps);
  for (const char* extra : {"", "; cc_params=line_gbps=40"}) {
    SCOPED_TRACE(extra);
    DeviceConfig cfg;
    std::string err;
    ASSERT_TRUE(parse_device_string(
        std::string("port=net_null40; ipv4=192.0.2.1/24; cc=dcqcn") + extra, &cfg, &err))
        << err;
    std::unique_ptr<Device> d = Device::open(cfg, &err);
    ASSERT_TRUE(d) << err;
    const double want = *extra ? 40 : DeviceConfig::kLineGbps;
    EXPECT_EQ(d->link_speed_mbps(), 10'000u);
    EXPECT_EQ(d->runner().run([&] { return d->engine().line_rate_gbps(); }), want);
    const std::string text = d->counters_text();
    EXPECT_NE(text.find("link 10000 Mb/s (nominal: a vdev), dcqcn line rate " +
                        std::string(*extra ? "40" : "100") + " Gb/s\n"),
              std::string::npos)
        << text;
  }
}

// counters=- means standard error: the counters appear there when the device closes (and no
// file named "-" is made).
TEST(DeviceCounters, ADashMeansStandardError) {
  DeviceConfig cfg;
  std::string err;
  ASSERT_TRUE(parse_device_string("port=net_null33; ipv4=192.0.2.1/24; counters=-", &cfg, &err))
      << err;
  std::unique_ptr<Device> d = Device::open(cfg, &err);
  ASSERT_TRUE(d) << err;
  ::testing::internal::CaptureStderr();
  d.reset();
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(text.find("device roce0 (net_null33"), std::string::npos) << text;
  EXPECT_NE(text.find("driver:"), std::string::npos) << text;
  EXPECT_NE(access("-", F_OK), 0) << "a file named '-' was written";
  std::remove("-");
}

// Key `mtu` sizes the port: its largest frame is mtu + 14.
TEST(DeviceConfigOverDpdk, TheMtuSizesThePort) {
  DeviceConfig cfg;
  std::string err;
  ASSERT_TRUE(parse_device_string("port=net_null34; ipv4=192.0.2.1/24; mtu=1500", &cfg, &err))
      << err;
  std::unique_ptr<Device> d = Device::open(cfg, &err);
  ASSERT_TRUE(d) << err;
  EXPECT_EQ(d->max_frame_len(), 1514u);
}

// The mtu counts the IP datagram, as a Linux VLAN interface's does: with `vlan` the port takes
// frames 4 bytes longer (the tag), so the RoCE path MTU is the one the same mtu gives untagged.
// It used to be mtu + 14 whatever the tag: at mtu 1108 an untagged device offered 1024 and a
// tagged one 512, and an IP datagram of the full mtu from a tagged peer was dropped.
TEST(DeviceConfigOverDpdk, AVlanTagComesOnTopOfTheMtu) {
  std::string err;
  for (const bool vlan : {false, true}) {
    SCOPED_TRACE(vlan ? "vlan=100" : "untagged");
    DeviceConfig cfg;
    const std::string port = vlan ? "port=net_null43" : "port=net_null44";
    ASSERT_TRUE(parse_device_string(
        port + "; ipv4=192.0.2.1/24; mtu=1108" + (vlan ? "; vlan=100" : ""), &cfg, &err))
        << err;
    std::unique_ptr<Device> d = Device::open(cfg, &err);
    ASSERT_TRUE(d) << err;
    EXPECT_EQ(d->max_frame_len(), vlan ? 1126u : 1122u);
    EXPECT_EQ(d->active_mtu(), Mtu::k1024);
  }
}

// EAL starts once per process, with the first device's eal arguments. A later device with eal
// arguments EAL was not started with fails its open, naming them; it used to run without them
// (a second memif device's --single-file-segments, needed for zero-copy, silently lost).
TEST(DeviceEal, ALaterDevicesEalArgumentsMustBeOnesEalRunsWith) {
  DeviceConfig cfg;
  std::string err;
  ASSERT_TRUE(parse_device_string("port=net_null40; ipv4=192.0.2.1/24", &cfg, &err)) << err;
  std::unique_ptr<Device> first = Device::open(cfg, &err);
  ASSERT_TRUE(first) << err;
  ASSERT_GE(dpdk::Eal::args().size(), 2u);
  DeviceConfig other;
  ASSERT_TRUE(parse_device_string(
      "name=second; port=net_null41; ipv4=192.0.2.2/24; eal=--single-file-segments", &other, &err))
      << err;
  EXPECT_FALSE(Device::open(other, &err));
  EXPECT_EQ(err,
            "second: eal: '--single-file-segments' cannot take effect: EAL already runs in this "
            "process, started by an earlier device without it (give the first device opened "
            "these eal arguments)");
  DeviceConfig same;
  ASSERT_TRUE(parse_device_string("name=third; port=net_null42; ipv4=192.0.2.3/24", &same, &err))
      << err;
  same.eal_args = {dpdk::Eal::args()[1]};  // one it runs with
  std::unique_ptr<Device> third = Device::open(same, &err);
  EXPECT_TRUE(third) << err;
}

// A capture file is written out about once a second while the device runs, so that it can be
// read (tshark -r) during a run and a process that is killed leaves its frames up to a second
// before; it was written only once 1 MiB of frames had gathered, or at close.
TEST(DeviceCapture, TheFileIsWrittenWhileTheDeviceRuns) {
  const std::string path = ::testing::TempDir() + "roce-capture-" + std::to_string(getpid());
  DeviceConfig ca, cb;
  std::string err;
  ASSERT_TRUE(parse_device_string("name=a; port=net_null50; ipv4=192.0.2.1/24; pcap=" + path +
                                      "; neighbor=192.0.2.2 02:00:00:00:00:02",
                                  &ca, &err))
      << err;
  ASSERT_TRUE(parse_device_string("name=b; port=net_null51; ipv4=192.0.2.2/24", &cb, &err)) << err;
  std::unique_ptr<Device> da = Device::open(ca, &err);
  ASSERT_TRUE(da) << err;
  std::unique_ptr<Device> db = Device::open(cb, &err);
  ASSERT_TRUE(db) << err;
  Side a{da.get()}, b{db.get()};
  ASSERT_TRUE(setup_side(a, 4096));
  ASSERT_TRUE(setup_side(b, 4096));
  ASSERT_EQ(connect_side(a, b, 1, Mtu::k1024), 0);
  Sge sge{a.addr(), 64, a.key};
  SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.remote_addr = 0x1000;
  wr.rkey = 1;
  ASSERT_EQ(a.qp->post_send(wr), 0);  // sent into net_null: never acknowledged, retried
  struct stat st {};
  for (int i = 0; i < 300 && (stat(path.c_str(), &st) != 0 || st.st_size <= 24); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(st.st_size, 24) << "nothing but at most the file header within 3 s";
  a.release();
  b.release();
  da.reset();
  db.reset();
  std::remove(path.c_str());
}

// A counters file that cannot be written fails the open, not the close, and names it.
TEST(DeviceCounters, AnUnwritableFileFailsTheOpen) {
  DeviceConfig cfg;
  std::string err;
  ASSERT_TRUE(parse_device_string(
      "port=net_null32; ipv4=192.0.2.1/24; counters=/nonexistent-dir/counters.txt", &cfg, &err))
      << err;
  EXPECT_FALSE(Device::open(cfg, &err));
  EXPECT_EQ(err,
            "roce0: counters: cannot open '/nonexistent-dir/counters.txt': No such file or "
            "directory");
}

// An open that fails after the counters file was created (here at the port) leaves no empty file.
TEST(DeviceCounters, AFailedOpenLeavesNoFile) {
  const std::string path = ::testing::TempDir() + "roce-counters-fail-" + std::to_string(getpid());
  DeviceConfig cfg;
  std::string err;
  ASSERT_TRUE(parse_device_string("port=net_nosuchdriver0; ipv4=192.0.2.1/24; counters=" + path,
                                  &cfg, &err))
      << err;
  EXPECT_FALSE(Device::open(cfg, &err));
  EXPECT_NE(err.find("roce0: "), std::string::npos) << err;
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " was left behind";
}

// A memif buffer smaller than the largest frame would make frames span ring slots, which the
// driver mishandles when its ring fills: open() refuses it and names the fix.
TEST(DeviceLink, MemifBufferSmallerThanTheFrameIsRefused) {
  std::string err;
  ASSERT_TRUE(roce::dpdk::Eal::init(roce::dpdk::EalOptions{}, &err)) << err;
  const std::string sock = ::testing::TempDir() + "roce-bsize-" + std::to_string(getpid());
  roce::dpdk::PortConfig pc;
  pc.mtu = 4200;
  auto port = roce::dpdk::DpdkPort::open(
      "net_memif20,role=server,socket=" + sock + ",socket-abstract=no,bsize=2048", pc, &err);
  EXPECT_FALSE(port);
  EXPECT_NE(err.find("bsize=2048"), std::string::npos) << err;
  EXPECT_NE(err.find("bsize=4224"), std::string::npos) << err;
  std::remove(sock.c_str());
}

// A memif buffer exactly as large as the largest frame holds it in one slot: accepted.
TEST(DeviceLink, MemifBufferThatHoldsTheFrameExactlyIsAccepted) {
  std::string err;
  ASSERT_TRUE(roce::dpdk::Eal::init(roce::dpdk::EalOptions{}, &err)) << err;
  const std::string sock = ::testing::TempDir() + "roce-bsize-exact-" + std::to_string(getpid());
  roce::dpdk::PortConfig pc;
  pc.mtu = 1522;  // frames up to 1536 B
  pc.num_mbufs = 1023;
  auto port = roce::dpdk::DpdkPort::open(
      "net_memif21,role=server,socket=" + sock + ",socket-abstract=no,bsize=1536", pc, &err);
  ASSERT_TRUE(port) << err;
  EXPECT_EQ(port->max_frame_len(), 1536u);
  port.reset();
  std::remove(sock.c_str());
}

}  // namespace
