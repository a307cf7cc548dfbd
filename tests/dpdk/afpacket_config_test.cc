// How DpdkPort sizes itself for net_af_packet, whose frame slots (framesz) bound both the frames
// it carries and the mbufs it accepts; and for net_tap, which enforces its MTU on transmit. Runs on
// the loopback interface of a network namespace of the test's own (unshare), so nothing outside the
// test is touched; needs root.
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <string>

#include "dpdk/dpdk_port.h"
#include "tests/dpdk/eal_environment.h"

namespace roce::dpdk {
namespace {

[[maybe_unused]] const ::testing::Environment* const kEal =
    ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment());

class AfPacket : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "AF_PACKET sockets need root (CAP_NET_RAW)";
    // A private network namespace for this thread: its "lo" is ours alone.
    if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "cannot create a network namespace";
  }
  PortConfig config(uint32_t mtu) {
    PortConfig c;
    c.mtu = mtu;
    c.promiscuous = false;
    c.num_mbufs = 1023;
    return c;
  }
};

TEST_F(AfPacket, RefusesAnMtuItsFrameSlotsCannotCarry) {
  std::string error;
  EXPECT_EQ(DpdkPort::open("net_af_packet0,iface=lo", config(4200), &error), nullptr);
  EXPECT_NE(error.find("framesz=2048 carries frames up to 2016 B"), std::string::npos) << error;
  EXPECT_NE(error.find("add blocksz=8192,framesz=8192,framecnt=512"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  // The failed open removed the device again: the name is free.
  auto port = DpdkPort::open("net_af_packet0,iface=lo", config(1500), &error);
  ASSERT_NE(port, nullptr) << error;
  EXPECT_GE(port->buffer_capacity(), 2016u);
}

// A slot of the default framesz=2048 carries 2016 bytes: mtu 2002 fills it exactly and opens;
// 2003 does not fit.
TEST_F(AfPacket, AnMtuWhoseFrameFillsASlotExactlyOpens) {
  std::string error;
  auto port = DpdkPort::open("net_af_packet0,iface=lo", config(2002), &error);
  ASSERT_NE(port, nullptr) << error;
  EXPECT_EQ(port->max_frame_len(), 2016u);
  port.reset();
  EXPECT_EQ(DpdkPort::open("net_af_packet0,iface=lo", config(2003), &error), nullptr);
  EXPECT_NE(error.find("framesz=2048 carries frames up to 2016 B"), std::string::npos) << error;
}

// Brings our namespace's "lo" up.
void lo_up() {
  const int ctl = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(ctl, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  ASSERT_EQ(ioctl(ctl, SIOCGIFFLAGS, &ifr), 0);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  ASSERT_EQ(ioctl(ctl, SIOCSIFFLAGS, &ifr), 0);
  close(ctl);
}

// Sends `n` broadcast frames on lo from a raw socket of its own.
void send_on_lo(int n) {
  const int tx = socket(AF_PACKET, SOCK_RAW, 0);  // protocol 0: sends, receives nothing
  ASSERT_GE(tx, 0);
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
  to.sll_halen = 6;
  std::array<uint8_t, 100> frame{};
  std::memset(frame.data(), 0xff, 6);  // broadcast
  frame[12] = 0x88;                    // EtherType 0x88b5 (local experimental)
  frame[13] = 0xb5;
  for (int i = 0; i < n; ++i) {
    frame[14] = static_cast<uint8_t>(i);
    ASSERT_EQ(
        sendto(tx, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
        static_cast<ssize_t>(frame.size()));
  }
  close(tx);
}

// Receives until the port's ring is empty; returns the frames received.
uint64_t drain(DpdkPort& port) {
  std::array<PktBuf, 32> bufs;
  uint64_t received = 0;
  while (const uint16_t n = port.rx_burst(bufs.data(), static_cast<uint16_t>(bufs.size()))) {
    received += n;
    port.free(bufs.data(), n);
  }
  return received;
}

// The kernel drops what arrives while a packet socket's ring is full; the PMD's statistics do
// not count those drops, eth_stats() does (ring_drops, and in imissed).
TEST_F(AfPacket, CountsTheFramesTheKernelDropsWhenItsRingIsFull) {
  lo_up();
  std::string error;
  constexpr uint32_t kSlots = 64;  // framecnt: frames the ring holds
  auto port = DpdkPort::open("net_af_packet0,iface=lo,framecnt=" + std::to_string(kSlots),
                             config(1500), &error);
  ASSERT_NE(port, nullptr) << error;
  EthStats es;
  ASSERT_TRUE(port->eth_stats(&es, &error)) << error;
  EXPECT_EQ(es.ring_drops, 0u);

  constexpr int kSent = 500;  // nothing polls the port meanwhile
  send_on_lo(kSent);

  ASSERT_TRUE(port->eth_stats(&es, &error)) << error;
  // On lo the port's socket sees each frame twice, as it leaves and as it comes back. The ring
  // took at most kSlots of those; the kernel dropped the rest.
  constexpr uint64_t kArrived = 2 * kSent;
  EXPECT_GE(es.ring_drops, kArrived - kSlots);
  EXPECT_GE(es.imissed, es.ring_drops);
  // Reading the kernel's count resets it: the port keeps the total.
  EthStats again;
  ASSERT_TRUE(port->eth_stats(&again, &error)) << error;
  EXPECT_EQ(again.ring_drops, es.ring_drops);

  // What the ring holds is what was not dropped.
  const uint64_t received = drain(*port);
  EXPECT_GT(received, 0u);
  EXPECT_LE(received, kSlots);
  EXPECT_EQ(received + es.ring_drops, kArrived);

  // The PMD closes its sockets when the port stops: the total stays, read no more.
  EXPECT_EQ(port->ring_sockets(), 1u);
  port->stop();
  EXPECT_EQ(port->ring_sockets(), 0u);
  ASSERT_TRUE(port->eth_stats(&again, &error)) << error;
  EXPECT_EQ(again.ring_drops, es.ring_drops);
}

// Two ports on one interface: each reads its own socket, not the other's too (a socket read by
// two ports would have its drops counted twice, or lost to the other's reset).
TEST_F(AfPacket, TwoPortsOnOneInterfaceReadTheirOwnSockets) {
  lo_up();
  std::string error;
  auto a = DpdkPort::open("net_af_packet0,iface=lo,framecnt=64", config(1500), &error);
  ASSERT_NE(a, nullptr) << error;
  auto b = DpdkPort::open("net_af_packet1,iface=lo,framecnt=64", config(1500), &error);
  ASSERT_NE(b, nullptr) << error;
  EXPECT_EQ(a->ring_sockets(), 1u);  // one queue pair each
  EXPECT_EQ(b->ring_sockets(), 1u);
  constexpr int kSent = 500;
  send_on_lo(kSent);
  EthStats sa, sb;
  ASSERT_TRUE(a->eth_stats(&sa, &error)) << error;
  ASSERT_TRUE(b->eth_stats(&sb, &error)) << error;
  // The PMD puts the sockets of one process and interface in one fanout group: each of the
  // 1,000 arrivals (see above) lands in one of the two rings, received or dropped there.
  EXPECT_EQ(drain(*a) + sa.ring_drops + drain(*b) + sb.ring_drops, 2u * kSent);
}

// A port whose set-up fails after it found its socket lets it go: the next port, whose socket
// gets the freed descriptor number, reads its own.
TEST_F(AfPacket, AFailedOpenLetsItsSocketGo) {
  std::string error;
  PortConfig bad = config(1500);
  bad.mbuf_data_size = 1000;  // below the 2016-byte slot: refused after the probe
  EXPECT_EQ(DpdkPort::open("net_af_packet0,iface=lo", bad, &error), nullptr);
  EXPECT_NE(error.find("mbuf_data_size 1000"), std::string::npos) << error;
  auto port = DpdkPort::open("net_af_packet0,iface=lo", config(1500), &error);
  ASSERT_NE(port, nullptr) << error;
  EXPECT_EQ(port->ring_sockets(), 1u);
}

// So does a port that ran and closed: the PMD closes its socket when the port stops, and the
// next port's socket, likely under the same descriptor number, is that port's to read.
TEST_F(AfPacket, AClosedPortLetsItsSocketGo) {
  std::string error;
  for (int round = 0; round < 3; ++round) {
    auto port = DpdkPort::open("net_af_packet0,iface=lo", config(1500), &error);
    ASSERT_NE(port, nullptr) << "round " << round << ": " << error;
    EXPECT_EQ(port->ring_sockets(), 1u) << "round " << round;
  }
}

TEST_F(AfPacket, SizesMbufsForItsFrameSlots) {
  std::string error;
  auto port = DpdkPort::open("net_af_packet0,iface=lo,blocksz=8192,framesz=8192,framecnt=512",
                             config(4200), &error);
  ASSERT_NE(port, nullptr) << error;
  EXPECT_EQ(port->driver(), "net_af_packet");
  EXPECT_EQ(port->max_frame_len(), 4214u);
  // rx queue setup wants a whole slot (8192 - 32) of data room...
  EXPECT_GE(port->buffer_capacity(), 8160u);
  // ...and ethdev caps the configured MTU at the 1518-byte frame the driver reports, which it
  // exceeds in practice (frames up to the slot size pass).
  EXPECT_EQ(port->device_mtu(), 1500u);
}

// net_tap refuses to transmit frames above its 1522-byte limit, so a larger mtu is refused at
// open, in one line that says what to use; 1500 opens.
TEST_F(AfPacket, TapRefusesAnMtuItWouldNotTransmit) {
  if (access("/dev/net/tun", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/net/tun";
  std::string error;
  EXPECT_EQ(DpdkPort::open("net_tap0,iface=rtest0", config(4200), &error), nullptr);
  EXPECT_NE(error.find("mtu 4200 exceeds net_tap's maximum of"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  auto port = DpdkPort::open("net_tap0,iface=rtest0", config(1500), &error);
  ASSERT_NE(port, nullptr) << error;
  EXPECT_EQ(port->driver(), "net_tap");
}

}  // namespace
}  // namespace roce::dpdk
