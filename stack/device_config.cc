#include "stack/device_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "stack/util/shown.h"

namespace roce {

namespace {
std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

bool parse_u64(const std::string& s, uint64_t* out) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

bool parse_bool(const std::string& s, bool* out) {
  if (s == "1" || s == "on" || s == "yes" || s == "true") {
    *out = true;
    return true;
  }
  if (s == "0" || s == "off" || s == "no" || s == "false") {
    *out = false;
    return true;
  }
  return false;
}

bool bad(std::string* err, const std::string& key, const std::string& value,
         const std::string& want) {
  *err = shown(key) + ": '" + shown(value) + "' is not " + want;
  return false;
}

// A fraction: a number in [0, 1), or [0, 1] with `closed`. NaN and infinities fail.
bool parse_fraction(const std::string& v, bool closed, double* out) {
  if (v.empty()) return false;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (*end || !(d >= 0 && (closed ? d <= 1 : d < 1))) return false;
  *out = d;
  return true;
}

bool parse_prefix(const std::string& v, bool want_v4, IpPrefix* out) {
  const auto slash = v.find('/');
  const std::string ip = v.substr(0, slash);
  bool v4 = false;
  if (!parse_ip(ip, &out->addr, &v4) || v4 != want_v4) return false;
  // ::ffff:a.b.c.d written as IPv6 would be an IPv4 GID: it belongs in ipv4.
  if (!want_v4 && out->ipv4()) return false;
  out->prefix_len = want_v4 ? 24 : 64;
  if (slash != std::string::npos) {
    uint64_t len = 0;
    if (!parse_u64(v.substr(slash + 1), &len) || len > (want_v4 ? 32u : 128u)) return false;
    out->prefix_len = static_cast<uint8_t>(len);
  }
  return true;
}
}  // namespace

bool IpPrefix::ipv4() const {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(addr.data(), kMapped, 12) == 0;
}

bool parse_mac(const std::string& s, Mac* out) {
  // Six groups of one or two hex digits, separated by ':'; nothing else (no signs, no 0x).
  // (from_chars takes neither a sign nor a 0x for an unsigned type.)
  Mac m{};
  const char* p = s.data();
  const char* const end = s.data() + s.size();
  for (size_t g = 0; g < 6; ++g) {
    if (g > 0 && (p == end || *p++ != ':')) return false;
    unsigned v = 0;
    const auto [next, ec] = std::from_chars(p, end, v, 16);
    if (ec != std::errc() || next - p > 2) return false;
    m[g] = static_cast<uint8_t>(v);
    p = next;
  }
  if (p != end) return false;
  *out = m;
  return true;
}

bool parse_ip(const std::string& s, Gid* out, bool* is_v4) {
  in_addr a4;
  in6_addr a6;
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) {
    *out = Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    std::memcpy(out->data() + 12, &a4, 4);
    *is_v4 = true;
    return true;
  }
  if (inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
    std::memcpy(out->data(), &a6, 16);
    *is_v4 = false;
    return true;
  }
  return false;
}

std::string format_gid(const Gid& g) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, g.data(), buf, sizeof buf);
  return buf;
}

std::string format_mac(const Mac& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  return buf;
}

