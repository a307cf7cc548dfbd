#include "dpdk/dpdk_port.h"

#include "dpdk/eal.h"

#include <linux/if_packet.h>
#include <rte_branch_prediction.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>

#include <dirent.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

namespace roce::dpdk {
namespace {

constexpr uint32_t kEthHeaderLen = 14;
constexpr uint32_t kVlanTagLen = 4;
constexpr uint32_t kMinMtu = 68;  // RFC 791: the smallest MTU IPv4 must carry
constexpr uint32_t kMaxMtu = 9000;

// net_af_packet copies each frame into a TPACKET_V2 ring slot of `framesz` bytes, after a
// header of TPACKET2_HDRLEN - sizeof(sockaddr_ll) bytes (32). Bigger frames vanish on tx and
// arrive truncated on rx, and rx queue setup refuses mbufs with less data room than a slot.
constexpr uint32_t kAfPacketDefaultFrameSize = 2048;  // the PMD's DFLT_FRAME_SIZE
constexpr uint32_t kAfPacketSlotHeader = TPACKET2_HDRLEN - sizeof(struct sockaddr_ll);

// net_memif copies a frame into ring buffers of `bsize` bytes (default 2048), chaining slots for
// a longer one. DPDK 22.11's copy-mode transmit checks for a free slot one too late when it
// chains: with the ring nearly full it writes a frame's last piece into a slot the receiver
// still owns and its free count wraps, so frames are lost, overwritten or received twice
// (write_bw over a 64-slot ring: 4 % more frames received than sent, 129 173 out-of-sequence
// packets, 0.06 Gb/s). A buffer that holds a whole frame never chains: open() adds
// bsize=<frame size rounded up to a cache line> unless the device string sets one, and set-up
// refuses a bsize smaller than the largest frame.
constexpr const char* kMemifBufferArg = "bsize";
constexpr uint32_t kMemifDefaultBufferSize = 2048;
// The PMDs' ring sizes when the device string leaves them out: net_af_packet's DFLT_FRAME_COUNT
// frames, net_memif's ETH_MEMIF_DEFAULT_RING_SIZE (log2 of the slots).
constexpr uint32_t kAfPacketDefaultFrameCount = 512;
constexpr uint32_t kMemifDefaultRingLog2 = 10;

std::string errno_text(int err) { return rte_strerror(err < 0 ? -err : err); }

// The value of `key` in a "k1=v1,k2=v2" driver argument string, or "" if absent.
std::string kvarg(std::string_view args, std::string_view key) {
  while (!args.empty()) {
    const size_t comma = args.find(',');
    std::string_view kv = args.substr(0, comma);
    if (kv.size() > key.size() && kv.starts_with(key) && kv[key.size()] == '=') {
      return std::string(kv.substr(key.size() + 1));
    }
    if (comma == std::string_view::npos) break;
    args.remove_prefix(comma + 1);
  }
  return "";
}

// Removes the device rte_dev_probe made under `name`: a virtual device, or else a PCI one.
void remove_probed(const std::string& name) {
  if (rte_eal_hotplug_remove("vdev", name.c_str()) != 0) {
    rte_eal_hotplug_remove("pci", name.c_str());
  }
}

// The driver argument `key` the device was probed with, or "" if absent.
std::string devarg_str(const rte_eth_dev_info& info, std::string_view key) {
  const rte_devargs* da = info.device ? rte_dev_devargs(info.device) : nullptr;
  return da && da->args ? kvarg(da->args, key) : "";
}

// The same as a number, or `dflt` if absent.
uint32_t devarg_u32(const rte_eth_dev_info& info, std::string_view key, uint32_t dflt) {
  const std::string v = devarg_str(info, key);
  return v.empty() ? dflt : static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
}

// Packet sockets some open port already reads (two ports on one interface must not both count
// the same socket's drops).
std::mutex g_claimed_mu;
std::set<int> g_claimed_sockets;

// The TPACKET_V2 packet sockets of this process bound to interface `ifindex` that no other port
// has claimed: net_af_packet's, one per queue pair (the PMD keeps its descriptors private).
// Claims them.
std::vector<int> claim_packet_ring_sockets(int ifindex) {
  std::vector<int> fds;
  std::lock_guard<std::mutex> lock(g_claimed_mu);
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return fds;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    const int s = static_cast<int>(fd);
    if (g_claimed_sockets.count(s)) continue;
    int v = 0;
    socklen_t len = sizeof v;
    if (getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 || v != AF_PACKET) continue;
    len = sizeof v;
    if (getsockopt(s, SOL_PACKET, PACKET_VERSION, &v, &len) != 0 || v != TPACKET_V2) continue;
    sockaddr_ll sll{};
    len = sizeof sll;
    if (getsockname(s, reinterpret_cast<sockaddr*>(&sll), &len) != 0) continue;
    if (sll.sll_ifindex != ifindex) continue;
    fds.push_back(s);
    g_claimed_sockets.insert(s);
  }
  closedir(dir);
  return fds;
}

void release_packet_ring_sockets(const std::vector<int>& fds) {
  std::lock_guard<std::mutex> lock(g_claimed_mu);
  for (const int fd : fds) g_claimed_sockets.erase(fd);
}

uint32_t round_up(uint32_t v, uint32_t to) { return (v + to - 1) / to * to; }

// The largest frame of `mtu`, rounded up to a cache line: the default mbuf data room and the
// net_memif buffer size.
// The longest frame a port of this configuration sends or takes: the MTU counts the IP
// datagram, as Linux's and ethdev's do, so an 802.1Q tag comes on top of it.
uint32_t frame_len_for(const PortConfig& config) {
  return config.mtu + kEthHeaderLen + (config.vlan ? kVlanTagLen : 0);
}

// A buffer for one frame of frame_len bytes, in whole cache lines.
uint32_t frame_buffer_size(uint32_t frame_len) { return round_up(frame_len, RTE_CACHE_LINE_SIZE); }

// The bytes a driver counts on top of the MTU, where it reports its limits (max_mtu below
// max_rx_pktlen); 0 where it does not.
uint32_t reported_overhead(const rte_eth_dev_info& info) {
  return info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu
             ? info.max_rx_pktlen - info.max_mtu
             : 0;
}

// The largest MTU rte_eth_dev_configure accepts for this device, computed as ethdev does
// (eth_dev_get_overhead_len in lib/ethdev): a frame of mtu + overhead must fit max_rx_pktlen.
uint32_t max_device_mtu(const rte_eth_dev_info& info) {
  uint32_t overhead = reported_overhead(info);
  if (overhead == 0) overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  uint32_t limit = info.max_mtu;
  if (info.max_rx_pktlen > overhead) limit = std::min(limit, info.max_rx_pktlen - overhead);
  return limit;
}

// Held while the shared regions are touched (prefault_shared_memory: every memif port's in the
// process) and while a memif port stops or closes, which unmaps its regions. Both run on EAL's
// interrupt thread, which orders them already; the lock still does when a stop or close had to
// run on its caller's thread (the interrupt thread did not answer in time).
std::mutex& shared_memory_mu() {
  static std::mutex mu;
  return mu;
}

// Devices EAL probed itself (--vdev, the PCI scan) whose port a DpdkPort has closed, by the name
// open() was given, with the device string EAL had probed them with. Closing releases an ethdev
// port while the device keeps its driver, so the device can only come back through a remove and
// a new probe: ~DpdkPort removes it and notes it here, and open() probes it again from this.
std::mutex g_released_mu;
std::map<std::string, std::string> g_released_devices;

std::string released_device(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_released_mu);
  const auto it = g_released_devices.find(name);
  return it == g_released_devices.end() ? "" : it->second;
}

