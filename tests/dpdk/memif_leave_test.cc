// A memif peer that leaves while this side is inside a burst. DPDK 22.11's net_memif tears the
// connection down on EAL's interrupt thread (memif_disconnect: unmaps the shared regions, frees
// their descriptions, clears the ring sizes) with nothing to wait for a burst another thread is
// inside: the burst then reads or writes memory that is gone (SIGSEGV; without the gate below,
// every run of this test died within its first 4 rounds). DpdkPort closes a gate around its
// memif bursts whenever the interrupt thread has events to handle (dpdk/burst_gate.h).
//
// Both ends of the link live in this process. The server side sends large frames as fast as
// the ring takes them, then stops and closes while the client side's thread keeps bursting
// (copying those frames out of the shared ring); the server's close tells the client it is
// leaving, and the client's teardown runs on the interrupt thread, which shares a CPU with the
// bursting thread so that it can preempt it anywhere in a burst.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"

namespace roce::dpdk {
namespace {

bool wait_for(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Offers `n` frames of `len` bytes; frees what the port did not take.
void send_some(DpdkPort& port, uint16_t n, uint32_t len) {
  PktBuf bufs[32];
  const uint16_t got = port.alloc(bufs, n);
  for (uint16_t i = 0; i < got; ++i) {
    bufs[i].len = len;
    std::memset(bufs[i].data, 0x5a, 64);
  }
  const uint16_t sent = port.tx_burst(bufs, got);
  if (sent < got) port.free(bufs + sent, got - sent);
}

uint16_t receive_some(DpdkPort& port) {
  PktBuf bufs[32];
  const uint16_t got = port.rx_burst(bufs, 32);
  if (got) port.free(bufs, got);
  return got;
}

TEST(MemifPeerLeaves, BurstsDuringThePeersTeardownAreSafe) {
  std::string err;
  ASSERT_TRUE(Eal::init(EalOptions{}, &err)) << err;
  // The CPUs EAL's interrupt thread may run on: the bursting thread joins it on the first.
  cpu_set_t intr_cpus;
  CPU_ZERO(&intr_cpus);
  ASSERT_TRUE(Eal::run_on_interrupt_thread(
      [&intr_cpus] { pthread_getaffinity_np(pthread_self(), sizeof intr_cpus, &intr_cpus); },
      std::chrono::seconds(5)));
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &intr_cpus)) ++cpu;
  ASSERT_LT(cpu, CPU_SETSIZE);

  const std::string sock = ::testing::TempDir() + "roce-memifleave-" + std::to_string(getpid());
  PortConfig pc;
  pc.num_mbufs = 4095;
  pc.rx_desc = pc.tx_desc = 1024;
  const int rounds = std::getenv("ROCE_MEMIF_LEAVE_ROUNDS")
                         ? std::atoi(std::getenv("ROCE_MEMIF_LEAVE_ROUNDS"))
                         : 40;
  std::mt19937 rng(12345);
  uint64_t received_after_close = 0, bursts_after_close = 0, skipped = 0;
  const burst_gate::Stats before = burst_gate::stats();
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::remove(sock.c_str());
    const std::string args = ",socket=" + sock + ",socket-abstract=no";
    std::unique_ptr<DpdkPort> server = DpdkPort::open("net_memif50,role=server" + args, pc, &err);
    ASSERT_TRUE(server) << err;
    std::unique_ptr<DpdkPort> client = DpdkPort::open("net_memif51,role=client" + args, pc, &err);
    ASSERT_TRUE(client) << err;
    ASSERT_TRUE(server->burst_gated() && client->burst_gated());
    ASSERT_TRUE(
        wait_for([&] { return server->link_up() && client->link_up(); }, std::chrono::seconds(10)));

    std::atomic<bool> closing{false}, stop{false};
    std::atomic<uint64_t> after{0}, bursts{0};
    std::thread burster([&] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      while (!stop.load(std::memory_order_relaxed)) {
        const uint16_t got = receive_some(*client);
        send_some(*client, 32, 4096);
        if (closing.load(std::memory_order_relaxed)) {
          after.fetch_add(got, std::memory_order_relaxed);
          bursts.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
    // Fill the client's receive ring (and drain the server's), for a varying while.
    const auto fill_until =
        std::chrono::steady_clock::now() + std::chrono::microseconds(200 + rng() % 2000);
    while (std::chrono::steady_clock::now() < fill_until) {
      send_some(*server, 32, 4096);
      receive_some(*server);
    }
    for (int i = 0; i < 64; ++i) send_some(*server, 32, 4096);
    closing.store(true);
    server.reset();  // the server leaves: the client's teardown follows on the interrupt thread
    EXPECT_TRUE(wait_for([&] { return !client->link_up(); }, std::chrono::seconds(10)));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    stop.store(true);
    burster.join();
    received_after_close += after.load();
    bursts_after_close += bursts.load();
    skipped += client->counters().bursts_gated;
    client.reset();
  }
  std::remove(sock.c_str());
  const burst_gate::Stats after = burst_gate::stats();
  std::printf(
      "%d rounds: %llu bursts (%llu frames received) after the server began to close; the "
      "interrupt thread closed the gate %llu times and found a burst in flight %llu times; "
      "the client skipped %llu bursts in all\n",
      rounds, static_cast<unsigned long long>(bursts_after_close),
      static_cast<unsigned long long>(received_after_close),
      static_cast<unsigned long long>(after.closes - before.closes),
      static_cast<unsigned long long>(after.waits - before.waits),
      static_cast<unsigned long long>(skipped));
  // The gate did close while the client burst (each round's teardown at least).
  EXPECT_GE(after.closes - before.closes, static_cast<uint64_t>(rounds));
  EXPECT_GT(skipped, 0u);
}

}  // namespace
}  // namespace roce::dpdk
