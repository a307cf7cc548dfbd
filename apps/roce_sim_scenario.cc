// roce-sim --scenario: DCQCN on the simulated switch (see stack/sim/scenario.h), with a report
// per run and the pass criteria:
//   fairness   Jain's index >= 0.99 over the second half, utilisation >= 90 %, no drops, queue
//              within 2 x Kmax once converged
//   incast     with DCQCN: no drops and completion within 1.2 x the C-limited ideal; the same
//              incast without congestion control is run and reported beside it
//   joinleave  after every join and leave the active flows share the link again
//   ecmp       (roce_sim_ecmp.cc) every byte delivered; the paths' load evener with more QPs
#include "apps/roce_sim_scenario.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "stack/sim/scenario.h"

namespace roce::apps {

using sim::ScenarioConfig;
using sim::ScenarioKind;
using sim::ScenarioResult;

namespace {

std::string kind_name(ScenarioKind k) {
  switch (k) {
    case ScenarioKind::kFairness:
      return "fairness";
    case ScenarioKind::kIncast:
      return "incast";
    case ScenarioKind::kJoinLeave:
      return "joinleave";
  }
  return "?";
}

void write_csv(const std::string& path, const ScenarioResult& r, std::string* err) {
  std::ostringstream f;
  f << "t_ms,queue_kb";
  const size_t n = r.flows.size();
  for (size_t i = 0; i < n; ++i) f << ",flow" << i << "_gbps";
  for (size_t i = 0; i < n; ++i) f << ",rate" << i << "_gbps";
  f << "\n";
  for (const auto& s : r.series) {
    f << s.t_ns / 1e6 << "," << s.queue_bytes / 1000.0;
    for (double v : s.flow_gbps) f << "," << v;
    for (double v : s.rate_gbps) f << "," << v;
    f << "\n";
  }
  write_text(path, f.str(), err);
}

void report(const ScenarioConfig& c, const std::string& profile, const ScenarioResult& r) {
  std::printf(
      "scenario %s: %u flows through %.0f Gb/s, %s, buffer %.1f MB, ECN Kmin %.0f KB "
      "Kmax %.0f KB Pmax %.2f, MTU %u\n",
      kind_name(c.kind).c_str(), c.flows, c.link_gbps,
      c.dcqcn ? ("DCQCN " + profile).c_str() : "no congestion control", c.buffer_bytes / 1e6,
      c.kmin_bytes / 1e3, c.kmax_bytes / 1e3, c.pmax, mtu_bytes(c.mtu));
  std::printf("  flow  throughput[Gb/s]  rate[Gb/s]      CNPs   cuts  retransmitted%s\n",
              c.kind == ScenarioKind::kIncast ? "  completion[ms]" : "");
  for (size_t i = 0; i < r.flows.size(); ++i) {
    const auto& f = r.flows[i];
    std::printf("  %4zu  %16.3f  %10.3f  %8llu  %5llu  %13llu", i, f.throughput_gbps, f.rate_gbps,
                static_cast<unsigned long long>(f.cnps),
                static_cast<unsigned long long>(f.rate_cuts),
                static_cast<unsigned long long>(f.retransmitted));
    if (c.kind == ScenarioKind::kIncast) std::printf("  %14.3f", f.completion_ns / 1e6);
    std::printf("\n");
  }
  std::printf(
      "  Jain's index %.4f, utilisation %.3f over %.1f..%.1f ms; max queue %.1f KB "
      "(%.1f KB in that window); drops %llu (%llu in that window); ECN marks %llu\n",
      r.jain, r.utilisation, r.window_start_ns / 1e6, r.window_end_ns / 1e6,
      r.max_queue_bytes / 1e3, r.max_queue_late_bytes / 1e3,
      static_cast<unsigned long long>(r.drops), static_cast<unsigned long long>(r.drops_late),
      static_cast<unsigned long long>(r.ecn_marks));
  if (c.kind == ScenarioKind::kIncast) {
    std::printf("  completion %.3f ms, ideal (C-limited) %.3f ms: %.2f x\n", r.completion_ns / 1e6,
                r.ideal_ns / 1e6,
                r.ideal_ns ? static_cast<double>(r.completion_ns) / r.ideal_ns : 0);
  }
  if (c.kind == ScenarioKind::kJoinLeave) {
    std::printf("  recovery after each join/leave [ms]:");
    for (uint64_t t : r.recovery_ns) {
      if (t == UINT64_MAX) {
        std::printf(" never");
      } else {
        std::printf(" %.1f", t / 1e6);
      }
    }
    std::printf("\n");
  }
}

}  // namespace

bool write_text(const std::string& path, const std::string& text, std::string* err) {
  std::ofstream f(path);
  if (!f) {
    *err = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  f << text;
  f.close();  // a full disk shows here, or in a write before
  if (f.fail()) {
    *err = "cannot write " + path + ": " + std::strerror(errno ? errno : EIO);
    return false;
  }
  return true;
}

bool parse_counts(const std::string& s, uint32_t max, std::vector<uint32_t>* out) {
  out->clear();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || item[0] < '0' || item[0] > '9' || *end || v < 1 || v > max) return false;
    out->push_back(static_cast<uint32_t>(v));
  }
  return !out->empty();
}

