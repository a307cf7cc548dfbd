// Test support for the dpdk layer: things a test needs that PacketIo deliberately cannot do.
// Lives in its own target (roce_dpdk_testing) so that production binaries don't carry it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

struct rte_mempool;

namespace roce::dpdk {

class DpdkPort;

// Sends frames as chains of small mbufs straight to a port's tx queue, bypassing
// DpdkPort::tx_burst (which only sends single-segment frames). Over a RingPair the peer then
// receives the chain as it was built, which is how tests reach DpdkPort's rx linearization.
class ChainedFrameSender {
 public:
  // A pool of `count` mbufs with `segment_size` bytes of data room each.
  static std::unique_ptr<ChainedFrameSender> create(uint32_t segment_size, uint32_t count,
                                                    std::string* error);
  // Frees the pool; every mbuf it sent must have come back (the receiver freed them).
  ~ChainedFrameSender();
  ChainedFrameSender(const ChainedFrameSender&) = delete;
  ChainedFrameSender& operator=(const ChainedFrameSender&) = delete;

  // Splits `frame` into segments of segment_size bytes and transmits the chain on
  // `port`'s queue 0. False if the pool ran dry or the driver did not take the frame.
  bool send(DpdkPort& port, std::span<const uint8_t> frame);
  uint32_t in_use() const;

 private:
  ChainedFrameSender() = default;
  rte_mempool* pool_ = nullptr;
  uint32_t segment_size_ = 0;
};

// Keeps EAL's interrupt thread busy for `busy` in an alarm callback, as a memif teardown keeps
// it: *state goes to 1 when the callback starts and to 2 just before it returns. False if the
// alarm could not be set. (Not with a memif server port open: see dpdk/intr_sync.cc.)
bool occupy_interrupt_thread(std::chrono::milliseconds busy, std::atomic<int>* state);

// Collects what EAL and the drivers log (rte_openlog_stream) from construction until
// destruction, when logging goes back to EAL's default stream. For tests that look for a
// driver's complaint, e.g. rte_free's "Invalid memory" on a double free. One at a time.
class EalLogCapture {
 public:
  EalLogCapture();
  ~EalLogCapture();
  EalLogCapture(const EalLogCapture&) = delete;
  EalLogCapture& operator=(const EalLogCapture&) = delete;
  // Everything logged so far.
  std::string text();

 private:
  std::FILE* file_ = nullptr;
};

// rte_dev_probe(devargs) as it is (0 also for a device already there; Eal::device_listed
// tells them apart); remove_device removes a virtual device, false if there was none.
int probe_device(const std::string& devargs);
bool remove_device(const std::string& devargs);

}  // namespace roce::dpdk
