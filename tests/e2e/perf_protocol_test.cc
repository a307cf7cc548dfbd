// roce-perf's out-of-band exchange and reports, checked against perftest 6.06's definitions
// (src/perftest_communication.[ch], src/perftest_parameters.h) without any RDMA device: the
// bytes each message puts on the wire, the order of a session's hand shakes over loopback TCP,
// and the report lines' formats and arithmetic.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "apps/perf/oob.h"
#include "apps/perf/options.h"
#include "apps/perf/perf_test.h"
#include "apps/perf/report.h"
#include "apps/perf/verify_pattern.h"

namespace {
using namespace roce;
using namespace roce::perf;

KeyMessage sample_key() {
  KeyMessage k;
  k.lid = 0;
  k.out_reads = 16;
  k.qpn = 0x11;
  k.psn = 0xabcdef;
  k.rkey = 0x12340001;
  k.vaddr = 0x7f0011223344ull;
  k.gid = Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 101};
  return k;
}

TEST(KeyMessage, HasPerftestsGidFormatAnd108Bytes) {
  // KEY_PRINT_FMT_GID: "%04x:%04x:%06x:%06x:%08x:%016llx:" + 16 x "%02x:" + "%08x:", plus
  // the NUL that sizeof(msg) sends along.
  const std::string m = format_key_message(sample_key());
  ASSERT_EQ(m.size(), 108u);
  EXPECT_EQ(m.substr(0, 107),
            "0000:0010:000011:abcdef:12340001:00007f0011223344:00:00:00:00:00:00:00:00:00:00:"
            "ff:ff:0a:4d:00:65:00000000:");
  EXPECT_EQ(m[107], '\0');
}

TEST(KeyMessage, ParsesWhatItFormatsAndRejectsGarbage) {
  const std::string m = format_key_message(sample_key());
  KeyMessage k;
  ASSERT_TRUE(parse_key_message(m.data(), m.size(), &k));
  EXPECT_EQ(k.out_reads, 16u);
  EXPECT_EQ(k.qpn, 0x11u);
  EXPECT_EQ(k.psn, 0xabcdefu);
  EXPECT_EQ(k.rkey, 0x12340001u);
  EXPECT_EQ(k.vaddr, 0x7f0011223344ull);
  EXPECT_EQ(k.gid, sample_key().gid);
  std::string bad = m;
  bad[10] = 'x';
  EXPECT_FALSE(parse_key_message(bad.data(), bad.size(), &k));
  EXPECT_FALSE(parse_key_message(m.data(), 60, &k));  // the 59-byte form without a GID
}

TEST(Version, PerftestReadsOursAsItsOwnAndWeRecogniseEachOther) {
  uint8_t buf[kVersionSize];
  format_version(VersionInfo{kPerftestVersion, true, true}, buf);
  EXPECT_STREQ(reinterpret_cast<const char*>(buf), "6.06");  // what atof() sees
  EXPECT_DOUBLE_EQ(std::atof(reinterpret_cast<const char*>(buf)), 6.06);
  VersionInfo v = parse_version(buf);
  EXPECT_TRUE(v.roce_perf);
  EXPECT_TRUE(v.verify);
  EXPECT_EQ(v.revision, kRocePerfRevision);  // (--verify needs the same on both sides)
  buf[12] = 1;  // a roce-perf from before --verify's records carried the number of sizes
  v = parse_version(buf);
  EXPECT_TRUE(v.roce_perf);
  EXPECT_EQ(v.revision, 1);
  // A real perftest: strncpy(version, "6.06", 16) leaves zeros behind the string.
  uint8_t theirs[kVersionSize] = {'6', '.', '0', '6'};
  v = parse_version(theirs);
  EXPECT_EQ(v.version, "6.06");
  EXPECT_FALSE(v.roce_perf);
}

