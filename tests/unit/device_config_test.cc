// Device configuration from the user (stack/device_config.h): every invalid value is refused
// with one line that names the key and the value, and what is accepted is what was written.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "stack/device_config.h"

namespace roce {
namespace {

// The error of one key = value, "" if it was accepted.
std::string refusal(const std::string& key, const std::string& value) {
  DeviceConfig c;
  std::string err;
  return apply_setting(c, key, value, &err) ? "" : err;
}

TEST(DeviceConfig, FractionsRefuseWhatIsNotANumberInRange) {
  for (const char* v : {"nan", "NAN", "-nan", "inf", "-inf", "1", "-0.1", "0.5x", ""}) {
    EXPECT_NE(refusal("drop", v), "") << v;
  }
  for (const char* v : {"nan", "-nan", "inf", "1.5", ""}) EXPECT_NE(refusal("ce", v), "") << v;
  EXPECT_EQ(refusal("drop", "0.01"), "");
  EXPECT_EQ(refusal("ce", "1"), "");
}

TEST(DeviceConfig, MacAddressesAreSixHexGroupsAndNothingElse) {
  for (const char* v : {"-1:2:3:4:5:6", "+2:00:00:00:00:01", "02:00:00:00:00:01:", "02:00:00:00:00",
                        "02:00:00:00:00:0x", "02:00:00:00:00:001", "0x2:0:0:0:0:1",
                        "02: 0:00:00:00:01", "02:00:00:00:00:01 x"}) {
    EXPECT_NE(refusal("mac", v), "") << v;
  }
  DeviceConfig c;
  std::string err;
  ASSERT_TRUE(apply_setting(c, "mac", "2:0:aB:00:0:ff", &err)) << err;
  EXPECT_EQ(format_mac(*c.mac), "02:00:ab:00:00:ff");
}

TEST(DeviceConfig, AnIpv4MappedAddressIsNotAnIpv6One) {
  EXPECT_NE(refusal("ipv6", "::ffff:10.0.0.1"), "");
  EXPECT_NE(refusal("ipv6", "::ffff:10.0.0.1/64"), "");
  EXPECT_EQ(refusal("ipv6", "fd00::1/64"), "");
  EXPECT_EQ(refusal("ipv4", "10.0.0.1/24"), "");
}

// Our own MAC and addresses must be ones a station can have: the all-zero MAC is no station's
// (Linux refuses it for an interface; peers drop frames from it), and an unspecified, loopback
// or multicast address, or IPv4 0/8 and 240/4, is no host's (Linux refuses such IPv6 addresses;
// peers, this stack's neighbour agent among them, take such senders for martians).
TEST(DeviceConfig, OurMacAndAddressesAreAStationsOwn) {
  EXPECT_NE(refusal("mac", "00:00:00:00:00:00"), "");
  EXPECT_NE(refusal("mac", "0:0:0:0:0:0"), "");
  for (const char* v : {"0.0.0.0", "0.1.2.3/8", "127.0.0.1/8", "224.0.0.1", "239.1.2.3/24",
                        "240.0.0.1/4", "255.255.255.255"}) {
    const std::string err = refusal("ipv4", v);
    EXPECT_NE(err, "") << v;
    EXPECT_NE(err.find(v), std::string::npos) << err;
  }
  for (const char* v : {"::", "::/64", "::1", "::1/128", "ff02::1", "ff05::2/64"}) {
    const std::string err = refusal("ipv6", v);
    EXPECT_NE(err, "") << v;
    EXPECT_NE(err.find(v), std::string::npos) << err;
  }
  EXPECT_EQ(refusal("mac", "02:00:00:00:00:00"), "");
  for (const char* v : {"1.0.0.1/8", "10.0.0.1/24", "126.255.255.254", "223.255.255.1"}) {
    EXPECT_EQ(refusal("ipv4", v), "") << v;
  }
  for (const char* v : {"fe80::1/64", "fd00::1", "2001:db8::1/48", "::2"}) {
    EXPECT_EQ(refusal("ipv6", v), "") << v;
  }
}

TEST(DeviceConfig, AStaticNeighbourIsAnAddressAndAMacAndNothingMore) {
  EXPECT_EQ(refusal("neighbor", "10.0.0.2 02:00:00:00:00:02"), "");
  EXPECT_NE(refusal("neighbor", "10.0.0.2 02:00:00:00:00:02 extra"), "");
  EXPECT_NE(refusal("neighbor", "10.0.0.2"), "");
}

// ROCE_DEVICE may hold anything: a value with a newline or another control character still
// gives one line, with the character written out.
TEST(DeviceConfig, AnErrorIsOneLineWhateverTheValueHolds) {
  DeviceConfig c;
  std::string err;
  ASSERT_FALSE(parse_device_string("port=x; mtu=15\n00", &c, &err));
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_NE(err.find("mtu: '15\\n00'"), std::string::npos) << err;
  err.clear();
  ASSERT_FALSE(parse_device_string(std::string("vlan=1\x01"), &c, &err));
  EXPECT_NE(err.find("'1\\x01'"), std::string::npos) << err;
}

TEST(DeviceConfig, ADeviceNameIsPrintableWithoutSpacesOrSlashes) {
  for (const char* v : {"a b", "a/b", "a\tb", "a\nb", "a\x01", "\x7f"}) {
    EXPECT_NE(refusal("name", v), "") << v;
  }
  EXPECT_NE(refusal("name", std::string("a\0b", 3)), "");
  EXPECT_EQ(refusal("name", "roce_0-A.1"), "");
}

TEST(DeviceConfig, AFileNamesTheLineOfItsFirstError) {
  std::vector<DeviceConfig> devs;
  std::string err;
  EXPECT_FALSE(parse_config_text("[device a]\nport = x\n\n# note\nmtu = 5\n", &devs, &err));
  EXPECT_EQ(err.rfind("line 5: mtu: '5' is not", 0), 0u) << err;
  devs.clear();
  ASSERT_TRUE(
      parse_config_text("[device a]\nport = x # the port\nipv4 = 10.1.0.1\n[device b]\n"
                        "port = y\nipv6 = fd00::2/48\n",
                        &devs, &err))
      << err;
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].name, "a");
  EXPECT_EQ(devs[0].port, "x");
  EXPECT_EQ(devs[1].ipv6.at(0).prefix_len, 48);
  EXPECT_TRUE(validate(devs[0], &err)) << err;
}

