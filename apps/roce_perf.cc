// roce-perf: perftest's bandwidth and latency tests (ib_write_bw, ib_send_lat, ...) over the
// userspace RoCEv2 stack, with perftest's flags, output and out-of-band exchange, so it runs
// against itself or against a real perftest on an RDMA NIC or Linux rxe.
//
//   roce-perf write_bw --device "port=net_af_packet0,iface=veth0; ipv4=10.0.0.1/24; mtu=4200"
//   roce-perf write_bw --device "..." 10.0.0.1        (the client: the server's TCP address)
//
// Exit status: 0 success, 1 runtime failure (peer unreachable, completion error, verification
// failure), 2 bad flags or values. See apps/perf/ for the parts. `--transport verbs` runs the
// same test through <infiniband/verbs.h> and our libibverbs (roce-perf-verbs, verbs_main.cc).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/common/eal_lcores.h"
#include "apps/perf/native_transport.h"
#include "apps/perf/oob.h"
#include "apps/perf/options.h"
#include "apps/perf/perf_test.h"
#include "apps/perf/transport_select.h"
#include "dpdk/eal.h"
#include "stack/device_config.h"

namespace {

using namespace roce;
using namespace roce::perf;

int usage_error(const std::string& why) {
  std::fprintf(stderr, "roce-perf: %s\n", why.c_str());
  return 2;
}

// The device: --config FILE (else ROCE_CONFIG), then ROCE_DEVICE, then --device, then the
// tool's own flags; -d picks a [device NAME] section.
int device_config(const PerfOptions& o, DeviceConfig* out) {
  std::vector<DeviceConfig> devs;
  std::string err;
  if (!o.config_file.empty()) {
    std::ifstream f(o.config_file);
    if (!f) return usage_error("--config: cannot read '" + o.config_file + "'");
    std::stringstream text;
    text << f.rdbuf();
    if (!parse_config_text(text.str(), &devs, &err)) {
      return usage_error("--config " + o.config_file + ": " + err);
    }
    if (const char* dev = std::getenv("ROCE_DEVICE"); dev && *dev) {
      if (devs.empty()) devs.emplace_back();
      if (!parse_device_string(dev, &devs.front(), &err)) return usage_error("ROCE_DEVICE: " + err);
    }
  } else if (!devices_from_env(&devs, &err)) {
    return usage_error(err);
  }
  DeviceConfig* cfg = nullptr;
  if (!o.ib_devname.empty()) {
    for (auto& d : devs) {
      if (d.name == o.ib_devname) cfg = &d;
    }
    if (!cfg && (!devs.empty() || o.device_spec.empty())) {
      std::string names;
      for (const auto& d : devs) names += (names.empty() ? "" : " ") + d.name;
      return usage_error("ib-dev: no device '" + o.ib_devname + "' configured" +
                         (names.empty() ? "" : " (configured: " + names + ")"));
    }
  } else if (!devs.empty()) {
    cfg = &devs.front();
  }
  if (!cfg) {
    if (o.device_spec.empty()) {
      return usage_error(
          "no device configured: give --device \"port=...; ipv4=...\" or "
          "--config FILE (or set ROCE_DEVICE / ROCE_CONFIG)");
    }
    devs.emplace_back();
    cfg = &devs.back();
    if (!o.ib_devname.empty()) cfg->name = o.ib_devname;
  }
  if (!o.device_spec.empty() && !parse_device_string(o.device_spec, cfg, &err)) {
    return usage_error("--device: " + err);
  }
  if (o.inline_engine) cfg->inline_mode = true;
  if (!validate(*cfg, &err)) return usage_error(err);
  apps::add_default_lcores(cfg);
  *out = *cfg;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  PerfOptions o;
  if (const int rc = parse_options(argc, argv, &o); rc >= 0) return rc;
  if (o.transport == "verbs") return exec_sibling(kVerbsExecutable, argv);
  DeviceConfig cfg;
  if (const int rc = device_config(o, &cfg); rc >= 0) return rc;
  install_interrupt_handlers();
  std::string err;
  std::unique_ptr<NativeTransport> transport = NativeTransport::open(cfg, &err);
  if (!transport) {
    std::fprintf(stderr, "roce-perf: %s\n", err.c_str());
    dpdk::Eal::cleanup();
    return 1;
  }
  int rc = 0;
  {
    PerfTest test(o, *transport);
    rc = test.run();  // closes the transport before its buffers go
  }
  transport.reset();
  // Removes EAL's runtime directory (/var/run/dpdk/roce-<pid>): runs must not leave them behind.
  dpdk::Eal::cleanup();
  die_of_interrupt();
  return rc;
}
