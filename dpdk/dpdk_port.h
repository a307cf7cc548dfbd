// A DPDK ethdev port as a PacketIo: one rx and one tx queue, its own mbuf pool, bursts of mbufs.
//
// The engine that owns the port is the only thread that calls rx_burst / tx_burst / alloc /
// free (DPDK queues are not thread-safe); counters() may be read from any thread. tx_burst
// takes only buffers from this port's alloc() (the driver may free them in bulk to this pool:
// RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE), never rx buffers. Every buffer the engine holds must be
// returned (free or tx_burst) before the port is destroyed: the pool goes with the port. The
// burst path neither allocates, logs nor throws. Errors on the control path come back as
// nullptr / false plus one line of text, as elsewhere in the project.
//
// This header includes no rte_*.h, so layers above see DPDK only through PacketIo.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dpdk/burst_gate.h"
#include "stack/io/packet_io.h"

struct rte_device;
struct rte_mempool;
struct rte_mbuf;

namespace roce::dpdk {

struct PortConfig {
  // IP MTU. Frames are up to mtu + 14 bytes (Ethernet header, no FCS), mtu + 18 with `vlan`:
  // the default carries a 4096-byte RoCE path MTU over IPv4 or IPv6. Up to 9000.
  uint32_t mtu = 4200;
  // Frames carry an 802.1Q tag: 4 bytes more than mtu + 14, as on a Linux VLAN interface.
  bool vlan = false;
  // Buffers in the pool: rx ring + tx ring + what the engine holds + per-lcore caches.
  // 2^k - 1 fits the pool's ring best.
  uint32_t num_mbufs = 8191;
  // Bytes of data room after the headroom; 0 picks the smallest that holds the longest frame
  // (max_frame_len()) and that the driver accepts (net_af_packet wants framesz - 32).
  uint32_t mbuf_data_size = 0;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  // Receive frames for any MAC: veth peers and vdevs see frames for the stack's own MAC only
  // if the stack's MAC is the interface's, which it need not be.
  bool promiscuous = true;
  // Replaces the device's MAC address unless all zero (net_ring ports come up with
  // 00:00:00:00:00:00). Drivers that cannot set a MAC (net_ring) keep it as the port's mac().
  std::array<uint8_t, 6> mac = {};
};

// What DpdkPort itself counted (all monotonically increasing).
struct PortCounters {
  uint64_t rx_packets = 0;  // handed to the engine
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;  // taken by the driver
  uint64_t tx_bytes = 0;
  uint64_t rx_linearized = 0;        // chained frames copied into one mbuf
  uint64_t rx_dropped_chained = 0;   // chained frames too big for one mbuf, or no mbuf to copy to
  uint64_t rx_dropped_oversize = 0;  // frames longer than max_frame_len()
  uint64_t tx_rejected = 0;          // offered to tx_burst but not taken (ring full)
  // net_memif: bursts skipped (nothing received, nothing taken) while EAL's interrupt thread
  // handled events, the peer's connect or leave among them (dpdk/burst_gate.h).
  uint64_t bursts_gated = 0;
};

// The driver's own statistics (rte_eth_stats_get).
struct EthStats {
  uint64_t ipackets = 0;
  uint64_t opackets = 0;
  uint64_t ibytes = 0;
  uint64_t obytes = 0;
  // Dropped by the hardware / driver because the rx ring was full. For net_af_packet this
  // includes ring_drops, which the PMD itself does not count.
  uint64_t imissed = 0;
  // net_af_packet: frames the kernel dropped because the socket's rx ring was full (the sum of
  // PACKET_STATISTICS tp_drops over the port's sockets since it opened); 0 for other drivers.
  uint64_t ring_drops = 0;
  uint64_t ierrors = 0;
  uint64_t oerrors = 0;
  uint64_t rx_nombuf = 0;  // rx mbuf allocation failures
};

class DpdkPort final : public PacketIo {
 public:
  // Probes `devargs` and opens the port it creates. Accepts a vdev ("net_af_packet0,iface=vA,
  // blocksz=8192,framesz=8192,framecnt=512", "net_pcap0,iface=vA", "net_pcap0,rx_pcap=in.pcap,
  // tx_pcap=out.pcap", "net_memif0,role=server,socket=/tmp/x.sock,socket-abstract=no",
  // "net_tap0") or a PCI address ("0000:01:00.0", needs EAL with pci = true). A device EAL
  // already probed (from --vdev or the PCI scan) is opened as it is. The device is removed
  // again when the port is destroyed; one EAL probed is probed again, with EAL's arguments, by
  // the next open() of the same name (closing released its port). nullptr and *error on failure.
  static std::unique_ptr<DpdkPort> open(const std::string& devargs, const PortConfig& config,
                                        std::string* error);
  // Opens an existing ethdev port (one EAL probed from --vdev or the PCI scan, or one made by
  // rte_eth_from_rings). kRemoveDevice also removes the device (rte_dev_remove) when the port is
  // destroyed, so that a device of the same name can be created again.
  enum class OnClose : uint8_t { kKeepDevice, kRemoveDevice };
  static std::unique_ptr<DpdkPort> open_port_id(uint16_t port_id, const PortConfig& config,
                                                std::string* error,
                                                OnClose on_close = OnClose::kKeepDevice);