void set_released_device(const std::string& name, const std::string& devargs) {
  std::lock_guard<std::mutex> lock(g_released_mu);
  if (devargs.empty()) {
    g_released_devices.erase(name);
  } else {
    g_released_devices[name] = devargs;
  }
}

// The ethdev ports a DpdkPort of this process has open: a second DpdkPort on one of them (two
// devices given the same vdev name) would reconfigure or close it under the first.
std::mutex g_held_mu;
std::set<uint16_t> g_held_ports;

// Mempool names must be unique in the process and outlive a leaked pool (see ~DpdkPort).
std::string next_pool_name() {
  static std::atomic<uint32_t> counter{0};
  return "roce_pool_" + std::to_string(counter.fetch_add(1));
}

}  // namespace

uint64_t populate_pages(uintptr_t start, uintptr_t end) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  start &= ~(page - 1);
  end = (end + page - 1) & ~(page - 1);
  if (end <= start) return 0;
  if (madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0) {
    // And a read of every page from here: on this project's VMs a page the kernel populated
    // still trapped on the process's own first access (most likely a hypervisor that shadows
    // the guest's page tables): the first ~490 messages of a memif ping-pong took 15-35 us each
    // with the madvise alone (docs/performance.md, "Decisions").
    // The caller keeps the range mapped meanwhile (see prefault_shared_memory).
    for (uintptr_t a = start; a < end; a += page) {
      (void)*reinterpret_cast<volatile const uint8_t*>(a);
    }
    return end - start;
  }
  // ENOMEM: (part of) the range is no longer mapped -- a memif peer's port stopping unmaps its
  // regions from the interrupt thread while we read /proc/self/maps. Touching the pages by hand
  // there was a SIGSEGV; the kernel checks under the mmap lock, so just skip them.
  if (errno != EINVAL) return 0;
  // Kernels before 5.14 lack MADV_POPULATE_WRITE: read a byte of every page instead (a read
  // fault maps a shared writable page writable; a private one still faults on its first write).
  // mincore() first: a page of a range unmapped since /proc/self/maps was read is skipped
  // (ENOMEM) instead of faulting; the race that remains is the window between the two calls.
  uint64_t done = 0;
  for (uintptr_t a = start; a < end; a += page) {
    unsigned char resident = 0;
    if (mincore(reinterpret_cast<void*>(a), page, &resident) != 0) continue;
    (void)*reinterpret_cast<volatile const uint8_t*>(a);
    done += page;
  }
  return done;
}

