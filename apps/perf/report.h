// perftest's console output, format for format (perftest 6.06 src/perftest_parameters.c
// ctx_print_test_info, print_report_bw, print_full_bw_report, print_report_lat,
// print_report_lat_duration; src/perftest_communication.c ctx_print_pingpong_data), so scripts
// that read perftest's output read ours.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/perf/oob.h"
#include "apps/perf/options.h"

namespace roce::perf {

inline constexpr const char* kResultLine =
    "---------------------------------------------------------------------------------------\n";

// What the banner shows beyond the options.
struct BannerInfo {
  std::string device;
  Mtu mtu = Mtu::k1024;
  int gid_index = 0;
  int out_reads = 1;
};

void print_waiting_for_client(const PerfOptions& o);
// perftest's closing rule line (only at full verbosity).
void print_result_line(const PerfOptions& o);
void print_banner(const PerfOptions& o, const BannerInfo& b);
// " local address: LID ... QPN ... PSN ..." (+ OUT / RKey / VAddr by verb) and " GID: ...".
void print_address(const PerfOptions& o, const KeyMessage& k, bool remote);
void print_bw_header(const PerfOptions& o);
void print_lat_header(const PerfOptions& o);

// Timestamps of a bw run (nanoseconds, steady clock), as perftest's tposted / tcompleted.
struct BwSamples {
  const uint64_t* posted = nullptr;
  const uint64_t* completed = nullptr;
  uint64_t iters = 0;  // messages over all QPs (duration: counted in the sample window)
  bool no_peak = false;
  int cq_mod = 1;
  int post_list = 1;
};
// print_report_bw: computes the report (and prints it unless `print` is false).
BwReport compute_bw_report(const PerfOptions& o, uint64_t size, const BwSamples& s);
// print_full_bw_report: one result line. With `remote` (-b: the peer's report of its own
// direction), peak, average and message rate are the sums of both directions; #bytes and
// #iterations stay this side's, as perftest prints them.
// With --cpu_util (PerfOptions::cpu_util_on), `cpu` (this side's, percent) ends the line.
// With --out_json, also (re)writes the report file with this result, as perftest's does.
void print_bw_report(const PerfOptions& o, const BwReport& r, const BwReport* remote = nullptr,
                     double cpu = 0);
// --run_infinitely's periodic line (print_bw_infinite_mode): the line only, no report file.
void print_bw_infinite_report(const PerfOptions& o, const BwReport& r);

// perftest's limit verifier (-w / -y): a result counts when print_full_bw_report would count it
// (a -b run's summed line, any other run's own line). Passed once any result reaches the limit.
struct BwLimits {
  bool bw_passed = false;
  bool msgrate_passed = false;
  void count(const PerfOptions& o, const BwReport& r, const BwReport* remote = nullptr);
  // "" if every limit given was reached, else perftest's error line.
  std::string verdict(const PerfOptions& o) const;
};

// --report-both (with -b, one size): this side's line and the peer's, each under a header of
// its own, after the summed line; without the peer's report (send_bw -b -D) only this side's.
void print_report_both(const PerfOptions& o, const BwReport& mine, const BwReport* theirs,
                       double cpu = 0);

// print_report_lat: `posted` holds iters timestamps; the deltas between them are the samples.
// `scratch` must hold iters entries (sorted in place: no allocation while printing).
void print_lat_report(const PerfOptions& o, uint64_t size, const uint64_t* posted, uint64_t iters,
                      uint64_t* scratch);
// print_report_lat_duration.
void print_lat_duration_report(const PerfOptions& o, uint64_t size, uint64_t iters,
                               uint64_t elapsed_ns, double cpu = 0);

}  // namespace roce::perf