namespace {
// Digits only: std::stoull would also take "-3" (as 2^64 - 3), "+3" and leading blanks.
bool parse_number(std::string_view s, uint64_t* v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}
}  // namespace

bool parse_range(const std::string& s, uint64_t* a, uint64_t* b) {
  const auto dash = s.find('-');
  if (dash == std::string::npos) return parse_number(s, a) && parse_number(s, b);
  const std::string_view v(s);
  return parse_number(v.substr(0, dash), a) && parse_number(v.substr(dash + 1), b) && *a <= *b;
}

int run_scenarios(const ScenarioOptions& o) {
  ScenarioKind kind = ScenarioKind::kFairness;
  if (o.scenario == "incast") {
    kind = ScenarioKind::kIncast;
  } else if (o.scenario == "joinleave") {
    kind = ScenarioKind::kJoinLeave;
  } else if (o.scenario != "fairness" && o.scenario != "ecmp") {
    std::fprintf(stderr, "roce-sim: --scenario: '%s' is not fairness, incast, joinleave or ecmp\n",
                 o.scenario.c_str());
    return 2;
  }
  std::vector<uint32_t> flow_counts;
  if (!parse_counts(o.flows, 64, &flow_counts)) {
    std::fprintf(stderr, "roce-sim: --flows: '%s' is not a list of counts in 1..64\n",
                 o.flows.c_str());
    return 2;
  }
  if (o.kmin_bytes > o.kmax_bytes) {
    std::fprintf(stderr, "roce-sim: --kmin (%llu) is above --kmax (%llu)\n",
                 static_cast<unsigned long long>(o.kmin_bytes),
                 static_cast<unsigned long long>(o.kmax_bytes));
    return 2;
  }
  cc::DcqcnParams params;
  if (o.profile == "paper") {
    params = cc::DcqcnParams::paper(o.link_gbps);
  } else if (o.profile == "connectx") {
    params = cc::DcqcnParams::connectx(o.link_gbps);
  } else if (o.profile != "none") {
    std::fprintf(stderr, "roce-sim: --profile: '%s' is not paper, connectx or none\n",
                 o.profile.c_str());
    return 2;
  }
  std::string err;
  if (!o.cc.empty() && !params.parse(o.cc, &err)) {
    std::fprintf(stderr, "roce-sim: --cc: %s\n", err.c_str());
    return 2;
  }

  ScenarioConfig base;
  base.dcqcn = o.profile != "none";
  base.params = params;
  base.link_gbps = o.link_gbps;
  base.buffer_bytes = o.buffer_bytes;
  base.kmin_bytes = o.kmin_bytes;
  base.kmax_bytes = o.kmax_bytes;
  base.pmax = o.pmax;
  base.mtu = static_cast<Mtu>(__builtin_ctz(o.mtu) - 7);
  base.duration_ns = o.duration_ms * 1'000'000;
  if (o.join_interval_ms) base.join_interval_ns = o.join_interval_ms * 1'000'000;
  base.incast_bytes = o.incast_bytes;
  base.seed = o.seed;
  base.ecn_on_dequeue = o.ecn_on_dequeue;
  if (o.scenario == "ecmp") return run_ecmp_scenarios(o, base);

  bool all_passed = true;
  for (uint32_t n : flow_counts) {
    ScenarioConfig c = base;
    c.kind = kind;
    c.flows = n;
    const ScenarioResult r = sim::run_scenario(c);
    report(c, o.profile, r);
    if (!o.csv.empty()) {
      std::string path = o.csv;
      if (flow_counts.size() > 1) path += "." + std::to_string(n);
      write_csv(path, r, &err);
      if (!err.empty()) {
        std::fprintf(stderr, "roce-sim: --csv: %s\n", err.c_str());
        return 2;
      }
    }
    if (kind == ScenarioKind::kIncast && c.dcqcn) {
      // The same incast without congestion control, for comparison.
      ScenarioConfig base = c;
      base.dcqcn = false;
      const ScenarioResult b = sim::run_scenario(base);
      report(base, "none", b);
      std::printf(
          "  without DCQCN: %llu drops, %llu packets retransmitted, completion %.2f x "
          "ideal; with: %llu drops, %.2f x\n",
          static_cast<unsigned long long>(b.drops),
          [&] {
            unsigned long long t = 0;
            for (const auto& f : b.flows) t += f.retransmitted;
            return t;
          }(),
          b.ideal_ns ? static_cast<double>(b.completion_ns) / b.ideal_ns : 0,
          static_cast<unsigned long long>(r.drops),
          r.ideal_ns ? static_cast<double>(r.completion_ns) / r.ideal_ns : 0);
    }
    if (r.passed) {
      std::printf("PASS %s %u flows\n\n", o.scenario.c_str(), n);
    } else {
      all_passed = false;
      for (const auto& f : r.failures) {
        std::printf("FAIL %s %u flows: %s\n", o.scenario.c_str(), n, f.c_str());
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return all_passed ? 0 : 1;
}

}  // namespace roce::apps