std::unique_ptr<DpdkPort> DpdkPort::open(const std::string& devargs, const PortConfig& config,
                                         std::string* error) {
  if (!Eal::running()) {
    *error = "open '" + devargs + "': EAL is not running (call Eal::init first)";
    return nullptr;
  }
  const std::string name = devargs.substr(0, devargs.find(','));
  uint16_t port_id = 0;
  bool probed_here = false;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    // A device EAL probed, closed by an earlier DpdkPort: probe it as EAL had, unless the caller
    // gives arguments of its own.
    const std::string eal_devargs = devargs == name ? released_device(name) : "";
    std::string probe_args = eal_devargs.empty() ? devargs : eal_devargs;
    // net_memif: one ring slot per frame (see kMemifBufferArg).
    if (name.rfind("net_memif", 0) == 0 && kvarg(probe_args, kMemifBufferArg).empty() &&
        config.mtu >= kMinMtu && config.mtu <= kMaxMtu) {
      probe_args += std::string(",") + kMemifBufferArg + "=" +
                    std::to_string(frame_buffer_size(frame_len_for(config)));
    }
    // rte_dev_probe gives 0, not -EEXIST, for a device already there (with no ethdev port:
    // one of another class, or one whose port was closed without removing it).
    const bool existed = Eal::device_listed(name);
    const int rc = rte_dev_probe(probe_args.c_str());
    if (rc < 0 && rc != -EEXIST) {
      *error = "probe '" + devargs + "' failed: " + errno_text(rc) +
               " (driver missing, bad argument, or interface absent; EAL's log says which)";
      return nullptr;
    }
    // EAL's device again: set up as one EAL probed (removed and noted again on close).
    probed_here = rc == 0 && !existed && eal_devargs.empty();
    if (rc == 0) set_released_device(name, "");
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
      // A PCI address written differently from EAL's canonical form ("01:00.0" for
      // "0000:01:00.0") names no port: match the device string instead.
      rte_dev_iterator it;
      bool found = false;
      if (rte_eth_iterator_init(&it, devargs.c_str()) == 0) {
        const uint16_t id = rte_eth_iterator_next(&it);
        if (id != RTE_MAX_ETHPORTS) {
          port_id = id;
          found = true;
          rte_eth_iterator_cleanup(&it);
        }
      }
      if (!found) {
        // A device of another class (crypto_null0, a raw or event device) probes but is no
        // ethdev: one this call probed goes again, so the name is free for what comes next;
        // one that was there before stays.
        if (rc == 0 && !existed) remove_probed(name);
        *error = "probe '" + devargs + "' created no ethdev port named '" + name +
                 "' (not a network device?)";
        return nullptr;
      }
    }
  }
  return setup(port_id, config, devargs, probed_here, error);
}

std::unique_ptr<DpdkPort> DpdkPort::open_port_id(uint16_t port_id, const PortConfig& config,
                                                 std::string* error, OnClose on_close) {
  if (!Eal::running()) {
    *error = "open port " + std::to_string(port_id) + ": EAL is not running (call Eal::init first)";
    return nullptr;
  }
  if (!rte_eth_dev_is_valid_port(port_id)) {
    *error = "open port " + std::to_string(port_id) + ": no such ethdev port";
    return nullptr;
  }
  return setup(port_id, config, "", on_close == OnClose::kRemoveDevice, error);
}