// A raw TCP peer that records the bytes roce-perf's client sends and answers with `reply`.
class RawPeer {
 public:
  RawPeer() {
    ls_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(ls_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(ls_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(ls_, 1);
  }
  ~RawPeer() {
    if (fd_ >= 0) close(fd_);
    close(ls_);
  }
  int port() const { return port_; }
  void accept_now() { fd_ = accept(ls_, nullptr, nullptr); }
  std::string read_n(size_t n) {
    std::string s(n, '\0');
    size_t got = 0;
    while (got < n) {
      const ssize_t r = recv(fd_, s.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    s.resize(got);
    return s;
  }
  void write(const std::string& s) {
    ASSERT_EQ(send(fd_, s.data(), s.size(), 0), static_cast<ssize_t>(s.size()));
  }
  void close_write() { shutdown(fd_, SHUT_WR); }
  // Closes the connection with whatever it holds unread (the client's writes then fail).
  void reset() {
    close(fd_);
    fd_ = -1;
  }
  // Connects roce-perf's client `c` to this peer.
  bool connect_client(OobChannel& c) {
    std::string err;
    std::thread t([&] { accept_now(); });
    const bool ok = c.connect_to("127.0.0.1", port_, 5, &err);
    t.join();
    EXPECT_TRUE(ok) << err;
    return ok;
  }

 private:
  int ls_ = -1, fd_ = -1, port_ = 0;
};

TEST(Oob, ClientPutsPerftestsBytesOnTheWire) {
  RawPeer peer;
  OobChannel c;
  ASSERT_TRUE(peer.connect_client(c));
  std::string err;
  // exchange_versions: the client writes its 16 bytes first, then reads the server's.
  VersionInfo theirs;
  std::thread s1([&] {
    EXPECT_EQ(peer.read_n(16).substr(0, 5), std::string("6.06\0", 5));
    peer.write(std::string("6.06\0\0\0\0\0\0\0\0\0\0\0\0", 16));
  });
  ASSERT_TRUE(c.exchange_versions(VersionInfo{kPerftestVersion, true, false}, &theirs, &err));
  s1.join();
  EXPECT_FALSE(theirs.roce_perf);
  // check_sys_data: two big-endian ints; each side keeps the larger.
  int cycle = 4096, line = 64;
  std::thread s2([&] {
    EXPECT_EQ(peer.read_n(4), std::string("\0\0\x10\0", 4));
    peer.write(std::string("\0\0\x20\0", 4));  // 8192
    EXPECT_EQ(peer.read_n(4), std::string("\0\0\0\x40", 4));
    peer.write(std::string("\0\0\0\x20", 4));  // 32
  });
  ASSERT_TRUE(c.exchange_sys_data(&cycle, &line, &err));
  s2.join();
  EXPECT_EQ(cycle, 8192);
  EXPECT_EQ(line, 64);
  // check_mtu: the ibv_mtu value as "%d" in two bytes; the smaller one wins.
  Mtu mtu;
  std::thread s3([&] {
    EXPECT_EQ(peer.read_n(2), std::string("5\0", 2));
    peer.write(std::string("3\0", 2));
  });
  ASSERT_TRUE(c.exchange_mtu(Mtu::k4096, &mtu, &err));
  s3.join();
  EXPECT_EQ(mtu, Mtu::k1024);
  // ctx_hand_shake: 108 bytes each way, client first.
  KeyMessage rem;
  std::thread s4([&] {
    EXPECT_EQ(peer.read_n(108), format_key_message(sample_key()));
    KeyMessage k = sample_key();
    k.qpn = 0x22;
    peer.write(format_key_message(k));
  });
  ASSERT_TRUE(c.hand_shake(sample_key(), &rem, &err)) << err;
  s4.join();
  EXPECT_EQ(rem.qpn, 0x22u);
  // xchg_bw_reports: size, iters (8 bytes since 5.33), peak, average, rate: big-endian.
  BwReport mine{65536, 5000, 1.5, 2.5, 0.25}, got;
  std::thread s5([&] {
    const std::string size = peer.read_n(8);
    EXPECT_EQ(size, std::string("\0\0\0\0\0\x01\0\0", 8));
    peer.write(size);
    const std::string iters = peer.read_n(8);
    EXPECT_EQ(iters, std::string("\0\0\0\0\0\0\x13\x88", 8));
    peer.write(iters);
    const std::string peak = peer.read_n(8);
    EXPECT_EQ(peak, std::string("\x3f\xf8\0\0\0\0\0\0", 8));  // 1.5
    peer.write(peak);
    peer.write(peer.read_n(8));
    peer.write(peer.read_n(8));
  });
  ASSERT_TRUE(c.exchange_bw_reports(mine, &got, &err));
  s5.join();
  EXPECT_EQ(got.size, 65536u);
  EXPECT_EQ(got.iters, 5000u);
  EXPECT_DOUBLE_EQ(got.bw_peak, 1.5);
  EXPECT_DOUBLE_EQ(got.bw_avg, 2.5);
  EXPECT_DOUBLE_EQ(got.msg_rate, 0.25);
  // ctx_close_connection: a last hand shake, then "done" with its NUL.
  std::thread s6([&] {
    peer.read_n(108);
    peer.write(format_key_message(sample_key()));
    EXPECT_EQ(peer.read_n(5), std::string("done\0", 5));
  });
  ASSERT_TRUE(c.close_connection(sample_key(), &err));
  s6.join();
}

std::string be32(uint32_t v) {
  const uint32_t n = htonl(v);
  return std::string(reinterpret_cast<const char*>(&n), 4);
}

// check_sys_data with a peer that sends `cycle` and `line`; *cycle_buffer / *cache_line start
// at a 4 KiB page and a 64-byte line, and hold the outcome.
bool sys_data_from_peer(uint32_t cycle, uint32_t line, int* cycle_buffer, int* cache_line,
                        std::string* err) {
  RawPeer peer;
  OobChannel c;
  if (!peer.connect_client(c)) return false;
  *cycle_buffer = 4096;
  *cache_line = 64;
  std::thread p([&] {
    peer.read_n(4);
    peer.write(be32(cycle));
    peer.read_n(4);
    peer.write(be32(line));
  });
  const bool ok = c.exchange_sys_data(cycle_buffer, cache_line, err);
  p.join();
  return ok;
}

// The peer's cycle buffer and cache line size our buffers (per QP) and divide our strides:
// values no machine has (perftest sends its page size and L1 line) end the run, naming them.
TEST(Oob, RefusesACycleBufferOrCacheLineNoMachineHas) {
  int cycle = 0, line = 0;
  std::string err;
  ASSERT_TRUE(sys_data_from_peer(65536, 128, &cycle, &line, &err)) << err;  // arm64, 64 KiB
  EXPECT_EQ(cycle, 65536);
  EXPECT_EQ(line, 128);
  struct Case {
    uint32_t cycle, line;
    const char* err;
  };
  const Case bad[] = {
      // slots = 0, then `% slots` (SIGFPE)
      {131072, 262144, "the peer's cache line size 262144 is above 4096, the most roce-perf takes"},
      // 4 GiB allocated and registered per QP
      {0x7fffffff, 64, "the peer's cycle buffer 2147483647 is not a power of two"},
      {0x80000000, 64,
       "the peer's cycle buffer 2147483648 is above 1048576, the most roce-perf takes"},
      {2u << 20, 64, "the peer's cycle buffer 2097152 is above 1048576, the most roce-perf takes"},
      {0, 64, "the peer's cycle buffer 0 is not a power of two"},
      {3000, 64, "the peer's cycle buffer 3000 is not a power of two"},
      {4096, 0, "the peer's cache line size 0 is not a power of two"},
      {4096, 96, "the peer's cache line size 96 is not a power of two"},
      {1024, 2048, "the peer's cache line size 2048 is larger than its cycle buffer 1024"},
  };
  for (const Case& k : bad) {
    SCOPED_TRACE(std::to_string(k.cycle) + " / " + std::to_string(k.line));
    err.clear();
    EXPECT_FALSE(sys_data_from_peer(k.cycle, k.line, &cycle, &line, &err));
    EXPECT_EQ(err, k.err);
  }
}

// A peer that stops reading: write_all gives up at the --timeout, as read_all does, instead of
// waiting in send() for ever.
TEST(Oob, WriteGivesUpAtTheTimeoutWhenThePeerStopsReading) {
  RawPeer peer;
  OobChannel c;
  ASSERT_TRUE(peer.connect_client(c));
  c.set_timeout(1);
  const std::vector<char> big(64 << 20);  // more than both sockets' buffers hold
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  auto wrote =
      std::async(std::launch::async, [&] { return c.write_all(big.data(), big.size(), &err); });
  const bool in_time = wrote.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!in_time) peer.reset();  // (ends a write_all without a deadline)
  EXPECT_FALSE(wrote.get());
  EXPECT_TRUE(in_time);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(900));
  EXPECT_EQ(err, "the peer did not take our data within 1 s");
}

// SIGINT / SIGTERM end a write that waits for the peer, with or without a --timeout.
TEST(OobDeathTest, WriteGivesUpWhenInterrupted) {
  EXPECT_EXIT(
      {
        alarm(10);  // (SIGALRM ends a write that ignores the interruption)
        install_interrupt_handlers();
        RawPeer peer;
        OobChannel c;
        if (!peer.connect_client(c)) std::_Exit(4);
        std::thread t([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          kill(getpid(), SIGINT);
        });
        const std::vector<char> big(64 << 20);
        std::string err;
        const bool ok = c.write_all(big.data(), big.size(), &err);
        t.join();
        std::_Exit(!ok && err == "interrupted" ? 3 : 4);
      },
      testing::ExitedWithCode(3), "");
}

// The end of a run: OobChannel::finish closes our half and returns once the peer's half
// closes (it is done with the link too), or after its timeout.
TEST(Oob, FinishWaitsForThePeerToBeDoneWithTheLink) {
  using Clock = std::chrono::steady_clock;
  const auto secs = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (const char* peer_kind : {"perftest", "roce-perf", "silent"}) {
    SCOPED_TRACE(peer_kind);
    RawPeer peer;
    OobChannel c;
    ASSERT_TRUE(peer.connect_client(c));
    std::thread p([&] {
      const std::string k(peer_kind);
      if (k == "perftest") {
        peer.write(std::string("done\0", 5));
        peer.close_write();  // perftest closes right after "done"
      } else if (k == "roce-perf") {
        peer.write(std::string("done\0", 5));
        std::this_thread::sleep_for(std::chrono::milliseconds(400));  // still using the link
        peer.close_write();
      }
      // Either way our half closes: the peer reads the end of the stream.
      EXPECT_EQ(peer.read_n(1), "");
    });
    const auto t0 = Clock::now();
    c.finish(/*timeout_s=*/3.0);
    const double took = secs(t0);
    p.join();
    if (std::string(peer_kind) == "perftest") {
      EXPECT_LT(took, 1.0);  // (not the timeout)
    } else if (std::string(peer_kind) == "roce-perf") {
      EXPECT_GE(took, 0.35);
      EXPECT_LT(took, 2.0);
    } else {
      EXPECT_GE(took, 2.9);  // a peer that never closes costs the timeout, no more
      EXPECT_LT(took, 5.0);
    }
  }
}

// peer_left: a connection with nothing on it, or with unread data, is not a peer that left; a
// half-close (a peer that stopped: its process closed the socket) and a reset are.
TEST(Oob, PeerLeftOnlyOnceThePeerClosed) {
  for (const bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "reset" : "shutdown");
    RawPeer peer;
    OobChannel c;
    EXPECT_FALSE(c.peer_left());  // not connected
    ASSERT_TRUE(peer.connect_client(c));
    EXPECT_FALSE(c.peer_left());
    peer.write("x");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(c.peer_left());  // data to read is not an end
    if (reset) {
      peer.reset();
    } else {
      peer.close_write();
    }
    bool left = false;
    for (int i = 0; i < 100 && !left; ++i) {
      left = c.peer_left();
      if (!left) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(left);
  }
}

TEST(Oob, ServerReadsFirstAndTimesOut) {
  OobChannel s;
  std::string err;
  // Nobody connects: accept gives up after the timeout instead of waiting forever.
  EXPECT_FALSE(s.accept_one(0, 0.3, &err));
  EXPECT_NE(err.find("no client"), std::string::npos) << err;
}

// perftest_parameters.h's REPORT_FMT / REPORT_FMT_EXT / REPORT_FMT_LAT, as the reference.
constexpr const char* kReportFmt =
    " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n";
constexpr const char* kReportFmtExt =
    " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf\n";
constexpr const char* kReportFmtLat =
    " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f "
    "\t\t%-7.2f\n";

TEST(Report, BwLineHasPerftestsColumns) {
  PerfOptions o;
  char expect[256];
  testing::internal::CaptureStdout();
  print_bw_report(o, BwReport{65536, 5000, 1655.5, 1500.07, 0.024001});
  std::snprintf(expect, sizeof expect, kReportFmt, 65536ul, 5000ul, 1655.5, 1500.07, 0.024001);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), expect);
  EXPECT_EQ(std::string(expect),
            " 65536      5000             1655.50            1500.07\t\t   0.024001\n");
  o.report_gbits = true;
  testing::internal::CaptureStdout();
  print_bw_report(o, BwReport{2, 1000, 0.05, 0.04, 1.25});  // below 0.1 Gb/s: more digits
  std::snprintf(expect, sizeof expect, kReportFmtExt, 2ul, 1000ul, 0.05, 0.04, 1.25);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), expect);
}

