// Engine-only throughput: two engines joined back to back by an in-memory, zero-copy packet
// loop, both polled by one thread on one core. RDMA WRITEs keep the send queue full; completions
// are counted. What it measures is the stack's own cost (requester + responder + completer,
// parse, build, ICRC), with no NIC and no copy on the wire.
//
//   engine_bench                                  Google Benchmark: 64 B .. 64 KiB WRITE, 4 KiB
//                                                 WRITEs over 1, 256 and 1,024 QPs, ping-pong
//   engine_bench --fixed OPS SIZE [MTU]           fixed work for callgrind, prints packets
//     valgrind --tool=callgrind engine_bench --fixed 20000 64
//   engine_bench --pingpong ITERS SIZE            send_lat's exchange, for callgrind
//   engine_bench --qps N OPS SIZE [BUDGET]        OPS WRITEs spread over N QP pairs (round
//                                                 robin; each send queue 64 deep), for callgrind;
//                                                 BUDGET: the port's in-flight PSNs (512; 0: none)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "stack/core/connect.h"
#include "stack/core/engine.h"

namespace {
using namespace roce;

// A pool of frame buffers shared by both ends, and a port that delivers to its peer's rx queue.
class LoopPool {
 public:
  explicit LoopPool(uint32_t n, uint32_t size = 4352) : size_(size), mem_(size_t{n} * size) {
    for (uint32_t i = 0; i < n; ++i) free_.push_back(mem_.data() + size_t{i} * size);
  }
  uint8_t* get() {
    if (free_.empty()) return nullptr;
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  void put(uint8_t* b) { free_.push_back(b); }
  uint32_t size() const { return size_; }

 private:
  uint32_t size_;
  std::vector<uint8_t> mem_;
  std::vector<uint8_t*> free_;
};

class LoopPort final : public PacketIo {
 public:
  explicit LoopPort(LoopPool* pool) : pool_(pool) {}
  void connect(LoopPort* peer) { peer_ = peer; }
  uint16_t rx_burst(PktBuf* bufs, uint16_t n) override {
    uint16_t k = 0;
    while (k < n && !rx_.empty()) {
      bufs[k++] = rx_.front();
      rx_.pop_front();
    }
    return k;
  }
  uint16_t tx_burst(PktBuf* bufs, uint16_t n) override {
    for (uint16_t i = 0; i < n; ++i) peer_->rx_.push_back(bufs[i]);
    packets += n;
    return n;
  }
  uint16_t alloc(PktBuf* bufs, uint16_t n) override {
    uint16_t k = 0;
    for (; k < n; ++k) {
      uint8_t* b = pool_->get();
      if (!b) break;
      bufs[k] = PktBuf{b, b, 0, pool_->size()};
    }
    return k;
  }
  void free(PktBuf* bufs, uint16_t n) override {
    for (uint16_t i = 0; i < n; ++i) pool_->put(static_cast<uint8_t*>(bufs[i].handle));
  }
  uint32_t max_frame_len() const override { return pool_->size(); }
  uint64_t packets = 0;

 private:
  LoopPool* pool_;
  LoopPort* peer_ = nullptr;
  std::deque<PktBuf> rx_;
};

struct Pair {
  VirtualClock clock;  // time does not matter here: no losses, so no timer ever fires
  LoopPool pool{8192};
  LoopPort pa{&pool}, pb{&pool};
  std::unique_ptr<Engine> a, b;
  std::vector<uint8_t> ma, mb;
  uint32_t ka = 0, kb = 0;
  Qp* qa = nullptr;
  Qp* qb = nullptr;
  std::vector<Qp*> qas, qbs;  // every pair (qas[0] == qa)
  CompletionQueue* cq = nullptr;
  CompletionQueue* cqb = nullptr;
  bool recvs_posted = false;