std::unique_ptr<DpdkPort> DpdkPort::setup(uint16_t port_id, const PortConfig& config,
                                          const std::string& devargs, bool remove_on_close,
                                          std::string* error) {
  std::unique_ptr<DpdkPort> port(new DpdkPort());
  port->port_id_ = port_id;
  port->remove_on_close_ = remove_on_close;
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  if (rte_eth_dev_get_name_by_port(port_id, name) == 0) port->name_ = name;
  const std::string what = devargs.empty() ? port->name_ : devargs;
  auto fail = [&](const std::string& msg) {
    *error = "open '" + what + "': " + msg;
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(g_held_mu);
    port->held_ = g_held_ports.insert(port_id).second;
  }
  if (!port->held_) {
    return fail("port '" + port->name_ +
                "' is already open in this process (each device needs a device name of its own, "
                "e.g. net_af_packet0 and net_af_packet1)");
  }

  rte_eth_dev_info info;
  int rc = rte_eth_dev_info_get(port_id, &info);
  if (rc != 0) return fail("rte_eth_dev_info_get: " + errno_text(rc));
  port->device_ = info.device;
  port->driver_ = info.driver_name ? info.driver_name : "";
  port->shares_peer_memory_ = port->driver_ == "net_memif";
  const rte_bus* bus = info.device ? rte_dev_bus(info.device) : nullptr;
  port->virtual_device_ = !bus || std::strcmp(rte_bus_name(bus), "vdev") == 0;
  if (!devargs.empty() && !remove_on_close && info.device != nullptr) {
    // A device EAL probed (--vdev, the PCI scan): closing the port releases it for good unless
    // ~DpdkPort removes the device and open() probes it again, as EAL had it.
    const rte_devargs* da = rte_dev_devargs(info.device);
    port->eal_devargs_ = rte_dev_name(info.device);
    if (da != nullptr && da->args != nullptr && *da->args != '\0') {
      port->eal_devargs_ += std::string(",") + da->args;
    }
    port->open_name_ = devargs.substr(0, devargs.find(','));
  }

  if (config.mtu < kMinMtu || config.mtu > kMaxMtu) {
    return fail("mtu " + std::to_string(config.mtu) + " outside [" + std::to_string(kMinMtu) +
                ", " + std::to_string(kMaxMtu) + "]");
  }
  port->max_frame_len_ = frame_len_for(config);
  const char* mtu_note = config.vlan ? " with a VLAN tag" : "";

  // The smallest data room the driver accepts, and the largest frame it carries.
  uint32_t driver_min_data = info.min_rx_bufsize;
  if (port->driver_ == "net_af_packet") {
    const uint32_t framesz = devarg_u32(info, "framesz", kAfPacketDefaultFrameSize);
    const uint32_t slot = framesz > kAfPacketSlotHeader ? framesz - kAfPacketSlotHeader : 0;
    if (port->max_frame_len_ > slot) {
      return fail("net_af_packet framesz=" + std::to_string(framesz) + " carries frames up to " +
                  std::to_string(slot) + " B but mtu " + std::to_string(config.mtu) + mtu_note +
                  " needs " + std::to_string(port->max_frame_len_) +
                  " B: add blocksz=8192,framesz=8192,framecnt=512 to the vdev");
    }
    driver_min_data = std::max(driver_min_data, slot);
    port->rx_ring_frames_ = devarg_u32(info, "framecnt", kAfPacketDefaultFrameCount);
    // The PMD's statistics leave out the frames the kernel dropped because its ring was full
    // (13 % of them in a 64-QP write_bw before the port budget, with imissed 0): eth_stats()
    // reads them from the sockets (PACKET_STATISTICS).
    const std::string iface = devarg_str(info, "iface");
    const unsigned ifindex = iface.empty() ? 0 : if_nametoindex(iface.c_str());
    if (ifindex) port->ring_sockets_ = claim_packet_ring_sockets(static_cast<int>(ifindex));
  }
  if (port->driver_ == "net_memif") {
    const uint32_t bsize = devarg_u32(info, kMemifBufferArg, kMemifDefaultBufferSize);
    if (port->max_frame_len_ > bsize) {
      return fail("net_memif bsize=" + std::to_string(bsize) + " holds frames up to " +
                  std::to_string(bsize) + " B but mtu " + std::to_string(config.mtu) + mtu_note +
                  " needs " + std::to_string(port->max_frame_len_) +
                  " B, and frames spanning several ring slots are lost or duplicated when the "
                  "ring fills (DPDK 22.11): leave bsize out (the port sets it from the mtu) or "
                  "use bsize=" +
                  std::to_string(frame_buffer_size(port->max_frame_len_)) + " on both sides");
    }
    // A whole buffer fits one mbuf: the driver's receive path then copies without chaining.
    driver_min_data = std::max(driver_min_data, bsize);
    const uint32_t log2 = devarg_u32(info, "rsize", kMemifDefaultRingLog2);
    port->rx_ring_frames_ = log2 < 16 ? 1u << log2 : 0;
  }

  // A frame as the driver counts it: a driver that reports its limits may count more than the
  // frame on top of the MTU (virtio: a VLAN tag and its 12-byte net header), and refuses an rx
  // queue whose buffers cannot hold that without scatter.
  const uint32_t frame_room = std::max(port->max_frame_len_, config.mtu + reported_overhead(info));
  uint32_t data_size = config.mbuf_data_size;
  if (data_size == 0) {
    data_size = std::max(frame_buffer_size(frame_room), driver_min_data);
  } else if (data_size < frame_room || data_size < driver_min_data) {
    return fail("mbuf_data_size " + std::to_string(data_size) + " is below the " +
                std::to_string(std::max(frame_room, driver_min_data)) +
                " B this mtu and driver need");
  }
  if (data_size + RTE_PKTMBUF_HEADROOM > UINT16_MAX) {
    return fail("mbuf data room " + std::to_string(data_size) + " too large");
  }
  port->buffer_capacity_ = data_size;

  int socket = rte_eth_dev_socket_id(port_id);
  if (socket < 0) socket = SOCKET_ID_ANY;
  // The per-lcore cache must not exceed 1/1.5 of the pool (rte_mempool_create rule).
  const uint32_t cache = std::min<uint32_t>(256, config.num_mbufs / 8);
  const std::string pool_name = next_pool_name();
  port->pool_ =
      rte_pktmbuf_pool_create(pool_name.c_str(), config.num_mbufs, cache, 0,
                              static_cast<uint16_t>(data_size + RTE_PKTMBUF_HEADROOM), socket);
  if (port->pool_ == nullptr) {
    return fail("mbuf pool of " + std::to_string(config.num_mbufs) + " x " +
                std::to_string(data_size) + " B: " + errno_text(rte_errno) +
                " (raise EAL -m or lower num_mbufs)");
  }
  // Without hugepages the pool is anonymous memory that the pool's set-up touched only at each
  // buffer's header: a buffer's data pages would fault on first use, under the first messages.
  rte_mempool_mem_iter(
      port->pool_,
      [](rte_mempool*, void*, rte_mempool_memhdr* m, unsigned) {
        const auto a = reinterpret_cast<uintptr_t>(m->addr);
        populate_pages(a, a + m->len);
      },
      nullptr);

  rte_eth_conf conf;
  std::memset(&conf, 0, sizeof(conf));
  // Drivers' reported limits are not all real: net_af_packet reports 1518-byte frames and
  // carries whatever its frame slots hold (checked above), so the device MTU is clamped to
  // what ethdev accepts. net_tap enforces its limit on transmit, where an oversize frame would
  // be refused for ever: refuse such an mtu now.
  if (config.mtu > max_device_mtu(info) && std::strcmp(info.driver_name, "net_tap") == 0) {
    return fail("mtu " + std::to_string(config.mtu) + " exceeds net_tap's maximum of " +
                std::to_string(max_device_mtu(info)) + " (frames up to " +
                std::to_string(info.max_rx_pktlen) + " B): use mtu " +
                std::to_string(max_device_mtu(info)) + " or less (RoCE path MTU 1024)");
  }
  port->device_mtu_ = std::clamp<uint32_t>(config.mtu, info.min_mtu, max_device_mtu(info));
  conf.rxmode.mtu = port->device_mtu_;
  // The engine sends only mbufs of this pool with refcnt 1, the condition for fast free.
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) {
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    port->tx_fast_free_ = true;
  }
  rc = rte_eth_dev_configure(port_id, 1, 1, &conf);
  if (rc != 0) return fail("rte_eth_dev_configure: " + errno_text(rc));
  port->configured_ = true;

  uint16_t rx_desc = config.rx_desc;
  uint16_t tx_desc = config.tx_desc;
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc);
  if (rc != 0) return fail("rte_eth_dev_adjust_nb_rx_tx_desc: " + errno_text(rc));
  rc = rte_eth_rx_queue_setup(port_id, 0, rx_desc, socket, nullptr, port->pool_);
  if (rc != 0) return fail("rx queue setup: " + errno_text(rc));
  if (!port->virtual_device_) port->rx_ring_frames_ = rx_desc;
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  rc = rte_eth_tx_queue_setup(port_id, 0, tx_desc, socket, &txconf);
  if (rc != 0) return fail("tx queue setup: " + errno_text(rc));

  rc = rte_eth_dev_start(port_id);
  if (rc != 0) return fail("rte_eth_dev_start: " + errno_text(rc));
  port->started_ = true;

  // Not every driver implements promiscuous mode (-ENOTSUP); those that don't filter anyway.
  if (config.promiscuous) {
    rc = rte_eth_promiscuous_enable(port_id);
    if (rc != 0 && rc != -ENOTSUP) return fail("promiscuous mode: " + errno_text(rc));
  }
  if (config.mac != std::array<uint8_t, 6>{}) {
    rte_ether_addr mac;
    std::memcpy(mac.addr_bytes, config.mac.data(), sizeof(mac.addr_bytes));
    rc = rte_eth_dev_default_mac_addr_set(port_id, &mac);
    // Drivers without a MAC filter (net_ring) cannot set one: the address is then only what
    // the stack writes as its source, which is all a filterless port needs.
    if (rc != 0 && rc != -ENOTSUP) return fail("setting the MAC address: " + errno_text(rc));
    std::memcpy(port->mac_, config.mac.data(), sizeof(port->mac_));
  } else {
    rte_ether_addr mac;
    rc = rte_eth_macaddr_get(port_id, &mac);
    if (rc != 0) return fail("rte_eth_macaddr_get: " + errno_text(rc));
    std::memcpy(port->mac_, mac.addr_bytes, sizeof(port->mac_));
  }
  if (port->shares_peer_memory_) {
    // Before the first burst. Without the gate the port works as it did before it: a peer
    // that leaves during a burst may crash this process.
    const char* why = nullptr;
    port->gated_ = burst_gate::add(&port->gate_, &why);
    if (!port->gated_) {
      std::fprintf(stderr,
                   "DpdkPort %s: bursts are not kept apart from the peer's leaving (%s): this "
                   "process may crash if its peer leaves during a burst\n",
                   port->name_.c_str(), why ? why : "unknown");
    }
  }
  return port;
}