// IPv6 needs links of 1280 bytes or more (RFC 8200 5): an IPv6 address on a device whose MTU is
// smaller is refused, naming both; IPv4 alone may use any MTU from 576.
TEST(DeviceConfig, AnIpv6AddressNeedsAnMtuOf1280) {
  DeviceConfig c;
  std::string err;
  ASSERT_TRUE(parse_device_string("name=d;port=x;ipv6=fd00::1;mtu=1279", &c, &err)) << err;
  EXPECT_FALSE(validate(c, &err));
  EXPECT_EQ(err, "d: mtu 1279 is below IPv6's minimum of 1280 (RFC 8200), and ipv6 is set");
  c = DeviceConfig{};
  ASSERT_TRUE(parse_device_string("name=d;port=x;ipv6=fd00::1;mtu=1280", &c, &err)) << err;
  EXPECT_TRUE(validate(c, &err)) << err;
  c = DeviceConfig{};
  ASSERT_TRUE(parse_device_string("name=d;port=x;ipv4=10.0.0.1;mtu=576", &c, &err)) << err;
  EXPECT_TRUE(validate(c, &err)) << err;
}

// cc_params (DCQCN overrides on top of cc_profile) are checked with the rest of the
// configuration, so a tool refuses them before it opens anything; a device checked them only
// when it opened. The profile given anywhere in the configuration applies.
TEST(DeviceConfig, DcqcnOverridesAreCheckedWithTheConfiguration) {
  DeviceConfig c;
  std::string err;
  ASSERT_TRUE(parse_device_string("name=d;port=x;ipv4=10.0.0.1;cc_params=bogus=1", &c, &err))
      << err;
  EXPECT_FALSE(validate(c, &err));
  EXPECT_EQ(err.rfind("d: cc_params: dcqcn: ", 0), 0u) << err;
  c = DeviceConfig{};
  ASSERT_TRUE(parse_device_string("name=d;port=x;ipv4=10.0.0.1;cc_params=g=2", &c, &err)) << err;
  EXPECT_FALSE(validate(c, &err));
  c = DeviceConfig{};
  ASSERT_TRUE(parse_device_string(
      "name=d;port=x;ipv4=10.0.0.1;cc_params=g=0.01,rai_mbps=10;cc_profile=connectx", &c, &err))
      << err;
  EXPECT_TRUE(validate(c, &err)) << err;
  cc::DcqcnParams p;
  ASSERT_TRUE(c.dcqcn_params(&p, &err)) << err;
  EXPECT_EQ(p.g, 0.01);
  EXPECT_EQ(p.rai_gbps, 0.01);
}