  Pair(Mtu mtu, uint32_t mem, uint32_t nqps = 1,
       uint32_t budget = EngineConfig{}.port_inflight_psns)
      : ma(mem, 1), mb(mem, 0) {
    pa.connect(&pb);
    pb.connect(&pa);
    EngineConfig ca, cb;
    ca.mac = {2, 0, 0, 0, 0, 1};
    cb.mac = {2, 0, 0, 0, 0, 2};
    ca.gids = {Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1}};
    cb.gids = {Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 2}};
    ca.seed = 1;
    cb.seed = 2;
    ca.max_inflight_psns = cb.max_inflight_psns = 1024;
    ca.port_inflight_psns = cb.port_inflight_psns = budget;
    a = std::make_unique<Engine>(ca, &pa, &clock);
    b = std::make_unique<Engine>(cb, &pb, &clock);
    a->neighbors().add_static(cb.gids[0], cb.mac);
    b->neighbors().add_static(ca.gids[0], ca.mac);
    const uint32_t acc = kAccessLocalWrite | kAccessRemoteWrite;
    const uint32_t pda = a->alloc_pd(), pdb = b->alloc_pd();
    a->reg_mr(pda, ma.data(), mem, reinterpret_cast<uint64_t>(ma.data()), acc, &ka);
    b->reg_mr(pdb, mb.data(), mem, reinterpret_cast<uint64_t>(mb.data()), acc, &kb);
    int err = 0;
    cq = a->create_cq(std::max<uint32_t>(4096, 4 * nqps + 64), &err);  // 4 signalled a QP
    cqb = b->create_cq(64, &err);
    QpInitAttr ia;
    ia.pd = pda;
    ia.send_cq = ia.recv_cq = cq;
    ia.cap.max_send_wr = nqps == 1 ? 512 : 64;  // several: at most 4 signalled each in the CQ
    ia.cap.max_recv_wr = 1;
    ia.cap.max_inline_data = 236;
    for (uint32_t i = 0; i < nqps; ++i) {
      ia.pd = pda;
      ia.send_cq = ia.recv_cq = cq;
      Qp* x = a->create_qp(ia, &err);
      ia.pd = pdb;
      ia.send_cq = ia.recv_cq = cqb;
      Qp* y = b->create_qp(ia, &err);
      if (!x || !y) std::abort();
      connect(*a, x, cb.gids[0], y->qpn(), mtu);
      connect(*b, y, ca.gids[0], x->qpn(), mtu);
      qas.push_back(x);
      qbs.push_back(y);
    }
    qa = qas[0];
    qb = qbs[0];
  }
  static void connect(Engine& e, Qp* q, const Gid& dgid, uint32_t dqpn, Mtu mtu) {
    ConnectParams p;  // both PSNs 0
    p.access = kAccessRemoteWrite;
    p.ah.dgid = dgid;
    p.mtu = mtu;
    p.dest_qpn = dqpn;
    p.max_dest_rd_atomic = 1;
    p.min_rnr_timer = 0;
    p.timeout = 0;  // no timer: the loop never loses a packet
    p.retry_cnt = 7;
    p.rnr_retry = 7;
    p.max_rd_atomic = 1;
    connect_qp(e, q, p);
  }

  // Runs `ops` WRITEs of `size` bytes, spread evenly over the QPs (every 16th of a QP's
  // signalled, and its last), keeping every send queue full.
  uint64_t run(uint64_t ops, uint32_t size) {
    const size_t n = qas.size();
    std::vector<uint64_t> quota(n, ops / n), posted(n, 0), done(n, 0);
    for (size_t i = 0; i < ops % n; ++i) ++quota[i];
    uint64_t all_done = 0;
    Sge sge{reinterpret_cast<uint64_t>(ma.data()), size, ka};
    SendWr wr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.remote_addr = reinterpret_cast<uint64_t>(mb.data());
    wr.rkey = kb;
    Cqe c[64];
    constexpr int kQpShift = 40;  // wr_id: the QP's index above, its sequence below
    while (all_done < ops) {
      for (size_t q = 0; q < n; ++q) {
        while (posted[q] < quota[q] && qas[q]->sq_.free_slots() > 0) {
          wr.wr_id = (uint64_t{q} << kQpShift) | posted[q];
          wr.send_flags = (posted[q] % 16 == 15 || posted[q] + 1 == quota[q]) ? kSendSignaled : 0;
          qas[q]->post_send(wr);
          ++posted[q];
        }
      }
      a->poll();
      b->poll();
      int k = cq->poll(c, 64);
      for (int i = 0; i < k; ++i) {
        if (c[i].status != WcStatus::kSuccess) {
          std::fprintf(stderr, "completion error\n");
          std::abort();
        }
        const size_t q = c[i].wr_id >> kQpShift;
        const uint64_t seq = c[i].wr_id & ((uint64_t{1} << kQpShift) - 1);
        all_done += seq + 1 - done[q];
        done[q] = seq + 1;
      }
    }
    return pa.packets + pb.packets;
  }

