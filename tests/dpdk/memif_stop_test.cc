// Two net_memif ports of one process, server and client of one link, stopped and closed at the
// same time on two threads: each side's stop tells the other it is leaving, and DPDK 22.11's
// net_memif handles that message on EAL's interrupt thread (memif_disconnect: frees the control
// channel and the shared regions) with nothing to exclude the stop or close running on the
// other thread, which frees the same things (dpdk/README.md, known issue).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "dpdk/testing.h"

namespace roce::dpdk {
namespace {

bool wait_up(const DpdkPort& p, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!p.link_up()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// Releases two threads at once (a spin, so that neither is still waking up).
struct StartLine {
  std::atomic<int> ready{0};
  void arrive_and_wait() {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
  }
};

TEST(MemifStop, BothEndsStoppingAndClosingAtOnceIsSafe) {
  std::string err;
  ASSERT_TRUE(Eal::init(EalOptions{}, &err)) << err;
  const std::string sock = ::testing::TempDir() + "roce-memifstop-" + std::to_string(getpid());
  PortConfig pc;
  pc.num_mbufs = 2047;
  pc.rx_desc = pc.tx_desc = 256;
  constexpr int kRounds = 60;
  // A double free of the driver's control channel or regions shows as rte_free's complaint
  // (before the fix: in 10 of 20 runs of this test, and one of the 20 died of SIGSEGV).
  EalLogCapture log;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::remove(sock.c_str());
    const std::string args = ",socket=" + sock + ",socket-abstract=no";
    std::unique_ptr<DpdkPort> server = DpdkPort::open("net_memif40,role=server" + args, pc, &err);
    ASSERT_TRUE(server) << err;
    std::unique_ptr<DpdkPort> client = DpdkPort::open("net_memif41,role=client" + args, pc, &err);
    ASSERT_TRUE(client) << err;
    ASSERT_TRUE(wait_up(*server, std::chrono::seconds(10)));
    ASSERT_TRUE(wait_up(*client, std::chrono::seconds(10)));
    StartLine line;
    // Alternate which side gets a head start of a few microseconds, so that each side's stop
    // meets the other's message at varying points.
    const auto skew = std::chrono::microseconds(round % 7 * 3);
    std::thread a([&] {
      line.arrive_and_wait();
      if (round % 2) std::this_thread::sleep_for(skew);
      server.reset();
    });
    std::thread b([&] {
      line.arrive_and_wait();
      if (round % 2 == 0) std::this_thread::sleep_for(skew);
      client.reset();
    });
    a.join();
    b.join();
    const std::string text = log.text();
    ASSERT_EQ(text.find("Invalid memory"), std::string::npos) << text;
  }
  std::remove(sock.c_str());
}

}  // namespace
}  // namespace roce::dpdk
