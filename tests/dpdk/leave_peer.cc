// roce_leave_peer: one side of a two-process RC transfer whose other side is killed (SIGKILL),
// for tests/e2e/peer_leaves_test.sh. Both sides run QPs on a Device of any vdev kind and keep
// RDMA WRITEs and READs outstanding on every QP. The side that survives must see each of its
// QPs fail as IBA 9.7.6.1.3 and 10.3.1 say: the request the peer never answered completes with
// RETRY_EXC_ERR once its retries are spent, everything posted after it with WR_FLUSH_ERR, the
// QP in the error state; then it must close its device and exit 0 (no crash, no hang).
//
// The sides meet through files in --sync-dir: NAME.info (GID, QPNs, R_Key, address), then
// NAME.connected; a side prints "running" once traffic flows. --victim-exits: the side stops
// posting after a few hundred completions, prints "exiting" and tears down (the test kills it
// there, at a random point of its teardown, which pauses 30 ms before and between its steps: a
// peer killed at exit); otherwise it posts until it is killed or --seconds pass.
//
// Exit codes: 0 as above; 1 the survivor's QPs did not fail as they should; 2 set-up failed;
// 3 no error within --seconds (a hang).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dpdk/device.h"
#include "stack/core/connect.h"
#include "stack/device_config.h"