DpdkPort::~DpdkPort() {
  stop();
  release_packet_ring_sockets(ring_sockets_);  // a port that never started (set-up failed)
  // Closing a memif port frees its queues and its socket: on the interrupt thread, as stop().
  // A device EAL probed is ours to remove only once this port configured it (not when set-up
  // failed on a port that another DpdkPort has open), and only if it has no other port left (a
  // PCI function may carry several).
  bool released = false;
  on_control_thread([this, &released] {
    if (configured_) rte_eth_dev_close(port_id_);
    if (device_ == nullptr) return;
    if (!remove_on_close_ && configured_ && !eal_devargs_.empty()) {
      uint16_t other = 0;
      released = true;
      RTE_ETH_FOREACH_DEV_OF(other, device_) released = false;
    }
    if (remove_on_close_ || released) rte_dev_remove(device_);
  });
  if (released) set_released_device(open_name_, eal_devargs_);
  if (held_) {
    std::lock_guard<std::mutex> lock(g_held_mu);
    g_held_ports.erase(port_id_);
  }
  if (gated_) burst_gate::remove(&gate_);
  if (pool_ != nullptr) {
    // Freeing a pool whose mbufs are still referenced (by the engine, or by a peer's ring)
    // would turn their later free into a write to freed memory: leak it instead, and say so.
    const unsigned in_use = rte_mempool_in_use_count(pool_);
    if (in_use == 0) {
      rte_mempool_free(pool_);
    } else {
      std::fprintf(stderr, "DpdkPort %s: %u mbufs still in use at close; pool leaked\n",
                   name_.c_str(), in_use);
    }
  }
}

