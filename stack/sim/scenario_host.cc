#include "stack/sim/scenario_host.h"

#include "stack/core/connect.h"

namespace roce::sim {

EgressConfig scenario_egress(const ScenarioConfig& cfg) {
  EgressConfig eg;
  eg.rate_gbps = cfg.link_gbps;
  eg.delay_ns = cfg.link_delay_ns;
  eg.buffer_bytes = cfg.buffer_bytes;
  eg.ecn_kmin_bytes = cfg.kmin_bytes;
  eg.ecn_kmax_bytes = cfg.kmax_bytes;
  eg.ecn_pmax = cfg.pmax;
  eg.ecn_mark_on_dequeue = cfg.ecn_on_dequeue;
  return eg;
}

std::unique_ptr<ScenarioHost> add_scenario_host(SimNetwork& net, uint32_t index,
                                                const ScenarioConfig& cfg,
                                                const cc::DcqcnParams& dcqcn, uint64_t mem_bytes,
                                                std::string* err) {
  const uint32_t h = index;
  auto host = std::make_unique<ScenarioHost>();
  host->port =
      net.add_port(Mac{0x02, 0, 0, 0, static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h + 1)});
  LinkConfig& up = host->port->uplink();
  up.rate_gbps = cfg.link_gbps;
  up.delay_ns = cfg.link_delay_ns;
  host->port->egress() = scenario_egress(cfg);
  EngineConfig ec;
  ec.mac = host->port->mac();
  ec.gids = {Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 1, static_cast<uint8_t>(h >> 8),
                 static_cast<uint8_t>(h + 1)}};
  ec.seed = cfg.seed + h;
  ec.default_cc = cfg.dcqcn ? CcKind::kDcqcn : CcKind::kNone;
  ec.max_inflight_psns = cfg.window_psns;
  ec.dcqcn = dcqcn;
  host->engine = std::make_unique<Engine>(ec, host->port, &net.clock());
  host->mem.assign(mem_bytes, 0);
  host->pd = host->engine->alloc_pd();
  if (host->engine->reg_mr(host->pd, host->mem.data(), mem_bytes, host->addr(),
                           kAccessLocalWrite | kAccessRemoteWrite, &host->key)) {
    *err = "reg_mr";
    return nullptr;
  }
  int e = 0;
  host->cq = host->engine->create_cq(65536, &e);
  Engine* eng = host->engine.get();
  net.add_actor({[eng] { return eng->poll(); }, [eng] { return eng->next_timer_ns(); },
                 [eng] { return eng->has_pending_output(); }});
  return host;
}

bool connect_scenario_qps(ScenarioHost& tx, ScenarioHost& rx, const ScenarioConfig& cfg, Qp** sq,
                          Qp** rq, std::string* err) {
  tx.engine->neighbors().add_static(rx.engine->config().gids[0], rx.port->mac());
  rx.engine->neighbors().add_static(tx.engine->config().gids[0], tx.port->mac());
  for (int side = 0; side < 2; ++side) {
    ScenarioHost& h = side ? rx : tx;
    QpInitAttr ia;
    ia.pd = h.pd;
    ia.send_cq = ia.recv_cq = h.cq;
    ia.cap.max_send_wr = 64;
    ia.cap.max_recv_wr = 1;
    int e = 0;
    (side ? *rq : *sq) = h.engine->create_qp(ia, &e);
    if (!(side ? *rq : *sq)) {
      *err = "create_qp: errno " + std::to_string(e);
      return false;
    }
  }
  for (int side = 0; side < 2; ++side) {
    ScenarioHost& h = side ? rx : tx;
    ScenarioHost& peer = side ? tx : rx;
    Qp* q = side ? *rq : *sq;
    Qp* pq = side ? *sq : *rq;
    ConnectParams p;  // both PSNs 0
    p.access = kAccessRemoteWrite;
    p.ah.dgid = peer.engine->config().gids[0];
    p.mtu = cfg.mtu;
    p.dest_qpn = pq->qpn();
    p.max_dest_rd_atomic = 1;
    p.min_rnr_timer = 1;
    p.timeout = 12;  // 16.8 ms, a common setting
    p.retry_cnt = 7;
    p.rnr_retry = 7;
    p.max_rd_atomic = 1;
    if (int rc = connect_qp(*h.engine, q, p)) {
      *err = "modify_qp: errno " + std::to_string(rc);
      return false;
    }
  }
  return true;
}

}  // namespace roce::sim