  // send_lat's exchange (perftest's run_iter_lat_send with a send queue of one): `a` posts a
  // signalled inline SEND of `size` bytes and waits for its completion; `b` takes it from its
  // receive queue, posts the receive again and answers with the same SEND; `a` takes the
  // answer. Both engines are polled in turn on this thread, so a round trip costs the two
  // turnarounds (every frame built, parsed, acknowledged and completed) and nothing else.
  uint64_t pingpong(uint64_t iters, uint32_t size) {
    Sge sa_recv{reinterpret_cast<uint64_t>(ma.data()), size, ka};
    Sge sb_recv{reinterpret_cast<uint64_t>(mb.data()), size, kb};
    Sge sa_send{reinterpret_cast<uint64_t>(ma.data() + 64), size, ka};
    Sge sb_send{reinterpret_cast<uint64_t>(mb.data() + 64), size, kb};
    RecvWr ra{0, &sa_recv, 1}, rb{0, &sb_recv, 1};
    SendWr wa, wb;
    wa.sg_list = &sa_send;
    wb.sg_list = &sb_send;
    wa.num_sge = wb.num_sge = 1;
    wa.opcode = wb.opcode = WrOpcode::kSend;
    wa.send_flags = wb.send_flags = kSendSignaled | kSendInline;
    if (!recvs_posted && (qa->post_recv(ra) || qb->post_recv(rb))) std::abort();
    recvs_posted = true;  // each end re-posts the one it consumes
    // Polls both engines until `q` holds a completion, which must be a success.
    const auto wait = [&](CompletionQueue* q) {
      Cqe c;
      for (int spins = 0; q->poll(&c, 1) == 0; ++spins) {
        if (spins > 1000) {
          std::fprintf(stderr, "ping-pong stalled\n");
          std::abort();
        }
        a->poll();
        b->poll();
      }
      if (c.status != WcStatus::kSuccess) {
        std::fprintf(stderr, "completion error\n");
        std::abort();
      }
    };
    for (uint64_t i = 0; i < iters; ++i) {
      if (qa->post_send(wa)) std::abort();
      wait(cq);   // a's SEND acknowledged
      wait(cqb);  // b received it
      if (qb->post_recv(rb) || qb->post_send(wb)) std::abort();
      wait(cqb);  // b's SEND acknowledged
      wait(cq);   // a received it
      if (qa->post_recv(ra)) std::abort();
    }
    return pa.packets + pb.packets;
  }
};

void BM_EngineWrite(benchmark::State& state) {
  const uint32_t size = static_cast<uint32_t>(state.range(0));
  Pair p(Mtu::k4096, std::max<uint32_t>(size, 64));
  uint64_t ops = 0;
  const uint64_t batch = size >= 65536 ? 256 : 20000;
  for (auto _ : state) {
    p.run(batch, size);
    ops += batch;
  }
  state.counters["Mops/s"] =
      benchmark::Counter(static_cast<double>(ops) / 1e6, benchmark::Counter::kIsRate);
  state.counters["Gb/s"] =
      benchmark::Counter(static_cast<double>(ops) * size * 8 / 1e9, benchmark::Counter::kIsRate);
  state.counters["pkts/op"] =
      static_cast<double>(p.pa.packets + p.pb.packets) / static_cast<double>(ops);
}
BENCHMARK(BM_EngineWrite)->Arg(64)->Arg(4096)->Arg(65536)->Unit(benchmark::kMillisecond);

