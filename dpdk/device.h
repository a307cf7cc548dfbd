// A device: one configured port brought to life -- EAL (once per process), the DPDK port, an
// optional fault-injecting wrapper, the engine with its GID table, the neighbour agent (ARP, ND,
// ping), an optional capture file, and the runner that drives the engine. This is what a tool or
// the verbs shim opens; it exposes no DPDK type.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dpdk/tsc_clock.h"
#include "stack/core/engine.h"
#include "stack/core/runner.h"
#include "stack/device_config.h"
#include "stack/io/fault_io.h"
#include "stack/net/neighbor_agent.h"
#include "stack/util/clock.h"
#include "stack/util/pcap_writer.h"

namespace roce::dpdk {

class DpdkPort;

class Device {
 public:
  // Opens the device and starts its engine (own thread, or inline). nullptr and one line in
  // *err on failure. EAL starts with the first device opened in the process: cfg.eal_args
  // (the user's `eal =`) then `eal_defaults` (a caller's own, e.g. the verbs shim's --lcores).
  // A later device whose cfg.eal_args EAL does not run with fails, naming them.
  static std::unique_ptr<Device> open(const DeviceConfig& cfg, std::string* err,
                                      const std::vector<std::string>& eal_defaults = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceConfig& config() const { return cfg_; }
  const std::string& name() const { return cfg_.name; }
  Engine& engine() { return *engine_; }
  EngineRunner& runner() { return *runner_; }
  const Mac& mac() const { return mac_; }
  const std::vector<Gid>& gids() const { return gids_; }
  // The port's largest frame and the IB MTU the engine offers.
  uint32_t max_frame_len() const;
  Mtu active_mtu() const { return engine_->active_mtu(); }
  // Whether the port's link is up. A net_memif link comes up once both sides' ports run and
  // their control channel has connected, some milliseconds after open() returns. Any thread.
  bool link_up() const;
  // The link's speed in Mb/s as the port's driver reports it; 0 where it reports none.
  uint32_t link_speed_mbps() const;
  // Whether the link was seen up (by link_up(), wait_link_up or the engine's timer) and is down
  // now: a net_memif peer that left, a cable pulled. A link that has not come up yet is not
  // lost (a memif server waits for its first client). Any thread.
  bool link_lost() const;
  // Waits (sleeping) up to `timeout` for the link to come up, then readies it: a net_memif
  // port's shared rings are mapped in (DpdkPort::prefault_shared_memory) so that the first
  // messages take no page faults. A tool that measures should call this before it starts; the
  // engine readies a link it sees come up by itself too. False on timeout.
  bool wait_link_up(std::chrono::milliseconds timeout);
  // Per-port and per-QP counters, neighbour and driver statistics, as text.
  std::string counters_text();
  // The port's mbuf pool: buffers out of it (held by the engine, the driver's rings or a memif
  // peer) and its size. Any thread (rte_mempool_in_use_count: a snapshot, per-lcore caches
  // counted as free): what a long run watches for leaks.
  uint32_t buffers_in_use() const;
  uint32_t buffers_total() const { return cfg_.buffers; }
  // The fault injection's counts (zero without `drop` or `ce`). Read from another thread they
  // may be a little stale.
  FaultCounters fault_counters() const { return faults_ ? faults_->counters() : FaultCounters{}; }
  // Writes counters_text() to the file of the configuration's key `counters` and closes it, once:
  // the destructor calls it, and so does the verbs shim when a program exits with the device
  // still open. Nothing without the key.
  void write_counters();
  // Writes buffered capture frames to disk (the capture is also flushed on close, which says on
  // stderr if a capture write failed: stack/util/pcap_writer.h).
  void flush_capture();

 private:
  Device() = default;
  static void on_net_frame(void* ctx, const wire::PacketInfo& info, wire::ParseError why);
  static bool send_frame(void* ctx, const uint8_t* frame, uint32_t len);
  static void on_resolved(void* ctx, const Gid& ip);
  static void on_failed(void* ctx, const Gid& ip);
  static uint64_t tick(void* ctx, uint64_t now_ns);
  // Populates a memif link's shared memory once per link-up, on whichever thread comes first;
  // true once that is done (false while the other thread is still at it).
  bool ready_link();
  static void on_tap(void* ctx, const uint8_t* frame, uint32_t len, bool tx, uint64_t now_ns);

  DeviceConfig cfg_;
  Mac mac_{};
  std::vector<Gid> gids_;
  // The engine's clock: the TSC where it is invariant (dpdk/tsc_clock.h), else CLOCK_MONOTONIC.
  std::unique_ptr<TscClock> tsc_clock_;
  SteadyClock steady_clock_;
  int64_t wall_offset_ns_ = 0;  // realtime - monotonic, for capture timestamps
  std::unique_ptr<DpdkPort> port_;
  std::unique_ptr<FaultIo> faults_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<NeighborAgent> agent_;
  std::unique_ptr<EngineRunner> runner_;
  PcapWriter capture_;
  uint64_t next_capture_flush_ns_ = 0;  // tick() writes the capture out about once a second
  std::FILE* counters_out_ = nullptr;   // DeviceConfig::counters, until write_counters()
  // A memif link's shared memory: not populated since the link came up, being populated (by
  // the engine thread or wait_link_up), or populated.
  static constexpr uint8_t kLinkNotReady = 0, kLinkPrefaulting = 1, kLinkReady = 2;
  std::atomic<uint8_t> link_ready_{kLinkNotReady};
  mutable std::atomic<bool> link_seen_up_{false};  // see link_lost()
  // DCQCN's line rate follows the link's speed on a NIC (not a virtual device's nominal one)
  // unless cc_params gives line_gbps: tick() looks every 100 ms for a speed other than the one
  // last taken (line_mbps_; 0 while none was known) and hands it to the engine.
  void follow_link_speed(uint64_t now_ns);
  bool line_from_link_ = false;
  uint32_t line_mbps_ = 0;
  uint64_t next_speed_check_ns_ = 0;

 public:
  // The line rate DCQCN starts a device's QPs at, given whether its port is a virtual device and
  // the speed its link reports (0: none): the link's for a NIC, else
  // DeviceConfig::kLineGbps. cc_params' line_gbps overrides either (DeviceConfig::dcqcn_params).
  static double line_gbps_for(bool virtual_device, uint32_t link_mbps);
};

}  // namespace roce::dpdk