void DpdkPort::stop() {
  if (!started_) return;
  // net_af_packet closes its sockets when it stops: take their last drop counts now, and let
  // the descriptors go (their numbers may be reused by anything after this).
  if (!ring_sockets_.empty()) {
    std::lock_guard<std::mutex> lock(ring_drops_mu_);
    read_ring_drops_locked();
    release_packet_ring_sockets(ring_sockets_);
    ring_sockets_.clear();
  }
  on_control_thread([this] { rte_eth_dev_stop(port_id_); });
  started_ = false;
}

// net_memif handles its peer's leaving on EAL's interrupt thread (memif_disconnect: frees the
// control channel, unmaps and frees the shared regions), and its own stop does the same on the
// caller's thread, with nothing in the driver to keep the two apart: a peer that left while this
// side stopped freed them twice (dpdk/README.md, known issue; tests/dpdk/memif_stop_test.cc).
// So a port that shares memory with its peer stops and closes on the interrupt thread, where
// the two take turns. The lock keeps prefault_shared_memory() out as well. If the interrupt
// thread does not get to it (it never should take a second), the work runs on the caller's thread.
void DpdkPort::on_control_thread(const std::function<void()>& fn) {
  if (!shares_peer_memory_) {
    fn();
    return;
  }
  std::lock_guard<std::mutex> lock(shared_memory_mu());
  if (!Eal::run_on_interrupt_thread(fn, std::chrono::seconds(5))) {
    std::fprintf(stderr,
                 "DpdkPort %s: could not stop or close the port on EAL's interrupt thread (no "
                 "answer within 5 s, or no handle); doing it on this thread\n",
                 name_.c_str());
    fn();
  }
}

void DpdkPort::read_ring_drops_locked() const {
  // PACKET_STATISTICS counts since the last read, hence the running total.
  for (const int fd : ring_sockets_) {
    tpacket_stats st{};
    socklen_t len = sizeof st;
    if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) ring_drops_ += st.tp_drops;
  }
}

// A burst of a port whose driver shares memory with its peer: never beside what EAL's interrupt
// thread does to that memory (dpdk/burst_gate.h).
template <uint16_t (DpdkPort::*Burst)(PktBuf*, uint16_t)>
uint16_t DpdkPort::through_gate(PktBuf* bufs, uint16_t n) {
  if (unlikely(!burst_gate::enter(gate_))) {
    bursts_gated_.add(1);
    return 0;
  }
  const uint16_t done = (this->*Burst)(bufs, n);
  burst_gate::leave(gate_);
  return done;
}

uint16_t DpdkPort::rx_burst(PktBuf* bufs, uint16_t n) {
  return gated_ ? through_gate<&DpdkPort::rx_burst_now>(bufs, n) : rx_burst_now(bufs, n);
}

