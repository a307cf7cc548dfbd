// Frames and bounded polling shared by the dpdk tests and their peer helper.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "stack/io/packet_io.h"

namespace roce::dpdk::testing {

// IEEE 802 "local experimental" EtherType: no kernel stack claims it, so frames of ours are easy
// to tell from the IPv6 neighbour discovery a veth sends on its own.
inline constexpr uint16_t kTestEtherType = 0x88b5;
inline constexpr uint32_t kMinTestFrame = 20;  // header + sequence number

// A broadcast frame of `len` bytes: EtherType kTestEtherType, then `seq` (big-endian), then
// bytes that depend on both seq and position, so a frame swapped, cut or shifted is detected.
inline std::vector<uint8_t> make_frame(uint32_t len, uint32_t seq) {
  std::vector<uint8_t> f(len < kMinTestFrame ? kMinTestFrame : len);
  std::memset(f.data(), 0xff, 6);
  const uint8_t src[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  std::memcpy(f.data() + 6, src, 6);
  f[12] = kTestEtherType >> 8;
  f[13] = kTestEtherType & 0xff;
  for (int i = 0; i < 4; ++i) f[14 + i] = static_cast<uint8_t>(seq >> (24 - 8 * i));
  for (size_t i = 18; i < f.size(); ++i) f[i] = static_cast<uint8_t>(i * 7 + seq * 13);
  return f;
}

inline bool is_test_frame(const uint8_t* p, uint32_t len) {
  return len >= kMinTestFrame && p[12] == (kTestEtherType >> 8) && p[13] == (kTestEtherType & 0xff);
}

inline uint32_t frame_seq(const uint8_t* p) {
  return (uint32_t{p[14]} << 24) | (uint32_t{p[15]} << 16) | (uint32_t{p[16]} << 8) | p[17];
}

// Receives until `want` frames (all frames, or only test frames if `only_test_frames`) arrived
// or `timeout` passed. Copies each frame out and frees it. Sleeps 200 us whenever a poll comes
// back empty, so a test waiting on a slow peer never spins a core.
inline std::vector<std::vector<uint8_t>> receive(PacketIo& io, size_t want,
                                                 std::chrono::milliseconds timeout,
                                                 bool only_test_frames = false) {
  std::vector<std::vector<uint8_t>> frames;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  PktBuf bufs[32];
  while (frames.size() < want && std::chrono::steady_clock::now() < deadline) {
    const uint16_t n = io.rx_burst(bufs, 32);
    for (uint16_t i = 0; i < n; ++i) {
      if (only_test_frames && !is_test_frame(bufs[i].data, bufs[i].len)) continue;
      frames.emplace_back(bufs[i].data, bufs[i].data + bufs[i].len);
    }
    io.free(bufs, n);
    if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return frames;
}

}  // namespace roce::dpdk::testing
