// The hosts of the congestion-control scenarios (scenario.h, ecmp_scenario.h): a port on the
// simulated network with every link at the scenario's rate and every switch queue marking as it
// says, an engine running DCQCN (or nothing) on every QP, one registered region and one CQ; and
// the RC QP pair from one host to another that carries a flow of WRITEs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stack/core/engine.h"
#include "stack/sim/scenario.h"
#include "stack/sim/sim_network.h"

namespace roce::sim {

struct ScenarioHost {
  SimPort* port = nullptr;
  std::unique_ptr<Engine> engine;
  std::vector<uint8_t> mem;
  uint32_t pd = 0, key = 0;
  CompletionQueue* cq = nullptr;
  uint64_t addr() const { return reinterpret_cast<uint64_t>(mem.data()); }
};

// A switch queue as the scenario configures it: rate, buffer, delay, RED/ECN.
EgressConfig scenario_egress(const ScenarioConfig& cfg);

// Host `index` (its MAC and IPv4 address follow from it) with `mem_bytes` of memory, its engine
// registered as an actor of `net`. `dcqcn` is cfg.params with the line rate set. Null on error.
std::unique_ptr<ScenarioHost> add_scenario_host(SimNetwork& net, uint32_t index,
                                                const ScenarioConfig& cfg,
                                                const cc::DcqcnParams& dcqcn, uint64_t mem_bytes,
                                                std::string* err);

// An RC QP on `tx` connected to one on `rx` (RTS both), WRITE access, the scenario's MTU. The
// hosts learn each other's addresses. False (and why) on error.
bool connect_scenario_qps(ScenarioHost& tx, ScenarioHost& rx, const ScenarioConfig& cfg, Qp** sq,
                          Qp** rq, std::string* err);

}  // namespace roce::sim