TEST(Report, BidirectionalLineSumsBothDirectionsButKeepsOurIterations) {
  // print_full_bw_report(my, rem): peak, average and rate summed; #bytes and #iterations ours;
  // the extra digits chosen by our own average (below 0.1 Gb/s), not by the sum.
  PerfOptions o;
  o.duplex = true;
  char expect[256];
  const BwReport mine{65536, 5000, 1655.5, 1500.25, 0.024};
  const BwReport theirs{65536, 4000, 1000.25, 900.5, 0.014};
  testing::internal::CaptureStdout();
  print_bw_report(o, mine, &theirs);
  std::snprintf(expect, sizeof expect, kReportFmt, 65536ul, 5000ul, 2655.75, 2400.75, 0.038);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), expect);
  o.report_gbits = true;
  testing::internal::CaptureStdout();
  print_bw_report(o, BwReport{2, 1000, 0.05, 0.04, 1.25}, &theirs);
  std::snprintf(expect, sizeof expect, kReportFmtExt, 2ul, 1000ul, 1000.3, 900.54, 1.264);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), expect);
}

// --output: one number per result (print_full_bw_report's "%lf\n"), -b summed; nothing else.
TEST(Report, OutputPrintsOnlyTheNumber) {
  PerfOptions o;
  o.output = PerfOptions::Output::kBandwidth;
  const BwReport mine{65536, 5000, 1655.5, 1500.25, 0.024};
  const BwReport theirs{65536, 4000, 1000.25, 900.5, 0.014};
  testing::internal::CaptureStdout();
  print_banner(o, BannerInfo{"roce0"});
  print_bw_header(o);
  print_bw_report(o, mine);
  print_result_line(o);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "1500.250000\n");
  o.output = PerfOptions::Output::kMessageRate;
  o.duplex = true;
  testing::internal::CaptureStdout();
  print_bw_report(o, mine, &theirs);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "0.038000\n");
}

