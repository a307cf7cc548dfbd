#include "apps/perf/report.h"

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace roce::perf {

namespace {

// perftest's column headers and result lines (perftest_parameters.h).
constexpr const char* kResultFmt =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
constexpr const char* kResultFmtG =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
constexpr const char* kResultFmtLat =
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
    "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
constexpr const char* kResultFmtLatDur =
    " #bytes        #iterations       t_avg[usec]    tps average";

constexpr uint64_t kNsPerSecond = 1'000'000'000;
constexpr double kNsPerUsec = 1000.0;

int rtt_factor(Verb v) { return v == Verb::kRead || v == Verb::kAtomic ? 1 : 2; }

uint64_t round_up(uint64_t v, uint64_t a) { return v % a == 0 ? v : a * (v / a + 1); }

}  // namespace

void print_waiting_for_client(const PerfOptions& o) {
  if (!o.full_output()) return;
  std::printf("\n************************************\n");
  std::printf("* Waiting for client to connect... *\n");
  std::printf("************************************\n");
  std::fflush(stdout);
}

void print_result_line(const PerfOptions& o) {
  if (o.full_output()) std::printf("%s", kResultLine);
}

namespace {
BannerInfo g_banner;  // the run's, as print_banner was given it: --out_json's test_info

// The banner's title ("RDMA_Write Post List BW Test"); the report file spells it with '_'.
std::string test_title(const PerfOptions& o) {
  std::string t = std::string(verb_name(o.verb)) + " ";
  if (o.verb == Verb::kAtomic) {
    t += o.atomic_type == AtomicType::kCmpAndSwap ? "CMP_AND_SWAP " : "FETCH_AND_ADD ";
  }
  if (o.kind == TestKind::kBw) {
    if (o.duplex) t += "Bidirectional ";
    if (o.post_list > 1) t += "Post List ";
    t += "BW ";
  } else {
    t += "Latency ";
  }
  return t + "Test";
}
// Which depths perftest shows, in the banner and the report file alike.
bool shows_tx_depth(const PerfOptions& o) { return o.client() || o.duplex; }
bool shows_rx_depth(const PerfOptions& o) {
  return o.verb == Verb::kSend && (!o.client() || o.duplex);
}

// perftest's open_file_write (the file truncated, mode 0600) and the opening of its report
// file: "{", then write_test_info_to_file's block. Null without --out_json, or after perftest's
// line when the file cannot be opened.
std::FILE* json_open(const PerfOptions& o) {
  if (!o.out_json) return nullptr;
  const int fd = ::open(o.out_json_file.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  std::FILE* f = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (!f) {
    if (fd >= 0) ::close(fd);
    std::fprintf(stderr, "failed to open %s\n", o.out_json_file.c_str());
    return nullptr;
  }
  const BannerInfo& b = g_banner;
  std::fprintf(f, "{\n");
  std::fprintf(f, "test_info: {\n");
  std::string title = test_title(o);
  std::replace(title.begin(), title.end(), ' ', '_');
  std::fprintf(f, "test: %s,\n", title.c_str());
  if (o.use_event) {
    std::fprintf(f, "Test with events: Using_%s_comp%d,\n", b.device.c_str(), o.eq_num);
  }
  std::fprintf(f, "Dual_port: %s,\nDevice: \"%s\",\n", "OFF", b.device.c_str());
  std::fprintf(f, "Number_of_qps: %d,\nTransport_type: %s,\n", o.num_qps, "IB");
  std::fprintf(f, "Connection_type: %s,\nUsing_SRQ: %s,\n", conn_name(o.conn),
               o.use_srq ? "ON" : "OFF");
  std::fprintf(f, " PCIe_relax_order: %s,\n", "Unsupported");  // (sic: perftest's space)
  std::fprintf(f, "ibv_wr_API: %s,\n", "OFF");
  if (shows_tx_depth(o)) std::fprintf(f, "TX_depth : %d,\n", o.tx_depth);
  if (o.post_list > 1) std::fprintf(f, "Post_List: %d,\n", o.post_list);
  if (shows_rx_depth(o)) std::fprintf(f, "RX_depth: %d,\n", o.rx_depth);
  if (o.kind == TestKind::kBw) std::fprintf(f, "CQ_Moderation: %d,\n", o.cq_mod);
  std::fprintf(f, "Mtu: %u,\n", mtu_bytes(b.mtu));
  std::fprintf(f, "Link_type: %s,\n", "Ethernet");
  std::fprintf(f, "GID_index: %d,\n", b.gid_index);
  if (o.verb != Verb::kRead && o.verb != Verb::kAtomic) {
    std::fprintf(f, "Max_inline_data: %d,\n", o.inline_size);
  } else {
    std::fprintf(f, "Outstand_reads: %d,\n", b.out_reads);
  }
  std::fprintf(f, "rdma_cm_QPs: %s,\n", "OFF");
  std::fprintf(f, "Data_ex_method: %s,\n", "Ethernet");
  std::fprintf(f, "},\n");
  std::fprintf(f, "results: {\n");
  return f;
}

// The results block's end (with --cpu_util's entry where perftest writes it) and the file's.
void json_close(std::FILE* f, const PerfOptions& o, bool cpu_entry, double cpu) {
  if (cpu_entry && o.cpu_util_on()) std::fprintf(f, "CPU_util: %.2f,\n", cpu);
  std::fprintf(f, "},\n}\n");
  std::fclose(f);
}
}  // namespace

void print_banner(const PerfOptions& o, const BannerInfo& b) {
  g_banner = b;
  if (!o.full_output()) return;
  std::printf("%s", kResultLine);
  std::printf("                    %s\n", test_title(o).c_str());
  if (o.use_event) std::printf(" Test with events. Using %s_comp%d\n", b.device.c_str(), o.eq_num);
  std::printf(" Dual-port       : %s\t\tDevice         : %s\n", "OFF", b.device.c_str());
  std::printf(" Number of qps   : %d\t\tTransport type : %s\n", o.num_qps, "IB");
  std::printf(" Connection type : %s\t\tUsing SRQ      : %s\n", conn_name(o.conn),
              o.use_srq ? "ON" : "OFF");
  std::printf(" PCIe relax order: %s\n", "Unsupported");
  std::printf(" ibv_wr* API     : %s\n", "OFF");
  if (shows_tx_depth(o)) std::printf(" TX depth        : %d\n", o.tx_depth);
  if (o.post_list > 1) std::printf(" Post List       : %d\n", o.post_list);
  if (shows_rx_depth(o)) std::printf(" RX depth        : %d\n", o.rx_depth);
  if (o.kind == TestKind::kBw) std::printf(" CQ Moderation   : %d\n", o.cq_mod);
  std::printf(" Mtu             : %u[B]\n", mtu_bytes(b.mtu));
  std::printf(" Link type       : %s\n", "Ethernet");
  std::printf(" GID index       : %d\n", b.gid_index);
  if (o.verb != Verb::kRead && o.verb != Verb::kAtomic) {
    std::printf(" Max inline data : %d[B]\n", o.inline_size);
  } else {
    std::printf(" Outstand reads  : %d\n", b.out_reads);
  }
  std::printf(" rdma_cm QPs\t : %s\n", "OFF");
  std::printf(" Data ex. method : %s", "Ethernet");
  std::putchar('\n');
  std::printf("%s", kResultLine);
  std::fflush(stdout);
}

void print_address(const PerfOptions& o, const KeyMessage& k, bool remote) {
  if (!o.full_output()) return;
  std::printf(" %s address: LID %#04x QPN %#06x PSN %#06x", remote ? "remote" : "local", k.lid,
              k.qpn, k.psn);
  // perftest's switch falls through: READ shows OUT, READ and WRITE show RKey and VAddr.
  if (o.verb == Verb::kRead) std::printf(" OUT %#04x", k.out_reads);
  if (o.verb == Verb::kRead || o.verb == Verb::kWrite) {
    std::printf(" RKey %#08x VAddr %#016llx", k.rkey, static_cast<unsigned long long>(k.vaddr));
  }
  std::putchar('\n');
  const Gid& g = k.gid;
  std::printf(
      " %s: %02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d\n",
      "GID", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13],
      g[14], g[15]);
  std::fflush(stdout);
}

namespace {
// perftest's RESULT_EXT / RESULT_EXT_CPU_UTIL and REPORT_EXT / REPORT_EXT_CPU_UTIL.
void end_header(const PerfOptions& o) {
  std::printf("%s", o.cpu_util_on() ? "    CPU_Util[%]\n" : "\n");
}
void end_report(const PerfOptions& o, double cpu) {
  if (o.cpu_util_on()) {
    std::printf("\t    %-3.2f\n", cpu);
  } else {
    std::printf("\n");
  }
}
void bw_header(const PerfOptions& o) {
  std::printf("%s", kResultLine);
  std::printf("%s", o.report_gbits ? kResultFmtG : kResultFmt);
  end_header(o);
  std::fflush(stdout);
}
}  // namespace

void print_bw_header(const PerfOptions& o) {
  if (o.full_output()) bw_header(o);
}

void print_lat_header(const PerfOptions& o) {
  if (!o.full_output()) return;
  std::printf("%s", kResultLine);
  std::printf("%s", o.duration_mode ? kResultFmtLatDur : kResultFmtLat);
  end_header(o);
  std::fflush(stdout);
}

BwReport compute_bw_report(const PerfOptions& o, uint64_t size, const BwSamples& s) {
  const uint64_t n = s.iters;
  const uint64_t cq_mod = static_cast<uint64_t>(s.cq_mod > 0 ? s.cq_mod : 1);
  const uint64_t step = static_cast<uint64_t>(s.post_list > 0 ? s.post_list : 1);
  // The peak: the best per-message time over every window from a post to a later signalled
  // completion (perftest's definition; unsigned as perftest's cycles_t, so a missing first
  // completion timestamp starts it at "infinity").
  uint64_t opt_delta = s.completed[0] - s.posted[0];
  if (!s.no_peak) {
    for (uint64_t i = 0; i < n; i += step) {
      for (uint64_t j = round_up(i + 1, cq_mod) - 1; j < n; j += cq_mod) {
        const uint64_t t = (s.completed[j] - s.posted[i]) / (j - i + 1);
        if (t < opt_delta) opt_delta = t;
      }
      if (n % cq_mod) {
        const uint64_t j = n - 1;
        const uint64_t t = (s.completed[j] - s.posted[i]) / (j - i + 1);
        if (t < opt_delta) opt_delta = t;
      }
    }
  }
  const double factor = o.report_gbits ? 125000000.0 : 0x100000;
  const uint64_t location = s.no_peak ? 0 : n - 1;
  const double sum_ns = static_cast<double>(s.completed[location] - s.posted[0]);
  BwReport r;
  r.size = size;
  r.iters = n;
  if (sum_ns > 0) {
    r.bw_avg =
        static_cast<double>(size) * static_cast<double>(n) * kNsPerSecond / (sum_ns * factor);
    r.msg_rate = static_cast<double>(n) * kNsPerSecond / (sum_ns * 1e6);
  }
  const double peak_up = s.no_peak ? 0.0 : static_cast<double>(size) * kNsPerSecond;
  const double peak_down = static_cast<double>(opt_delta) * factor;
  r.bw_peak = peak_down > 0 ? peak_up / peak_down : 0;
  return r;
}

namespace {
void bw_line(const PerfOptions& o, const BwReport& r, const BwReport* remote, double cpu,
             bool json) {
  // perftest picks the format by this side's own average, before the peer's is added.
  const bool inc_accuracy = r.bw_avg < 0.1 && o.report_gbits;
  double peak = r.bw_peak, avg = r.bw_avg, rate = r.msg_rate;
  if (remote) {
    peak += remote->bw_peak;
    avg += remote->bw_avg;
    rate += remote->msg_rate;
  }
  if (std::FILE* f = json ? json_open(o) : nullptr) {  // write_bw_report_to_file
    if (o.output == PerfOptions::Output::kBandwidth) {
      std::fprintf(f, "bw_avg: %lf,\n", avg);
    } else if (o.output == PerfOptions::Output::kMessageRate) {
      std::fprintf(f, "msgRate_avg: %lf,\n", rate);
    } else {
      std::fprintf(f,
                   inc_accuracy ? "MsgSize: %lu,\nn_iterations: %" PRIu64
                                  ",\nBW_peak: %.6lf,\nBW_average: %.6lf,\nMsgRate: %.6lf,\n"
                                : "MsgSize: %lu,\nn_iterations: %" PRIu64
                                  ",\nBW_peak: %.2lf,\nBW_average: %.2lf,\nMsgRate: %.6lf,\n",
                   static_cast<unsigned long>(r.size), r.iters, peak, avg, rate);
    }
    json_close(f, o, true, cpu);
  }
  if (o.output == PerfOptions::Output::kBandwidth ||
      o.output == PerfOptions::Output::kMessageRate) {
    std::printf("%lf\n", o.output == PerfOptions::Output::kBandwidth ? avg : rate);
    std::fflush(stdout);
    return;
  }
  if (inc_accuracy) {
    std::printf(" %-7lu    %" PRIu64 "           %-7.6lf            %-7.6lf            %-7.6lf",
                static_cast<unsigned long>(r.size), r.iters, peak, avg, rate);
  } else {
    std::printf(" %-7lu    %-10" PRIu64 "       %-7.2lf            %-7.2lf\t\t   %-7.6lf",
                static_cast<unsigned long>(r.size), r.iters, peak, avg, rate);
  }
  end_report(o, cpu);
  std::fflush(stdout);
}
}  // namespace

void print_bw_report(const PerfOptions& o, const BwReport& r, const BwReport* remote, double cpu) {
  bw_line(o, r, remote, cpu, true);
}

void print_bw_infinite_report(const PerfOptions& o, const BwReport& r) {
  bw_line(o, r, nullptr, 0, false);
}

void print_report_both(const PerfOptions& o, const BwReport& mine, const BwReport* theirs,
                       double cpu) {
  // perftest's atomic_bw spells these without the space before the newline.
  const char* colon = o.verb == Verb::kAtomic ? ":" : ": ";
  const auto block = [&](const char* side, const BwReport& r) {
    std::printf("%s\n %s results%s\n", kResultLine, side, colon);
    bw_header(o);                         // whatever the verbosity, as perftest
    print_bw_report(o, r, nullptr, cpu);  // perftest's calc_cpu_util: this side's, on both
  };
  block("Local", mine);
  if (theirs) block("Remote", *theirs);  // send_bw -b -D swaps none (perftest prints garbage)
}

void print_lat_report(const PerfOptions& o, uint64_t size, const uint64_t* posted, uint64_t iters,
                      uint64_t* delta) {
  if (iters < 4) return;
  const double q = kNsPerUsec * rtt_factor(o.verb);
  uint64_t measure_cnt = iters - 1;
  for (uint64_t i = 0; i < measure_cnt; ++i) delta[i] = posted[i + 1] - posted[i];
  if (o.report_unsorted) {
    std::printf("#, %s\n", "usec");
    for (uint64_t i = 0; i < measure_cnt; ++i) {
      std::printf("%d, %g\n", static_cast<int>(i + 1), static_cast<double>(delta[i]) / q);
    }
  }
  std::sort(delta, delta + measure_cnt);
  measure_cnt -= 2;  // perftest's LAT_MEASURE_TAIL: the two slowest samples are dropped
  const uint64_t median = (measure_cnt - 1) % 2
                              ? (delta[measure_cnt / 2] + delta[measure_cnt / 2 - 1]) / 2
                              : delta[measure_cnt / 2];
  double average_sum = 0, stdev_sum = 0;
  for (uint64_t i = 0; i < measure_cnt; ++i) average_sum += static_cast<double>(delta[i]) / q;
  const double average = average_sum / static_cast<double>(measure_cnt);
  for (uint64_t i = 0; i < measure_cnt; ++i) {
    // perftest squares the difference truncated to whole microseconds; so do we, so the
    // numbers compare.
    const int temp_var = static_cast<int>(average - static_cast<double>(delta[i]) / q);
    const int pow_var = static_cast<int>(std::pow(temp_var, 2));
    stdev_sum += pow_var;
  }
  if (o.report_histogram) {
    std::printf("#, %s\n", "usec");
    for (uint64_t i = 0; i < measure_cnt; ++i) {
      std::printf("%d, %g\n", static_cast<int>(i + 1), static_cast<double>(delta[i]) / q);
    }
  }
  if (o.report_unsorted || o.report_histogram) print_lat_header(o);
  const double latency = static_cast<double>(median) / q;
  const double stdev = std::sqrt(stdev_sum / static_cast<double>(measure_cnt));
  const auto iters_99 = static_cast<uint64_t>(std::ceil(static_cast<double>(measure_cnt) * 0.99));
  const auto iters_99_9 =
      static_cast<uint64_t>(std::ceil(static_cast<double>(measure_cnt) * 0.999));
  const double t_min = static_cast<double>(delta[0]) / q;
  const double t_max = static_cast<double>(delta[measure_cnt]) / q;
  const double p99 = static_cast<double>(delta[iters_99]) / q;
  const double p99_9 = static_cast<double>(delta[iters_99_9]) / q;
  if (std::FILE* f = json_open(o)) {  // write_report_lat_to_file
    if (o.output == PerfOptions::Output::kLatency) {
      std::fprintf(f, "avg_lat: %lf,\n", average);
    } else {
      std::fprintf(f,
                   "MsgSize: %lu,\nn_iterations: %" PRIu64
                   ",\nt_min: %.2f,\nt_max: %.2f,\nt_typical: %.2f,\nt_avg: %.2f,\n"
                   "t_stdev: %.2f,\npercentile_99: %.2f,\npercentile_99.9: %.2f,\n",
                   static_cast<unsigned long>(size), iters, t_min, t_max, latency, average, stdev,
                   p99, p99_9);
    }
    json_close(f, o, o.output != PerfOptions::Output::kLatency, 0);
  }
  if (o.output == PerfOptions::Output::kLatency) {
    std::printf("%lf\n", average);
    std::fflush(stdout);
    return;
  }
  std::printf(" %-7lu %" PRIu64
              "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f "
              "\t\t%-7.2f",
              static_cast<unsigned long>(size), iters, t_min, t_max, latency, average, stdev, p99,
              p99_9);
  std::printf("\n");
  std::fflush(stdout);
}

void print_lat_duration_report(const PerfOptions& o, uint64_t size, uint64_t iters,
                               uint64_t elapsed_ns, double cpu) {
  const double usec = static_cast<double>(elapsed_ns) / kNsPerUsec;
  const double latency = iters ? usec / rtt_factor(o.verb) / static_cast<double>(iters) : 0;
  const double tps = usec > 0 ? static_cast<double>(iters) / (usec / 1e6) : 0;
  if (std::FILE* f = json_open(o)) {  // write_report_lat_duration_to_file
    if (o.output == PerfOptions::Output::kLatency) {
      std::fprintf(f, "t_avg: %lf\n", latency);  // (sic: no comma)
    } else {
      std::fprintf(f,
                   "MsgSize: %lu,\nn_iterations: %" PRIu64 ",\nt_avg: %.2f,\ntps_average: %.2f,\n",
                   static_cast<unsigned long>(size), iters, latency, tps);
    }
    json_close(f, o, o.output != PerfOptions::Output::kLatency, cpu);
  }
  if (o.output == PerfOptions::Output::kLatency) {
    std::printf("%lf\n", latency);
    std::fflush(stdout);
    return;
  }
  std::printf(" %-7lu       %" PRIu64 "            %-7.2f        %-7.2f",
              static_cast<unsigned long>(size), iters, latency, tps);
  end_report(o, cpu);
  std::fflush(stdout);
}

void BwLimits::count(const PerfOptions& o, const BwReport& r, const BwReport* remote) {
  if ((remote != nullptr) != o.duplex) return;
  const double avg = r.bw_avg + (remote ? remote->bw_avg : 0);
  const double rate = r.msg_rate + (remote ? remote->msg_rate : 0);
  bw_passed |= !(o.limit_bw_on && o.limit_bw > avg);
  msgrate_passed |= !(o.limit_msgrate_on && o.limit_msgrate > rate);
}

std::string BwLimits::verdict(const PerfOptions& o) const {
  if (o.limit_bw_on && !bw_passed) return "Error: BW result is below bw limit";
  // perftest 6.06 checks the message rate only when -w is given too; -y alone counts here.
  if (o.limit_msgrate_on && !msgrate_passed) return "Error: Msg rate  is below msg_rate limit";
  return "";
}

}  // namespace roce::perf