// DCQCN's line rate: the link's speed where the device knows it (the caller passes it), unless
// cc_params gives line_gbps; overrides that do not fit under the link's rate are refused.
TEST(DeviceConfig, DcqcnLineRateIsTheLinksUnlessCcParamsGivesIt) {
  DeviceConfig c;
  std::string err;
  cc::DcqcnParams p;
  ASSERT_TRUE(c.dcqcn_params(&p, &err)) << err;
  EXPECT_EQ(p.line_gbps, DeviceConfig::kLineGbps);
  ASSERT_TRUE(c.dcqcn_params(&p, &err, 25)) << err;
  EXPECT_EQ(p.line_gbps, 25);
  c.cc_params = "line_gbps=40";
  ASSERT_TRUE(c.dcqcn_params(&p, &err, 25)) << err;
  EXPECT_EQ(p.line_gbps, 40);
  c.cc_params = "first_cnp_rate_gbps=50";
  ASSERT_TRUE(c.dcqcn_params(&p, &err)) << err;
  EXPECT_FALSE(c.dcqcn_params(&p, &err, 25));
  EXPECT_EQ(err.rfind("cc_params: dcqcn: first_cnp_rate_gbps=50 out of range", 0), 0u) << err;
}

// A section header is "[device]" or "[device NAME]": "[devicefoo]" is not a device "foo".
TEST(DeviceConfig, ASectionHeaderIsDeviceThenItsName) {
  for (const char* text :
       {"[devicefoo]\nport = x\n", "[device_a]\nport = x\n", "[devices b]\nport = x\n"}) {
    std::vector<DeviceConfig> devs;
    std::string err;
    EXPECT_FALSE(parse_config_text(text, &devs, &err)) << text;
    EXPECT_EQ(err.rfind("line 1: expected [device NAME]", 0), 0u) << err;
  }
  std::vector<DeviceConfig> devs;
  std::string err;
  ASSERT_TRUE(parse_config_text("[device]\nport = x\n[device\tb]\nport = y\n", &devs, &err)) << err;
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].name, "roce0");
  EXPECT_EQ(devs[1].name, "b");
}

// Each device is one ibv device, found by its name: two sections of one name would leave one of
// them silently unused (the later configuration replaces the earlier).
TEST(DeviceConfig, TwoDevicesOfOneNameAreRefused) {
  const struct {
    const char* text;
    const char* err;
  } cases[] = {
      {"[device a]\nport = x\n[device a]\nport = y\n",
       "line 3: name: 'a' is already the name of the device of line 1"},
      {"[device]\nport = x\n[device]\nport = y\n",  // both roce0
       "line 3: name: 'roce0' is already the name of the device of line 1"},
      {"port = x\n[device b]\nport = y\nname = roce0\n",  // renamed
       "line 4: name: 'roce0' is already the name of the device of line 1"},
  };
  for (const auto& c : cases) {
    std::vector<DeviceConfig> devs;
    std::string err;
    EXPECT_FALSE(parse_config_text(c.text, &devs, &err)) << c.text;
    EXPECT_EQ(err, c.err);
  }
}