std::vector<Gid> DeviceConfig::gid_table(const Mac& m) const {
  // GID 0: the IPv6 link-local address from the MAC (modified EUI-64, RFC 4291 appendix A),
  // as rxe exposes for its netdev; GID 1: the first IPv4 address; then the rest.
  std::vector<Gid> t;
  Gid ll{0xfe, 0x80, 0,    0,    0,    0,    0,   0, static_cast<uint8_t>(m[0] ^ 0x02),
         m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
  t.push_back(ll);
  for (const auto& p : ipv4) t.push_back(p.addr);
  for (const auto& p : ipv6) {
    if (p.addr != ll) t.push_back(p.addr);
  }
  return t;
}

bool apply_setting(DeviceConfig& c, const std::string& key_in, const std::string& value_in,
                   std::string* err) {
  const std::string key = trim(key_in);
  const std::string v = trim(value_in);
  uint64_t n = 0;
  if (key == "name") {
    const bool printable = std::all_of(v.begin(), v.end(), [](char ch) {
      return std::isgraph(static_cast<unsigned char>(ch)) && ch != '/';
    });
    if (v.empty() || v.size() > 63 || !printable) {
      return bad(err, key, v, "a device name (1-63 printable characters, no spaces or '/')");
    }
    c.name = v;
  } else if (key == "port") {
    if (v.empty()) return bad(err, key, v, "a DPDK device (e.g. net_af_packet0,iface=veth0)");
    c.port = v;
  } else if (key == "mac") {
    Mac m;
    if (!parse_mac(v, &m)) return bad(err, key, v, "a MAC address like 02:00:00:00:00:01");
    if (m[0] & 1) return bad(err, key, v, "a unicast MAC address");
    if (m == Mac{}) return bad(err, key, v, "a station's MAC address (not all zeros)");
    c.mac = m;
  } else if (key == "ipv4") {
    IpPrefix p;
    if (!parse_prefix(v, true, &p)) return bad(err, key, v, "an IPv4 address[/prefix]");
    // RFC 1122 3.2.1.3: 0/8 (this network), 127/8 (loopback), 224/4 (multicast) and 240/4
    // (reserved, with the limited broadcast) are no host's address; peers drop such senders.
    const uint8_t a = p.addr[12];
    if (a == 0 || a == 127 || a >= 224) {
      return bad(err, key, v, "a host's IPv4 address (not in 0/8, 127/8, 224/4 or 240/4)");
    }
    c.ipv4.push_back(p);
  } else if (key == "ipv6") {
    IpPrefix p;
    if (!parse_prefix(v, false, &p)) return bad(err, key, v, "an IPv6 address[/prefix]");
    // RFC 4291 2.5.2, 2.5.3, 2.7: neither the unspecified, the loopback nor a multicast address
    // can be an interface's (Linux refuses them too).
    static constexpr Gid kUnspecified{};
    static constexpr Gid kLoopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (p.addr == kUnspecified || p.addr == kLoopback || p.addr[0] == 0xFF) {
      return bad(err, key, v, "a unicast IPv6 address (not ::, ::1 or multicast)");
    }
    c.ipv6.push_back(p);
  } else if (key == "mtu") {
    if (!parse_u64(v, &n) || n < 576 || n > 9000) return bad(err, key, v, "an MTU in 576..9000");
    c.mtu = static_cast<uint32_t>(n);
  } else if (key == "ecn") {
    if (!parse_bool(v, &c.ecn)) return bad(err, key, v, "on or off");
  } else if (key == "vlan") {
    if (!parse_u64(v, &n) || n < 1 || n > 4094) return bad(err, key, v, "a VLAN id in 1..4094");
    c.vlan = static_cast<uint16_t>(n);
  } else if (key == "pcp") {
    if (!parse_u64(v, &n) || n > 7) return bad(err, key, v, "a priority in 0..7");
    c.pcp = static_cast<uint8_t>(n);
  } else if (key == "neighbor") {
    // "IP MAC"
    std::istringstream ss(v);
    std::string ip, mac, extra;
    ss >> ip >> mac >> extra;
    StaticNeighbor nb;
    bool v4;
    if (!parse_ip(ip, &nb.ip, &v4) || !parse_mac(mac, &nb.mac) || !extra.empty()) {
      return bad(err, key, v, "'IP MAC' (e.g. 10.0.0.2 02:00:00:00:00:02)");
    }
    c.neighbors.push_back(nb);
  } else if (key == "pcap") {
    if (v.empty()) return bad(err, key, v, "a file name");
    c.pcap = v;
  } else if (key == "counters") {
    if (v.empty()) return bad(err, key, v, "a file name, or - for standard error");
    c.counters = v;
  } else if (key == "drop") {
    if (!parse_fraction(v, false, &c.drop)) return bad(err, key, v, "a fraction in [0, 1)");
  } else if (key == "ce") {
    if (!parse_fraction(v, true, &c.ce)) return bad(err, key, v, "a fraction in [0, 1]");
  } else if (key == "cc") {
    if (v != "none" && v != "dcqcn") return bad(err, key, v, "none or dcqcn");
    c.cc = v;
  } else if (key == "cc_profile") {
    if (v != "paper" && v != "connectx") return bad(err, key, v, "paper or connectx");
    c.cc_profile = v;
  } else if (key == "cc_params") {
    c.cc_params = v;  // checked by validate(), on top of whichever cc_profile is given
  } else if (key == "fault_seed") {
    if (!parse_u64(v, &n)) return bad(err, key, v, "a number");
    c.fault_seed = n;
  } else if (key == "mode") {
    if (v == "thread") {
      c.inline_mode = false;
    } else if (v == "inline") {
      c.inline_mode = true;
    } else {
      return bad(err, key, v, "thread or inline");
    }
  } else if (key == "cpu") {
    if (!parse_u64(v, &n) || n > 4095) return bad(err, key, v, "a CPU number");
    c.cpu = static_cast<int>(n);
  } else if (key == "idle_sleep_us") {
    if (!parse_u64(v, &n) || n < 1 || n > 1'000'000) {
      return bad(err, key, v, "microseconds in 1..1000000");
    }
    c.idle_sleep_us = n;
  } else if (key == "buffers") {
    if (!parse_u64(v, &n) || n < 1024 || n > (1u << 20)) return bad(err, key, v, "1024..1048576");
    c.buffers = static_cast<uint32_t>(n);
  } else if (key == "inflight") {
    if (!parse_u64(v, &n) || (n != 0 && n < 16) || n > (1u << 22)) {
      return bad(err, key, v, "0 (no bound) or PSNs in 16..4194304");
    }
    c.inflight = static_cast<uint32_t>(n);
  } else if (key == "eal") {
    std::istringstream ss(v);
    std::string a;
    while (ss >> a) c.eal_args.push_back(a);
  } else {
    *err = "unknown setting '" + shown(key) +
           "' (name, port, mac, ipv4, ipv6, mtu, ecn, vlan, pcp, neighbor, pcap, counters, drop, "
           "ce, cc, cc_profile, cc_params, fault_seed, mode, cpu, idle_sleep_us, buffers, "
           "inflight, eal)";
    return false;
  }
  return true;
}

bool parse_config_text(const std::string& text, std::vector<DeviceConfig>* out, std::string* err) {
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  DeviceConfig* cur = nullptr;
  const size_t first = out->size();
  std::vector<int> name_line;  // per device parsed here: the line that gave it its name
  while (std::getline(in, line)) {
    ++lineno;
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(lineno) + ": ";
    if (line.front() == '[') {
      // "[device]" or "[device NAME]"; not "[devicefoo]".
      if (line.back() != ']' || line.rfind("[device", 0) != 0 ||
          !(line.size() == 8 || std::isspace(static_cast<unsigned char>(line[7])))) {
        *err = where + "expected [device NAME]";
        return false;
      }
      out->emplace_back();
      cur = &out->back();
      name_line.push_back(lineno);
      const std::string name = trim(line.substr(7, line.size() - 8));
      if (!name.empty() && !apply_setting(*cur, "name", name, err)) {
        *err = where + *err;
        return false;
      }
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      *err = where + "expected key = value";
      return false;
    }
    if (!cur) {
      out->emplace_back();
      cur = &out->back();
      name_line.push_back(lineno);
    }
    if (!apply_setting(*cur, line.substr(0, eq), line.substr(eq + 1), err)) {
      *err = where + *err;
      return false;
    }
    if (trim(line.substr(0, eq)) == "name") name_line.back() = lineno;
  }
  // Each device is one ibv device, found by its name: a second one of a name would replace the
  // first.
  for (size_t j = 1; j < name_line.size(); ++j) {
    const std::string& name = (*out)[first + j].name;
    for (size_t i = 0; i < j; ++i) {
      if ((*out)[first + i].name == name) {
        *err = "line " + std::to_string(name_line[j]) + ": name: '" + name +
               "' is already the name of the device of line " + std::to_string(name_line[i]);
        return false;
      }
    }
  }
  return true;
}

bool parse_device_string(const std::string& spec, DeviceConfig* cfg, std::string* err) {
  std::istringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (trim(item).empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      *err = "'" + shown(trim(item)) + "' is not key=value";
      return false;
    }
    if (!apply_setting(*cfg, item.substr(0, eq), item.substr(eq + 1), err)) return false;
  }
  return true;
}