// -w / -y (print_full_bw_report's verifier): a result counts if it is a -b run's sum or any other
// run's own line; one result at the limit passes; -y is checked on its own too.
TEST(Report, LimitVerifierCountsWhatPerftestCounts) {
  PerfOptions o;
  o.limit_bw_on = true;
  o.limit_bw = 1600;
  const BwReport low{65536, 5000, 1655.5, 1500.25, 0.024};
  const BwReport high{65536, 5000, 1700, 1650, 0.026};
  BwLimits l;
  l.count(o, low);
  EXPECT_EQ(l.verdict(o), "Error: BW result is below bw limit");
  l.count(o, high, &low);  // a sum, but this run is not -b: not counted
  EXPECT_EQ(l.verdict(o), "Error: BW result is below bw limit");
  l.count(o, high);
  EXPECT_EQ(l.verdict(o), "");
  o.duplex = true;
  BwLimits d;
  d.count(o, low);  // -b: only the summed line counts
  EXPECT_NE(d.verdict(o), "");
  d.count(o, low, &low);  // 3000.5
  EXPECT_EQ(d.verdict(o), "");
  PerfOptions y;
  y.limit_msgrate_on = true;
  y.limit_msgrate = 0.025;
  BwLimits m;
  m.count(y, low);
  EXPECT_EQ(m.verdict(y), "Error: Msg rate  is below msg_rate limit");
  m.count(y, high);
  EXPECT_EQ(m.verdict(y), "");
  PerfOptions none;
  EXPECT_EQ(BwLimits{}.verdict(none), "") << "no limit given: nothing to fail";
}

std::string banner_of(const PerfOptions& o) {
  testing::internal::CaptureStdout();
  print_banner(o, BannerInfo{"roce0"});
  return testing::internal::GetCapturedStdout();
}

TEST(Report, BidirectionalBannerIsPerftests) {
  // ctx_print_test_info: "Bidirectional" in the title; the server shows its TX depth, and a
  // send_bw client its RX depth, since both sides send and receive.
  PerfOptions o;
  o.verb = Verb::kSend;
  o.duplex = true;
  o.tx_depth = 128;
  o.rx_depth = 512;
  const std::string server = banner_of(o);
  EXPECT_NE(server.find("                    Send Bidirectional BW Test\n"), std::string::npos);
  EXPECT_NE(server.find(" TX depth        : 128\n"), std::string::npos);
  EXPECT_NE(server.find(" RX depth        : 512\n"), std::string::npos);
  o.servername = "10.0.0.1";
  EXPECT_NE(banner_of(o).find(" RX depth        : 512\n"), std::string::npos);
  o.duplex = false;
  o.servername.clear();
  const std::string plain = banner_of(o);
  EXPECT_NE(plain.find("                    Send BW Test\n"), std::string::npos);
  EXPECT_EQ(plain.find(" TX depth"), std::string::npos);
  EXPECT_EQ(plain.find("events"), std::string::npos);
}

TEST(Report, ReportBothPrintsEachDirectionUnderItsOwnHeader) {
  // write_bw.c's report_both block: a rule, "Local results: ", the column header, our line;
  // the same for the peer's line ("Remote results: "). atomic_bw.c drops the trailing space.
  PerfOptions o;
  o.duplex = true;
  const BwReport mine{65536, 5000, 1655.5, 1500.25, 0.024};
  const BwReport theirs{65536, 4000, 1000.25, 900.5, 0.014};
  char l1[256], l2[256];
  std::snprintf(l1, sizeof l1, kReportFmt, 65536ul, 5000ul, 1655.5, 1500.25, 0.024);
  std::snprintf(l2, sizeof l2, kReportFmt, 65536ul, 4000ul, 1000.25, 900.5, 0.014);
  const std::string rule(87, '-');
  // perftest_parameters.h RESULT_FMT
  const std::string header =
      rule + "\n #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n";
  testing::internal::CaptureStdout();
  print_report_both(o, mine, &theirs);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), rule + "\n\n Local results: \n" + header + l1 +
                                                        rule + "\n\n Remote results: \n" + header +
                                                        l2);
  o.verb = Verb::kAtomic;
  testing::internal::CaptureStdout();
  print_report_both(o, mine, nullptr);  // send_bw -b -D: no peer report, no remote block
  EXPECT_EQ(testing::internal::GetCapturedStdout(), rule + "\n\n Local results:\n" + header + l1);
}

