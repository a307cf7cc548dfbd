#include "apps/soak/sampler.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace roce::soak {

namespace {

// The CSV's columns, in order.
struct Column {
  const char* name;
  uint64_t Sample::*u;  // or
  double Sample::*d;
};
constexpr Column kColumns[] = {
    {"t_s", nullptr, &Sample::t_s},
    {"mbufs_in_use", &Sample::mbufs_in_use, nullptr},
    {"mbufs_min", &Sample::mbufs_min, nullptr},
    {"mbufs_max", &Sample::mbufs_max, nullptr},
    {"mbufs_total", &Sample::mbufs_total, nullptr},
    {"rss_kib", &Sample::rss_kib, nullptr},
    {"fds", &Sample::fds, nullptr},
    {"threads", &Sample::threads, nullptr},
    {"batches", &Sample::batches, nullptr},
    {"ops_verified", &Sample::ops_verified, nullptr},
    {"bytes_verified", &Sample::bytes_verified, nullptr},
    {"retransmitted_packets", &Sample::retransmitted_packets, nullptr},
    {"retransmit_events", &Sample::retransmit_events, nullptr},
    {"local_ack_timeouts", &Sample::local_ack_timeouts, nullptr},
    {"seq_naks_sent", &Sample::seq_naks_sent, nullptr},
    {"seq_naks_received", &Sample::seq_naks_received, nullptr},
    {"rnr_naks_received", &Sample::rnr_naks_received, nullptr},
    {"implicit_naks", &Sample::implicit_naks, nullptr},
    {"duplicate_requests", &Sample::duplicate_requests, nullptr},
    {"fault_rx_dropped", &Sample::fault_rx_dropped, nullptr},
    {"fault_tx_dropped", &Sample::fault_tx_dropped, nullptr},
    {"tx_frames", &Sample::tx_frames, nullptr},
    {"rx_frames", &Sample::rx_frames, nullptr},
    {"tx_backpressure", &Sample::tx_backpressure, nullptr},
    {"tx_no_buffer", &Sample::tx_no_buffer, nullptr},
    {"max_wait_ms", nullptr, &Sample::max_wait_ms},
    {"run_max_wait_ms", nullptr, &Sample::run_max_wait_ms},
    {"wait_limit_ms", nullptr, &Sample::wait_limit_ms},
    {"max_poll_gap_ms", nullptr, &Sample::max_poll_gap_ms},
    {"run_max_poll_gap_ms", nullptr, &Sample::run_max_poll_gap_ms},
    {"waits_over_limit", &Sample::waits_over_limit, nullptr},
    {"cpu_pressure", nullptr, &Sample::cpu_pressure},
};

uint64_t count_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  uint64_t n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n > 0 ? n - 1 : 0;  // not the directory's own descriptor
}

}  // namespace

ProcStats read_proc_stats() {
  ProcStats s;
  {
    std::ifstream statm("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    if (statm >> size >> resident) {
      s.rss_kib = resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024;
    }
  }
  s.fds = count_fds();
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) s.threads = std::strtoull(line.c_str() + 8, nullptr, 10);
  }
  std::ifstream psi("/proc/pressure/cpu");
  if (std::getline(psi, line) && line.rfind("some avg10=", 0) == 0) {
    s.cpu_pressure = std::strtod(line.c_str() + 11, nullptr);
  }
  return s;
}

CsvWriter::~CsvWriter() { close(); }

bool CsvWriter::open(const std::string& path, std::string* err) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) {
    *err = "--csv: cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  const char* sep = "";
  for (const Column& c : kColumns) {
    std::fprintf(f_, "%s%s", sep, c.name);
    sep = ",";
  }
  std::fputc('\n', f_);
  std::fflush(f_);
  return true;
}

void CsvWriter::write(const Sample& s) {
  if (!f_) return;
  const char* sep = "";
  for (const Column& c : kColumns) {
    if (c.u) {
      std::fprintf(f_, "%s%llu", sep, static_cast<unsigned long long>(s.*c.u));
    } else {
      std::fprintf(f_, "%s%.3f", sep, s.*c.d);
    }
    sep = ",";
  }
  std::fputc('\n', f_);
  std::fflush(f_);
}

void CsvWriter::close() {
  if (f_) std::fclose(f_);
  f_ = nullptr;
}

std::string describe(const Sample& s) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "t=%.0fs mbufs %llu (%llu..%llu of %llu) rss %.1f MiB fds %llu threads %llu | "
      "verified %llu ops %.1f MiB | retransmitted %llu timeouts %llu naks %llu/%llu | "
      "longest wait %.1f ms (run %.1f, limit %.0f, %llu over), poll gap %.1f ms, cpu pressure "
      "%.0f%%",
      s.t_s, (unsigned long long)s.mbufs_in_use, (unsigned long long)s.mbufs_min,
      (unsigned long long)s.mbufs_max, (unsigned long long)s.mbufs_total, s.rss_kib / 1024.0,
      (unsigned long long)s.fds, (unsigned long long)s.threads, (unsigned long long)s.ops_verified,
      s.bytes_verified / 1048576.0, (unsigned long long)s.retransmitted_packets,
      (unsigned long long)s.local_ack_timeouts, (unsigned long long)s.seq_naks_sent,
      (unsigned long long)s.seq_naks_received, s.max_wait_ms, s.run_max_wait_ms, s.wait_limit_ms,
      (unsigned long long)s.waits_over_limit, s.max_poll_gap_ms, s.cpu_pressure);
  return buf;
}

}  // namespace roce::soak
