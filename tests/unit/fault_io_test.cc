// FaultIo (stack/io/fault_io.h): the fractions it drops are the ones configured, whatever the
// burst size, and every frame is either dropped (freed) or handed to the port, once, in order.
#include "stack/io/fault_io.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace roce {
namespace {

// A port that takes up to `room` frames a burst and records what it took and freed; its
// "buffers" are numbers in the handle.
class RecordingIo final : public PacketIo {
 public:
  uint16_t rx_burst(PktBuf* bufs, uint16_t n) override {
    for (uint16_t i = 0; i < n; ++i) bufs[i].handle = reinterpret_cast<void*>(next_rx++);
    return n;
  }
  uint16_t tx_burst(PktBuf* bufs, uint16_t n) override {
    const uint16_t k = n < room ? n : room;
    for (uint16_t i = 0; i < k; ++i) sent.push_back(reinterpret_cast<uintptr_t>(bufs[i].handle));
    return k;
  }
  uint16_t alloc(PktBuf*, uint16_t) override { return 0; }
  void free(PktBuf* bufs, uint16_t n) override {
    for (uint16_t i = 0; i < n; ++i) freed.push_back(reinterpret_cast<uintptr_t>(bufs[i].handle));
  }
  uint32_t max_frame_len() const override { return 1514; }

  uint16_t room = UINT16_MAX;
  uintptr_t next_rx = 1;
  std::vector<uintptr_t> sent, freed;
};

// Sends `frames` numbered frames through `f` in bursts of `burst`, offering again what the port
// did not take.
void send_all(FaultIo& f, uint32_t frames, uint16_t burst) {
  std::vector<PktBuf> q;
  uintptr_t id = 1;
  while (id <= frames || !q.empty()) {
    while (q.size() < burst && id <= frames) {
      PktBuf b;
      b.handle = reinterpret_cast<void*>(id++);
      q.push_back(b);
    }
    const uint16_t took = f.tx_burst(q.data(), static_cast<uint16_t>(q.size()));
    q.erase(q.begin(), q.begin() + took);
  }
}

TEST(FaultIo, DropsTheConfiguredFractionOfBurstsSent) {
  for (uint16_t burst : {1, 4, 32}) {
    RecordingIo port;
    FaultIo f(&port, 0, 0.05, 7);
    send_all(f, 200'000, burst);
    const double dropped = f.counters().tx_dropped / 200'000.0;
    EXPECT_NEAR(dropped, 0.05, 0.005) << "bursts of " << burst;
    EXPECT_EQ(port.sent.size() + port.freed.size(), 200'000u);
  }
}

TEST(FaultIo, DropsTheConfiguredFractionReceived) {
  RecordingIo port;
  FaultIo f(&port, 0.05, 0, 7);
  PktBuf bufs[32];
  uint64_t kept = 0;
  for (int i = 0; i < 200'000 / 32; ++i) kept += f.rx_burst(bufs, 32);
  EXPECT_NEAR(f.counters().rx_dropped / 200'000.0, 0.05, 0.005);
  EXPECT_EQ(kept + f.counters().rx_dropped, 200'000u / 32 * 32);
}

TEST(FaultIo, EveryFrameIsSentOrDroppedOnceAndInOrderWhenThePortFills) {
  RecordingIo port;
  port.room = 5;  // fewer than a burst: the rest goes back to the caller
  FaultIo f(&port, 0, 0.1, 3);
  send_all(f, 10'000, 32);
  std::vector<bool> seen(10'001, false);
  uintptr_t last = 0;
  for (uintptr_t id : port.sent) {
    EXPECT_GT(id, last);
    last = id;
    EXPECT_FALSE(seen[id]);
    seen[id] = true;
  }
  for (uintptr_t id : port.freed) {
    EXPECT_FALSE(seen[id]);
    seen[id] = true;
  }
  EXPECT_EQ(port.sent.size() + port.freed.size(), 10'000u);
  EXPECT_EQ(f.counters().tx_dropped, port.freed.size());
}

TEST(FaultIo, DropsNothingWithoutFaults) {
  RecordingIo port;
  FaultIo f(&port, 0, 0, 1);
  send_all(f, 1'000, 32);
  EXPECT_EQ(port.sent.size(), 1'000u);
  EXPECT_EQ(f.counters().tx_dropped, 0u);
}

}  // namespace
}  // namespace roce
