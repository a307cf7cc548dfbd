#include "apps/coll_perf/report.h"

#include <cstdio>

namespace roce::coll::perf {
namespace {

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string placement(const Placement& p) {
  if (p.wrong < 0) {
    return format("  %7s  %6s  %6s    N/A", fixed_width(p.time_us, 7).c_str(),
                  fixed_width(p.algbw, 6).c_str(), fixed_width(p.busbw, 6).c_str());
  }
  return format("  %7s  %6s  %6s  %6g", fixed_width(p.time_us, 7).c_str(),
                fixed_width(p.algbw, 6).c_str(), fixed_width(p.busbw, 6).c_str(), double(p.wrong));
}

std::string json_placement(const Placement& p) {
  return format("{\"time\": %.3f, \"alg_bw\": %.6f, \"bus_bw\": %.6f, \"wrong\": %lld}", p.time_us,
                p.algbw, p.busbw, static_cast<long long>(p.wrong));
}

}  // namespace

std::string fixed_width(double value, int width) {
  char buf[64];
  for (const char* fmt : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (std::snprintf(buf, sizeof buf, fmt, width, value) <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return buf;
}

std::string table_header() {
  return format(
             "# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
             "in-place          \n",
             "", "", "", "", "") +
         format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong") +
         format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
}

std::string row_line(const Row& r) {
  return format("%12zu  %12zu  %8s  %6s  %6i", r.bytes, r.count, r.type.c_str(), r.redop.c_str(),
                r.root) +
         placement(r.out_of_place) + placement(r.in_place) + "\n";
}

double average_busbw(const std::vector<Row>& rows) {
  double sum = 0;
  for (const Row& r : rows) sum += r.out_of_place.busbw + r.in_place.busbw;
  return rows.empty() ? 0 : sum / (2.0 * rows.size());
}

std::string footer(int64_t wrong, double avg_busbw, double min_bw, const std::string& program) {
  const char* floor = min_bw < 0 ? "" : avg_busbw < min_bw * 0.9 ? "FAILED" : "OK";
  return format("# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(wrong),
                wrong ? "FAILED" : "OK") +
         format("# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw, floor) + "#\n" +
         format("# Collective test concluded: %s\n", program.c_str());
}

Row baseline_row(bool all_reduce, size_t count, int ranks, double seconds) {
  Placement p;
  p.time_us = seconds * 1e6;
  p.algbw = double(count * 4) / 1e9 / seconds;
  p.busbw = p.algbw * (all_reduce ? 2.0 * (ranks - 1) / ranks : double(ranks - 1) / ranks);
  p.wrong = -1;
  return Row{count * 4, count, "float", all_reduce ? "sum" : "none", -1, p, p};
}

std::string json(const std::string& program, const std::vector<Row>& rows, int64_t wrong,
                 double avg_busbw) {
  std::string s = "{\"program\": \"" + program + "\", \"results\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    s += format(
             "%s\n  {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
             "\"root\": %d, ",
             i ? "," : "", r.bytes, r.count, r.type.c_str(), r.redop.c_str(), r.root) +
         "\"out_of_place\": " + json_placement(r.out_of_place) +
         ", \"in_place\": " + json_placement(r.in_place) + "}";
  }
  s += format(
      "],\n \"out_of_bounds\": {\"count\": %lld, \"okay\": %s},\n"
      " \"average_bus_bandwidth\": {\"bandwidth\": %.6f}}\n",
      static_cast<long long>(wrong), wrong ? "false" : "true", avg_busbw);
  return s;
}

}  // namespace roce::coll::perf
