// roce-sim --scenario: the congestion-control scenarios of stack/sim/scenario.h as a command.
#pragma once

#include <cstdint>
#include <string>

namespace roce::apps {

struct ScenarioOptions {
  std::string scenario;              // fairness | incast | joinleave
  std::string flows = "2,4,8,16";    // one run per count
  std::string profile = "connectx";  // paper | connectx | none
  std::string cc;                    // DCQCN parameter overrides, key=value,...
  double link_gbps = 25;
  uint64_t buffer_bytes = 4'000'000;
  uint64_t kmin_bytes = 20'000;
  uint64_t kmax_bytes = 200'000;
  double pmax = 0.2;
  uint32_t mtu = 1024;
  uint64_t duration_ms = 300;
  uint64_t join_interval_ms = 0;  // 0: the scenario's default
  uint32_t incast_bytes = 1u << 20;
  uint64_t seed = 1;
  bool ecn_on_dequeue = true;
  std::string csv;  // time series for plots
};

// Runs the scenario for every flow count; prints the reports; 0 if all passed, 1 if a criterion
// failed, 2 on bad options.
int run_scenarios(const ScenarioOptions& o);

}  // namespace roce::apps
