// roce-soak: a long run of every RC operation on several QPs between two stack instances, every
// byte checked, with samples of what would show a leak (mbufs, memory, descriptors) and of the
// transport's recoveries, and a stall watch (apps/soak/soak.h). scripts/soak.sh runs a pair.
//
//   roce-soak --device "port=...; ipv4=...; drop=0.005" --seconds 1800 --csv server.csv
//   roce-soak --device "..." --seconds 1800 --csv client.csv 10.78.0.1   (the server's TCP address)
//
// Both sides need the same --seed, --qps, --max-ops and --max-size. Exit status: 0 everything
// verified and no stall, 1 a failure (one line "roce-soak: FAIL: ..." and the device's counters
// on stderr), 2 bad flags or values.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "apps/common/eal_lcores.h"
#include "apps/perf/oob.h"
#include "apps/soak/soak.h"
#include "dpdk/device.h"
#include "dpdk/eal.h"
#include "stack/device_config.h"

namespace {

using namespace roce;

int usage_error(const std::string& why) {
  std::fprintf(stderr, "roce-soak: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  soak::SoakOptions o;
  std::string device, server;
  int tcp_port = 18600;
  double connect_timeout = 60;
  uint32_t max_size = o.plan.max_size;
  CLI::App app{"roce-soak: every RC operation on several QPs for a long time, every byte checked"};
  app.add_option("server", server, "the server's TCP address (this side is then the client)");
  app.add_option("--device", device, "the device: \"port=...; ipv4=...\" (after ROCE_DEVICE)");
  app.add_option("--port", tcp_port, "TCP port of the side channel")->check(CLI::Range(1, 65535));
  app.add_option("--seconds", o.seconds, "how long new batches start")
      ->check(apps::kNotNan)
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--interval", o.interval, "seconds between samples")
      ->check(apps::kNotNan)
      ->check(CLI::Range(0.1, 1e6));
  app.add_option("--csv", o.csv, "write the samples here");
  app.add_option("--qps", o.qps, "RC QPs (half of them post from each side)")
      ->check(CLI::Range(2u, soak::kMaxQps));
  app.add_option("--seed", o.plan.seed, "the plans' and patterns' seed")->check(apps::kNoMinus);
  app.add_option("--max-ops", o.plan.max_ops, "most operations of a batch")
      ->check(CLI::Range(1u, soak::kMaxOps));
  app.add_option("--max-size", max_size, "largest message (bytes)")
      ->check(CLI::Range(1u, 1u << 24));
  app.add_option("--timeout", o.timeout, "local ACK timeout: 4.096 us x 2^N (0: none)")
      ->check(CLI::Range(0, 31));
  app.add_option("--retry", o.retry, "retry count")->check(CLI::Range(0, 7));
  app.add_option("--gid-index", o.gid_index, "GID of the QPs' path")->check(CLI::Range(0, 255));
  app.add_option("--connect-timeout", connect_timeout, "seconds to wait for the peer")
      ->check(apps::kNotNan)
      ->check(CLI::Range(1.0, 3600.0));
  if (const int rc = apps::parse_command_line(app, argc, argv, "roce-soak"); rc >= 0) return rc;
  o.server = server.empty();
  o.plan.max_size = max_size;
  o.plan.area = 4ull * max_size + (64 << 10);
  o.plan.read_source = max_size + 4096ull;

  std::vector<DeviceConfig> devs;
  std::string err;
  if (!devices_from_env(&devs, &err)) return usage_error(err);
  if (devs.empty()) devs.emplace_back();
  DeviceConfig& cfg = devs.front();
  if (!device.empty() && !parse_device_string(device, &cfg, &err)) {
    return usage_error("--device: " + err);
  }
  if (!validate(cfg, &err)) return usage_error(err);
  apps::add_default_lcores(&cfg);

  perf::install_interrupt_handlers();
  std::unique_ptr<dpdk::Device> dev = dpdk::Device::open(cfg, &err);
  if (!dev) {
    std::fprintf(stderr, "roce-soak: FAIL: %s\n", err.c_str());
    dpdk::Eal::cleanup();
    return 1;
  }
  int rc = 1;
  {
    perf::OobChannel oob;
    const bool up = o.server ? oob.accept_one(tcp_port, connect_timeout, &err)
                             : oob.connect_to(server, tcp_port, connect_timeout, &err);
    if (up && !dev->wait_link_up(
                  std::chrono::milliseconds(static_cast<int64_t>(connect_timeout * 1000)))) {
      err = "the link of " + cfg.port + " did not come up";
    } else if (up) {
      oob.set_timeout(connect_timeout);
      soak::Soak s(o, *dev, oob);
      rc = s.run();
      err.clear();
    }
    if (!err.empty()) std::fprintf(stderr, "roce-soak: FAIL: %s\n", err.c_str());
    dev.reset();
  }
  dpdk::Eal::cleanup();
  perf::die_of_interrupt();
  return rc;
}
