// DpdkPort over net_pcap with capture files: frames replayed from a capture arrive
// byte-identical, frames sent land in a capture byte-identical, and frames too big for an mbuf
// (which net_pcap chains) never reach the engine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/common/pcap_reader.h"
#include "dpdk/dpdk_port.h"
#include "tests/dpdk/eal_environment.h"
#include "tests/dpdk/test_frames.h"

namespace roce::dpdk {
namespace {

using namespace std::chrono_literals;

[[maybe_unused]] const ::testing::Environment* const kEal =
    ::testing::AddGlobalTestEnvironment(new testing::EalEnvironment());

// 54 frames of 42 to 4170 bytes: RDMA WRITEs at a 4096-byte path MTU captured from rxe.
const std::string kCapture = std::string(ROCE_TEST_DATA_DIR) + "/write_bw_ipv4_16KiB_mtu4096.pcap";

std::vector<std::vector<uint8_t>> read_capture(const std::string& path) {
  std::string error;
  auto reader = apps::PcapReader::open(path, &error);
  EXPECT_NE(reader, nullptr) << error;
  std::vector<std::vector<uint8_t>> frames;
  if (reader == nullptr) return frames;
  apps::CapturedFrame f;
  while (reader->next(f)) frames.emplace_back(f.bytes.begin(), f.bytes.end());
  EXPECT_EQ(reader->error(), "");
  return frames;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) /
          ("roce-dpdk-" + std::to_string(getpid()) + "-" + name))
      .string();
}

TEST(PcapPort, ReplaysACaptureByteIdentical) {
  const auto expected = read_capture(kCapture);
  ASSERT_EQ(expected.size(), 54u);
  std::string error;
  auto port = DpdkPort::open("net_pcap0,rx_pcap=" + kCapture, PortConfig{}, &error);
  ASSERT_NE(port, nullptr) << error;
  EXPECT_EQ(port->driver(), "net_pcap");
  const auto got = testing::receive(*port, expected.size(), 5s);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "frame " << i + 1;
  // The file is read once: nothing more arrives.
  EXPECT_TRUE(testing::receive(*port, 1, 50ms).empty());
  const PortCounters c = port->counters();
  EXPECT_EQ(c.rx_packets, expected.size());
  EXPECT_EQ(c.rx_linearized + c.rx_dropped_chained, 0u);
  EthStats s;
  ASSERT_TRUE(port->eth_stats(&s, &error)) << error;
  EXPECT_EQ(s.ipackets, expected.size());
  EXPECT_EQ(port->buffers_in_use(), 0u);
}

// With 1536-byte mbufs (mtu 1500), net_pcap chains the 4154- and 4170-byte frames over several
// mbufs; they cannot be linearized into one and are dropped and counted, the rest pass.
TEST(PcapPort, FramesTooBigForAnMbufAreDroppedNotChained) {
  const auto all = read_capture(kCapture);
  std::vector<std::vector<uint8_t>> small;
  size_t big = 0;
  for (const auto& f : all) {
    if (f.size() <= 1514) {
      small.push_back(f);
    } else {
      ++big;
    }
  }
  ASSERT_EQ(big, 40u);
  PortConfig config;
  config.mtu = 1500;
  std::string error;
  auto port = DpdkPort::open("net_pcap1,rx_pcap=" + kCapture, config, &error);
  ASSERT_NE(port, nullptr) << error;
  const auto got = testing::receive(*port, small.size(), 5s);
  // Frames after the last small one, if any, are big: one more poll takes them in.
  EXPECT_TRUE(testing::receive(*port, 1, 50ms).empty());
  EXPECT_EQ(got, small);
  const PortCounters c = port->counters();
  EXPECT_EQ(c.rx_dropped_chained, big);
  EXPECT_EQ(c.rx_packets, small.size());
  EXPECT_EQ(port->buffers_in_use(), 0u);
}

TEST(PcapPort, WritesSentFramesToACaptureByteIdentical) {
  const std::string out = temp_path("tx.pcap");
  std::vector<std::vector<uint8_t>> sent;
  uint32_t seq = 0;
  for (uint32_t len : {60u, 1500u, 4200u}) {
    for (int i = 0; i < 32; ++i) sent.push_back(testing::make_frame(len, seq++));
  }
  {
    std::string error;
    auto port =
        DpdkPort::open("net_pcap2,rx_pcap=" + kCapture + ",tx_pcap=" + out, PortConfig{}, &error);
    ASSERT_NE(port, nullptr) << error;
    for (size_t at = 0; at < sent.size(); at += 32) {
      PktBuf bufs[32];
      ASSERT_EQ(port->alloc(bufs, 32), 32);
      for (int i = 0; i < 32; ++i) {
        std::memcpy(bufs[i].data, sent[at + i].data(), sent[at + i].size());
        bufs[i].len = static_cast<uint32_t>(sent[at + i].size());
      }
      ASSERT_EQ(port->tx_burst(bufs, 32), 32);
    }
    EXPECT_EQ(port->counters().tx_packets, sent.size());
  }  // closing the port closes the capture file
  EXPECT_EQ(read_capture(out), sent);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace roce::dpdk