// Every numeric key is accepted at both ends of its range, with the value written, and refused
// one step outside: a bound moved by one on either side is a visible change.
TEST(DeviceConfig, EveryNumberIsAcceptedAtItsBoundsAndRefusedJustOutside) {
  const struct {
    const char* key;
    const char* lowest;
    const char* below;  // nullptr: the lowest is 0
    const char* highest;
    const char* above;
  } ranges[] = {
      {"mtu", "576", "575", "9000", "9001"},
      {"vlan", "1", "0", "4094", "4095"},
      {"pcp", "0", nullptr, "7", "8"},
      {"cpu", "0", nullptr, "4095", "4096"},
      {"idle_sleep_us", "1", "0", "1000000", "1000001"},
      {"buffers", "1024", "1023", "1048576", "1048577"},
      {"inflight", "16", "15", "4194304", "4194305"},
      {"fault_seed", "0", nullptr, "18446744073709551615", "18446744073709551616"},
  };
  for (const auto& r : ranges) {
    EXPECT_EQ(refusal(r.key, r.lowest), "") << r.key;
    EXPECT_EQ(refusal(r.key, r.highest), "") << r.key;
    if (r.below) {
      const std::string err = refusal(r.key, r.below);
      EXPECT_EQ(err.rfind(std::string(r.key) + ": '" + r.below + "' is not ", 0), 0u) << err;
    }
    const std::string err = refusal(r.key, r.above);
    EXPECT_EQ(err.rfind(std::string(r.key) + ": '" + r.above + "' is not ", 0), 0u) << err;
  }
  // 0 is inflight's "no bound", not a bound of 0 PSNs.
  EXPECT_EQ(refusal("inflight", "0"), "");
  DeviceConfig c;
  std::string err;
  for (const char* kv : {"mtu=9000", "vlan=4094", "pcp=7", "cpu=4095", "idle_sleep_us=1000000",
                         "buffers=1048576", "inflight=0", "fault_seed=18446744073709551615"}) {
    ASSERT_TRUE(parse_device_string(kv, &c, &err)) << kv << ": " << err;
  }
  EXPECT_EQ(c.mtu, 9000u);
  EXPECT_EQ(c.vlan, 4094);
  EXPECT_EQ(c.pcp, 7);
  EXPECT_EQ(c.cpu, 4095);
  EXPECT_EQ(c.idle_sleep_us, 1'000'000u);
  EXPECT_EQ(c.buffers, 1u << 20);
  EXPECT_EQ(c.inflight, 0u);
  EXPECT_EQ(c.fault_seed, UINT64_MAX);
}

// A number is decimal digits and nothing else: no sign, no base prefix, no exponent, no junk.
TEST(DeviceConfig, ANumberIsDecimalDigitsOnly) {
  for (const char* v : {"+1500", "-1500", "0x5dc", "1.5e3", "1500x", "1 500", "", "x"}) {
    EXPECT_NE(refusal("mtu", v), "") << v;
  }
  for (const char* v : {"+1", "-1", "-0"}) EXPECT_NE(refusal("fault_seed", v), "") << v;
  EXPECT_EQ(refusal("mtu", " 1500 "), "");  // surrounding blanks are trimmed
}

TEST(DeviceConfig, FractionsIncludeZero) {
  DeviceConfig c;
  std::string err;
  c.drop = c.ce = 0.5;
  ASSERT_TRUE(parse_device_string("drop=0;ce=0", &c, &err)) << err;
  EXPECT_EQ(c.drop, 0.0);
  EXPECT_EQ(c.ce, 0.0);
}

