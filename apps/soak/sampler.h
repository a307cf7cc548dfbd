// The soak's periodic samples: what a leak or a stall would show over a long run -- the port's
// mbufs out of the pool, the process's resident memory, open descriptors and threads -- beside
// the work checked so far and the transport's recovery counters. One CSV row per sample.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace roce::soak {

struct ProcStats {
  uint64_t rss_kib = 0;
  uint64_t fds = 0;
  uint64_t threads = 0;
  double cpu_pressure = 0;  // % of the last 10 s some task waited for a CPU (the machine's load)
};
// /proc/self: statm (resident pages), fd/ (its entries), status (Threads:); /proc/pressure/cpu
// (PSI, "some avg10="). Zeros where a file cannot be read.
ProcStats read_proc_stats();

struct Sample {
  double t_s = 0;  // since the traffic started
  // The port's pool: in use at the sample, and the least and most seen since the last one
  // (read about every 100 ms): a leak raises the least.
  uint64_t mbufs_in_use = 0, mbufs_min = 0, mbufs_max = 0, mbufs_total = 0;
  uint64_t rss_kib = 0, fds = 0, threads = 0;
  // Checked by this side: batches it posted and saw acknowledged, operations and bytes it
  // verified (the passive side's SENDs and WRITEs, the active side's READs and atomics).
  uint64_t batches = 0, ops_verified = 0, bytes_verified = 0;
  // Sums over the device's QPs (stack/core/qp.h, QpCounters).
  uint64_t retransmitted_packets = 0, retransmit_events = 0, local_ack_timeouts = 0;
  uint64_t seq_naks_sent = 0, seq_naks_received = 0, rnr_naks_received = 0, implicit_naks = 0;
  uint64_t duplicate_requests = 0;
  // The fault injection's drops and the engine's frame counts (stack/core/engine.h).
  uint64_t fault_rx_dropped = 0, fault_tx_dropped = 0, tx_frames = 0, rx_frames = 0;
  uint64_t tx_backpressure = 0, tx_no_buffer = 0;
  // The longest a QP with work outstanding went without a completion (at least: less the time
  // the loop did not poll), since the last sample and over the run, and the limit its timeout
  // and retry count allow; the longest the loop went between two polls (a loaded machine).
  double max_wait_ms = 0, run_max_wait_ms = 0, wait_limit_ms = 0;
  double max_poll_gap_ms = 0, run_max_poll_gap_ms = 0;
  uint64_t waits_over_limit = 0;  // over the run
  double cpu_pressure = 0;
};

class CsvWriter {
 public:
  ~CsvWriter();
  // Opens `path` and writes the header; false and *err if it cannot.
  bool open(const std::string& path, std::string* err);
  void write(const Sample& s);  // one row, flushed
  void close();

 private:
  std::FILE* f_ = nullptr;
};

// One line for the log: "t=60s mbufs 123 (98..410)/8191 rss 80 MiB fds 12 ..."
std::string describe(const Sample& s);

}  // namespace roce::soak