  ~DpdkPort() override;
  DpdkPort(const DpdkPort&) = delete;
  DpdkPort& operator=(const DpdkPort&) = delete;

  // PacketIo. rx/tx/alloc/free take any n (they work in chunks of kChunk).
  uint16_t rx_burst(PktBuf* bufs, uint16_t n) override;
  uint16_t tx_burst(PktBuf* bufs, uint16_t n) override;
  uint16_t alloc(PktBuf* bufs, uint16_t n) override;
  void free(PktBuf* bufs, uint16_t n) override;
  uint32_t max_frame_len() const override { return max_frame_len_; }
  // net_af_packet: its `framecnt` (the kernel's ring); net_memif: 2^`rsize` (the peer is taken
  // to have the same); a PCI device: its rx descriptors; other vdevs: 0 (unknown).
  uint32_t rx_ring_frames() const override { return rx_ring_frames_; }

  uint16_t port_id() const { return port_id_; }
  const std::string& name() const { return name_; }
  const std::string& driver() const { return driver_; }
  const uint8_t* mac() const { return mac_; }
  std::string mac_string() const;  // "02:00:00:00:00:01"
  // Bytes from a fresh buffer's data pointer to its end.
  uint32_t buffer_capacity() const { return buffer_capacity_; }
  // The MTU given to the driver: the requested one clamped to what the driver accepts
  // (net_af_packet reports 1500 but carries frames up to framesz - 32 anyway).
  uint32_t device_mtu() const { return device_mtu_; }
  // Whether the driver frees tx mbufs by the fast path (RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE).
  bool tx_fast_free() const { return tx_fast_free_; }

  bool link_up() const;
  // The link's speed in Mb/s as the driver reports it; 0 where it reports none (or unknown).
  uint32_t link_speed_mbps() const;
  // Whether the device is a virtual one (on EAL's vdev bus: net_af_packet, net_memif, net_ring
  // ...), whose link speed is nominal (net_af_packet says 10 Gb/s whatever the veth carries),
  // rather than a NIC on a bus (PCI, VMBus, auxiliary) whose speed is the link's.
  bool virtual_device() const { return virtual_device_; }
  // Whether the driver shares rings and buffers with its peer through memory mapped after the
  // link comes up (net_memif), so that prefault_shared_memory() is worth calling on link-up.
  bool shares_peer_memory() const { return shares_peer_memory_; }
  // Whether this port's bursts pass the burst gate (dpdk/burst_gate.h): every net_memif port,
  // unless the gate could not be put in force (open() then says so on stderr).
  bool burst_gated() const { return gated_; }
  // Maps in every page of the driver's shared regions (net_memif's memfd "memif_region_N"
  // mappings, found in /proc/self/maps) with MADV_POPULATE_WRITE, then reads a byte of each
  // page. Untouched, each page of the rings' buffers faults on its first use on both sides, and
  // a run's first pass over the rings -- ~500 ping-pong messages -- took ~25 us per half round
  // trip instead of ~1.4 here. Runs on EAL's interrupt thread (Eal::run_on_interrupt_thread),
  // where net_memif maps and unmaps regions for its peer, and excludes this process's ports'
  // stop and close. Control path (a syscall per region, a load per page); returns the bytes
  // populated.
  uint64_t prefault_shared_memory();
  PortCounters counters() const;
  // net_af_packet: the PMD's packet sockets this port reads ring drops from (one per queue
  // pair while the port runs, 0 after stop() and for other drivers).
  size_t ring_sockets() const {
    std::lock_guard<std::mutex> lock(ring_drops_mu_);
    return ring_sockets_.size();
  }
  bool eth_stats(EthStats* out, std::string* error) const;
  // Buffers of this port's pool currently out of the pool (held by the engine, the driver's
  // rings, or a peer): a leak check for tests.
  uint32_t buffers_in_use() const;

