// roce-sim --scenario: the congestion-control scenarios of stack/sim/scenario.h as a command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stack/sim/scenario.h"

namespace roce::apps {

struct ScenarioOptions {
  std::string scenario;              // fairness | incast | joinleave | ecmp
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
  std::string csv;  // time series for plots (ecmp: one row per run)
  // ecmp
  uint32_t peers = 4;
  uint32_t paths = 4;
  std::string qps_per_peer = "1,2,4,8";  // one set of runs per count
  std::string hash_seeds = "1-8";
  uint64_t peer_bytes = 16u << 20;
};

// Runs the scenario for every flow count; prints the reports; 0 if all passed, 1 if a criterion
// failed, 2 on bad options.
int run_scenarios(const ScenarioOptions& o);

// roce_sim_ecmp.cc: the ECMP scenario for every QP count and hash seed, on the links, queues
// and DCQCN of `base`; the same exit statuses.
int run_ecmp_scenarios(const ScenarioOptions& o, const sim::ScenarioConfig& base);

// Writes `text` to `path` whole; false (and why) if it cannot, a full disk included.
bool write_text(const std::string& path, const std::string& text, std::string* err);
// "1,2,4" into counts in 1..max; false if any item is not one, or the list is empty.
bool parse_counts(const std::string& s, uint32_t max, std::vector<uint32_t>* out);
// A number, or a range A-B (A <= B), of decimal digits only.
bool parse_range(const std::string& s, uint64_t* a, uint64_t* b);

}  // namespace roce::apps