TEST(Report, EventsBannerIsPerftests) {
  // ctx_print_test_info with -e: a line right after the title, naming the completion vector.
  PerfOptions o;
  o.verb = Verb::kSend;
  o.kind = TestKind::kLat;
  o.use_event = true;
  EXPECT_NE(
      banner_of(o).find("Send Latency Test\n Test with events. Using roce0_comp0\n Dual-port"),
      std::string::npos);
  o.eq_num = 3;  // -X
  EXPECT_NE(banner_of(o).find(" Test with events. Using roce0_comp3\n"), std::string::npos);
}

// parse_options over a command line given as words (the test name first).
PerfOptions parsed(std::vector<std::string> words) {
  words.insert(words.begin(), "roce-perf");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  PerfOptions o;
  EXPECT_EQ(parse_options(static_cast<int>(argv.size()), argv.data(), &o), -1);
  return o;
}

// perftest's force_dependecies for UC and UD (perftest_parameters.c): the receive depth
// follows the iterations (no RNR flow control to fall back on), UD latency tests inline 188
// bytes at most 884, UD keeps the CQ moderation that big RC messages drop.
TEST(Options, UcAndUdDependenciesArePerftests) {
  PerfOptions o = parsed({"send_lat", "-c", "UD"});
  EXPECT_EQ(o.conn, Conn::kUd);
  EXPECT_EQ(o.inline_size, kDefInlineSendUd);
  EXPECT_EQ(o.rx_depth, 1000);  // min(iters, UC_MAX_RX) instead of DEF_RX_SEND (512)
  EXPECT_EQ(parsed({"send_lat"}).inline_size, 236);
  EXPECT_EQ(parsed({"send_lat"}).rx_depth, 512);

  o = parsed({"send_bw", "-c", "UC", "-n", "20000"});
  EXPECT_EQ(o.conn, Conn::kUc);
  EXPECT_EQ(o.rx_depth, kUcMaxRx);
  EXPECT_EQ(parsed({"send_bw", "-c", "UC", "-n", "20000", "-r", "64"}).rx_depth, 64);
  EXPECT_EQ(parsed({"send_bw", "-c", "UC", "-D", "4"}).rx_depth, 512);  // not with -D

  EXPECT_EQ(parsed({"send_bw", "-c", "UD"}).cq_mod, 100);
  EXPECT_EQ(parsed({"send_bw"}).cq_mod, 1);  // 64 KiB RC messages: no moderation

  testing::internal::CaptureStderr();
  o = parsed({"send_bw", "-c", "UD", "-I", "900"});
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "Setting inline size to 884 (Max inline size in UD)\n");
  EXPECT_EQ(o.inline_size, kMaxInlineUd);
  EXPECT_EQ(parsed({"write_bw", "-c", "UC"}).conn, Conn::kUc);
  EXPECT_EQ(parsed({"write_bw", "-c", "RC"}).conn, Conn::kRc);
}

// -X (--eq_num): perftest's completion vector, 0 .. 2048, with -e only; checked against the
// device's vectors when the CQs are made (the cli test).
TEST(Options, EqNumSelectsTheCompletionVector) {
  EXPECT_EQ(parsed({"send_lat", "-e", "-X", "0"}).eq_num, 0);
  EXPECT_EQ(parsed({"send_bw", "-e", "--eq_num", "2048"}).eq_num, 2048);
  EXPECT_EQ(parsed({"send_bw", "-e"}).eq_num, 0);
}

TEST(Report, BannerNamesTheConnectionType) {
  PerfOptions o;
  o.verb = Verb::kSend;
  EXPECT_NE(banner_of(o).find(" Connection type : RC\t\tUsing SRQ      : OFF\n"),
            std::string::npos);
  o.conn = Conn::kUd;
  EXPECT_NE(banner_of(o).find(" Connection type : UD\t\tUsing SRQ      : OFF\n"),
            std::string::npos);
  o.conn = Conn::kUc;
  EXPECT_NE(banner_of(o).find(" Connection type : UC\t\tUsing SRQ      : OFF\n"),
            std::string::npos);
}

TEST(Report, BwArithmeticIsPerftests) {
  // 4 messages of 1 MiB, one completion each, 1 ms apart: 4 MiB in 4 ms = 1000 MiB/s.
  PerfOptions o;
  const uint64_t posted[4] = {0, 0, 0, 0};
  const uint64_t completed[4] = {1'000'000, 2'000'000, 3'000'000, 4'000'000};
  BwSamples s{posted, completed, 4, false, 1, 1};
  const BwReport r = compute_bw_report(o, 1 << 20, s);
  EXPECT_NEAR(r.bw_avg, 1000.0, 1e-9);
  EXPECT_NEAR(r.msg_rate, 0.001, 1e-12);
  EXPECT_NEAR(r.bw_peak, 1000.0, 1e-9);  // every window runs at 1 ms per message
}

TEST(Report, LatencyStatisticsArePerftests) {
  // write_lat halves the round trip: posts every 10 us (and two slow ones) report 5 us typical.
  PerfOptions o;
  o.verb = Verb::kWrite;
  o.kind = TestKind::kLat;
  uint64_t posted[12], scratch[12];
  uint64_t t = 0;
  for (int i = 0; i < 12; ++i) {
    posted[i] = t;
    t += (i == 3 || i == 7) ? 1'000'000 : 10'000;
  }
  testing::internal::CaptureStdout();
  print_lat_report(o, 2, posted, 12, scratch);
  const std::string line = testing::internal::GetCapturedStdout();
  // Sorted, the two slowest samples are dropped from the average and the median, but t_max
  // and the percentiles index one past them (perftest's delta[measure_cnt]): 500 us.
  char expect[256];
  std::snprintf(expect, sizeof expect, kReportFmtLat, 2ul, 12ul, 5.0, 500.0, 5.0, 5.0, 0.0, 500.0,
                500.0);
  EXPECT_EQ(line, expect);
}

