// roce-raw-pingpong: the latency floor of a DPDK vdev between two processes. One Ethernet frame
// bounces between a `ping` and a `pong` process over one port (net_memif, net_af_packet, ...),
// with nothing but rte_eth_tx_burst / rte_eth_rx_burst in between: no protocol, no copy beyond
// the driver's, one busy-polling thread per process. The ping side timestamps each round trip
// (steady clock, as roce-perf) and reports half of it, so the figures compare with roce-perf
// send_lat's on the same vdev (docs/performance.md, scripts/bench-datapath.sh).
//
//   roce-raw-pingpong EAL-ARGS -- --role pong [--split 0|1] [--timeout S]
//   roce-raw-pingpong EAL-ARGS -- --role ping [--iters N] [--warmup N] [--size BYTES] [--frames N]
//                                           [--split 0|1] [--timeout S]
// --frames N sends N frames in each burst (the pong side echoes them in one burst), the last one
// timed: a message and the ACK that travels with it, as an RC ping-pong sends them.
// --split 1 (give it to both sides) sends the timed frame first, in a tx burst of its own, and
// the others in a second burst: the answer ahead of the ACK.
//
// EAL-ARGS name the port: e.g. --no-huge -m 256 --no-pci --file-prefix pp1 --lcores 0@1
// --vdev net_memif0,role=server,socket=/tmp/pp.sock,socket-abstract=no (the pong side; the ping
// side role=client, started once the server's socket exists). The ping side prints
//   raw_pingpong: iters=N size=B half_rtt_us: min=.. median=.. avg=.. p99=.. p99.9=.. max=..
// and tells the pong side to stop with a last frame. Exit 0; 1 on a runtime failure (no link,
// timeout); 2 on a bad argument.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dpdk/intr_sync.h"

