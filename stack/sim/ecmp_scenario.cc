#include "stack/sim/ecmp_scenario.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "stack/sim/ecmp_hash.h"
#include "stack/sim/scenario_host.h"
#include "stack/sim/sim_network.h"
#include "stack/util/rng.h"
#include "stack/wire/builder.h"

namespace roce::sim {

namespace {

constexpr uint32_t kOutstanding = 8;  // WRITEs each QP keeps posted

struct EcmpQp {
  Qp* sq = nullptr;
  Qp* rq = nullptr;
  std::vector<uint32_t> messages;  // indexes into the peer's transfer, in order
  uint32_t posted = 0, completed = 0;
};

struct Peer {
  std::vector<EcmpQp> qps;
  uint64_t done_ns = 0;
  bool done = false;
};

class Runner {
 public:
  explicit Runner(const EcmpConfig& c) : cfg_(c), net_(c.net.seed, 1u << 17) {}
  EcmpResult run();

 private:
  bool setup(std::string* err);
  bool drive();  // posts WRITEs, polls completions
  uint32_t messages() const {
    const uint64_t m = cfg_.net.message_bytes;
    return static_cast<uint32_t>((cfg_.peer_bytes + m - 1) / m);
  }
  uint32_t path_of(const Qp& q) const;

  EcmpConfig cfg_;
  SimNetwork net_;
  std::vector<std::unique_ptr<ScenarioHost>> hosts_;  // 0..M-1 senders, M..2M-1 receivers
  std::vector<Peer> peers_;
  std::string error_;
};

bool Runner::setup(std::string* err) {
  const uint32_t m = cfg_.peers;
  if (m == 0 || cfg_.paths == 0 || cfg_.qps_per_peer == 0 || cfg_.peer_bytes == 0 ||
      cfg_.net.message_bytes == 0) {
    *err = "peers, paths, QPs per peer, bytes and message size must be positive";
    return false;
  }
  cc::DcqcnParams p = cfg_.net.params;
  p.line_gbps = cfg_.net.link_gbps;
  if (!p.validate(err)) return false;
  FabricConfig fc;
  fc.paths = cfg_.paths;
  fc.hash_seed = cfg_.hash_seed;
  fc.path = scenario_egress(cfg_.net);
  net_.set_fabric(fc);
  for (uint32_t h = 0; h < 2 * m; ++h) {
    auto host = add_scenario_host(net_, h, cfg_.net, p, cfg_.peer_bytes, err);
    if (!host) return false;
    host->port->set_leaf(h >= m);
    if (h < m) {
      // What each sender writes: its own pattern.
      Rng r(cfg_.net.seed * 0x9E3779B97F4A7C15ull + h);
      for (size_t i = 0; i < host->mem.size(); i += 8) {
        const uint64_t v = r.next();
        std::memcpy(host->mem.data() + i, &v, std::min<size_t>(8, host->mem.size() - i));
      }
    }
    hosts_.push_back(std::move(host));
  }
  peers_.resize(m);
  for (uint32_t i = 0; i < m; ++i) {
    Peer& peer = peers_[i];
    peer.qps.resize(cfg_.qps_per_peer);
    for (EcmpQp& q : peer.qps) {
      if (!connect_scenario_qps(*hosts_[i], *hosts_[m + i], cfg_.net, &q.sq, &q.rq, err)) {
        return false;
      }
    }
    for (uint32_t j = 0; j < messages(); ++j) peer.qps[j % cfg_.qps_per_peer].messages.push_back(j);
  }
  return true;
}

// The path a QP's data takes: the fabric's choice for a frame with the QP's headers.
uint32_t Runner::path_of(const Qp& q) const {
  uint8_t frame[wire::kMaxHeadersLen + 16] = {};
  wire::write_l2l4(frame, q.path_, 16);
  return ecmp_path(frame, wire::l2l4_header_len(q.path_) + 16, cfg_.paths, cfg_.hash_seed);
}

bool Runner::drive() {
  bool any = false;
  const uint32_t m = cfg_.peers;
  const uint64_t msg = cfg_.net.message_bytes;
  for (uint32_t i = 0; i < m; ++i) {
    ScenarioHost& tx = *hosts_[i];
    ScenarioHost& rx = *hosts_[m + i];
    for (EcmpQp& q : peers_[i].qps) {
      while (q.posted < q.messages.size() && q.posted - q.completed < kOutstanding) {
        const uint64_t off = q.messages[q.posted] * msg;
        Sge sge{tx.addr() + off, static_cast<uint32_t>(std::min(msg, cfg_.peer_bytes - off)),
                tx.key};
        SendWr wr;
        wr.wr_id = q.posted;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = WrOpcode::kRdmaWrite;
        wr.send_flags = kSendSignaled;
        wr.remote_addr = rx.addr() + off;
        wr.rkey = rx.key;
        if (q.sq->post_send(wr) != 0) break;
        ++q.posted;
        any = true;
      }
    }
    Cqe c[32];
    int k;
    while ((k = tx.cq->poll(c, 32)) > 0) {
      any = true;
      for (int j = 0; j < k; ++j) {
        if (c[j].status != WcStatus::kSuccess) {
          error_ = "peer " + std::to_string(i) + ": completion " + to_string(c[j].status);
          return true;
        }
        for (EcmpQp& q : peers_[i].qps) {
          if (q.sq->qpn() == c[j].qp_num) ++q.completed;
        }
      }
    }
    Peer& peer = peers_[i];
    if (!peer.done && std::all_of(peer.qps.begin(), peer.qps.end(), [](const EcmpQp& q) {
          return q.completed == q.messages.size();
        })) {
      peer.done = true;
      peer.done_ns = net_.now();
    }
  }
  return any;
}

EcmpResult Runner::run() {
  EcmpResult r;
  std::string err;
  if (!setup(&err)) {
    r.error = "setup: " + err;
    return r;
  }
  net_.add_actor({[this] { return drive(); }, nullptr, nullptr});
  // Rounded up: never 0, so that ratios to it stay finite.
  r.ideal_ns = static_cast<uint64_t>(
      std::ceil(static_cast<double>(cfg_.peer_bytes) * 8 / cfg_.net.link_gbps));
  // Slow enough to be broken: every transfer on one path would take peers x ideal.
  const uint64_t deadline = std::max<uint64_t>(50 * r.ideal_ns * cfg_.peers, 1'000'000'000);
  const bool ok = net_.run_until(
      [&] {
        return !error_.empty() ||
               std::all_of(peers_.begin(), peers_.end(), [](const Peer& p) { return p.done; });
      },
      deadline);
  if (!ok && error_.empty()) error_ = "the transfers did not complete within 50 x peers x ideal";
  r.error = error_;

  const uint32_t m = cfg_.peers;
  for (const Peer& p : peers_) {
    r.peer_ns.push_back(p.done_ns);
    r.completion_ns = std::max(r.completion_ns, p.done_ns);
    for (const EcmpQp& q : p.qps) {
      r.cnps += q.sq->counters_.cnps_received;
      r.retransmitted += q.sq->counters_.retransmitted_packets;
    }
  }
  r.data_ok = error_.empty();
  for (uint32_t i = 0; i < m && r.data_ok; ++i) {
    r.data_ok = hosts_[i]->mem == hosts_[m + i]->mem;
  }

  r.paths.resize(cfg_.paths);
  for (const Peer& p : peers_) {
    for (const EcmpQp& q : p.qps) ++r.paths[path_of(*q.sq)].qps;
  }
  const double capacity_bytes = cfg_.net.link_gbps / 8 * static_cast<double>(r.completion_ns);
  std::vector<double> load;
  for (uint32_t i = 0; i < cfg_.paths; ++i) {
    const PathStats& s = net_.path_stats(0, i);
    EcmpPath& out = r.paths[i];
    out.bytes = s.bytes;
    // + 24 bytes a frame of preamble, inter-frame gap and FCS, as the path's serialisation.
    out.utilisation =
        capacity_bytes > 0 ? static_cast<double>(s.bytes + 24 * s.frames) / capacity_bytes : 0;
    out.drops = s.dropped_queue;
    out.ecn_marks = s.ecn_marked;
    out.max_queue_bytes = s.max_queue_bytes;
    load.push_back(static_cast<double>(s.bytes));
    for (int leaf = 0; leaf < 2; ++leaf) {
      r.drops += net_.path_stats(leaf, i).dropped_queue;
      r.ecn_marks += net_.path_stats(leaf, i).ecn_marked;
    }
  }
  for (const auto& h : hosts_) {
    r.drops += h->port->stats().dropped_queue;
    r.ecn_marks += h->port->stats().ecn_marked;
  }
  double sum = 0;
  for (double v : load) sum += v;
  const double mean = sum / static_cast<double>(load.size());
  r.imbalance = mean > 0 ? *std::max_element(load.begin(), load.end()) / mean : 0;
  r.jain = jain_index(load);
  return r;
}

}  // namespace

EcmpResult run_ecmp(const EcmpConfig& cfg) {
  Runner runner(cfg);
  return runner.run();
}

}  // namespace roce::sim