// An address's prefix defaults to /24 (IPv4) and /64 (IPv6) and may be anything up to the
// address's width.
TEST(DeviceConfig, APrefixDefaultsAndGoesUpToTheAddressWidth) {
  DeviceConfig c;
  std::string err;
  ASSERT_TRUE(
      parse_device_string("ipv4=10.0.0.1;ipv6=fd00::1;ipv4=10.0.0.2/32;ipv6=fd00::2/128", &c, &err))
      << err;
  ASSERT_EQ(c.ipv4.size(), 2u);
  ASSERT_EQ(c.ipv6.size(), 2u);
  EXPECT_EQ(c.ipv4[0].prefix_len, 24);
  EXPECT_EQ(c.ipv6[0].prefix_len, 64);
  EXPECT_EQ(c.ipv4[1].prefix_len, 32);
  EXPECT_EQ(c.ipv6[1].prefix_len, 128);
  for (const char* v : {"10.0.0.1/33", "10.0.0.1/", "10.0.0.1/+8", "10.0.0.1/8x"}) {
    EXPECT_NE(refusal("ipv4", v), "") << v;
  }
  EXPECT_NE(refusal("ipv6", "fd00::1/129"), "");
}

// Our own MAC is a unicast one: the group bit (the first octet's lowest) is clear.
TEST(DeviceConfig, OurMacIsUnicast) {
  for (const char* v : {"01:00:5e:00:00:01", "33:33:00:00:00:01", "ff:ff:ff:ff:ff:ff"}) {
    const std::string err = refusal("mac", v);
    EXPECT_NE(err.find("a unicast MAC address"), std::string::npos) << v << ": " << err;
  }
  EXPECT_EQ(refusal("mac", "fe:00:00:00:00:01"), "");
}

TEST(DeviceConfig, ANameHasAtMost63Characters) {
  EXPECT_EQ(refusal("name", std::string(63, 'n')), "");
  EXPECT_NE(refusal("name", std::string(64, 'n')), "");
  EXPECT_NE(refusal("name", ""), "");
}

TEST(DeviceConfig, OnOffHasEverySpelling) {
  for (const char* v : {"1", "on", "yes", "true"}) {
    DeviceConfig c;
    std::string err;
    ASSERT_TRUE(apply_setting(c, "ecn", v, &err)) << v << ": " << err;
    EXPECT_TRUE(c.ecn) << v;
  }
  for (const char* v : {"0", "off", "no", "false"}) {
    DeviceConfig c;
    c.ecn = true;
    std::string err;
    ASSERT_TRUE(apply_setting(c, "ecn", v, &err)) << v << ": " << err;
    EXPECT_FALSE(c.ecn) << v;
  }
  for (const char* v : {"", "2", "maybe", "onn"}) EXPECT_NE(refusal("ecn", v), "") << v;
}

// validate() refuses a device without a port, without any address, or with a priority but no
// VLAN to carry it, each with its own message.
TEST(DeviceConfig, ValidateNeedsAPortAnAddressAndAVlanForAPriority) {
  const struct {
    const char* spec;
    const char* err;  // nullptr: valid
  } cases[] = {
      {"name=d;ipv4=10.0.0.1", "d: no port given"},
      {"name=d;port=x", "d: no address given"},
      {"name=d;port=x;ipv4=10.0.0.1;pcp=3", "d: pcp needs a vlan"},
      {"name=d;port=x;ipv4=10.0.0.1;pcp=3;vlan=5", nullptr},
      {"name=d;port=x;ipv6=fd00::1", nullptr},
      {"name=d;port=x;ipv4=10.0.0.1;pcp=0", nullptr},
  };
  for (const auto& k : cases) {
    DeviceConfig c;
    std::string err;
    ASSERT_TRUE(parse_device_string(k.spec, &c, &err)) << k.spec << ": " << err;
    if (k.err) {
      EXPECT_FALSE(validate(c, &err)) << k.spec;
      EXPECT_EQ(err.rfind(k.err, 0), 0u) << k.spec << ": " << err;
    } else {
      EXPECT_TRUE(validate(c, &err)) << k.spec << ": " << err;
    }
  }
}

