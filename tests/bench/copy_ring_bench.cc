// What the machine does without DPDK or the stack: one thread copies 4 KiB frames into a ring
// of 1,024 slots of shared memory, another on a second CPU copies them out, as a copy-mode
// net_memif link does. Prints the rate in each window, then min / median / max. On the VMs of
// docs/performance.md ("The machine's memif states") this rate moves from run to run by up to 16x
// with nothing else running: what write_bw and testpmd report over memif moves with it.
//
//   copy_ring_bench [SECONDS [WINDOW_MS [CPU_A CPU_B]]]     defaults: 3 250 0 1
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {
constexpr size_t kSlots = 1024;
constexpr size_t kFrame = 4096;
constexpr size_t kStride = 4224;  // memif's buffer size in the benchmarks (bsize=4224)
constexpr size_t kLocal = 64;     // frames of private memory each side copies from / to
constexpr uint64_t kBurst = 32;

struct alignas(64) Index {
  std::atomic<uint64_t> v{0};
};

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

// A whole number argument in [lo, hi], or exit 2 with one line naming it.
long arg(int argc, char** argv, int i, const char* name, long def, long lo, long hi) {
  if (argc <= i) return def;
  char* end = nullptr;
  const long v = std::strtol(argv[i], &end, 10);
  if (*argv[i] == '\0' || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "copy_ring_bench: %s: '%s' is not a number in %ld..%ld\n", name, argv[i],
                 lo, hi);
    std::exit(2);
  }
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  const long secs = arg(argc, argv, 1, "SECONDS", 3, 1, 3600);
  const long window_ms = arg(argc, argv, 2, "WINDOW_MS", 250, 10, 60000);
  const int cpu_a = static_cast<int>(arg(argc, argv, 3, "CPU_A", 0, 0, CPU_SETSIZE - 1));
  const int cpu_b = static_cast<int>(arg(argc, argv, 4, "CPU_B", 1, 0, CPU_SETSIZE - 1));
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_SET(0, &allowed);
  for (const int c : {cpu_a, cpu_b}) {
    if (!CPU_ISSET(c, &allowed)) {
      std::fprintf(stderr, "copy_ring_bench: cannot run on CPU %d\n", c);
      return 2;
    }
  }
  auto* ring = static_cast<uint8_t*>(
      mmap(nullptr, kSlots * kStride, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (ring == MAP_FAILED) {
    std::perror("copy_ring_bench: mmap");
    return 1;
  }
  std::memset(ring, 1, kSlots * kStride);
  Index head, tail;
  std::atomic<uint64_t> copied{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> pinned_b{true};

  std::thread consumer([&] {
    pinned_b = pin(cpu_b);
    std::vector<uint8_t> dst(kFrame * kLocal);
    uint64_t t = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t h = head.v.load(std::memory_order_acquire);
      for (; t < h; ++t) {
        std::memcpy(dst.data() + (t % kLocal) * kFrame, ring + (t % kSlots) * kStride, kFrame);
      }
      tail.v.store(t, std::memory_order_release);
      copied.store(t, std::memory_order_relaxed);
    }
  });
  if (!pin(cpu_a)) {
    std::fprintf(stderr, "copy_ring_bench: cannot run on CPU %d\n", cpu_a);
    stop = true;
    consumer.join();
    return 2;
  }

  std::vector<uint8_t> src(kFrame * kLocal, 7);
  std::vector<double> rates;
  uint64_t h = 0, last_copied = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  while (true) {
    const uint64_t tl = tail.v.load(std::memory_order_acquire);
    for (uint64_t k = 0; k < kBurst && h - tl < kSlots; ++k, ++h) {
      std::memcpy(ring + (h % kSlots) * kStride, src.data() + (h % kLocal) * kFrame, kFrame);
    }
    head.v.store(h, std::memory_order_release);
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(window_ms)) continue;
    const uint64_t c = copied.load(std::memory_order_relaxed);
    const double s = std::chrono::duration<double>(now - last).count();
    rates.push_back(static_cast<double>(c - last_copied) * kFrame * 8 / s / 1e9);
    std::printf("%.1f ", rates.back());
    std::fflush(stdout);
    last_copied = c;
    last = now;
    if (now - t0 >= std::chrono::seconds(secs)) break;
  }
  stop = true;
  consumer.join();
  if (!pinned_b) {
    std::fprintf(stderr, "\ncopy_ring_bench: cannot run on CPU %d\n", cpu_b);
    return 2;
  }
  std::sort(rates.begin(), rates.end());
  std::printf(
      "\nGb/s of 4 KiB frames, CPU %d -> CPU %d, %zu windows of %ld ms: min %.1f median %.1f max "
      "%.1f\n",
      cpu_a, cpu_b, rates.size(), window_ms, rates.front(), rates[rates.size() / 2], rates.back());
  return 0;
}
