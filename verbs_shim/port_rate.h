// ibv_port_attr's active_width and active_speed for an Ethernet link of a given speed: the
// largest IB rate (lanes x per-lane speed) that does not exceed it, so that programs which size
// their traffic by the port's rate (collective libraries read these two fields) see the link's.
#pragma once

#include <cstdint>

namespace roce::verbs {

struct PortRate {
  uint8_t width;  // IBV_WIDTH-style code: 1 = 1X, 2 = 4X, 4 = 8X, 8 = 12X
  uint8_t speed;  // per-lane code: 1 SDR 2.5, 2 DDR 5, 4 QDR 10, 16 FDR 14, 32 EDR 25, 64 HDR 50,
                  // 128 NDR 100 Gb/s
};

// A driver that reports no speed (0): 1X EDR, 25 Gb/s, a plausible software NIC's figure.
constexpr PortRate port_rate_for_mbps(uint32_t mbps) {
  struct Row {
    uint32_t mbps;
    PortRate rate;
  };
  constexpr Row kRows[] = {
      {800'000, {4, 128}},  // 8X NDR
      {400'000, {2, 128}},  // 4X NDR
      {200'000, {2, 64}},   // 4X HDR
      {100'000, {2, 32}},   // 4X EDR
      {50'000, {1, 64}},    // 1X HDR
      {40'000, {2, 4}},     // 4X QDR
      {25'000, {1, 32}},    // 1X EDR
      {14'000, {1, 16}},    // 1X FDR
      {10'000, {1, 4}},     // 1X QDR
      {5'000, {1, 2}},      // 1X DDR
  };
  if (mbps == 0) return {1, 32};
  for (const Row& r : kRows) {
    if (mbps >= r.mbps) return r.rate;
  }
  return {1, 1};  // 1X SDR (2.5 Gb/s): nothing slower exists
}

}  // namespace roce::verbs
