// Device configuration: which port a stack instance drives and how it appears on the network.
// One ibv device per configured device. Sources, later ones overriding earlier ones:
//
//   1. a configuration file (ROCE_CONFIG=/path, or --config): sections of key = value lines
//        [device roce0]
//        port = net_af_packet0,iface=veth0,blocksz=8192,framesz=8192,framecnt=512
//        ipv4 = 10.0.0.1/24
//        ipv6 = fd00::1/64
//        mtu = 4200
//   2. ROCE_DEVICE="port=net_pcap0,iface=veth0; ipv4=10.0.0.1/24; mtu=4200" (one device,
//      ';'-separated, since DPDK device arguments contain commas)
//   3. command-line flags of the tools (the same keys).
//
// Every invalid value is refused with one line naming the key, the value and what is allowed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stack/cc/dcqcn.h"
#include "stack/core/types.h"

namespace roce {

struct IpPrefix {
  Gid addr{};  // IPv6, or IPv4-mapped
  uint8_t prefix_len = 0;
  bool ipv4() const;
};

struct StaticNeighbor {
  Gid ip{};
  Mac mac{};
};

struct DeviceConfig {
  std::string name = "roce0";  // the ibv device name
  std::string port;            // DPDK devargs: vdev string or PCI address (required)
  std::optional<Mac> mac;      // default: the port's own MAC
  std::vector<IpPrefix> ipv4;  // the first one is GID index 1
  std::vector<IpPrefix> ipv6;  // GID index 0 is fe80::/64 from the MAC; these follow
  uint32_t mtu = 1500;  // link MTU (IP packet size, 576..9000; 1280 up with ipv6); the IB path MTU
                        // follows from it
  bool ecn = false;     // mark data packets ECT(0) (DCQCN)
  std::optional<uint16_t> vlan;  // 802.1Q VLAN id
  uint8_t pcp = 0;               // 802.1Q priority (only with a VLAN)
  std::vector<StaticNeighbor> neighbors;
  std::string pcap;         // capture every RoCE frame sent and received to this file (written out
                            // about once a second, whole records only, and at close)
  std::string counters;     // the counters go here ("-": stderr) when the device closes
  double drop = 0;          // fault injection: drop this fraction of frames received and sent
  double ce = 0;            // fault injection: mark this fraction of the ECT frames sent CE
  std::string cc = "none";  // congestion control of new QPs: none | dcqcn
  std::string cc_profile = "paper";  // DCQCN parameters: paper | connectx
  std::string cc_params;             // DCQCN overrides, "key=value,..." (stack/cc/dcqcn.h)
  uint64_t fault_seed = 1;
  bool inline_mode = false;           // the application's polling drives the engine (no thread)
  int cpu = -1;                       // pin the engine thread
  uint64_t idle_sleep_us = 200;       // longest idle sleep of the engine thread
  uint32_t buffers = 8191;            // mbufs in the port's pool
  std::vector<std::string> eal_args;  // extra EAL arguments
  // Unacknowledged PSNs the port's RC requesters may have together (EngineConfig::
  // port_inflight_psns); 0: no bound beyond each QP's window.
  uint32_t inflight = 512;

  // The RoCEv2 GID table this configuration yields (index 0: link-local, 1: first IPv4, ...).
  std::vector<Gid> gid_table(const Mac& mac) const;
  // The DCQCN parameters of the device's QPs: cc_profile at `line_gbps` (the link's speed where
  // the device knows it), then cc_params, whose line_gbps wins. False and *err ("cc_params:
  // dcqcn: ...") if the overrides are bad, or do not fit under that line rate.
  bool dcqcn_params(cc::DcqcnParams* out, std::string* err, double line_gbps = kLineGbps) const;
  // The line rate DCQCN assumes where the link's speed is unknown: DPDK virtual devices report
  // none, or a nominal one that could not be trusted.
  static constexpr double kLineGbps = 100;
};

// Applies one key = value; false with *err set ("mtu: '99999' is not ... (576..9000)").
bool apply_setting(DeviceConfig& cfg, const std::string& key, const std::string& value,
                   std::string* err);
// Parses a configuration file's text; devices in file order.
bool parse_config_text(const std::string& text, std::vector<DeviceConfig>* out, std::string* err);
// Parses "key=value; key=value".
bool parse_device_string(const std::string& spec, DeviceConfig* cfg, std::string* err);
// Devices from the environment (ROCE_CONFIG, then ROCE_DEVICE applied to the first device).
bool devices_from_env(std::vector<DeviceConfig>* out, std::string* err);
// Checks what cannot be checked key by key (a port is given, ...).
bool validate(const DeviceConfig& cfg, std::string* err);

bool parse_mac(const std::string& s, Mac* out);
bool parse_ip(const std::string& s, Gid* out, bool* is_v4);
std::string format_gid(const Gid& g);
std::string format_mac(const Mac& m);

}  // namespace roce
