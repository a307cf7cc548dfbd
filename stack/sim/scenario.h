// Congestion-control scenarios on the simulated switch: N senders, one receiver, the bottleneck
// is the switch port towards the receiver (rate C, finite buffer, RED/ECN marking between Kmin
// and Kmax, tail drop). Each sender runs one RC QP; DCQCN (or nothing) per QP.
//
//   fairness   N long flows of back-to-back RDMA WRITEs: do they converge to C/N?
//   incast     N senders each WRITE one message at the same moment: drops, completion time
//   joinleave  flows start and stop at staggered times: re-convergence and recovery time
//
// Results carry the numbers a report prints and the pass/fail criteria of each scenario.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stack/cc/dcqcn.h"
#include "stack/core/types.h"

namespace roce::sim {

enum class ScenarioKind { kFairness, kIncast, kJoinLeave };

struct ScenarioConfig {
  ScenarioKind kind = ScenarioKind::kFairness;
  uint32_t flows = 4;
  bool dcqcn = true;
  cc::DcqcnParams params = cc::DcqcnParams::connectx(25);  // line rate set from link_gbps
  double link_gbps = 25;                                   // every link, and the bottleneck
  uint64_t buffer_bytes = 4'000'000;                       // bottleneck buffer (tail drop beyond)
  // RED/ECN marking: Kmax 200 KB as the paper; Kmin 20 KB and Pmax 20 % (HPCC's DCQCN setting):
  // with the paper's Pmax 1 % marks come too late, the queue overshoots Kmax and all flows cut
  // together (utilisation 0.86 at 16 flows, docs/dcqcn.md).
  uint64_t kmin_bytes = 20'000;
  uint64_t kmax_bytes = 200'000;
  double pmax = 0.20;
  bool ecn_on_dequeue = true;     // mark when a frame leaves the queue (EgressConfig)
  uint64_t link_delay_ns = 1000;  // each hop
  uint32_t window_psns = 256;     // go-back-N window of every QP (packets in flight)
  Mtu mtu = Mtu::k1024;
  uint32_t message_bytes = 64 * 1024;      // fairness / join-leave: each WRITE
  uint32_t incast_bytes = 1u << 20;        // incast: each sender's one WRITE
  uint64_t duration_ns = 300'000'000;      // fairness: AIMD needs a few hundred ms to equalise
  uint64_t join_interval_ns = 40'000'000;  // join-leave: flow i starts at i * this; the first
                                           // half of the flows stop, in order, after all joined
  uint64_t sample_ns = 100'000;            // time series resolution
  uint64_t seed = 1;
};

struct FlowResult {
  double throughput_gbps = 0;  // over the measurement window (wire bytes)
  double rate_gbps = 0;        // the sender's DCQCN rate at the end
  uint64_t bytes = 0;
  uint64_t completion_ns = 0;  // incast: when its WRITE completed
  uint64_t cnps = 0;
  uint64_t rate_cuts = 0;
  uint64_t retransmitted = 0;
};

struct Sample {
  uint64_t t_ns = 0;
  uint64_t queue_bytes = 0;
  uint64_t drops = 0;             // cumulative tail drops at the bottleneck
  std::vector<double> flow_gbps;  // measured over the last sample interval
  std::vector<double> rate_gbps;  // DCQCN Rc per flow
};

struct ScenarioResult {
  std::vector<FlowResult> flows;
  double jain = 0;                    // Jain's fairness index over the measurement window
  double utilisation = 0;             // bottleneck wire bytes / capacity over the window
  uint64_t max_queue_bytes = 0;       // whole run
  uint64_t max_queue_late_bytes = 0;  // measurement window only
  uint64_t drops = 0;                 // tail drops at the bottleneck, whole run
  uint64_t drops_late = 0;            // within the measurement window
  uint64_t ecn_marks = 0;
  uint64_t completion_ns = 0;         // incast: the last WRITE's completion
  uint64_t ideal_ns = 0;              // incast: total bytes at line rate
  std::vector<uint64_t> recovery_ns;  // join-leave: per event, time to a fair share again
  uint64_t window_start_ns = 0, window_end_ns = 0;
  std::vector<Sample> series;
  bool passed = false;
  std::vector<std::string> failures;  // each failed criterion, stated with its numbers
  std::string error;                  // the run itself failed (setup, stuck QP ...)
};

ScenarioResult run_scenario(const ScenarioConfig& cfg);

// Applies the criteria to a result (fills passed / failures).
void judge(const ScenarioConfig& cfg, ScenarioResult& r);

double jain_index(const std::vector<double>& x);

}  // namespace roce::sim
