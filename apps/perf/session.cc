// The connection sequence of each test, exactly as perftest 6.06's test mains run it
// (src/write_bw.c, read_bw.c, atomic_bw.c, send_bw.c, write_lat.c, read_lat.c, send_lat.c):
// which side writes first, how many key-message hand shakes happen where (one per QP to swap
// addresses, one more per QP to print the remote side, one after moving to RTR, the sync
// points around each measurement, the last one before "done"). A perftest peer waits for every
// one of them, so their number and order are the protocol.
#include <cstdio>
#include <cstdlib>

#include "apps/perf/perf_test.h"

namespace roce::perf {

namespace {
bool is_v4_mapped(const Gid& g) {
  return g[0] == 0 && g[1] == 0 && g[2] == 0 && g[3] == 0 && g[4] == 0 && g[5] == 0 && g[6] == 0 &&
         g[7] == 0 && g[8] == 0 && g[9] == 0 && g[10] == 0xFF && g[11] == 0xFF;
}

void progress_hook(void* ctx) { static_cast<Transport*>(ctx)->progress(); }

// How long the end of a run waits for the peer to be done with the link (OobChannel::finish):
// a peer that neither closes nor answers only delays our exit by this much.
constexpr double kFinishTimeoutS = 3.0;
}  // namespace

bool PerfTest::fail(const std::string& why, int code) {
  if (error_.empty()) {
    error_ = why;
    error_code_ = code;
  }
  return false;
}

void CpuUtil::read(int at) {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return;
  long long user = 0, nice = 0, system = 0, idle = 0;
  if (std::fscanf(f, "cpu %lld %lld %lld %lld", &user, &nice, &system, &idle) == 4) {
    user_[at] = user;
    idle_[at] = idle;
  }
  std::fclose(f);
}

double CpuUtil::percent() const {
  const long long user = user_[1] - user_[0], idle = idle_[1] - idle_[0];
  if (user + idle <= 0) return 0;
  return static_cast<double>(user) / static_cast<double>(user + idle) * 100;
}

bool PerfTest::recv_len_ok(uint32_t byte_len, uint64_t size) {
  const uint64_t want = recv_len(size);
  if (byte_len == want) return true;
  const uint64_t extra = want - size;  // UD: the GRH area
  const std::string got = byte_len >= extra ? std::to_string(byte_len - extra) + " bytes"
                                            : "a " + std::to_string(byte_len) + "-byte datagram";
  return fail("received " + got + ", expected " + std::to_string(size) +
              ": give both sides the same -s/--sizes/-a");
}

bool PerfTest::fail_stalled(const StallWatch& watch, uint64_t done, uint64_t total) {
  return fail("no progress " + watch.for_text() + ": " + count_text(done, total) +
              " messages completed");
}

int PerfTest::run() {
  bool ok = check_device() && prelude();
  if (ok) {
    switch (o_.verb) {
      case Verb::kSend:
        ok = o_.kind == TestKind::kBw ? run_send_bw() : run_send_lat();
        break;
      case Verb::kWrite:
        ok = o_.kind == TestKind::kBw ? run_write_read_atomic_bw() : run_write_lat();
        break;
      case Verb::kRead:
        ok = o_.kind == TestKind::kBw ? run_write_read_atomic_bw() : run_read_lat();
        break;
      case Verb::kAtomic:
        ok = run_write_read_atomic_bw();
        break;
    }
  }
  if (ok && o_.verify && o_.full_output()) print_verify_summary();
  // perftest's limit verifier runs where its tests run it: on both sides of send_bw and of a
  // -b run, on the client of the other bw tests.
  std::string limit_error;
  if (ok && (o_.verb == Verb::kSend || o_.duplex || o_.client())) limit_error = limits_.verdict(o_);
  if (o_.counters) {
    std::printf("%s", t_.counters_text().c_str());
    std::fflush(stdout);
  }
  if (o_.duration_mode) linger();
  // Neither side stops its port before both are done with the link (OobChannel::finish).
  t_.quiesce();
  oob_.finish(kFinishTimeoutS);
  t_.close();  // before our buffers go: nothing may still land in them
  if (!ok) {
    std::fprintf(stderr, "roce-perf: %s\n", error_.c_str());
    return error_code_ ? error_code_ : 1;
  }
  if (!limit_error.empty()) {
    std::fprintf(stderr, "%s\n", limit_error.c_str());  // perftest's line, exit 1 as perftest
    return 1;
  }
  return 0;
}

void PerfTest::report_bw(const BwReport& r, const BwReport* remote) {
  print_bw_report(o_, r, remote, cpu_.percent());
  limits_.count(o_, r, remote);
}

// A -D run ends on the clock, with the peer's last message possibly still in flight: keep the
// engine answering for a moment, or the peer (perftest polls its last completion without a
// deadline, with retries for ever) would wait for an ACK that never comes.
void PerfTest::linger() {
  const uint64_t until = StallWatch::now_ns() + 200'000'000;
  while (StallWatch::now_ns() < until) {
    t_.progress();
    t_.relax();
  }
}

bool PerfTest::prelude() {
  std::string err;
  if (t_.inline_engine()) oob_.set_progress(&progress_hook, &t_);
  // perftest prints this on its test server, which with --reversed is the side that connects.
  if (!o_.client()) print_waiting_for_client(o_);
  if (o_.connects()) {
    if (!oob_.connect_to(o_.servername, o_.port, o_.oob_timeout_s, &err)) return fail(err);
  } else if (!oob_.accept_one(o_.port, o_.oob_timeout_s, &err)) {
    return fail(err);
  }
  // exchange_versions, check_version_compatibility, check_sys_data, check_mtu.
  VersionInfo mine{kPerftestVersion, true, o_.verify};
  if (!oob_.exchange_versions(mine, &peer_, &err)) return fail(err);
  const double rem = std::atof(peer_.version.c_str());
  if (rem < 5.70) {
    return fail("the peer's perftest " + peer_.version +
                " is not compatible (versions older than 5.70 are not)");
  }
  if (o_.verify != (peer_.roce_perf && peer_.verify)) {
    return fail(o_.verify ? "--verify needs --verify on the other side too (a roce-perf)"
                          : "the peer runs --verify: give this side --verify too");
  }
  if (o_.verify && peer_.revision != kRocePerfRevision) {
    return fail("--verify: the peer's roce-perf has records of revision " +
                std::to_string(peer_.revision) + ", this side's of revision " +
                std::to_string(kRocePerfRevision) + ": run the same roce-perf on both sides");
  }
  // Both sides have their ports open now: wait for the link before the exchanges that follow,
  // which then also tell each side that the other's link is ready.
  if (!t_.wait_link(o_.oob_timeout_s, &err)) return fail(err);
  if (rem >= 5.32 && !oob_.exchange_sys_data(&cycle_buffer_, &cache_line_, &err)) return fail(err);
  if (rem >= 5.1 && !oob_.exchange_mtu(mtu_, &mtu_, &err)) return fail(err);
  if (!clamp_ud_sizes() || !allocate()) return false;
  set_up_connection();
  print_banner(o_, BannerInfo{t_.info().name, mtu_, gid_index_, out_reads_});
  return true;
}

bool PerfTest::hand_shake() {
  std::string err;
  KeyMessage theirs;
  if (!oob_.hand_shake(my_dest_[0], &theirs, &err)) return fail(err);
  return true;
}

bool PerfTest::close_connection() {
  std::string err;
  if (!oob_.close_connection(my_dest_[0], &err)) return fail(err);
  return true;
}

// One hand shake per QP (optionally preceded by one for QP 0, as write_lat and read_lat do),
// the GID family check, then INIT -> RTR (-> RTS).
bool PerfTest::exchange_addresses(bool first_single) {
  std::string err;
  if (first_single && !oob_.hand_shake(my_dest_[0], &rem_dest_[0], &err)) return fail(err);
  for (size_t i = 0; i < my_dest_.size(); ++i) {
    if (!oob_.hand_shake(my_dest_[i], &rem_dest_[i], &err)) return fail(err);
  }
  if (is_v4_mapped(my_dest_[0].gid) != is_v4_mapped(rem_dest_[0].gid)) {
    return fail(
        "Found Incompatibility issue with GID types: one side uses an IPv4 GID, the "
        "other an IPv6 one (choose them with -x)");
  }
  return true;
}

// Prints our addresses, then one hand shake per QP to print the peer's.
bool PerfTest::print_addresses_and_exchange() {
  for (const KeyMessage& k : my_dest_) print_address(o_, k, false);
  std::string err;
  for (size_t i = 0; i < my_dest_.size(); ++i) {
    if (!oob_.hand_shake(my_dest_[i], &rem_dest_[i], &err)) return fail(err);
    print_address(o_, rem_dest_[i], true);
  }
  return true;
}

bool PerfTest::bw_client_sizes() {
  for (uint64_t size : o_.size_list) {
    set_send_wqes(size);
    if (o_.perform_warm_up && !warm_up()) return false;
    if (o_.verify) {
      if (!verify_sync_params(size)) return false;
      if (!(o_.verb == Verb::kWrite ? verify_write(size) : verify_read(size))) return false;
    } else if (!run_iter_bw(size)) {
      return false;
    }
    last_report_ = bw_report(size);
    report_bw(last_report_);
  }
  return true;
}

// -b: swaps this size's report with the peer's and prints the sum of both directions
// (xchg_bw_reports, print_full_bw_report(my, rem)).
// With --report-both (one size only, as perftest) each direction's line follows.
bool PerfTest::exchange_and_print_sum() {
  std::string err;
  BwReport theirs;
  if (!oob_.exchange_bw_reports(last_report_, &theirs, &err)) return fail(err);
  report_bw(last_report_, &theirs);
  if (o_.report_both && !o_.multi_size)
    print_report_both(o_, last_report_, &theirs, cpu_.percent());
  return true;
}

// write_bw.c / read_bw.c / atomic_bw.c with -b: both sides are requesters and run the same
// sequence. Per size: a start barrier, the run, with several sizes a barrier after it (perftest
// gates it on its own version >= 4.6), then the report exchange; then the closing exchange.
bool PerfTest::bw_duplex_sizes() {
  for (uint64_t size : o_.size_list) {
    set_send_wqes(size);
    if (o_.perform_warm_up && !warm_up()) return false;
    if (!hand_shake() || !run_iter_bw(size)) return false;
    if (o_.multi_size && !hand_shake()) return false;
    last_report_ = bw_report(size);
    if (!exchange_and_print_sum()) return false;
  }
  print_result_line(o_);
  return close_connection();
}

// write_bw.c / read_bw.c / atomic_bw.c.
bool PerfTest::run_write_read_atomic_bw() {
  if (!exchange_addresses(false) || !connect_qps() || !print_addresses_and_exchange()) {
    return false;
  }
  if (!hand_shake()) return false;  // after RTR
  print_bw_header(o_);
  if (o_.duplex) return bw_duplex_sizes();
  std::string err;
  if (!o_.client()) {
    if (o_.verify) {
      for (uint64_t size : o_.size_list) {
        if (!verify_sync_params(size)) return false;
        if (!(o_.verb == Verb::kWrite ? verify_write(size) : verify_read(size))) return false;
      }
    }
    // The server waits for the client to finish, then prints the client's report.
    BwReport theirs;
    if (!hand_shake() || !oob_.exchange_bw_reports(BwReport{}, &theirs, &err)) return fail(err);
    report_bw(theirs);
    if (!close_connection()) return false;
    print_result_line(o_);
    return true;
  }
  if (!bw_client_sizes()) return false;
  print_result_line(o_);
  BwReport theirs;
  if (!hand_shake() || !oob_.exchange_bw_reports(last_report_, &theirs, &err)) return fail(err);
  return close_connection();
}

// send_bw.c with -b: both sides post receives and send (run_iter_bi). Per size: the barrier
// once the receives are posted, the run, the report exchange and the summed line (with -D no
// exchange: each side prints its own line, which counts what it sent and received), and with
// several sizes one more barrier.
bool PerfTest::send_bw_duplex() {
  for (uint64_t size : o_.size_list) {
    set_send_wqes(size);
    if (!post_receives(size) || !hand_shake() || !run_iter_bi(size)) return false;
    last_report_ = bw_report(size);
    if (o_.duration_mode) {
      report_bw(last_report_);
      if (o_.report_both) print_report_both(o_, last_report_, nullptr, cpu_.percent());
    } else if (!exchange_and_print_sum()) {
      return false;
    }
    if (o_.multi_size && !hand_shake()) return false;
  }
  print_result_line(o_);
  return close_connection();
}

// send_bw.c: both sides measure and report.
bool PerfTest::run_send_bw() {
  if (!exchange_addresses(false) || !connect_qps()) return false;
  if (!hand_shake()) return false;
  if (!print_addresses_and_exchange()) return false;
  print_bw_header(o_);
  if (o_.duplex) return send_bw_duplex();
  for (uint64_t size : o_.size_list) {
    if (o_.client()) {
      set_send_wqes(size);
    } else if (!(o_.verify ? verify_post_receives(size) : post_receives(size))) {
      return false;
    }
    if (!hand_shake()) return false;  // the receives are posted
    if (o_.verify) {
      if (!verify_sync_params(size) || !verify_send(size)) return false;
    } else if (!(o_.client() ? run_iter_bw(size) : run_iter_bw_server(size))) {
      return false;
    }
    last_report_ = bw_report(size);
    report_bw(last_report_);
    // One more sync point per size when running several (perftest's RUN_ALL loop only).
    if (o_.multi_size && !hand_shake()) return false;
  }
  print_result_line(o_);
  return close_connection();
}

// write_lat.c: no closing exchange; each side just leaves.
bool PerfTest::run_write_lat() {
  if (!exchange_addresses(true) || !connect_qps() || !print_addresses_and_exchange()) {
    return false;
  }
  if (!hand_shake()) return false;
  set_send_wqes(o_.size);
  print_lat_header(o_);
  for (uint64_t size : o_.size_list) {
    if (!run_iter_lat_write(size)) return false;
    lat_report(size);
  }
  print_result_line(o_);
  return true;
}

// read_lat.c: only the client reads; the server closes at once.
bool PerfTest::run_read_lat() {
  if (!exchange_addresses(true) || !connect_qps() || !print_addresses_and_exchange()) {
    return false;
  }
  if (!hand_shake()) return false;
  if (!o_.client()) {
    if (!close_connection()) return false;
    print_result_line(o_);
    return true;
  }
  print_lat_header(o_);
  set_send_wqes(o_.size);
  for (uint64_t size : o_.size_list) {
    if (!run_iter_lat(size)) return false;
    lat_report(size);
  }
  if (!close_connection()) return false;
  print_result_line(o_);
  return true;
}

// send_lat.c: receives are posted before each size's sync point.
bool PerfTest::run_send_lat() {
  if (!exchange_addresses(false) || !connect_qps()) return false;
  if (!hand_shake()) return false;
  if (!print_addresses_and_exchange()) return false;
  print_lat_header(o_);
  set_send_wqes(o_.size);
  for (uint64_t size : o_.size_list) {
    if (!post_receives(size) || !hand_shake()) return false;
    if (!run_iter_lat_send(size)) return false;
    lat_report(size);
  }
  print_result_line(o_);
  return close_connection();
}

}  // namespace roce::perf
