// How DpdkPort sizes itself for net_af_packet, whose frame slots (framesz) bound both the frames
// it carries and the mbufs it accepts; and for net_tap, which enforces its MTU on transmit. Runs on
// the loopback interface of a network namespace of the test's own (unshare), so nothing outside the
// test is touched; needs root.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

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
