// libFuzzer on what a user writes: a configuration file's text, a ROCE_DEVICE string and DCQCN
// overrides (stack/device_config.h, stack/cc/dcqcn.h), all three from the same input.
// Properties: no crash or exception; a refusal is one non-empty line; what is accepted is in
// range (fractions, addresses in the list of their family) and survives a round trip through
// its formatted text (MACs, addresses, DCQCN parameters); a refused DCQCN override changes
// nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "stack/cc/dcqcn.h"
#include "stack/device_config.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void check_refusal(const std::string& err) { check(!err.empty() && err.find('\n') == err.npos); }

void check_device(const roce::DeviceConfig& c) {
  check(c.drop >= 0 && c.drop < 1 && c.ce >= 0 && c.ce <= 1);
  if (c.mac) {
    roce::Mac m{};
    check(roce::parse_mac(roce::format_mac(*c.mac), &m) && m == *c.mac);
  }
  for (const auto* list : {&c.ipv4, &c.ipv6}) {
    for (const roce::IpPrefix& p : *list) {
      check(p.ipv4() == (list == &c.ipv4));
      check(p.prefix_len <= (p.ipv4() ? 32 : 128));
      roce::Gid g{};
      bool v4 = false;
      check(roce::parse_ip(roce::format_gid(p.addr), &g, &v4) && g == p.addr);
    }
  }
  for (const roce::StaticNeighbor& n : c.neighbors) {
    roce::Mac m{};
    check(roce::parse_mac(roce::format_mac(n.mac), &m) && m == n.mac);
  }
  std::string err;
  if (!roce::validate(c, &err)) check_refusal(err);
  const auto table = c.gid_table(roce::Mac{2, 0, 0, 0, 0, 1});
  check(table.size() >= 1 + c.ipv4.size() && table.size() <= 1 + c.ipv4.size() + c.ipv6.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  std::vector<roce::DeviceConfig> devs;
  std::string err;
  if (roce::parse_config_text(text, &devs, &err)) {
    for (const auto& d : devs) check_device(d);
  } else {
    check_refusal(err);
  }

  roce::DeviceConfig one;
  err.clear();
  if (roce::parse_device_string(text, &one, &err)) {
    check_device(one);
  } else {
    check_refusal(err);
  }

  roce::cc::DcqcnParams p = roce::cc::DcqcnParams::paper(100.0);
  const std::string before = p.to_string();
  err.clear();
  if (p.parse(text, &err)) {
    roce::cc::DcqcnParams q = roce::cc::DcqcnParams::paper(100.0);
    std::string err2;
    check(q.parse(p.to_string(), &err2) && q.to_string() == p.to_string());
  } else {
    check_refusal(err);
    check(p.to_string() == before);
  }
  return 0;
}
