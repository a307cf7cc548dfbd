// roce_dpdk_peer: one side of a two-process DpdkPort test. The test runs two of these (in two
// network namespaces, or over one memif socket), one sending and one receiving test frames,
// and reads their exit codes. EAL starts once per process, which is why the sides are processes.
//
// The sides meet through files in --sync-dir: the receiver creates "opened" once its port exists
// and the sender opens its own only then (a memif client that finds no server socket never
// connects); the receiver creates "ready" once its link is up, and the sender sends only then; the
// receiver creates "done" when it has what it expects; the sender stops its port and creates
// "sender-stopped"; the receiver stops its own after that (net_memif crashes the side still polling
// when its peer goes away). Every wait is bounded and sleeps between checks.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "tests/dpdk/test_frames.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace testing = roce::dpdk::testing;

// Polls `ready` every 10 ms until it holds or `timeout` passes.
template <typename F>
bool wait_for(F ready, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!ready()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

void touch(const std::filesystem::path& p) { std::ofstream(p).put('\n'); }

// Size and resident (mapped in this process's page tables) kB of net_memif's shared regions,
// from /proc/self/smaps.
struct SharedKb {
  uint64_t size = 0;
  uint64_t rss = 0;
};
SharedKb memif_regions_kb() {
  SharedKb kb;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_region = false;
  while (std::getline(smaps, line)) {
    unsigned long start = 0, end = 0;  // a mapping's header line: "start-end perms ..."
    if (std::sscanf(line.c_str(), "%lx-%lx", &start, &end) == 2) {
      in_region = line.find("memif_region_") != std::string::npos;
    } else if (in_region) {
      unsigned long long v = 0;
      if (std::sscanf(line.c_str(), "Size: %llu kB", &v) == 1) kb.size += v;
      if (std::sscanf(line.c_str(), "Rss: %llu kB", &v) == 1) kb.rss += v;
    }
  }
  return kb;
}

// DpdkPort::prefault_shared_memory on a link that is up: every page of net_memif's regions is
// in our page tables afterwards (before, only the rings' pages are); other drivers have none.
bool check_prefault(roce::dpdk::DpdkPort& port, const std::string& role) {
  const SharedKb before = memif_regions_kb();
  const uint64_t bytes = port.prefault_shared_memory();
  const SharedKb after = memif_regions_kb();
  std::printf(
      "%s: shared regions %llu kB, resident %llu kB before prefault, %llu kB after "
      "(%llu bytes populated)\n",
      role.c_str(), static_cast<unsigned long long>(after.size),
      static_cast<unsigned long long>(before.rss), static_cast<unsigned long long>(after.rss),
      static_cast<unsigned long long>(bytes));
  if (!port.shares_peer_memory()) return bytes == 0 && after.size == 0;
  return after.size > 0 && bytes == after.size * 1024 && after.rss == after.size;
}

struct Args {
  std::string vdev;
  std::string role;
  std::string sync_dir;
  std::vector<uint32_t> sizes{60, 1500, 4200};
  uint32_t count = 32;  // frames per size
  uint32_t mtu = 4200;
  uint32_t timeout_ms = 15000;
  bool flood = false;        // sender: no pacing, keep the driver's ring full
  uint32_t rx_delay_us = 0;  // receiver: sleep this long after every burst (a slow peer)
};

uint32_t size_of(const Args& a, uint32_t seq) { return a.sizes[seq / a.count]; }

int run_sender(roce::dpdk::DpdkPort& port, const Args& a, const std::filesystem::path& dir) {
  if (!wait_for([&] { return std::filesystem::exists(dir / "ready"); },
                std::chrono::milliseconds(a.timeout_ms))) {
    std::printf("sender: receiver never became ready\n");
    return 2;
  }
  const uint32_t total = a.count * static_cast<uint32_t>(a.sizes.size());
  uint32_t seq = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(a.timeout_ms);
  while (seq < total && Clock::now() < deadline) {
    roce::PktBuf bufs[32];
    const uint16_t want = static_cast<uint16_t>(std::min<uint32_t>(32, total - seq));
    const uint16_t n = port.alloc(bufs, want);
    for (uint16_t i = 0; i < n; ++i) {
      const auto f = testing::make_frame(size_of(a, seq + i), seq + i);
      std::memcpy(bufs[i].data, f.data(), f.size());
      bufs[i].len = static_cast<uint32_t>(f.size());
    }
    const uint16_t sent = port.tx_burst(bufs, n);
    port.free(bufs + sent, static_cast<uint16_t>(n - sent));
    seq += sent;
    // Pace the bursts: af_packet and pcap over veth lose frames silently under overload
    // (shared/notes/dpdk-here.md), and this test is about bytes, not rates. --flood (memif,
    // which is lossless) keeps the ring full instead.
    if (!a.flood) std::this_thread::sleep_for(sent == n ? 2ms : 5ms);
  }
  std::printf("sender: %u/%u frames sent\n", seq, total);
  const bool done = wait_for([&] { return std::filesystem::exists(dir / "done"); },
                             std::chrono::milliseconds(a.timeout_ms));
  port.stop();
  touch(dir / "sender-stopped");
  return seq == total && done ? 0 : 1;
}

int run_receiver(roce::dpdk::DpdkPort& port, const Args& a, const std::filesystem::path& dir) {
  touch(dir / "ready");
  const uint32_t total = a.count * static_cast<uint32_t>(a.sizes.size());
  std::set<uint32_t> seen;
  uint32_t bad = 0;
  uint32_t duplicates = 0;
  const auto deadline = Clock::now() + std::chrono::milliseconds(a.timeout_ms);
  while (seen.size() < total && Clock::now() < deadline) {
    roce::PktBuf bufs[32];
    const uint16_t n = port.rx_burst(bufs, 32);
    for (uint16_t i = 0; i < n; ++i) {
      const uint8_t* p = bufs[i].data;
      // Frames the kernel sends on its own (IPv6 neighbour discovery ...) are not ours.
      if (!testing::is_test_frame(p, bufs[i].len)) continue;
      const uint32_t seq = testing::frame_seq(p);
      const std::vector<uint8_t> got(p, p + bufs[i].len);
      if (seq >= total || got != testing::make_frame(size_of(a, seq), seq)) {
        ++bad;
      } else if (!seen.insert(seq).second) {
        ++duplicates;
      }
    }
    port.free(bufs, n);
    if (n == 0) std::this_thread::sleep_for(200us);
    if (n > 0 && a.rx_delay_us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(a.rx_delay_us));
  }
  touch(dir / "done");
  std::printf("receiver: %zu/%u frames byte-identical, %u corrupt, %u duplicate\n", seen.size(),
              total, bad, duplicates);
  roce::dpdk::EthStats s;
  std::string error;
  if (port.eth_stats(&s, &error)) {
    std::printf("receiver: driver ipackets %lu imissed %lu ierrors %lu\n",
                static_cast<unsigned long>(s.ipackets), static_cast<unsigned long>(s.imissed),
                static_cast<unsigned long>(s.ierrors));
  }
  wait_for([&] { return std::filesystem::exists(dir / "sender-stopped"); }, 5s);
  port.stop();
  return seen.size() == total && bad == 0 && duplicates == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"One side of a two-process DpdkPort test"};
  app.add_option("--vdev", a.vdev, "device string for DpdkPort::open")->required();
  app.add_option("--role", a.role, "send or recv")
      ->required()
      ->check(CLI::IsMember({"send", "recv"}));
  app.add_option("--sync-dir", a.sync_dir, "directory for the ready/done files")->required();
  app.add_option("--sizes", a.sizes, "frame sizes")->delimiter(',');
  app.add_option("--count", a.count, "frames per size");
  app.add_option("--mtu", a.mtu, "port MTU");
  app.add_option("--timeout-ms", a.timeout_ms, "bound on every wait");
  app.add_flag("--flood", a.flood, "sender: send without pacing");
  app.add_option("--rx-delay-us", a.rx_delay_us, "receiver: sleep after every burst");
  CLI11_PARSE(app, argc, argv);

  std::string error;
  if (!roce::dpdk::Eal::init(roce::dpdk::EalOptions{}, &error)) {
    std::fprintf(stderr, "%s: %s\n", a.role.c_str(), error.c_str());
    return 3;
  }
  int rc = 0;
  const std::filesystem::path dir(a.sync_dir);
  if (a.role == "send" && !wait_for([&] { return std::filesystem::exists(dir / "opened"); },
                                    std::chrono::milliseconds(a.timeout_ms))) {
    std::printf("sender: receiver never opened its port\n");
    rc = 2;
  }
  if (rc == 0) {
    roce::dpdk::PortConfig config;
    config.mtu = a.mtu;
    auto port = roce::dpdk::DpdkPort::open(a.vdev, config, &error);
    if (port == nullptr) {
      std::fprintf(stderr, "%s: %s\n", a.role.c_str(), error.c_str());
      rc = 3;
    } else {
      if (a.role == "recv") touch(dir / "opened");
      // memif's link comes up when the client has connected; af_packet/pcap are up at once.
      if (!wait_for([&] { return port->link_up(); }, std::chrono::milliseconds(a.timeout_ms))) {
        std::printf("%s: link never came up\n", a.role.c_str());
      }
      const bool prefault_ok = check_prefault(*port, a.role);
      rc = a.role == "send" ? run_sender(*port, a, dir) : run_receiver(*port, a, dir);
      if (rc == 0 && !prefault_ok) rc = 4;
    }
  }
  roce::dpdk::Eal::cleanup();
  std::fflush(stdout);
  return rc;
}