uint16_t DpdkPort::rx_burst_now(PktBuf* bufs, uint16_t n) {
  rte_mbuf* mbufs[kChunk];
  uint16_t seen = 0;  // frames taken from the driver; out <= seen <= n
  uint16_t out = 0;
  uint64_t bytes = 0;
  while (seen < n) {
    const uint16_t want = std::min<uint16_t>(n - seen, kChunk);
    const uint16_t got = rte_eth_rx_burst(port_id_, 0, mbufs, want);
    seen += got;
    for (uint16_t i = 0; i < got; ++i) {
      rte_mbuf* m = mbufs[i];
      if (i + 1 < got) rte_prefetch0(rte_pktmbuf_mtod(mbufs[i + 1], void*));
      if (unlikely(m->nb_segs != 1)) {
        m = linearize(m);
        if (m == nullptr) continue;
      }
      if (unlikely(m->data_len > max_frame_len_)) {
        rte_pktmbuf_free(m);
        rx_dropped_oversize_.add(1);
        continue;
      }
      PktBuf& b = bufs[out++];
      b.handle = m;
      b.data = rte_pktmbuf_mtod(m, uint8_t*);
      b.len = m->data_len;
      b.cap = m->buf_len - m->data_off;
      bytes += m->data_len;
    }
    if (got < want) break;
  }
  if (out != 0) {
    rx_packets_.add(out);
    rx_bytes_.add(bytes);
  }
  return out;
}

// Drivers chain mbufs when a frame does not fit one (net_pcap does on rx when the data room is
// small). The engine parses frames as one contiguous span, so copy into a fresh mbuf.
rte_mbuf* DpdkPort::linearize(rte_mbuf* m) {
  const uint32_t len = m->pkt_len;
  rte_mbuf* flat = len <= buffer_capacity_ ? rte_pktmbuf_alloc(pool_) : nullptr;
  if (flat == nullptr) {
    rte_pktmbuf_free(m);
    rx_dropped_chained_.add(1);
    return nullptr;
  }
  uint8_t* dst = rte_pktmbuf_mtod(flat, uint8_t*);
  // rte_pktmbuf_read copies across segments into dst unless the bytes are contiguous already.
  const void* src = rte_pktmbuf_read(m, 0, len, dst);
  if (src != dst) std::memcpy(dst, src, len);
  flat->data_len = static_cast<uint16_t>(len);
  flat->pkt_len = len;
  flat->port = m->port;
  rte_pktmbuf_free(m);
  rx_linearized_.add(1);
  return flat;
}

uint16_t DpdkPort::tx_burst(PktBuf* bufs, uint16_t n) {
  return gated_ ? through_gate<&DpdkPort::tx_burst_now>(bufs, n) : tx_burst_now(bufs, n);
}

uint16_t DpdkPort::tx_burst_now(PktBuf* bufs, uint16_t n) {
  rte_mbuf* mbufs[kChunk];
  uint16_t taken = 0;
  uint64_t bytes = 0;
  while (taken < n) {
    const uint16_t k = std::min<uint16_t>(n - taken, kChunk);
    for (uint16_t i = 0; i < k; ++i) {
      const PktBuf& b = bufs[taken + i];
      rte_mbuf* m = static_cast<rte_mbuf*>(b.handle);
      // The engine may have moved `data` (to prepend headers) and set `len`; an mbuf alloc()
      // handed out has one segment, so data_len and pkt_len are the same.
      m->data_off = static_cast<uint16_t>(b.data - static_cast<uint8_t*>(m->buf_addr));
      m->data_len = static_cast<uint16_t>(b.len);
      m->pkt_len = b.len;
      mbufs[i] = m;
    }
    // Once handed over, an mbuf may be freed and reused by the driver (or, on net_ring, by the
    // peer): count bytes from the caller's PktBufs, never from the mbufs.
    const uint16_t sent = rte_eth_tx_burst(port_id_, 0, mbufs, k);
    for (uint16_t i = 0; i < sent; ++i) bytes += bufs[taken + i].len;
    taken += sent;
    if (sent < k) break;
  }
  if (taken != 0) {
    tx_packets_.add(taken);
    tx_bytes_.add(bytes);
  }
  if (taken != n) tx_rejected_.add(n - taken);
  return taken;
}

