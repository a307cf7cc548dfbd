// roce-sim: randomized, deterministic simulations of the RC transport.
//
//   roce-sim --seeds 1-10000            random mixes of operations on several QPs under random
//                                       faults; one line per failing seed, then a summary
//   roce-sim --seeds 42 --faults drop=0.2,reorder=0.05 --hosts 3 --qps 4
//   roce-sim --scenario fairness|incast|joinleave|ecmp ...   congestion control and ECMP on the
//                                       simulated switch (docs/dcqcn.md, docs/ecmp.md)
//
// Every seed fixes the whole run (topology, operation mix, sizes, faults), so a failing seed is
// reproduced exactly by running it again with the same options. Exit status: 0 if every seed
// passed, 1 if any failed, 2 on bad arguments.
#include <CLI/CLI.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "apps/common/cli.h"
#include "apps/roce_sim_scenario.h"
#include "stack/sim/workload.h"
#include "stack/util/rng.h"

namespace {

using namespace roce;
using namespace roce::sim;

std::string describe(const LinkConfig& l) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "drop=%.4f,dup=%.4f,reorder=%.4f,corrupt=%.4f,delay=%llu,jitter=%llu", l.drop,
                l.duplicate, l.reorder, l.corrupt, static_cast<unsigned long long>(l.delay_ns),
                static_cast<unsigned long long>(l.jitter_ns));
  return buf;
}

