// roce-sim --scenario ecmp: the ECMP scenario of stack/sim/ecmp_scenario.h for every QP count K
// and hash seed, a line per run and a table per K. Criteria:
//   every run completes with every byte where it belongs (receiver memory == sender memory);
//   with 4 or more hash seeds and 2 or more counts, the paths' mean imbalance (busiest path's
//   bytes / mean) at the largest K is below that at the smallest (fewer seeds: not judged, one
//   draw of the hash can be lucky).
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "apps/roce_sim_scenario.h"
#include "stack/sim/ecmp_scenario.h"

namespace roce::apps {

namespace {

using sim::EcmpConfig;
using sim::EcmpResult;

struct Run {
  uint32_t k = 0;
  uint64_t seed = 0;
  EcmpResult r;
  double ratio() const { return static_cast<double>(r.completion_ns) / r.ideal_ns; }
  double fabric_utilisation() const {
    double u = 0;
    for (const auto& p : r.paths) u += p.utilisation;
    return u / static_cast<double>(r.paths.size());
  }
};

// The q-quantile (0..1) of `v`, nearest rank.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void print_run(const Run& x) {
  const EcmpResult& r = x.r;
  std::vector<double> peers;
  for (uint64_t t : r.peer_ns) peers.push_back(static_cast<double>(t) / r.ideal_ns);
  std::printf("  K=%u seed %llu: completion %.3f ms = %.2f x ideal (peers: median %.2f, max %.2f)",
              x.k, static_cast<unsigned long long>(x.seed), r.completion_ns / 1e6, x.ratio(),
              quantile(peers, 0.5), quantile(peers, 1));
  std::printf("; QPs per path");
  for (const auto& p : r.paths) std::printf(" %u", p.qps);
  std::printf("; utilisation");
  for (const auto& p : r.paths) std::printf(" %.2f", p.utilisation);
  std::printf(
      "; imbalance %.2f, Jain %.3f; drops %llu, ECN marks %llu, CNPs %llu, retransmitted "
      "%llu%s%s\n",
      r.imbalance, r.jain, static_cast<unsigned long long>(r.drops),
      static_cast<unsigned long long>(r.ecn_marks), static_cast<unsigned long long>(r.cnps),
      static_cast<unsigned long long>(r.retransmitted), r.error.empty() ? "" : "; ",
      r.error.c_str());
}

std::string csv_of(const std::vector<Run>& runs) {
  std::ostringstream f;
  const size_t paths = runs.empty() ? 0 : runs[0].r.paths.size();
  f << "qps,seed,completion_ms,ideal_ms,completion_x_ideal,peer_median_x_ideal,"
       "peer_max_x_ideal,imbalance,jain,fabric_utilisation,busiest_path_utilisation,"
       "idlest_path_utilisation,drops,ecn_marks,cnps,retransmitted";
  for (size_t i = 0; i < paths; ++i) f << ",path" << i << "_qps";
  for (size_t i = 0; i < paths; ++i) f << ",path" << i << "_utilisation";
  f << "\n";
  for (const Run& x : runs) {
    const EcmpResult& r = x.r;
    std::vector<double> peers, util;
    for (uint64_t t : r.peer_ns) peers.push_back(static_cast<double>(t) / r.ideal_ns);
    for (const auto& p : r.paths) util.push_back(p.utilisation);
    f << x.k << "," << x.seed << "," << r.completion_ns / 1e6 << "," << r.ideal_ns / 1e6 << ","
      << x.ratio() << "," << quantile(peers, 0.5) << "," << quantile(peers, 1) << "," << r.imbalance
      << "," << r.jain << "," << x.fabric_utilisation() << "," << quantile(util, 1) << ","
      << quantile(util, 0) << "," << r.drops << "," << r.ecn_marks << "," << r.cnps << ","
      << r.retransmitted;
    for (const auto& p : r.paths) f << "," << p.qps;
    for (const auto& p : r.paths) f << "," << p.utilisation;
    f << "\n";
  }
  return f.str();
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

int run_ecmp_scenarios(const ScenarioOptions& o, const sim::ScenarioConfig& base) {
  std::vector<uint32_t> counts;
  if (!parse_counts(o.qps_per_peer, 64, &counts)) {
    std::fprintf(stderr, "roce-sim: --qps-per-peer: '%s' is not a list of counts in 1..64\n",
                 o.qps_per_peer.c_str());
    return 2;
  }
  uint64_t first = 0, last = 0;
  if (!parse_range(o.hash_seeds, &first, &last) || last - first >= 1000) {
    std::fprintf(stderr,
                 "roce-sim: --hash-seeds: '%s' is not a seed or a range A-B of at most 1000\n",
                 o.hash_seeds.c_str());
    return 2;
  }
  // Every host holds a copy of its peer's transfer.
  if (2 * uint64_t{o.peers} * o.peer_bytes > (4ull << 30)) {
    std::fprintf(stderr, "roce-sim: --peers x --peer-bytes: %llu MiB over 2 GiB\n",
                 static_cast<unsigned long long>(o.peers * (o.peer_bytes >> 20)));
    return 2;
  }
  EcmpConfig c;
  c.net = base;
  c.peers = o.peers;
  c.paths = o.paths;
  c.peer_bytes = o.peer_bytes;
  std::printf(
      "scenario ecmp: %u senders on one leaf, %u receivers on the other, %u paths of %.0f Gb/s "
      "between; %.2f MiB per peer in %u KiB WRITEs over K QPs; %s; buffer %.1f MB, ECN Kmin "
      "%.0f KB Kmax %.0f KB Pmax %.2f on every queue; MTU %u; hash seeds %llu-%llu\n",
      c.peers, c.peers, c.paths, base.link_gbps, c.peer_bytes / 1048576.0,
      base.message_bytes / 1024,
      base.dcqcn ? ("DCQCN " + o.profile).c_str() : "no congestion control",
      base.buffer_bytes / 1e6, base.kmin_bytes / 1e3, base.kmax_bytes / 1e3, base.pmax,
      mtu_bytes(base.mtu), static_cast<unsigned long long>(first),
      static_cast<unsigned long long>(last));

  std::vector<Run> runs;
  std::vector<std::string> failures;
  for (uint32_t k : counts) {
    c.qps_per_peer = k;
    for (uint64_t seed = first;; ++seed) {
      c.hash_seed = seed;
      Run x{k, seed, sim::run_ecmp(c)};
      print_run(x);
      std::fflush(stdout);
      char buf[160];
      if (!x.r.error.empty()) {
        std::snprintf(buf, sizeof buf, "K=%u seed %llu: ", k,
                      static_cast<unsigned long long>(seed));
        failures.push_back(buf + x.r.error);
      } else if (!x.r.data_ok) {
        std::snprintf(buf, sizeof buf,
                      "K=%u seed %llu: a receiver's memory differs from its sender's", k,
                      static_cast<unsigned long long>(seed));
        failures.push_back(buf);
      }
      runs.push_back(std::move(x));
      if (seed == last) break;
    }
  }

  std::printf(
      "\n  over %llu hash seeds:\n"
      "     K  completion/ideal (mean  min   max)  peers (median  max)  imbalance (mean  max)  "
      "Jain   utilisation (fabric  busiest  idlest)  drops  ECN marks\n",
      static_cast<unsigned long long>(last - first + 1));
  std::vector<double> mean_imbalance;
  for (uint32_t k : counts) {
    std::vector<double> ratio, peers, imb, jain, fab, busiest, idlest;
    uint64_t drops = 0, marks = 0;
    for (const Run& x : runs) {
      if (x.k != k) continue;
      ratio.push_back(x.ratio());
      for (uint64_t t : x.r.peer_ns) peers.push_back(static_cast<double>(t) / x.r.ideal_ns);
      imb.push_back(x.r.imbalance);
      jain.push_back(x.r.jain);
      fab.push_back(x.fabric_utilisation());
      std::vector<double> util;
      for (const auto& p : x.r.paths) util.push_back(p.utilisation);
      busiest.push_back(quantile(util, 1));
      idlest.push_back(quantile(util, 0));
      drops += x.r.drops;
      marks += x.r.ecn_marks;
    }
    mean_imbalance.push_back(mean(imb));
    std::printf(
        "  %4u  %21.2f %5.2f %5.2f  %14.2f %4.2f  %16.2f %4.2f  %5.3f  %20.2f %8.2f %7.2f  %5llu  "
        "%9llu\n",
        k, mean(ratio), quantile(ratio, 0), quantile(ratio, 1), quantile(peers, 0.5),
        quantile(peers, 1), mean(imb), quantile(imb, 1), mean(jain), mean(fab), mean(busiest),
        mean(idlest), static_cast<unsigned long long>(drops),
        static_cast<unsigned long long>(marks));
  }
  const auto lo = std::min_element(counts.begin(), counts.end()) - counts.begin();
  const auto hi = std::max_element(counts.begin(), counts.end()) - counts.begin();
  if (last - first + 1 >= 4 && counts[lo] != counts[hi] &&
      !(mean_imbalance[hi] < mean_imbalance[lo])) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "mean path imbalance with K=%u (%.3f) is not below K=%u's (%.3f)", counts[hi],
                  mean_imbalance[hi], counts[lo], mean_imbalance[lo]);
    failures.push_back(buf);
  }
  if (!o.csv.empty()) {
    std::string err;
    if (!write_text(o.csv, csv_of(runs), &err)) {
      std::fprintf(stderr, "roce-sim: --csv: %s\n", err.c_str());
      return 2;
    }
  }
  for (const auto& f : failures) std::printf("FAIL ecmp: %s\n", f.c_str());
  if (failures.empty()) std::printf("PASS ecmp\n");
  return failures.empty() ? 0 : 1;
}

}  // namespace roce::apps