namespace {

using namespace roce;
using namespace std::chrono_literals;
using SteadyTime = std::chrono::steady_clock;

constexpr uint32_t kMsg = 65536;      // bytes of each WRITE and READ
constexpr uint32_t kDepth = 16;       // WQEs kept outstanding per QP
constexpr uint32_t kPsn = 0x2000;     // both directions' first PSN
constexpr uint32_t kExitAfter = 400;  // completions before a --victim-exits side leaves

struct Options {
  std::string device, dir, name, peer;
  uint32_t qps = 2;
  int timeout_exp = 16;  // 268 ms
  int retry_cnt = 3;
  int seconds = 20;
  bool victim_exits = false;
};

struct PeerInfo {
  Gid gid_value{};
  uint32_t rkey = 0;
  uint64_t addr = 0;
  std::vector<uint32_t> qpns;
};

bool wait_file(const std::filesystem::path& p, std::chrono::seconds limit) {
  const auto end = SteadyTime::now() + limit;
  while (!std::filesystem::exists(p)) {
    if (SteadyTime::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// NAME.info: "GID bytes, rkey, addr, qpn..." (written to a temporary name first, so a reader never
// sees half of it).
void write_info(const Options& o, const Gid& gid, uint32_t rkey, uint64_t addr,
                const std::vector<Qp*>& qps) {
  const std::filesystem::path tmp = o.dir + "/" + o.name + ".tmp";
  {
    std::ofstream f(tmp);
    for (uint8_t b : gid) f << unsigned{b} << ' ';
    f << rkey << ' ' << addr;
    for (const Qp* q : qps) f << ' ' << q->qpn();
    f << '\n';
  }
  std::filesystem::rename(tmp, o.dir + "/" + o.name + ".info");
}

bool read_info(const Options& o, PeerInfo* p) {
  const std::filesystem::path f = o.dir + "/" + o.peer + ".info";
  if (!wait_file(f, 30s)) return false;
  std::ifstream in(f);
  for (uint8_t& b : p->gid_value) {
    unsigned v = 0;
    in >> v;
    b = static_cast<uint8_t>(v);
  }
  in >> p->rkey >> p->addr;
  uint32_t q;
  while (in >> q) p->qpns.push_back(q);
  return p->qpns.size() == o.qps;
}

struct Run {
  Options o;
  std::unique_ptr<dpdk::Device> dev;
  std::vector<uint8_t> mem;
  uint32_t pd = 0, key = 0;
  CompletionQueue* cq = nullptr;
  std::vector<Qp*> qps;
  std::vector<uint32_t> outstanding, retry_exc, flushed, other, ok_after_error;
  uint64_t completions = 0;

  uint64_t addr() const { return reinterpret_cast<uint64_t>(mem.data()); }

  bool setup(std::string* err) {
    mem.assign(static_cast<size_t>(o.qps) * 2 * kMsg, 0);
    return dev->runner().run([&] {
      Engine& e = dev->engine();
      pd = e.alloc_pd();
      if (e.reg_mr(pd, mem.data(), mem.size(), addr(),
                   kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead, &key)) {
        *err = "reg_mr failed";
        return false;
      }
      int rc = 0;
      cq = e.create_cq(4096, &rc);
      for (uint32_t i = 0; i < o.qps && cq; ++i) {
        QpInitAttr ia;
        ia.pd = pd;
        ia.send_cq = ia.recv_cq = cq;
        ia.cap.max_send_wr = ia.cap.max_recv_wr = kDepth * 2;
        Qp* q = e.create_qp(ia, &rc);
        if (!q) break;
        qps.push_back(q);
      }
      if (qps.size() != o.qps) *err = "create_cq / create_qp failed";
      return qps.size() == o.qps;
    });
  }

  int connect(const PeerInfo& p) {
    return dev->runner().run([&] {
      for (uint32_t i = 0; i < o.qps; ++i) {
        const ConnectParams c{
            .access = kAccessRemoteWrite | kAccessRemoteRead,
            .ah = {.dgid = p.gid_value, .sgid_index = 1},
            .mtu = Mtu::k1024,
            .dest_qpn = p.qpns[i],
            .rq_psn = kPsn,
            .max_dest_rd_atomic = 4,
            .sq_psn = kPsn,
            .timeout = static_cast<uint8_t>(o.timeout_exp),
            .retry_cnt = static_cast<uint8_t>(o.retry_cnt),
            .rnr_retry = 7,
            .max_rd_atomic = 4,
        };
        if (int rc = connect_qp(dev->engine(), qps[i], c)) return rc;
      }
      return 0;
    });
  }

  // WRITE from this QP's first half to the peer's second half, READ the peer's second half into
  // this QP's second half, alternately.
  void post(uint32_t i, const PeerInfo& p, uint64_t n) {
    const uint64_t local = addr() + uint64_t{i} * 2 * kMsg;
    const bool read = n % 2 == 1;
    Sge sge{read ? local + kMsg : local, kMsg, key};
    SendWr wr;
    wr.wr_id = (uint64_t{i} << 48) | n;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = read ? WrOpcode::kRdmaRead : WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.remote_addr = p.addr + uint64_t{i} * 2 * kMsg + kMsg;
    wr.rkey = p.rkey;
    if (qps[i]->post_send(wr) == 0) ++outstanding[i];
  }

  void count(const Cqe& c) {
    const auto i = static_cast<uint32_t>(c.wr_id >> 48);
    if (i >= o.qps) return;
    --outstanding[i];
    ++completions;
    if (c.status == WcStatus::kSuccess) {
      if (retry_exc[i] + flushed[i] + other[i]) ++ok_after_error[i];
    } else if (c.status == WcStatus::kRetryExcErr && flushed[i] == 0) {
      ++retry_exc[i];
    } else if (c.status == WcStatus::kWrFlushErr && retry_exc[i] != 0) {
      ++flushed[i];
    } else {
      ++other[i];
      std::printf("%s: qp %u: unexpected completion status %d\n", o.name.c_str(), i,
                  static_cast<int>(c.status));
    }
  }

  bool failed(uint32_t i) const { return retry_exc[i] + flushed[i] + other[i] != 0; }

  // Keeps each QP's queue full until one of its completions fails, then lets what it has
  // outstanding complete. Returns 0 when every QP failed as it should, 1 otherwise, 3 on a hang.
  int transfer(const PeerInfo& p) {
    outstanding.assign(o.qps, 0);
    retry_exc = flushed = other = ok_after_error = outstanding;
    uint64_t n = 0;
    bool stop = false, running = false;
    const auto end = SteadyTime::now() + std::chrono::seconds(o.seconds);
    Cqe c[64];
    while (SteadyTime::now() < end) {
      bool all_failed = true;
      for (uint32_t i = 0; i < o.qps; ++i) {
        all_failed &= failed(i);
        if (stop || failed(i)) continue;
        while (outstanding[i] < kDepth && qps[i]->state() == QpState::kRts) post(i, p, n++);
      }
      const int got = cq->poll(c, 64);
      for (int k = 0; k < got; ++k) count(c[k]);
      if (!running && completions >= 64) {
        running = true;
        std::printf("%s: running\n", o.name.c_str());
        std::fflush(stdout);
      }
      // A side that leaves stops posting after a few hundred completions.
      if (o.victim_exits && completions >= kExitAfter) stop = true;
      if ((stop || all_failed) && drained()) break;
      if (got == 0) std::this_thread::sleep_for(50us);
    }
    if (!drained()) {
      std::printf("%s: hang: work still outstanding after %d s\n", o.name.c_str(), o.seconds);
      return 3;
    }
    if (o.victim_exits) return 0;
    int bad = 0;
    for (uint32_t i = 0; i < o.qps; ++i) {
      const QpState st = qps[i]->state();
      std::printf("%s: qp 0x%06x %s: retry_exc_err %u, wr_flush_err %u, other %u\n", o.name.c_str(),
                  qps[i]->qpn(), st == QpState::kErr ? "ERR" : "not in ERR", retry_exc[i],
                  flushed[i], other[i] + ok_after_error[i]);
      bad += st != QpState::kErr || retry_exc[i] != 1 || other[i] || ok_after_error[i];
    }
    return bad ? 1 : 0;
  }

  bool drained() const {
    for (uint32_t v : outstanding) {
      if (v) return false;
    }
    return true;
  }

  // `pause`: before and between its steps (QPs and memory, then the device), so that a test
  // that kills this side as it exits meets each step.
  void teardown(std::chrono::milliseconds pause) {
    if (!dev) return;
    std::this_thread::sleep_for(pause);
    dev->runner().run([&] {
      Engine& e = dev->engine();
      for (Qp* q : qps) e.destroy_qp(q);
      if (cq) e.destroy_cq(cq);
      if (key) e.dereg_mr(key);
      e.dealloc_pd(pd);
      return true;
    });
    std::this_thread::sleep_for(pause);
    dev.reset();
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"One side of a two-process RC transfer whose peer is killed"};
  app.add_option("--device", o.device, "device string (stack/device_config.h)")->required();
  app.add_option("--sync-dir", o.dir, "directory the sides meet in")->required();
  app.add_option("--name", o.name, "this side's name")->required();
  app.add_option("--peer", o.peer, "the other side's name")->required();
  app.add_option("--qps", o.qps, "QPs")->check(CLI::Range(1, 16));
  app.add_option("--timeout", o.timeout_exp, "local ACK timeout exponent")
      ->check(CLI::Range(1, 31));
  app.add_option("--retry", o.retry_cnt, "retry_cnt")->check(CLI::Range(0, 6));
  app.add_option("--seconds", o.seconds, "longest run")->check(CLI::Range(1, 600));
  app.add_flag("--victim-exits", o.victim_exits, "leave after a few hundred completions");
  CLI11_PARSE(app, argc, argv);

  Run r;
  r.o = o;
  DeviceConfig cfg;
  std::string err;
  if (!parse_device_string(o.device, &cfg, &err)) {
    std::printf("%s: --device: %s\n", o.name.c_str(), err.c_str());
    return 2;
  }
  r.dev = dpdk::Device::open(cfg, &err);
  PeerInfo p;
  if (!r.dev || !r.setup(&err)) {
    std::printf("%s: %s\n", o.name.c_str(), err.c_str());
    return 2;
  }
  std::filesystem::create_directories(o.dir);
  write_info(o, r.dev->gids().at(1), r.key, r.addr(), r.qps);
  if (!read_info(o, &p)) {
    std::printf("%s: no usable %s.info in %s\n", o.name.c_str(), o.peer.c_str(), o.dir.c_str());
    return 2;
  }
  if (!r.dev->wait_link_up(30s) || r.connect(p) != 0) {
    std::printf("%s: the link did not come up, or a QP did not connect\n", o.name.c_str());
    return 2;
  }
  std::ofstream(o.dir + "/" + o.name + ".connected").put('\n');
  if (!wait_file(o.dir + "/" + o.peer + ".connected", 30s)) {
    std::printf("%s: the peer did not connect\n", o.name.c_str());
    return 2;
  }
  const int rc = r.transfer(p);
  if (o.victim_exits) {
    std::printf("%s: exiting\n", o.name.c_str());
    std::fflush(stdout);
  }
  r.teardown(o.victim_exits ? 30ms : 0ms);
  std::printf("%s: closed, exit %d\n", o.name.c_str(), rc);
  return rc;
}