// The keys that take a word refuse any other, saying which words they take; a key the device
// does not have is named with the list of those it has; an item or a line without '=' is
// named.
TEST(DeviceConfig, WordsUnknownKeysAndItemsWithoutAValueAreNamed) {
  EXPECT_NE(refusal("cc", "cubic").find("none or dcqcn"), std::string::npos);
  EXPECT_NE(refusal("mode", "busy").find("thread or inline"), std::string::npos);
  EXPECT_NE(refusal("pcap", "").find("a file name"), std::string::npos);
  EXPECT_NE(refusal("counters", "").find("a file name, or -"), std::string::npos);
  const std::string unknown = refusal("colour", "red");
  EXPECT_EQ(unknown.rfind("unknown setting 'colour' (name, port,", 0), 0u) << unknown;
  DeviceConfig c;
  std::string err;
  ASSERT_TRUE(apply_setting(c, "mode", "inline", &err)) << err;
  EXPECT_TRUE(c.inline_mode);
  ASSERT_TRUE(apply_setting(c, "mode", "thread", &err)) << err;
  EXPECT_FALSE(c.inline_mode);
  ASSERT_TRUE(apply_setting(c, "cc", "dcqcn", &err)) << err;
  EXPECT_EQ(c.cc, "dcqcn");
  ASSERT_TRUE(apply_setting(c, "eal", "  --no-huge  -l 0 ", &err)) << err;
  EXPECT_EQ(c.eal_args, (std::vector<std::string>{"--no-huge", "-l", "0"}));
  EXPECT_FALSE(parse_device_string("port=x; mtu", &c, &err));
  EXPECT_EQ(err, "'mtu' is not key=value");
  std::vector<DeviceConfig> devs;
  EXPECT_FALSE(parse_config_text("[device a]\nport = x\nmtu\n", &devs, &err));
  EXPECT_EQ(err, "line 3: expected key = value");
  devs.clear();
  EXPECT_FALSE(parse_config_text("port = x\n[device a/b]\n", &devs, &err));
  EXPECT_EQ(err.rfind("line 2: name: 'a/b'", 0), 0u) << err;
}

// ROCE_CONFIG (a file) and ROCE_DEVICE (one device's string, over the file's first device):
// an error names the variable, and the file's its path and line.
TEST(DeviceConfig, TheEnvironmentsErrorsNameTheirVariable) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/roce_config_good.conf", bad = dir + "/roce_config_bad.conf";
  {
    FILE* f = std::fopen(good.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("[device a]\nport = net_ring0\nipv4 = 10.1.0.1\nmtu = 4200\n", f);
    std::fclose(f);
    f = std::fopen(bad.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("[device a]\nport = x\nmtu = 5\n", f);
    std::fclose(f);
  }
  struct Env {
    const char* config;
    const char* device;
    std::string want;  // "" : accepted
  };
  const std::string missing = dir + "/roce_config_missing.conf";
  const Env cases[] = {
      {good.c_str(), nullptr, ""},
      {good.c_str(), "mtu=1500", ""},
      {missing.c_str(), nullptr, "ROCE_CONFIG: cannot read '" + missing + "'"},
      {bad.c_str(), nullptr, "ROCE_CONFIG " + bad + ": line 3: mtu: '5'"},
      {nullptr, "port=x; mtu=5", "ROCE_DEVICE: mtu: '5'"},
      {good.c_str(), "port", "ROCE_DEVICE: 'port' is not key=value"},
  };
  for (const Env& e : cases) {
    SCOPED_TRACE(std::string(e.config ? e.config : "-") + " / " + (e.device ? e.device : "-"));
    if (e.config) {
      setenv("ROCE_CONFIG", e.config, 1);
    } else {
      unsetenv("ROCE_CONFIG");
    }
    if (e.device) {
      setenv("ROCE_DEVICE", e.device, 1);
    } else {
      unsetenv("ROCE_DEVICE");
    }
    std::vector<DeviceConfig> devs;
    std::string err;
    const bool ok = devices_from_env(&devs, &err);
    if (e.want.empty()) {
      ASSERT_TRUE(ok) << err;
      ASSERT_EQ(devs.size(), 1u);
      EXPECT_EQ(devs[0].name, "a");
      EXPECT_EQ(devs[0].mtu, e.device ? 1500u : 4200u);
    } else {
      EXPECT_FALSE(ok);
      EXPECT_EQ(err.rfind(e.want, 0), 0u) << err;
    }
  }
  unsetenv("ROCE_CONFIG");
  unsetenv("ROCE_DEVICE");
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace roce
