// Device, port and GID choice (device.h), on two devices of the stack's libibverbs configured
// for this process: "v4" (an IPv4 and a global IPv6 address) and "v6" (a global IPv6 address
// only), both net_null ports that receive nothing.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "collectives/device.h"
#include "collectives/error.h"

namespace roce::coll {
namespace {

class DeviceChoice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char path[] = "/tmp/roce-coll-devices-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    std::ofstream f(path);
    f << "[device v4]\nport = net_null0,no-rx=1\nipv4 = 10.88.0.1/24\nipv6 = fd88::1/64\n"
      << "[device v6]\nport = net_null1,no-rx=1\nipv6 = fd89::1/64\n";
    f.close();
    setenv("ROCE_CONFIG", path, 1);
    unsetenv("ROCE_DEVICE");
    config_ = path;
  }
  static void TearDownTestSuite() { unlink(config_.c_str()); }
  static std::string error_of(const CommOptions& o) {
    try {
      Device d(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  static inline std::string config_;
};

TEST_F(DeviceChoice, TheFirstActiveDeviceAndItsIpv4MappedGid) {
  Device d(CommOptions{});
  EXPECT_EQ(d.name(), "v4");
  EXPECT_EQ(d.port(), 1);
  EXPECT_EQ(d.gid_index(), 1);  // 0 is link-local, 1 the IPv4-mapped one
  EXPECT_EQ(gid_to_string(d.gid()), "::ffff:10.88.0.1");
  EXPECT_EQ(d.describe(), "v4 port 1 GID 1 ::ffff:10.88.0.1 MTU 1024");
}

TEST_F(DeviceChoice, AGlobalIpv6GidWhenThereIsNoIpv4) {
  CommOptions o;
  o.device = "v6";
  Device d(o);
  EXPECT_EQ(gid_to_string(d.gid()), "fd89::1");
}

TEST_F(DeviceChoice, LinkLocalOnlyWhenAsked) {
  CommOptions o;
  o.gid_index = 0;
  Device d(o);
  EXPECT_EQ(gid_to_string(d.gid()).rfind("fe80::", 0), 0u) << gid_to_string(d.gid());
}

TEST_F(DeviceChoice, UnknownDeviceOrPortOrGidIsNamed) {
  CommOptions o;
  o.device = "mlx5_0";
  EXPECT_EQ(error_of(o), "ROCE_COLL_DEVICE='mlx5_0': no such device (there are: v4, v6)");
  o = CommOptions{};
  o.port = 2;
  EXPECT_EQ(error_of(o), "ROCE_COLL_PORT=2: no device has that port ACTIVE (devices: v4, v6)");
  o.device = "v6";
  EXPECT_EQ(error_of(o), "ROCE_COLL_PORT=2: port is not ACTIVE on v6");
  o = CommOptions{};
  o.gid_index = 9;
  EXPECT_EQ(error_of(o), "ROCE_COLL_GID_INDEX=9: no such GID on v4 port 1");
}

}  // namespace
}  // namespace roce::coll
