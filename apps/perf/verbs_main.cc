// roce-perf-verbs: roce-perf's tests through <infiniband/verbs.h>, linked against our drop-in
// libibverbs (verbs_shim/), to measure what the shim adds to the stack's native API
// (`roce-perf --transport verbs` runs this). Same flags, output and exit codes as roce-perf.
//
// The device: as for any verbs program, the shim reads ROCE_CONFIG and ROCE_DEVICE. --config
// sets ROCE_CONFIG; --device and --inline-engine (mode = inline) are added to ROCE_DEVICE, which
// applies to the first configured device; -d NAME picks the ibv device.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/oob.h"
#include "apps/perf/options.h"
#include "apps/perf/perf_test.h"
#include "apps/perf/transport_select.h"
#include "apps/perf/verbs_transport.h"
#include "stack/device_config.h"

namespace {

using namespace roce;
using namespace roce::perf;

int usage_error(const std::string& why) {
  std::fprintf(stderr, "roce-perf: %s\n", why.c_str());
  return 2;
}

// Puts the tool's device flags into the environment the shim reads, then checks the result
// with the stack's own parser (the shim's), so a bad value fails here with exit 2 as in
// roce-perf. Sets *inline_mode from the chosen device. -1 to go on, else the exit code.
int device_environment(const PerfOptions& o, bool* inline_mode) {
  if (!o.config_file.empty()) setenv("ROCE_CONFIG", o.config_file.c_str(), 1);
  const char* cfg_env = std::getenv("ROCE_CONFIG");
  const bool have_file = cfg_env && *cfg_env;
  std::string dev;
  if (const char* d = std::getenv("ROCE_DEVICE"); d && *d) dev = d;
  auto add = [&](const std::string& s) { dev += (dev.empty() ? "" : "; ") + s; };
  // roce-perf -d NAME --device "...": a device of that name (without a configuration file).
  if (!have_file && !o.ib_devname.empty() && !o.device_spec.empty()) add("name=" + o.ib_devname);
  if (!o.device_spec.empty()) add(o.device_spec);
  if (o.inline_engine) add("mode=inline");
  if (!dev.empty()) setenv("ROCE_DEVICE", dev.c_str(), 1);

  std::vector<DeviceConfig> devs;
  std::string err;
  if (!devices_from_env(&devs, &err)) return usage_error(err);
  if (devs.empty()) {
    return usage_error(
        "no device configured: give --device \"port=...; ipv4=...\" or "
        "--config FILE (or set ROCE_DEVICE / ROCE_CONFIG)");
  }
  const DeviceConfig* cfg = &devs.front();
  if (!o.ib_devname.empty()) {
    cfg = nullptr;
    std::string names;
    for (const auto& d : devs) {
      if (!cfg && d.name == o.ib_devname) cfg = &d;
      names += (names.empty() ? "" : " ") + d.name;
    }
    if (!cfg) {
      return usage_error("ib-dev: no device '" + o.ib_devname +
                         "' configured (configured: " + names + ")");
    }
    if (cfg != &devs.front() && (!o.device_spec.empty() || o.inline_engine)) {
      return usage_error("--device and --inline-engine apply to the first configured device (" +
                         devs.front().name + ") over the verbs transport, not to " + cfg->name);
    }
  }
  if (!validate(*cfg, &err)) return usage_error(err);
  *inline_mode = cfg->inline_mode;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  PerfOptions o;
  if (const int rc = parse_options(argc, argv, &o); rc >= 0) return rc;
  if (o.transport == "native") return exec_sibling(kNativeExecutable, argv);
  bool inline_mode = false;
  if (const int rc = device_environment(o, &inline_mode); rc >= 0) return rc;
  install_interrupt_handlers();
  std::string err;
  std::unique_ptr<VerbsTransport> transport = VerbsTransport::open(o.ib_devname, inline_mode, &err);
  if (!transport) {
    std::fprintf(stderr, "roce-perf: %s\n", err.c_str());
    return 1;
  }
  int rc = 0;
  {
    PerfTest test(o, *transport);
    rc = test.run();  // closes the transport before its buffers go
  }
  transport.reset();  // closing the last context stops the instance and cleans up EAL
  die_of_interrupt();
  return rc;
}