uint16_t DpdkPort::alloc(PktBuf* bufs, uint16_t n) {
  rte_mbuf* mbufs[kChunk];
  uint16_t done = 0;
  bool cleaned = false;
  while (done < n) {
    const uint16_t want = std::min<uint16_t>(n - done, kChunk);
    uint16_t k = want;
    if (unlikely(rte_pktmbuf_alloc_bulk(pool_, mbufs, k) != 0)) {
      // The bulk call is all or nothing; near exhaustion take what is left one at a time.
      uint16_t got = 0;
      auto take_singly = [&] {
        while (got < k && (mbufs[got] = rte_pktmbuf_alloc(pool_)) != nullptr) ++got;
      };
      take_singly();
      // Still short: many drivers free what they sent only inside a later tx burst, and an
      // engine with no buffer builds nothing to send. Ask the driver to free what its transmit
      // ring is done with (where it can: -ENOTSUP otherwise), once a call, and take again.
      if (got < k && !cleaned) {
        cleaned = true;
        if (rte_eth_tx_done_cleanup(port_id_, 0, 0) > 0) take_singly();
      }
      k = got;
    }
    for (uint16_t i = 0; i < k; ++i) {
      rte_mbuf* m = mbufs[i];
      PktBuf& b = bufs[done + i];
      b.handle = m;
      b.data = rte_pktmbuf_mtod(m, uint8_t*);
      b.len = 0;
      b.cap = rte_pktmbuf_tailroom(m);
    }
    done += k;
    if (k < want) break;
  }
  return done;
}

void DpdkPort::free(PktBuf* bufs, uint16_t n) {
  rte_mbuf* mbufs[kChunk];
  uint16_t done = 0;
  while (done < n) {
    const uint16_t k = std::min<uint16_t>(n - done, kChunk);
    for (uint16_t i = 0; i < k; ++i) mbufs[i] = static_cast<rte_mbuf*>(bufs[done + i].handle);
    rte_pktmbuf_free_bulk(mbufs, k);
    done += k;
  }
}

std::string DpdkPort::mac_string() const {
  char s[18];
  std::snprintf(s, sizeof(s), "%02x:%02x:%02x:%02x:%02x:%02x", mac_[0], mac_[1], mac_[2], mac_[3],
                mac_[4], mac_[5]);
  return s;
}

bool DpdkPort::link_up() const {
  rte_eth_link link;
  std::memset(&link, 0, sizeof(link));
  if (rte_eth_link_get_nowait(port_id_, &link) != 0) return false;
  return link.link_status == RTE_ETH_LINK_UP;
}

uint32_t DpdkPort::link_speed_mbps() const {
  rte_eth_link link;
  std::memset(&link, 0, sizeof(link));
  if (rte_eth_link_get_nowait(port_id_, &link) != 0) return 0;
  return link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : link.link_speed;
}

uint64_t DpdkPort::prefault_shared_memory() {
  if (!shares_peer_memory_) return 0;
  // net_memif maps and unmaps the regions on EAL's interrupt thread when a peer connects or
  // leaves, and on the caller's thread when a port of this process stops or closes: run there,
  // under the lock that stops and closes take, so that no region goes away while it is read.
  std::lock_guard<std::mutex> lock(shared_memory_mu());
  uint64_t bytes = 0;
  Eal::run_on_interrupt_thread([&bytes] { bytes = populate_shared_regions(); },
                               std::chrono::seconds(1));
  return bytes;
}

uint64_t DpdkPort::populate_shared_regions() {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (!maps) return 0;
  uint64_t bytes = 0;
  char line[512];
  while (std::fgets(line, sizeof line, maps)) {
    // "start-end perms offset dev inode path": only the PMD's shared, writable regions.
    uintptr_t start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &start, &end, perms) != 3) continue;
    if (!std::strstr(line, "memif_region_") || perms[1] != 'w' || perms[3] != 's') continue;
    bytes += populate_pages(start, end);
  }
  std::fclose(maps);
  return bytes;
}

PortCounters DpdkPort::counters() const {
  PortCounters c;
  c.rx_packets = rx_packets_.get();
  c.rx_bytes = rx_bytes_.get();
  c.tx_packets = tx_packets_.get();
  c.tx_bytes = tx_bytes_.get();
  c.rx_linearized = rx_linearized_.get();
  c.rx_dropped_chained = rx_dropped_chained_.get();
  c.rx_dropped_oversize = rx_dropped_oversize_.get();
  c.tx_rejected = tx_rejected_.get();
  c.bursts_gated = bursts_gated_.get();
  return c;
}

bool DpdkPort::eth_stats(EthStats* out, std::string* error) const {
  rte_eth_stats s;
  const int rc = rte_eth_stats_get(port_id_, &s);
  if (rc != 0) {
    *error = "rte_eth_stats_get(" + name_ + "): " + errno_text(rc);
    return false;
  }
  out->ipackets = s.ipackets;
  out->opackets = s.opackets;
  out->ibytes = s.ibytes;
  out->obytes = s.obytes;
  out->imissed = s.imissed;
  {
    std::lock_guard<std::mutex> lock(ring_drops_mu_);
    read_ring_drops_locked();
    out->ring_drops = ring_drops_;
    out->imissed += ring_drops_;
  }
  out->ierrors = s.ierrors;
  out->oerrors = s.oerrors;
  out->rx_nombuf = s.rx_nombuf;
  return true;
}

uint32_t DpdkPort::buffers_in_use() const { return rte_mempool_in_use_count(pool_); }

}  // namespace roce::dpdk