// -D's state machine read from a bandwidth loop: the clock is read on every kPollStride-th pass
// only, and a read moves the state as far as the time it returns allows.
TEST(DurationClock, PollReadsTheClockOnceEveryStrideAndMovesWithIt) {
  constexpr uint64_t s = 1'000'000'000;
  DurationClock d;
  d.start(0, 4, 1);  // sampling from 1 s to 3 s, the end at 4 s
  uint64_t t = 0;
  int reads = 0;
  auto now = [&] {
    ++reads;
    return t;
  };
  t = s + s / 2;
  for (uint32_t i = 0; i + 1 < DurationClock::kPollStride; ++i) d.poll(now);
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(d.state(), DurationClock::kStart);
  d.poll(now);
  EXPECT_EQ(reads, 1);
  ASSERT_TRUE(d.sampling());
  EXPECT_EQ(d.sample_start(), t);
  t = 5 * s;  // past both the stop and the end: one read takes it through both
  for (uint32_t i = 0; i < DurationClock::kPollStride; ++i) d.poll(now);
  EXPECT_EQ(reads, 2);
  EXPECT_TRUE(d.done());
  EXPECT_EQ(d.sample_end(), t);
}

// A port whose link the watch asks about.
struct FakeLink final : LinkState {
  bool lost = false;
  mutable int asked = 0;
  bool link_lost() const override {
    ++asked;
    return lost;
  }
};