bool devices_from_env(std::vector<DeviceConfig>* out, std::string* err) {
  if (const char* path = std::getenv("ROCE_CONFIG"); path && *path) {
    std::ifstream f(path);
    if (!f) {
      *err = std::string("ROCE_CONFIG: cannot read '") + path + "'";
      return false;
    }
    std::stringstream buf;
    buf << f.rdbuf();
    if (!parse_config_text(buf.str(), out, err)) {
      *err = std::string("ROCE_CONFIG ") + path + ": " + *err;
      return false;
    }
  }
  if (const char* dev = std::getenv("ROCE_DEVICE"); dev && *dev) {
    if (out->empty()) out->emplace_back();
    if (!parse_device_string(dev, &out->front(), err)) {
      *err = "ROCE_DEVICE: " + *err;
      return false;
    }
  }
  return true;
}

bool DeviceConfig::dcqcn_params(cc::DcqcnParams* out, std::string* err, double line_gbps) const {
  *out = cc_profile == "connectx" ? cc::DcqcnParams::connectx(line_gbps)
                                  : cc::DcqcnParams::paper(line_gbps);
  if (cc_params.empty() || out->parse(cc_params, err)) return true;
  *err = "cc_params: " + *err;
  return false;
}

bool validate(const DeviceConfig& c, std::string* err) {
  if (c.port.empty()) {
    *err = c.name + ": no port given (port = a DPDK device, e.g. net_af_packet0,iface=veth0)";
    return false;
  }
  if (c.ipv4.empty() && c.ipv6.empty()) {
    *err = c.name + ": no address given (ipv4 = ... and/or ipv6 = ...)";
    return false;
  }
  if (!c.ipv6.empty() && c.mtu < 1280) {
    *err = c.name + ": mtu " + std::to_string(c.mtu) +
           " is below IPv6's minimum of 1280 (RFC 8200), and ipv6 is set";
    return false;
  }
  if (c.pcp && !c.vlan) {
    *err = c.name + ": pcp needs a vlan (priority travels in the 802.1Q tag)";
    return false;
  }
  cc::DcqcnParams dcqcn;
  if (!c.dcqcn_params(&dcqcn, err)) {
    *err = c.name + ": " + *err;
    return false;
  }
  return true;
}

}  // namespace roce
