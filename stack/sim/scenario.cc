#include "stack/sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "stack/core/engine.h"
#include "stack/sim/scenario_host.h"
#include "stack/sim/sim_network.h"

namespace roce::sim {

double jain_index(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return x.empty() || s2 == 0 ? 0 : s * s / (static_cast<double>(x.size()) * s2);
}

namespace {

using Host = ScenarioHost;

struct Flow {
  Qp* sq = nullptr;  // sender's QP
  Qp* rq = nullptr;  // receiver's QP
  uint64_t start_ns = 0;
  uint64_t stop_ns = UINT64_MAX;
  uint64_t posted = 0, completed = 0;
  uint64_t last_rx_wire = 0;  // for per-sample throughput
  uint64_t completion_ns = 0;
  bool incast_posted = false;
};

uint64_t wire_bytes(const QpCounters& c) { return c.rx_bytes + 24 * c.rx_packets; }

class Runner {
 public:
  explicit Runner(const ScenarioConfig& c) : cfg_(c), net_(c.seed, 1u << 17) {}
  ScenarioResult run();

 private:
  bool setup(std::string* err);
  bool drive();   // posts work, polls completions
  bool sample();  // records a time-series point when due

  ScenarioConfig cfg_;
  SimNetwork net_;
  std::vector<std::unique_ptr<Host>> hosts_;  // 0..N-1 senders, N receiver
  std::vector<Flow> flows_;
  std::vector<Sample> series_;
  uint64_t next_sample_ = 0;
  std::string error_;
};

bool Runner::setup(std::string* err) {
  const uint32_t n = cfg_.flows;
  cc::DcqcnParams p = cfg_.params;
  p.line_gbps = cfg_.link_gbps;
  if (!p.validate(err)) return false;
  const uint32_t mem = std::max(cfg_.message_bytes, cfg_.incast_bytes);
  for (uint32_t h = 0; h <= n; ++h) {
    auto host = add_scenario_host(net_, h, cfg_, p, mem, err);
    if (!host) return false;
    hosts_.push_back(std::move(host));
  }
  Host& rx = *hosts_[n];
  for (uint32_t i = 0; i < n; ++i) {
    Flow f;
    if (!connect_scenario_qps(*hosts_[i], rx, cfg_, &f.sq, &f.rq, err)) return false;
    if (cfg_.kind == ScenarioKind::kJoinLeave) {
      f.start_ns = i * cfg_.join_interval_ns;
      // The first flows leave again, in the order they came, after everyone has joined.
      if (i < n / 2) f.stop_ns = (n + i) * cfg_.join_interval_ns;
    }
    flows_.push_back(f);
  }
  return true;
}

bool Runner::drive() {
  bool any = false;
  const uint64_t now = net_.now();
  for (uint32_t i = 0; i < flows_.size(); ++i) {
    Flow& f = flows_[i];
    Host& tx = *hosts_[i];
    Host& rx = *hosts_.back();
    Sge sge{tx.addr(), 0, tx.key};
    SendWr wr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.remote_addr = rx.addr();
    wr.rkey = rx.key;
    if (cfg_.kind == ScenarioKind::kIncast) {
      if (!f.incast_posted) {
        sge.length = cfg_.incast_bytes;
        wr.send_flags = kSendSignaled;
        if (f.sq->post_send(wr) == 0) f.incast_posted = any = true;
      }
    } else if (now >= f.start_ns && now < f.stop_ns) {
      // Long flow: keep 8 messages queued; every 4th signalled.
      sge.length = cfg_.message_bytes;
      while (f.posted - f.completed < 8) {
        wr.wr_id = f.posted;
        wr.send_flags = (f.posted % 4 == 3) ? kSendSignaled : 0;
        if (f.sq->post_send(wr) != 0) break;
        ++f.posted;
        any = true;
      }
    }
  }
  for (uint32_t i = 0; i < flows_.size(); ++i) {
    Cqe c[32];
    int k;
    while ((k = hosts_[i]->cq->poll(c, 32)) > 0) {
      any = true;
      for (int j = 0; j < k; ++j) {
        if (c[j].status != WcStatus::kSuccess) {
          error_ = "flow " + std::to_string(i) + ": completion " + to_string(c[j].status);
          return true;
        }
        flows_[i].completed = c[j].wr_id + 1;
        if (cfg_.kind == ScenarioKind::kIncast) flows_[i].completion_ns = now;
      }
    }
  }
  return any;
}

bool Runner::sample() {
  const uint64_t now = net_.now();
  if (now < next_sample_) return false;
  Sample s;
  s.t_ns = now;
  s.queue_bytes = hosts_.back()->port->queue_bytes();
  s.drops = hosts_.back()->port->stats().dropped_queue;
  const double secs = static_cast<double>(cfg_.sample_ns) * 1e-9;
  for (Flow& f : flows_) {
    const uint64_t w = wire_bytes(f.rq->counters_);
    s.flow_gbps.push_back(static_cast<double>(w - f.last_rx_wire) * 8 / secs / 1e9);
    f.last_rx_wire = w;
    s.rate_gbps.push_back(f.sq->cc_.kind == CcKind::kDcqcn ? f.sq->cc_.rp.rate_gbps()
                                                           : cfg_.link_gbps);
  }
  series_.push_back(std::move(s));
  next_sample_ += cfg_.sample_ns;
  return false;
}

ScenarioResult Runner::run() {
  ScenarioResult r;
  std::string err;
  if (!setup(&err)) {
    r.error = "setup: " + err;
    return r;
  }
  net_.add_actor({[this] { return drive(); }, nullptr, nullptr});
  net_.add_actor({[this] { return sample(); }, [this] { return next_sample_; }, nullptr});
  const uint32_t n = cfg_.flows;
  uint64_t end = cfg_.duration_ns;
  if (cfg_.kind == ScenarioKind::kJoinLeave) end = (n + n / 2 + 2) * cfg_.join_interval_ns;
  if (cfg_.kind == ScenarioKind::kIncast) {
    r.ideal_ns =
        static_cast<uint64_t>(static_cast<double>(cfg_.incast_bytes) * n * 8 / cfg_.link_gbps);
    end = r.ideal_ns * 50;
    const bool ok = net_.run_until(
        [&] {
          if (!error_.empty()) return true;
          for (const Flow& f : flows_) {
            if (f.completed == 0) return false;
          }
          return true;
        },
        end);
    if (!ok && error_.empty()) error_ = "incast did not complete within 50x the ideal time";
  } else {
    net_.run_until([&] { return !error_.empty(); }, end);
  }
  r.error = error_;
  r.series = series_;
  const SimPort& bottleneck = *hosts_.back()->port;
  r.drops = const_cast<SimPort&>(bottleneck).stats().dropped_queue;
  r.ecn_marks = const_cast<SimPort&>(bottleneck).stats().ecn_marked;
  r.max_queue_bytes = const_cast<SimPort&>(bottleneck).stats().max_queue_bytes;

  // Measurement window: the last half of the run (fairness), the whole run (incast).
  r.window_start_ns = cfg_.kind == ScenarioKind::kFairness ? end / 2 : 0;
  r.window_end_ns = cfg_.kind == ScenarioKind::kIncast ? net_.now() : end;
  std::vector<double> per_flow(n, 0);
  double total_bits = 0;
  uint64_t samples = 0;
  uint64_t drops_at_start = 0;
  for (const Sample& s : series_) {
    if (s.t_ns <= r.window_start_ns) drops_at_start = s.drops;
    if (s.t_ns <= r.window_start_ns || s.t_ns > r.window_end_ns) continue;
    ++samples;
    r.max_queue_late_bytes = std::max(r.max_queue_late_bytes, s.queue_bytes);
    for (uint32_t i = 0; i < n; ++i) {
      per_flow[i] += s.flow_gbps[i];
      total_bits += s.flow_gbps[i];
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    FlowResult fr;
    fr.throughput_gbps = samples ? per_flow[i] / static_cast<double>(samples) : 0;
    const Flow& f = flows_[i];
    fr.bytes = wire_bytes(f.rq->counters_);
    fr.completion_ns = f.completion_ns;
    fr.cnps = f.sq->counters_.cnps_received;
    fr.rate_cuts = f.sq->cc_.kind == CcKind::kDcqcn ? f.sq->cc_.rp.counters().rate_cuts : 0;
    fr.rate_gbps = f.sq->cc_.kind == CcKind::kDcqcn ? f.sq->cc_.rp.rate_gbps() : cfg_.link_gbps;
    fr.retransmitted = f.sq->counters_.retransmitted_packets;
    r.completion_ns = std::max(r.completion_ns, f.completion_ns);
    r.flows.push_back(fr);
  }
  r.drops_late = r.drops - drops_at_start;
  r.utilisation = samples ? total_bits / static_cast<double>(samples) / cfg_.link_gbps : 0;
  std::vector<double> thr;
  for (const auto& fr : r.flows) thr.push_back(fr.throughput_gbps);
  r.jain = jain_index(thr);

  if (cfg_.kind == ScenarioKind::kJoinLeave) {
    // After each join or leave: the time until the flows active through the next 2 ms share
    // the link again -- Jain's index of their 2 ms average throughputs >= 0.95 and together
    // >= 90 % of C.
    std::vector<uint64_t> events;
    for (const Flow& f : flows_) {
      if (f.start_ns > 0) events.push_back(f.start_ns);
      if (f.stop_ns != UINT64_MAX) events.push_back(f.stop_ns);
    }
    std::sort(events.begin(), events.end());
    const size_t win = std::max<size_t>(1, 2'000'000 / cfg_.sample_ns);
    for (size_t ei = 0; ei < events.size(); ++ei) {
      const uint64_t ev = events[ei];
      const uint64_t phase_end = ei + 1 < events.size() ? events[ei + 1] : end;
      uint64_t recovered = UINT64_MAX;
      for (size_t k = 0; k + win <= series_.size(); ++k) {
        const uint64_t t0 = series_[k].t_ns - cfg_.sample_ns;  // start of sample k
        if (t0 < ev) continue;
        const uint64_t t_end = series_[k + win - 1].t_ns;
        if (t_end > phase_end) break;
        std::vector<double> avg;
        double total = 0;
        for (uint32_t i = 0; i < n; ++i) {
          if (flows_[i].start_ns > t0 || flows_[i].stop_ns < t_end) continue;
          double a = 0;
          for (size_t j = 0; j < win; ++j) a += series_[k + j].flow_gbps[i];
          a /= static_cast<double>(win);
          avg.push_back(a);
          total += a;
        }
        if (!avg.empty() && jain_index(avg) >= 0.95 && total >= 0.9 * cfg_.link_gbps) {
          recovered = t0 - ev;
          break;
        }
      }
      r.recovery_ns.push_back(recovered);
    }
  }
  judge(cfg_, r);
  return r;
}

}  // namespace

ScenarioResult run_scenario(const ScenarioConfig& cfg) {
  Runner runner(cfg);
  return runner.run();
}

void judge(const ScenarioConfig& cfg, ScenarioResult& r) {
  r.failures.clear();
  char buf[200];
  auto fail = [&](const char* fmt, double a, double b) {
    std::snprintf(buf, sizeof buf, fmt, a, b);
    r.failures.push_back(buf);
  };
  if (!r.error.empty()) r.failures.push_back(r.error);
  switch (cfg.kind) {
    case ScenarioKind::kFairness:
      if (r.jain < 0.99) fail("Jain's index %.4f < %.2f", r.jain, 0.99);
      if (r.utilisation < 0.90) fail("utilisation %.3f < %.2f", r.utilisation, 0.90);
      // Drops are judged once converged: N senders starting together at line rate put N
      // windows on the wire before the first CNP can arrive.
      if (r.drops_late) {
        fail("%.0f drops in the second half (want %.0f)", static_cast<double>(r.drops_late), 0);
      }
      // "Bounded near Kmax": the queue stays within twice Kmax once converged.
      if (r.max_queue_late_bytes > 2 * cfg.kmax_bytes) {
        fail("queue reached %.0f bytes in the second half (> 2 x Kmax = %.0f)",
             static_cast<double>(r.max_queue_late_bytes), 2.0 * cfg.kmax_bytes);
      }
      break;
    case ScenarioKind::kIncast:
      if (cfg.dcqcn) {
        if (r.drops) fail("%.0f drops with DCQCN (want %.0f)", static_cast<double>(r.drops), 0);
        if (r.completion_ns > 1.2 * r.ideal_ns) {
          fail("completion %.3f ms > 1.2 x ideal %.3f ms", r.completion_ns / 1e6, r.ideal_ns / 1e6);
        }
      }
      break;
    case ScenarioKind::kJoinLeave:
      for (size_t i = 0; i < r.recovery_ns.size(); ++i) {
        if (r.recovery_ns[i] == UINT64_MAX) {
          fail("event %.0f: rates did not re-converge within the phase (%.0f flows)",
               static_cast<double>(i), cfg.flows);
        }
      }
      if (r.drops) fail("%.0f drops (want %.0f)", static_cast<double>(r.drops), 0);
      break;
  }
  r.passed = r.failures.empty();
}

}  // namespace roce::sim