// Spins idle passes (sleeping ones: each reads the clock) until stalled() or `max`.
bool stalls_within(StallWatch& w, std::chrono::milliseconds max) {
  const auto end = std::chrono::steady_clock::now() + max;
  while (std::chrono::steady_clock::now() < end) {
    if (w.stalled()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// A wait whose link went down ends after the grace period, long before the stall limit, and
// says why; the link is not asked about before the grace period, nor while progress is made.
TEST(StallWatch, EndsAWaitWhoseLinkWentDownAfterTheGracePeriod) {
  FakeLink link;
  StallWatch w(60, true, &link, 0.05);
  link.lost = true;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(stalls_within(w, std::chrono::seconds(5)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_EQ(link.asked, 1);
  EXPECT_EQ(w.for_text(), "for 0 s and the port's link went down");

  // Progress restarts the grace period: no question in the first 30 ms of a new wait.
  link.asked = 0;
  w.progress();
  EXPECT_FALSE(w.stalled());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(w.stalled());
  EXPECT_EQ(link.asked, 0);
}

struct FakePeer : PeerState {
  bool left = false;
  mutable int asked = 0;
  bool peer_left() const override {
    ++asked;
    return left;
  }
};

// A wait whose peer closed the out-of-band connection ends after the grace period as a lost
// link does, and says so; a link that went down is named first.
TEST(StallWatch, EndsAWaitWhosePeerLeftAfterTheGracePeriod) {
  FakeLink link;
  FakePeer peer;
  StallWatch w(60, true, &link, 0.05, &peer);
  peer.left = true;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(stalls_within(w, std::chrono::seconds(5)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_EQ(peer.asked, 1);
  EXPECT_EQ(w.for_text(), "for 0 s and the peer closed the out-of-band connection");

  link.lost = true;
  StallWatch both(60, true, &link, 0.05, &peer);
  ASSERT_TRUE(stalls_within(both, std::chrono::seconds(5)));
  EXPECT_EQ(both.for_text(), "for 0 s and the port's link went down");
}

// A link that is up does not end the wait: the stall limit does, asked again every tenth of
// the grace period meanwhile; its text then names the time waited.
TEST(StallWatch, ALinkThatIsUpLeavesTheStallLimitInCharge) {
  FakeLink link;
  StallWatch w(0.3, true, &link, 0.05);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(stalls_within(w, std::chrono::seconds(5)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  EXPECT_GE(link.asked, 2);
  EXPECT_EQ(w.for_text(), "for 0 s");
  // --timeout 0 bounds nothing: no stall, and no question about the link either.
  FakeLink down;
  down.lost = true;
  StallWatch unbounded(0, true, &down, 0.01);
  EXPECT_FALSE(stalls_within(unbounded, std::chrono::milliseconds(50)));
  EXPECT_EQ(down.asked, 0);
}

TEST(Report, LatencyMedianAndStdevOfAnEvenCountArePerftests) {
  // 13 posts, 12 round trips of 2, 4, .. 24 us (out of order), halved: 1 .. 12 us. The two
  // slowest are dropped, leaving 10: an even count, whose median is the mean of the middle two
  // (5.5 us, get_median), and the standard deviation squares the differences truncated to whole
  // microseconds over the 10 (4, 3, 2, 1, 0, 0, -1, .. -4: sqrt(60 / 10) = 2.45 us).
  PerfOptions o;
  o.verb = Verb::kWrite;
  o.kind = TestKind::kLat;
  const uint64_t order[12] = {7, 2, 11, 4, 1, 9, 12, 3, 6, 10, 5, 8};
  uint64_t posted[13], scratch[13];
  posted[0] = 1'000'000;
  for (int i = 0; i < 12; ++i) posted[i + 1] = posted[i] + order[i] * 2'000;
  testing::internal::CaptureStdout();
  print_lat_report(o, 8, posted, 13, scratch);
  char expect[256];
  std::snprintf(expect, sizeof expect, kReportFmtLat, 8ul, 13ul, 1.0, 11.0, 5.5, 5.5,
                2.449489742783178, 11.0, 11.0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), expect);
}

// print_report_lat's rtt_factor: READ and atomics report the whole round trip, the ping-pongs
// (WRITE, SEND) half of it.
TEST(Report, ReadAndAtomicLatencyIsTheWholeRoundTrip) {
  uint64_t posted[12], scratch[12];
  for (int i = 0; i < 12; ++i) posted[i] = uint64_t(i) * 10'000;  // 10 us apart
  const auto typical = [&](Verb v) {
    PerfOptions o;
    o.verb = v;
    o.kind = TestKind::kLat;
    testing::internal::CaptureStdout();
    print_lat_report(o, 8, posted, 12, scratch);
    const std::string line = testing::internal::GetCapturedStdout();
    double t_min = 0, t_max = 0, t_typical = 0;
    unsigned long size = 0, iters = 0;
    EXPECT_EQ(
        std::sscanf(line.c_str(), "%lu %lu %lf %lf %lf", &size, &iters, &t_min, &t_max, &t_typical),
        5)
        << line;
    return t_typical;
  };
  EXPECT_DOUBLE_EQ(typical(Verb::kRead), 10.0);
  EXPECT_DOUBLE_EQ(typical(Verb::kAtomic), 10.0);
  EXPECT_DOUBLE_EQ(typical(Verb::kWrite), 5.0);
  EXPECT_DOUBLE_EQ(typical(Verb::kSend), 5.0);
}

// print_report_lat_duration: the latency is the sample window over the iterations, halved for
// the ping-pongs; tps is iterations a second.
TEST(Report, DurationLatencyLineIsPerftests) {
  PerfOptions o;
  o.kind = TestKind::kLat;
  o.duration_mode = true;
  o.verb = Verb::kWrite;
  testing::internal::CaptureStdout();
  print_lat_duration_report(o, 2, 1000, 4'000'000);  // 1000 round trips in 4 ms
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            " 2             1000            2.00           250000.00\n");
  o.verb = Verb::kRead;
  testing::internal::CaptureStdout();
  print_lat_duration_report(o, 2, 1000, 4'000'000);
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            " 2             1000            4.00           250000.00\n");
}

// --cpu_util (perftest's RESULT_EXT_CPU_UTIL and REPORT_EXT_CPU_UTIL): in a -D run the headers
// end with the column's title and the lines with this side's share; not without -D.
TEST(Report, CpuUtilColumnIsPerftests) {
  PerfOptions o;
  o.cpu_util = true;
  o.duration_mode = true;
  testing::internal::CaptureStdout();
  print_bw_header(o);
  print_bw_report(o, BwReport{65536, 5000, 0, 1500.07, 0.024001}, nullptr, 87.5);
  EXPECT_EQ(
      testing::internal::GetCapturedStdout(),
      std::string(kResultLine) +
          " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   "
          "MsgRate[Mpps]    CPU_Util[%]\n"
          " 65536      5000             0.00               1500.07\t\t   0.024001\t    87.50\n");
  o.kind = TestKind::kLat;
  o.verb = Verb::kSend;
  testing::internal::CaptureStdout();
  print_lat_header(o);
  print_lat_duration_report(o, 2, 1000, 4'000'000, 100);
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            std::string(kResultLine) +
                " #bytes        #iterations       t_avg[usec]    tps average    CPU_Util[%]\n"
                " 2             1000            2.00           250000.00\t    100.00\n");
  o.duration_mode = false;  // perftest: a warning, and no column
  testing::internal::CaptureStdout();
  print_bw_report(o, BwReport{65536, 5000, 1655.5, 1500.07, 0.024001}, nullptr, 87.5);
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            " 65536      5000             1655.50            1500.07\t\t   0.024001\n");
}

// The peak over windows that end at a signalled completion: with -Q 2 those are messages 1
// and 3 (every second one) and the last, 4, signalled because it is the last.
TEST(Report, BwPeakWindowsEndAtModeratedCompletionsAndAtTheLast) {
  PerfOptions o;
  const uint64_t posted[5] = {1000, 1000, 1000, 1000, 1000};
  const auto peak_ns = [&](const uint64_t(&completed)[5]) {
    // 1 MiB messages in MB/s: 10^9 / (ns per message).
    const BwReport r = compute_bw_report(o, 1 << 20, BwSamples{posted, completed, 5, false, 2, 1});
    return 1e9 / r.bw_peak;
  };
  // Completion stamps only where completions were seen (0 elsewhere, as never written). The
  // best window is messages 0..1 or 0..3: 1000 ns a message.
  EXPECT_NEAR(peak_ns({0, 3000, 0, 5000, 11000}), 1000.0, 1e-6);
  // The best window ends at the last message, 0..4: 8500 ns over 5 messages.
  EXPECT_NEAR(peak_ns({0, 5000, 0, 9000, 9500}), 1700.0, 1e-6);
}

TEST(Report, BwInGbitsAndWithoutPeak) {
  // 4 MiB in 4 ms is 8.388608 Gb/s (--report_gbits: 10^9 bits).
  PerfOptions o;
  o.report_gbits = true;
  const uint64_t posted[4] = {0, 0, 0, 0};
  const uint64_t completed[4] = {1'000'000, 2'000'000, 3'000'000, 4'000'000};
  BwReport r = compute_bw_report(o, 1 << 20, BwSamples{posted, completed, 4, false, 1, 1});
  EXPECT_NEAR(r.bw_avg, 8.388608, 1e-9);
  EXPECT_NEAR(r.bw_peak, 8.388608, 1e-9);
  // -N (and -D, and a SEND receiver): only the first stamps are written, and they span the
  // run; no peak.
  o.report_gbits = false;
  const uint64_t span_posted[4] = {0, 0, 0, 0};
  const uint64_t span_completed[4] = {4'000'000, 0, 0, 0};
  r = compute_bw_report(o, 1 << 20, BwSamples{span_posted, span_completed, 4, true, 1, 1});
  EXPECT_NEAR(r.bw_avg, 1000.0, 1e-9);
  EXPECT_EQ(r.bw_peak, 0.0);
  // Two decimals from 0.1 Gb/s up; six below.
  o.report_gbits = true;
  testing::internal::CaptureStdout();
  print_bw_report(o, BwReport{2, 1000, 0.6, 0.5, 1.25});
  char expect[256];
  std::snprintf(expect, sizeof expect, kReportFmt, 2ul, 1000ul, 0.6, 0.5, 1.25);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), expect);
}

TEST(Report, BannerLinesFollowTheVerbAndTheSide) {
  PerfOptions o;
  o.verb = Verb::kSend;
  o.servername = "10.0.0.1";  // a send_bw client: no RX depth (it only sends)
  EXPECT_EQ(banner_of(o).find(" RX depth"), std::string::npos);
  o.servername.clear();
  EXPECT_NE(banner_of(o).find(" RX depth"), std::string::npos);
  o.verb = Verb::kAtomic;  // atomics, as READ, show their outstanding reads, not inline data
  std::string b = banner_of(o);
  EXPECT_NE(b.find(" Outstand reads  : 1\n"), std::string::npos);
  EXPECT_EQ(b.find("Max inline data"), std::string::npos);
  o.verb = Verb::kWrite;
  o.post_list = 4;
  b = banner_of(o);
  EXPECT_NE(b.find("                    RDMA_Write Post List BW Test\n"), std::string::npos) << b;
  EXPECT_NE(b.find(" Post List       : 4\n"), std::string::npos);
}

// ctx_print_pingpong_data: READ shows its outstanding reads; READ and WRITE their RKey and
// VAddr; SEND neither.
TEST(Report, AddressLineShowsWhatTheVerbUses) {
  const auto line = [](Verb v) {
    PerfOptions o;
    o.verb = v;
    testing::internal::CaptureStdout();
    print_address(o, sample_key(), false);
    return testing::internal::GetCapturedStdout();
  };
  const std::string read = line(Verb::kRead), write = line(Verb::kWrite), send = line(Verb::kSend);
  EXPECT_NE(read.find(" OUT 0x10 RKey 0x12340001 VAddr 0x007f0011223344\n"), std::string::npos)
      << read;
  EXPECT_EQ(write.find(" OUT"), std::string::npos) << write;
  EXPECT_NE(write.find(" RKey 0x12340001 VAddr 0x007f0011223344\n"), std::string::npos) << write;
  EXPECT_EQ(send.find(" RKey"), std::string::npos) << send;
  EXPECT_NE(send.find(" GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:101\n"),
            std::string::npos)
      << send;
}

// --verify's pattern finds a wrong byte at every offset of every length, including the bytes
// of a last partial word.
TEST(VerifyPattern, EveryWrongByteIsFoundWhereItIs) {
  const Pattern p = pattern_for(Verb::kWrite, 4096);
  for (uint64_t len = 1; len <= 40; ++len) {
    uint8_t buf[40];
    p.fill(buf, 7, len);
    uint8_t want = 0;
    ASSERT_EQ(p.check(buf, 7, len, &want), -1) << len;
    for (uint64_t off = 0; off < len; ++off) {
      const uint8_t good = buf[off];
      buf[off] ^= 0x01;
      ASSERT_EQ(p.check(buf, 7, len, &want), static_cast<int64_t>(off)) << len << " " << off;
      EXPECT_EQ(want, good);
      buf[off] = good;
    }
  }
}

// A message in the place of another, or shifted by a word, differs in every word; so does the
// same message under another size or verb (a peer on other sizes, a stale message).
TEST(VerifyPattern, MessagesWordsSizesAndVerbsDiffer) {
  const Pattern p = pattern_for(Verb::kSend, 64);
  for (uint64_t m = 0; m < 1000; ++m) {
    uint64_t a[8], b[8];
    p.fill(reinterpret_cast<uint8_t*>(a), m, 64);
    p.fill(reinterpret_cast<uint8_t*>(b), m + 1, 64);
    for (int i = 0; i < 8; ++i) {
      ASSERT_NE(a[i], b[i]) << m << " " << i;
      if (i < 7) {
        ASSERT_NE(a[i], a[i + 1]) << m << " " << i;
      }
    }
  }
  EXPECT_NE(pattern_for(Verb::kSend, 64).salt, pattern_for(Verb::kSend, 128).salt);
  EXPECT_NE(pattern_for(Verb::kSend, 64).salt, pattern_for(Verb::kWrite, 64).salt);
  EXPECT_NE(pattern_for(Verb::kRead, 1).salt, pattern_for(Verb::kRead, 2).salt);
}

// force_dependecies (perftest_parameters.c) and perftest's defaults, each at its edge.
TEST(Options, DependenciesAtTheirEdgesArePerftests) {
  // Completion moderation off above 8 KiB (MSG_SIZE_CQ_MOD_LIMIT), and never above the depth.
  EXPECT_EQ(parsed({"write_bw", "-s", "8192"}).cq_mod, 100);
  EXPECT_EQ(parsed({"write_bw", "-s", "8193"}).cq_mod, 1);
  EXPECT_EQ(parsed({"write_bw", "-s", "64", "-t", "64"}).cq_mod, 64);
  // The depth never above the iterations.
  EXPECT_EQ(parsed({"write_bw", "-n", "50"}).tx_depth, 50);
  EXPECT_EQ(parsed({"write_bw", "-n", "5000"}).tx_depth, 128);
  // An odd receive depth of a single-size SEND test is made even.
  EXPECT_EQ(parsed({"send_bw", "-r", "65"}).rx_depth, 66);
  EXPECT_EQ(parsed({"send_bw", "-r", "65", "--sizes", "64,128"}).rx_depth, 65);
  // No peak above 20,000 iterations (the timestamps would be too many).
  EXPECT_FALSE(parsed({"write_bw", "-n", "20000"}).no_peak);
  EXPECT_TRUE(parsed({"write_bw", "-n", "20001"}).no_peak);
  // Inline data by default on the latency ping-pongs only.
  EXPECT_EQ(parsed({"write_lat"}).inline_size, 220);
  EXPECT_EQ(parsed({"write_bw"}).inline_size, 0);
  // -a: 2 B .. 8 MiB, buffers laid out for the largest.
  const PerfOptions all = parsed({"write_bw", "-a"});
  ASSERT_EQ(all.size_list.size(), 23u);
  EXPECT_EQ(all.size_list.front(), 2u);
  EXPECT_EQ(all.size_list.back(), uint64_t{1} << 23);
  EXPECT_EQ(all.size, kMaxSize);
}

}  // namespace