  // Stops the port: no more rx/tx (rte_eth_dev_stop). net_memif needs both sides stopped before
  // either process exits. Idempotent; the destructor calls it and then closes the port.
  void stop();

  // Fast path sizes.
  static constexpr uint16_t kChunk = 64;

 private:
  // prefault_shared_memory's work: every memif region this process maps.
  static uint64_t populate_shared_regions();
  // Runs a stop or close of the port: on EAL's interrupt thread, never beside
  // prefault_shared_memory(), for a driver that shares memory with its peer; on the caller's
  // thread otherwise.
  void on_control_thread(const std::function<void()>& fn);
  struct Counter {
    // Single writer (the owning thread), any reader: a relaxed load + store compiles to a plain
    // add, with no lock prefix, and a reader never sees a torn value.
    std::atomic<uint64_t> v{0};
    void add(uint64_t d) {
      v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    }
    uint64_t get() const { return v.load(std::memory_order_relaxed); }
  };

  DpdkPort() = default;
  static std::unique_ptr<DpdkPort> setup(uint16_t port_id, const PortConfig& config,
                                         const std::string& devargs, bool remove_on_close,
                                         std::string* error);
  rte_mbuf* linearize(rte_mbuf* m);
  uint16_t rx_burst_now(PktBuf* bufs, uint16_t n);
  uint16_t tx_burst_now(PktBuf* bufs, uint16_t n);
  template <uint16_t (DpdkPort::*Burst)(PktBuf*, uint16_t)>
  uint16_t through_gate(PktBuf* bufs, uint16_t n);

  uint16_t port_id_ = 0;
  std::string name_;
  std::string driver_;
  rte_device* device_ = nullptr;
  uint8_t mac_[6] = {};
  rte_mempool* pool_ = nullptr;
  uint32_t max_frame_len_ = 0;
  uint32_t rx_ring_frames_ = 0;
  uint32_t buffer_capacity_ = 0;
  uint32_t device_mtu_ = 0;
  bool tx_fast_free_ = false;
  bool shares_peer_memory_ = false;
  bool virtual_device_ = true;
  bool started_ = false;
  bool configured_ = false;
  bool remove_on_close_ = false;
  bool held_ = false;  // this port's id is in the process's set of open ports
  // A device EAL probed, opened by open(): its device string as EAL had it ("name[,args]") and
  // the name open() was given; ~DpdkPort removes the device and notes both for a later open().
  std::string eal_devargs_;
  std::string open_name_;

  // net_af_packet: its sockets (found at open by their binding; let go at stop) and the
  // kernel's ring drops read from them so far (each read of PACKET_STATISTICS resets the
  // kernel's count).
  void read_ring_drops_locked() const;
  std::vector<int> ring_sockets_;
  mutable std::mutex ring_drops_mu_;
  mutable uint64_t ring_drops_ = 0;

  Counter rx_packets_, rx_bytes_, tx_packets_, tx_bytes_;
  Counter rx_linearized_, rx_dropped_chained_, rx_dropped_oversize_, tx_rejected_;
  Counter bursts_gated_;

  // net_memif: bursts pass the gate (dpdk/burst_gate.h); gated_ once add() succeeded.
  bool gated_ = false;
  burst_gate::Slot gate_;
};

// Maps in the pages of [start, end) writable without changing their contents (the page
// rounding is done here), so that the datapath takes no page fault on its first touch of them.
// Safe on a range that is, or becomes, unmapped: those pages are skipped. Returns the bytes
// covered (0 for a range that is gone). Control path: a syscall, or one per page on kernels
// before 5.14.
uint64_t populate_pages(uintptr_t start, uintptr_t end);

}  // namespace roce::dpdk
