// The neighbour agent's cost per received frame, by the size of its table. A broadcast ARP
// request for another host (what every station on the segment sees when its neighbours resolve
// one another) makes the agent look its sender up in the table, to refresh an entry it may
// hold; the table is first filled by requests for our address from N distinct senders, then
// 64 other senders take turns.
//
//     build/tests/bench/neighbor_bench --benchmark_repetitions=3
//     --benchmark_report_aggregates_only=true
//
// The row with an empty table is the baseline for the others. For callgrind,
// `neighbor_bench --flood ENTRIES FRAMES` feeds FRAMES such requests to a table of ENTRIES in
// `feed_frames`, which alone is counted with
//
//     valgrind --tool=callgrind --toggle-collect='*feed_frames*' build/tests/bench/neighbor_bench
//     --flood 1024 12800
//
// (the table's seed differs from run to run, and with it the cost of filling the table: a
// difference of two runs would mix that into the figure).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "stack/net/neighbor_agent.h"
#include "tests/support/inet_frames.h"

namespace {

using namespace roce;
using namespace roce::test;

bool accept_frame(void*, const uint8_t*, uint32_t) { return true; }

const Mac kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// A broadcast ARP request from `sha` / `spa` for `tpa`, padded to 60 bytes.
Bytes arp_request(const Mac& sha, const Gid& spa, const Gid& tpa) {
  return padded(arp(1, kBroadcast, sha, spa, Mac{}, tpa));
}

struct Flood {
  NeighborTable table;
  NeighborAgent agent;

  explicit Flood(int entries)
      : agent(table, Mac{2, 0, 0, 0, 0, 1}, {v4(10, 0, 0, 1)}, false, 0, NeighborConfig{},
              &accept_frame, nullptr, nullptr) {
    for (int i = 0; i < entries; ++i) {
      const auto hi = static_cast<uint8_t>(i >> 8), lo = static_cast<uint8_t>(i);
      const Bytes f = arp_request(Mac{2, 0, 0, 1, hi, lo}, v4(10, 1, hi, lo), v4(10, 0, 0, 1));
      agent.on_frame(f.data(), static_cast<uint32_t>(f.size()), 0);
    }
    // 64 senders the table does not hold, in turn, so that the cost averages over where their
    // addresses land in the table's index.
    for (uint8_t i = 0; i < kSenders; ++i) {
      frames[i] = arp_request(Mac{2, 0, 0, 9, 9, i}, v4(10, 9, 9, i), v4(10, 0, 0, 77));
    }
  }
  void feed() {
    const Bytes& f = frames[next++ % kSenders];
    agent.on_frame(f.data(), static_cast<uint32_t>(f.size()), 0);
  }

  static constexpr uint8_t kSenders = 64;
  Bytes frames[kSenders];
  unsigned next = 0;
};

void BM_BroadcastArpForAnotherHost(benchmark::State& state) {
  Flood f(static_cast<int>(state.range(0)));
  if (f.table.entries().size() != static_cast<size_t>(state.range(0))) {
    state.SkipWithError("the table did not fill");
    return;
  }
  for (auto _ : state) f.feed();
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_BroadcastArpForAnotherHost)->Arg(0)->Arg(16)->Arg(1024);

// Not inlined: callgrind counts this function alone (--toggle-collect).
[[gnu::noinline]] void feed_frames(Flood& f, int frames) {
  for (int i = 0; i < frames; ++i) f.feed();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--flood") == 0) {
    Flood f(std::atoi(argv[2]));
    feed_frames(f, std::atoi(argv[3]));
    std::printf("%zu entries, %llu frames ignored\n", f.table.entries().size(),
                static_cast<unsigned long long>(f.agent.counters().ignored));
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