const char* mtu_name(Mtu m) {
  switch (m) {
    case Mtu::k256:
      return "256";
    case Mtu::k512:
      return "512";
    case Mtu::k1024:
      return "1024";
    case Mtu::k2048:
      return "2048";
    case Mtu::k4096:
      return "4096";
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"roce-sim: randomized simulations of the RoCEv2 RC transport on a virtual wire"};
  std::string seeds = "1-100";
  std::string faults;
  uint32_t hosts = 0, qps = 0, ops = 0, max_size = 0, mtu = 0;
  int loopback = -1;
  double rate_gbps = -1;
  bool verbose = false;
  app.add_option("--seeds", seeds, "Seed or range A-B (inclusive)")->capture_default_str();
  app.add_option(
      "--faults", faults,
      "Fixed fault mix for every seed, e.g. drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,"
      "delay=2000,jitter=500 (default: random per seed)");
  app.add_option("--hosts", hosts, "Hosts (default: 2 or 3, per seed)")->check(CLI::Range(2, 16));
  app.add_option("--qps", qps, "QP pairs between every two hosts (default: 1-4 per seed)")
      ->check(CLI::Range(1, 64));
  app.add_option("--loopback", loopback,
                 "QP pairs within each host, through its own GID (default: 0-2 per seed)")
      ->check(CLI::Range(0, 64));
  app.add_option("--rate-limit", rate_gbps,
                 "Every QP's rate limit in Gb/s, 0 for none (default: none, or 2-20 Gb/s for about "
                 "a fifth of the seeds)")
      ->check(CLI::Range(0.0, 400.0));
  app.add_option("--ops", ops, "Operations each QP issues (default: 20-80 per seed)")
      ->check(CLI::Range(1, 100000));
  auto* max_size_opt =
      app.add_option("--max-size", max_size, "Largest message in bytes (default: per seed)")
          ->check(CLI::Range(0, 1 << 24));
  app.add_option("--mtu", mtu, "Path MTU: 256, 512, 1024, 2048 or 4096 (default: per seed)")
      ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
  app.add_flag("-v,--verbose", verbose, "One line per seed, passing or not");
  roce::apps::ScenarioOptions sc;
  auto* scen = app.add_option("--scenario", sc.scenario,
                              "Congestion-control scenario instead of seeds: fairness, incast, "
                              "joinleave (see docs/dcqcn.md) or ecmp (docs/ecmp.md)");
  app.add_option("--flows", sc.flows, "Scenario: flow counts, e.g. 2,4,8,16")
      ->capture_default_str();
  app.add_option("--profile", sc.profile, "Scenario: DCQCN profile paper, connectx or none")
      ->capture_default_str();
  app.add_option("--cc", sc.cc, "Scenario: DCQCN parameter overrides, e.g. rai_mbps=10,g=0.01");
  app.add_option("--link-gbps", sc.link_gbps, "Scenario: link and bottleneck rate")
      ->check(roce::apps::kNotNan)
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  app.add_option("--buffer", sc.buffer_bytes, "Scenario: bottleneck buffer in bytes")
      ->check(CLI::Range(10'000ull, 1'000'000'000ull))
      ->capture_default_str();
  app.add_option("--kmin", sc.kmin_bytes, "Scenario: RED/ECN Kmin in bytes")
      ->check(roce::apps::kNoMinus)
      ->capture_default_str();
  app.add_option("--kmax", sc.kmax_bytes, "Scenario: RED/ECN Kmax in bytes")
      ->check(roce::apps::kNoMinus)
      ->capture_default_str();
  app.add_option("--pmax", sc.pmax, "Scenario: RED/ECN marking probability at Kmax")
      ->check(roce::apps::kNotNan)
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--duration-ms", sc.duration_ms, "Scenario: fairness run length")
      ->check(CLI::Range(1ull, 100'000ull))
      ->capture_default_str();
  app.add_option("--join-interval-ms", sc.join_interval_ms,
                 "Scenario: joinleave phase length (0: the scenario's)")
      ->check(CLI::Range(0ull, 100'000ull));
  app.add_option("--incast-bytes", sc.incast_bytes, "Scenario: each incast sender's WRITE")
      ->check(CLI::Range(1u, 1u << 30))
      ->capture_default_str();
  app.add_option("--scenario-seed", sc.seed, "Scenario: random seed (ECN marking)")
      ->check(roce::apps::kNoMinus);
  app.add_flag("!--ecn-on-enqueue", sc.ecn_on_dequeue,
               "Scenario: mark CE at enqueue instead of dequeue");
  app.add_option("--csv", sc.csv,
                 "Scenario: write the time series (queue, per-flow rates); ecmp: a row per run");
  app.add_option("--peers", sc.peers, "ecmp: sender -> receiver pairs across the two leaves")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--paths", sc.paths, "ecmp: equal-cost paths between the leaves")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  app.add_option("--qps-per-peer", sc.qps_per_peer,
                 "ecmp: QP counts K, e.g. 1,2,4,8: each peer's bytes dealt over K QPs")
      ->capture_default_str();
  app.add_option("--hash-seeds", sc.hash_seeds, "ecmp: the switch's hash seed, or a range A-B")
      ->capture_default_str();
  app.add_option("--peer-bytes", sc.peer_bytes, "ecmp: bytes each sender writes to its receiver")
      ->check(CLI::Range(1ull, 1ull << 30))
      ->capture_default_str();
  // Each option is the seeds' or the scenarios' (--mtu is both): given to the other, it is an
  // error rather than silently ignored.
  for (const char* name : {"--seeds", "--faults", "--hosts", "--qps", "--loopback", "--rate-limit",
                           "--ops", "--max-size", "-v"}) {
    app.get_option(name)->excludes(scen);
  }
  for (const char* name :
       {"--flows", "--profile", "--cc", "--link-gbps", "--buffer", "--kmin", "--kmax", "--pmax",
        "--duration-ms", "--join-interval-ms", "--incast-bytes", "--scenario-seed",
        "--ecn-on-enqueue", "--csv", "--peers", "--paths", "--qps-per-peer", "--hash-seeds",
        "--peer-bytes"}) {
    app.get_option(name)->needs(scen);
  }
  if (const int rc = roce::apps::parse_command_line(app, argc, argv, "roce-sim"); rc >= 0)
    return rc;
  if (*scen) {
    // The ECMP scenario's options and the others' own: each is refused where it means nothing.
    const bool ecmp = sc.scenario == "ecmp";
    for (const char* name :
         {"--peers", "--paths", "--qps-per-peer", "--hash-seeds", "--peer-bytes"}) {
      if (!ecmp && app.count(name)) {
        std::fprintf(stderr, "roce-sim: %s is an option of --scenario ecmp\n", name);
        return 2;
      }
    }
    for (const char* name : {"--flows", "--duration-ms", "--join-interval-ms", "--incast-bytes"}) {
      if (ecmp && app.count(name)) {
        std::fprintf(stderr, "roce-sim: %s is not an option of --scenario ecmp\n", name);
        return 2;
      }
    }
    if (mtu) sc.mtu = mtu;
    return roce::apps::run_scenarios(sc);
  }

  uint64_t first = 0, last = 0;
  if (!roce::apps::parse_range(seeds, &first, &last)) {
    std::fprintf(stderr, "roce-sim: --seeds: '%s' is not a seed or a range A-B\n", seeds.c_str());
    return 2;
  }
  LinkConfig fixed;
  if (!faults.empty()) {
    std::string err;
    if (!parse_faults(faults, &fixed, &err)) {
      std::fprintf(stderr, "roce-sim: --faults: %s\n", err.c_str());
      return 2;
    }
  }

  // The options that, with --seeds N, reproduce any seed of this run exactly.
  std::string options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seeds") {
      ++i;
      continue;
    }
    if (a.rfind("--seeds=", 0) == 0 || a == "-v" || a == "--verbose") continue;
    options += " " + a;
  }

  uint64_t passed = 0, failed = 0, total_ops = 0, total_bytes = 0, retx = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t seed = first;; ++seed) {  // to `last` inclusive, which may be 2^64 - 1
    // Everything is drawn from the seed, always in the same order; options then override.
    Rng r(seed * 0x2545F4914F6CDD1Dull + 1);
    WorkloadConfig cfg;
    cfg.hosts = 2 + static_cast<uint32_t>(r.below(2));
    cfg.qps_per_pair = 1 + static_cast<uint32_t>(r.below(4));
    cfg.ops_per_qp = 20 + static_cast<uint32_t>(r.below(61));
    static const Mtu kMtus[] = {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096};
    cfg.mtu = kMtus[r.below(5)];
    cfg.max_size = static_cast<uint32_t>(1 + r.below(3 * 4096 + 1));
    cfg.signal_every = 0;  // random mix of signalled and unsignalled
    cfg.sq_depth = 8 + static_cast<uint32_t>(r.below(120));
    cfg.max_rd_atomic = 1 + static_cast<uint32_t>(r.below(16));
    // Up to 10 % loss, a few percent of the other faults, sometimes none at all.
    LinkConfig random_link;
    if (r.chance(0.8)) random_link.drop = r.uniform() * 0.10;
    if (r.chance(0.4)) random_link.duplicate = r.uniform() * 0.03;
    if (r.chance(0.4)) random_link.reorder = r.uniform() * 0.03;
    if (r.chance(0.4)) random_link.corrupt = r.uniform() * 0.03;
    random_link.delay_ns = 500 + r.below(5000);
    random_link.jitter_ns = r.below(2000);
    // Drawn last, so that the earlier draws give every seed the parameters they always did.
    cfg.loopback_pairs = r.chance(0.3) ? 1 + static_cast<uint32_t>(r.below(2)) : 0;
    cfg.rate_limit_kbps = r.chance(0.2) ? static_cast<uint32_t>(2 + r.below(19)) * 1'000'000 : 0;
    cfg.link = faults.empty() ? random_link : fixed;
    if (hosts) cfg.hosts = hosts;
    if (qps) cfg.qps_per_pair = qps;
    if (loopback >= 0) cfg.loopback_pairs = static_cast<uint32_t>(loopback);
    if (rate_gbps >= 0) cfg.rate_limit_kbps = static_cast<uint32_t>(rate_gbps * 1e6);
    if (ops) cfg.ops_per_qp = ops;
    if (mtu) cfg.mtu = static_cast<Mtu>(__builtin_ctz(mtu) - 7);
    if (*max_size_opt) cfg.max_size = max_size;  // 0 too: every message empty
    const WorkloadResult res = run_workload(seed, cfg);
    total_ops += res.ops;
    total_bytes += res.bytes;
    retx += res.retransmitted;
    if (res.ok) {
      ++passed;
      if (verbose) {
        std::printf(
            "ok   seed=%llu hosts=%u qps=%u loopback=%u rate_limit=%u ops=%u mtu=%s max_size=%u "
            "faults=%s: %llu ops, %.1f ms virtual, %llu retransmitted\n",
            static_cast<unsigned long long>(seed), cfg.hosts, cfg.qps_per_pair, cfg.loopback_pairs,
            cfg.rate_limit_kbps, cfg.ops_per_qp, mtu_name(cfg.mtu), cfg.max_size,
            describe(cfg.link).c_str(), static_cast<unsigned long long>(res.ops),
            res.virtual_ns / 1e6, static_cast<unsigned long long>(res.retransmitted));
      }
    } else {
      ++failed;
      std::printf(
          "FAIL seed=%llu hosts=%u qps=%u loopback=%u rate_limit=%u ops=%u mtu=%s max_size=%u "
          "faults=%s: %s\n"
          "     reproduce: roce-sim --seeds %llu%s\n",
          static_cast<unsigned long long>(seed), cfg.hosts, cfg.qps_per_pair, cfg.loopback_pairs,
          cfg.rate_limit_kbps, cfg.ops_per_qp, mtu_name(cfg.mtu), cfg.max_size,
          describe(cfg.link).c_str(), res.error.c_str(), static_cast<unsigned long long>(seed),
          options.c_str());
    }
    std::fflush(stdout);
    if (seed == last) break;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "%llu seeds: %llu passed, %llu failed; %llu operations, %.1f MiB, %llu packets "
      "retransmitted; %.1f s\n",
      static_cast<unsigned long long>(passed + failed), static_cast<unsigned long long>(passed),
      static_cast<unsigned long long>(failed), static_cast<unsigned long long>(total_ops),
      total_bytes / 1048576.0, static_cast<unsigned long long>(retx), secs);
  return failed ? 1 : 0;
}