namespace {

constexpr uint16_t kEtherType = 0x88B5;  // IEEE 802 local experimental
constexpr uint32_t kMagic = 0x52505050;  // "RPPP"
constexpr uint16_t kBurst = 32;

struct Payload {
  uint32_t magic;
  uint32_t stop;
  uint64_t seq;
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

int usage(const char* why) {
  std::fprintf(stderr, "roce-raw-pingpong: %s\n", why);
  std::fprintf(stderr,
               "usage: roce-raw-pingpong EAL-ARGS -- --role ping|pong [--iters N] [--warmup N] "
               "[--size BYTES] [--frames N] [--split 0|1] [--timeout S]\n");
  return 2;
}

bool parse_u64(const char* s, uint64_t lo, uint64_t hi, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || !*s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

struct Port {
  uint16_t id = 0;
  rte_mempool* pool = nullptr;
  bool started = false;
  void stop() {
    if (started) rte_eth_dev_stop(id);
    started = false;
  }
};

// `device_given`: EAL's arguments named a device (--vdev, -a / --allow). Then no port means
// its probe failed, which EAL logs but does not treat as an error.
bool open_port(Port* p, bool device_given) {
  if (rte_eth_dev_count_avail() < 1) {
    if (device_given) {
      std::fprintf(stderr,
                   "roce-raw-pingpong: no port: the device given to EAL did not probe (EAL's "
                   "log says why; --log-level=8 for more)\n");
    } else {
      std::fprintf(stderr, "roce-raw-pingpong: no port (give --vdev ...)\n");
    }
    return false;
  }
  uint16_t first = RTE_MAX_ETHPORTS;
  uint16_t id = 0;
  RTE_ETH_FOREACH_DEV(id) {
    if (first == RTE_MAX_ETHPORTS) first = id;
  }
  p->id = first;
  p->pool = rte_pktmbuf_pool_create("pp_pool", 2047, 64, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                    static_cast<int>(rte_socket_id()));
  if (!p->pool) {
    std::fprintf(stderr, "roce-raw-pingpong: mbuf pool: %s\n", rte_strerror(rte_errno));
    return false;
  }
  rte_eth_conf conf;
  std::memset(&conf, 0, sizeof conf);
  int rc = rte_eth_dev_configure(p->id, 1, 1, &conf);
  if (rc == 0) rc = rte_eth_rx_queue_setup(p->id, 0, 1024, rte_socket_id(), nullptr, p->pool);
  if (rc == 0) rc = rte_eth_tx_queue_setup(p->id, 0, 1024, rte_socket_id(), nullptr);
  if (rc == 0) rc = rte_eth_dev_start(p->id);
  if (rc != 0) {
    std::fprintf(stderr, "roce-raw-pingpong: port set-up: %s\n", rte_strerror(-rc));
    return false;
  }
  p->started = true;
  rte_eth_promiscuous_enable(p->id);  // -ENOTSUP is fine: nothing else is on the link
  return true;
}

bool link_up(const Port& p) {
  rte_eth_link link;
  std::memset(&link, 0, sizeof link);
  return rte_eth_link_get_nowait(p.id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

bool wait_link(const Port& p, uint64_t deadline) {
  while (!link_up(p)) {
    if (g_stop.load(std::memory_order_relaxed) || now_ns() > deadline) return false;
    rte_delay_us_sleep(1000);
  }
  return true;
}

// The payload follows the 14-byte Ethernet header, so it is not aligned for its 8-byte field:
// copied in and out, never accessed in place.
Payload payload_of(rte_mbuf* m) {
  Payload p;
  std::memcpy(&p, rte_pktmbuf_mtod_offset(m, const char*, sizeof(rte_ether_hdr)), sizeof p);
  return p;
}

bool is_ours(rte_mbuf* m) {
  if (rte_pktmbuf_data_len(m) < sizeof(rte_ether_hdr) + sizeof(Payload)) return false;
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  return eth->ether_type == rte_cpu_to_be_16(kEtherType) && payload_of(m).magic == kMagic;
}

rte_mbuf* make_frame(const Port& p, uint32_t size, uint64_t seq, bool stop) {
  rte_mbuf* m = rte_pktmbuf_alloc(p.pool);
  if (!m) return nullptr;
  char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(size));
  std::memset(d, 0, size);
  auto* eth = reinterpret_cast<rte_ether_hdr*>(d);
  const rte_ether_addr dst = {{0x02, 0, 0, 0x99, 0, 0x02}};
  const rte_ether_addr src = {{0x02, 0, 0, 0x99, 0, 0x01}};
  eth->dst_addr = dst;
  eth->src_addr = src;
  eth->ether_type = rte_cpu_to_be_16(kEtherType);
  const Payload pl{kMagic, stop ? 1u : 0u, seq};
  std::memcpy(d + sizeof(rte_ether_hdr), &pl, sizeof pl);
  return m;
}

// Sends n frames, retrying while the driver takes fewer; false (the rest freed) once it has
// taken none for `timeout_ns` or on a signal. The clock is read only when a burst falls short.
bool send_all(const Port& p, rte_mbuf** m, uint16_t n, uint64_t timeout_ns) {
  uint16_t sent = 0;
  uint64_t deadline = 0;
  while (sent < n) {
    const uint16_t k = rte_eth_tx_burst(p.id, 0, m + sent, static_cast<uint16_t>(n - sent));
    sent += k;
    if (sent == n) break;
    const uint64_t now = now_ns();
    if (k != 0 || deadline == 0) deadline = now + timeout_ns;
    if (g_stop.load(std::memory_order_relaxed) || now > deadline) {
      rte_pktmbuf_free_bulk(m + sent, n - sent);
      return false;
    }
  }
  return true;
}

int run_pong(Port& p, uint64_t timeout_ns, bool split) {
  if (!wait_link(p, now_ns() + timeout_ns)) {
    std::fprintf(stderr, "roce-raw-pingpong: no link within the timeout\n");
    return 1;
  }
  rte_mbuf* bufs[kBurst];
  uint64_t last = now_ns(), echoed = 0, idle = 0;
  bool stop = false;
  while (!stop) {
    const uint16_t n = rte_eth_rx_burst(p.id, 0, bufs, kBurst);
    if (n == 0) {
      if (g_stop.load(std::memory_order_relaxed)) return 1;
      // The clock is read only when idle; a stalled peer ends the run.
      if ((++idle & 0xFFF) == 0 && now_ns() - last > timeout_ns) {
        std::fprintf(stderr, "roce-raw-pingpong: no frame for the timeout\n");
        return 1;
      }
      continue;
    }
    uint16_t k = 0, timed = 0;
    rte_mbuf* companions[kBurst];
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = bufs[i];
      if (!is_ours(m)) {
        rte_pktmbuf_free(m);
        continue;
      }
      auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
      std::swap(eth->dst_addr, eth->src_addr);
      if (payload_of(m).stop) stop = true;
      if (split && payload_of(m).seq == ~uint64_t{0}) {
        companions[k - timed] = m;
      } else {
        bufs[timed++] = m;
      }
      ++k;
    }
    // With --split the timed frames leave first, in a burst of their own. A driver that takes
    // nothing for the timeout (a memif peer gone between our receive and the echo) ends the run.
    const auto companions_n = static_cast<uint16_t>(k - timed);
    if (!send_all(p, bufs, timed, timeout_ns)) {
      rte_pktmbuf_free_bulk(companions, companions_n);
      std::fprintf(stderr, "roce-raw-pingpong: the port took no echo for the timeout\n");
      return 1;
    }
    if (!send_all(p, companions, companions_n, timeout_ns)) {
      std::fprintf(stderr, "roce-raw-pingpong: the port took no echo for the timeout\n");
      return 1;
    }
    echoed += k;
    last = now_ns();
  }
  // The ping side stops its port once it has our answer to its stop frame: wait for that (no
  // more rx polling: a driver polled after its peer left may fault) before stopping ours.
  const uint64_t until = now_ns() + 2'000'000'000ull;
  while (link_up(p) && now_ns() < until) rte_delay_us_sleep(1000);
  std::printf("raw_pingpong: pong echoed %llu frames\n", static_cast<unsigned long long>(echoed));
  return 0;
}

int run_ping(Port& p, uint64_t iters, uint64_t warmup, uint32_t size, uint16_t frames, bool split,
             uint64_t timeout_ns) {
  if (!wait_link(p, now_ns() + timeout_ns)) {
    std::fprintf(stderr, "roce-raw-pingpong: no link within the timeout\n");
    return 1;
  }
  std::vector<uint64_t> samples(iters);
  rte_mbuf* bufs[kBurst];
  const uint64_t total = warmup + iters;
  for (uint64_t seq = 0; seq <= total; ++seq) {
    const bool stop = seq == total;  // the last frame tells the pong side to finish
    // Companions first (an unused sequence number), the timed frame last.
    rte_mbuf* m[kBurst];
    for (uint16_t f = 0; f < frames; ++f) {
      const bool timed = f + 1 == frames;
      m[f] = make_frame(p, size, timed ? seq : ~uint64_t{0}, stop && timed);
      if (!m[f]) {
        rte_pktmbuf_free_bulk(m, f);
        std::fprintf(stderr, "roce-raw-pingpong: mbuf pool empty\n");
        return 1;
      }
    }
    const uint64_t t0 = now_ns();
    const uint64_t deadline = t0 + timeout_ns;
    const auto companions = static_cast<uint16_t>(frames - 1);
    bool sent_all = true;
    if (!split) {
      sent_all = send_all(p, m, frames, timeout_ns);
    } else if (!send_all(p, m + companions, 1, timeout_ns)) {
      rte_pktmbuf_free_bulk(m, companions);
      sent_all = false;
    } else {
      sent_all = send_all(p, m, companions, timeout_ns);
    }
    if (!sent_all) {
      std::fprintf(stderr, "roce-raw-pingpong: cannot send frame %llu\n",
                   static_cast<unsigned long long>(seq));
      return 1;
    }
    bool got = false;
    uint64_t t1 = 0, polls = 0;
    while (!got) {
      const uint16_t n = rte_eth_rx_burst(p.id, 0, bufs, kBurst);
      if (n) t1 = now_ns();
      for (uint16_t i = 0; i < n; ++i) {
        if (is_ours(bufs[i]) && payload_of(bufs[i]).seq == seq) got = true;
        rte_pktmbuf_free(bufs[i]);
      }
      if (!got && (++polls & 0xFFF) == 0 &&
          (g_stop.load(std::memory_order_relaxed) || now_ns() > deadline)) {
        std::fprintf(stderr, "roce-raw-pingpong: no answer to frame %llu\n",
                     static_cast<unsigned long long>(seq));
        return 1;
      }
    }
    if (seq >= warmup && seq < total) samples[seq - warmup] = t1 - t0;
  }
  p.stop();  // before the pong side stops its own (see run_pong)
  std::sort(samples.begin(), samples.end());
  auto pct = [&](double q) {
    const auto i = static_cast<size_t>(q * static_cast<double>(iters - 1) + 0.5);
    return static_cast<double>(samples[i]) / 2e3;  // half the round trip, in us
  };
  double sum = 0;
  for (uint64_t s : samples) sum += static_cast<double>(s);
  std::printf(
      "raw_pingpong: iters=%llu size=%u frames=%u half_rtt_us: min=%.3f median=%.3f avg=%.3f "
      "p99=%.3f p99.9=%.3f max=%.3f\n",
      static_cast<unsigned long long>(iters), size, frames, pct(0), pct(0.5),
      sum / static_cast<double>(iters) / 2e3, pct(0.99), pct(0.999), pct(1));
  return 0;
}

// rte_eal_cleanup, and the runtime directory (/var/run/dpdk/<file-prefix>) DPDK 22.11 leaves.
void cleanup_eal() {
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::error_code ec;
  if (!runtime_dir.empty()) std::filesystem::remove_all(runtime_dir, ec);
}

}  // namespace

int main(int argc, char** argv) {
  bool device_given = false;
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    const std::string_view a = argv[i];
    for (const std::string_view opt : {"--vdev", "-a", "--allow"}) {
      if (a.substr(0, opt.size()) == opt) device_given = true;
    }
  }
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) {
    std::fprintf(stderr, "roce-raw-pingpong: rte_eal_init: %s\n", rte_strerror(rte_errno));
    return 2;
  }
  argc -= eal;
  argv += eal;
  std::string role;
  uint64_t iters = 100000, warmup = 1000, size = 64, frames = 1, timeout_s = 30, split = 0;
  struct Number {
    const char* name;
    uint64_t lo, hi;
    uint64_t* out;
  };
  const Number numbers[] = {
      {"--iters", 1, 100'000'000, &iters}, {"--warmup", 0, 100'000'000, &warmup},
      {"--size", 60, 1514, &size},         {"--frames", 1, 8, &frames},
      {"--split", 0, 1, &split},           {"--timeout", 1, 3600, &timeout_s}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const Number* number = nullptr;
    for (const Number& n : numbers) {
      if (a == n.name) number = &n;
    }
    std::string why;
    if (a != "--role" && number == nullptr) {
      why = "unknown option " + a;
    } else if (i + 1 >= argc) {
      why = "missing value for " + a;
    } else {
      const char* v = argv[++i];
      if (number == nullptr) {
        role = v;
        if (role != "ping" && role != "pong")
          why = "bad value for --role: '" + role + "' (ping or pong)";
      } else if (!parse_u64(v, number->lo, number->hi, number->out)) {
        why = "bad value for " + a + ": '" + v + "' (" + std::to_string(number->lo) + ".." +
              std::to_string(number->hi) + ")";
      }
    }
    if (!why.empty()) {
      cleanup_eal();
      return usage(why.c_str());
    }
  }
  if (role.empty()) {
    cleanup_eal();
    return usage("--role ping|pong is required");
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Port port;
  int rc = 1;
  const bool opened = open_port(&port, device_given);
  if (opened) {
    const uint64_t timeout_ns = timeout_s * 1'000'000'000ull;
    rc = role == "ping" ? run_ping(port, iters, warmup, static_cast<uint32_t>(size),
                                   static_cast<uint16_t>(frames), split != 0, timeout_ns)
                        : run_pong(port, timeout_ns, split != 0);
  }
  std::fflush(stdout);
  // net_memif handles the peer's leaving on EAL's interrupt thread with the same teardown that
  // our stop runs, unguarded: run ours there too (dpdk/intr_sync.h). Stopping here, on the main
  // thread, crashed the pong side at exit in 5 of 30 runs on a loaded machine.
  const auto close_port = [&] {
    port.stop();
    if (opened) rte_eth_dev_close(port.id);
  };
  if (!roce::dpdk::run_on_eal_interrupt_thread(close_port, std::chrono::seconds(5))) {
    std::fprintf(stderr,
                 "roce-raw-pingpong: could not close the port on EAL's interrupt thread (no "
                 "answer within 5 s, or no handle); closing it on the main thread\n");
    close_port();
  }
  roce::dpdk::settle_eal_interrupt_thread(std::chrono::seconds(5));
  cleanup_eal();
  return rc;
}