// 4 KiB WRITEs spread over N QP pairs, against one pair (the baseline, N = 1): with many QPs the
// port's in-flight budget holds most of them waiting, and what waiting costs shows here.
void BM_EngineWriteQps(benchmark::State& state) {
  const uint32_t nqps = static_cast<uint32_t>(state.range(0));
  Pair p(Mtu::k4096, 4096, nqps);
  const uint64_t batch = 20000;
  uint64_t ops = 0;
  for (auto _ : state) {
    p.run(batch, 4096);
    ops += batch;
  }
  state.counters["Mops/s"] =
      benchmark::Counter(static_cast<double>(ops) / 1e6, benchmark::Counter::kIsRate);
  state.counters["budget_waits/op"] =
      static_cast<double>(p.a->counters().port_budget_waits) / static_cast<double>(ops);
}
BENCHMARK(BM_EngineWriteQps)->Arg(1)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

// The engine's share of send_lat: ns per round trip of an 8-byte SEND answered by a SEND, both
// ends on this core (two turnarounds, four frames built and parsed).
void BM_EngineSendPingPong(benchmark::State& state) {
  const uint32_t size = static_cast<uint32_t>(state.range(0));
  Pair p(Mtu::k4096, 4096);
  const uint64_t batch = 1000;
  uint64_t iters = 0;
  for (auto _ : state) {
    p.pingpong(batch, size);
    iters += batch;
  }
  state.counters["ns/round_trip"] = benchmark::Counter(
      static_cast<double>(iters), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["frames/round_trip"] =
      static_cast<double>(p.pa.packets + p.pb.packets) / static_cast<double>(iters);
}
BENCHMARK(BM_EngineSendPingPong)->Arg(8)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "--fixed") {
    const uint64_t ops = std::strtoull(argv[2], nullptr, 10);
    const uint32_t size = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
    Pair p(Mtu::k4096, std::max<uint32_t>(size, 64));
    const uint64_t packets = p.run(ops, size);
    std::printf("ops=%llu size=%u packets=%llu (requests %llu, acks %llu)\n",
                static_cast<unsigned long long>(ops), size,
                static_cast<unsigned long long>(packets),
                static_cast<unsigned long long>(p.pa.packets),
                static_cast<unsigned long long>(p.pb.packets));
    return 0;
  }
  if (argc >= 5 && std::string(argv[1]) == "--qps") {
    const uint32_t nqps = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
    const uint64_t ops = std::strtoull(argv[3], nullptr, 10);
    const uint32_t size = static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10));
    if (nqps == 0 || nqps > 4000) {  // EngineConfig::max_qps 4096, QPNs from 0x11
      std::fprintf(stderr, "engine_bench: --qps takes 1..4000 QP pairs\n");
      return 2;
    }
    const uint32_t budget = argc >= 6 ? static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 10))
                                      : EngineConfig{}.port_inflight_psns;
    Pair p(Mtu::k4096, std::max<uint32_t>(size, 64), nqps, budget);
    const uint64_t packets = p.run(ops, size);
    std::printf("qps=%u ops=%llu size=%u budget=%u packets=%llu budget_waits=%llu\n", nqps,
                static_cast<unsigned long long>(ops), size, budget,
                static_cast<unsigned long long>(packets),
                static_cast<unsigned long long>(p.a->counters().port_budget_waits));
    return 0;
  }
  if (argc >= 4 && std::string(argv[1]) == "--pingpong") {
    const uint64_t iters = std::strtoull(argv[2], nullptr, 10);
    const uint32_t size = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
    Pair p(Mtu::k4096, 4096);
    const uint64_t packets = p.pingpong(iters, size);
    std::printf("iters=%llu size=%u packets=%llu\n", static_cast<unsigned long long>(iters), size,
                static_cast<unsigned long long>(packets));
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
