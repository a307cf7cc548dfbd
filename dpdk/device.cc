#include "dpdk/device.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "dpdk/dpdk_port.h"
#include "dpdk/eal.h"
#include "stack/core/counters_format.h"

namespace roce::dpdk {

namespace {
int64_t wall_minus_monotonic() {
  timespec rt, mt;
  clock_gettime(CLOCK_REALTIME, &rt);
  clock_gettime(CLOCK_MONOTONIC, &mt);
  return (static_cast<int64_t>(rt.tv_sec) - mt.tv_sec) * 1'000'000'000 + (rt.tv_nsec - mt.tv_nsec);
}
}  // namespace

std::unique_ptr<Device> Device::open(const DeviceConfig& cfg, std::string* err,
                                     const std::vector<std::string>& eal_defaults) {
  if (!validate(cfg, err)) return nullptr;
  if (Eal::running()) {
    // EAL started with an earlier device's arguments and cannot take others now.
    const std::vector<std::string>& running = Eal::args();
    std::string missing;
    for (const std::string& a : cfg.eal_args) {
      if (std::find(running.begin(), running.end(), a) != running.end()) continue;
      missing += (missing.empty() ? "" : " ") + a;
    }
    if (!missing.empty()) {
      *err = cfg.name + ": eal: '" + missing +
             "' cannot take effect: EAL already runs in this process, started by an earlier "
             "device without it (give the first device opened these eal arguments)";
      return nullptr;
    }
  }
  EalOptions eal;
  eal.extra_args = cfg.eal_args;
  eal.extra_args.insert(eal.extra_args.end(), eal_defaults.begin(), eal_defaults.end());
  if (!Eal::init(eal, err)) return nullptr;

  std::unique_ptr<Device> d(new Device());
  d->cfg_ = cfg;
  // Opened now, so that a path that cannot be written fails the open rather than the close.
  if (cfg.counters == "-") {
    d->counters_out_ = stderr;
  } else if (!cfg.counters.empty()) {
    d->counters_out_ = std::fopen(cfg.counters.c_str(), "w");
    if (!d->counters_out_) {
      *err = cfg.name + ": counters: cannot open '" + cfg.counters + "': " + std::strerror(errno);
      return nullptr;
    }
  }
  PortConfig pc;
  pc.mtu = cfg.mtu;
  pc.vlan = cfg.vlan.has_value();
  pc.num_mbufs = cfg.buffers;
  if (cfg.mac) pc.mac = *cfg.mac;
  std::string perr;
  d->port_ = DpdkPort::open(cfg.port, pc, &perr);
  if (!d->port_) {
    *err = cfg.name + ": " + perr;
    return nullptr;
  }
  std::memcpy(d->mac_.data(), d->port_->mac(), 6);
  d->gids_ = cfg.gid_table(d->mac_);
  d->wall_offset_ns_ = wall_minus_monotonic();

  PacketIo* io = d->port_.get();
  if (cfg.drop > 0 || cfg.ce > 0) {
    d->faults_ = std::make_unique<FaultIo>(io, cfg.drop, cfg.drop, cfg.fault_seed, cfg.ce);
    io = d->faults_.get();
  }

  EngineConfig ec;
  ec.mac = d->mac_;
  ec.gids = d->gids_;
  if (cfg.vlan) {
    ec.vlan = true;
    ec.vlan_tci = static_cast<uint16_t>(cfg.pcp << 13 | *cfg.vlan);
  }
  std::random_device rd;
  ec.seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  // Congestion control (checked by validate() above at kLineGbps; here again at the link's
  // speed, which a NIC may already report); ECT marking with DCQCN or ecn = on.
  d->line_from_link_ = !d->port_->virtual_device();
  if (d->line_from_link_) d->line_mbps_ = d->port_->link_speed_mbps();
  const double line = line_gbps_for(d->port_->virtual_device(), d->line_mbps_);
  if (!cfg.dcqcn_params(&ec.dcqcn, err, line)) {
    *err = cfg.name + ": " + *err;
    if (d->line_mbps_) {
      char why[96];
      std::snprintf(why, sizeof why, " (line_gbps is the link's %g Gb/s unless cc_params gives it)",
                    line);
      *err += why;
    }
    return nullptr;
  }
  ec.default_cc = cfg.cc == "dcqcn" ? CcKind::kDcqcn : CcKind::kNone;
  ec.ecn_mark = cfg.ecn;
  ec.port_inflight_psns = cfg.inflight;
  // Well above the engine thread's longest idle sleep: a longer gap means it did not run.
  ec.stall_ns = std::max<uint64_t>(2'000'000, 4ull * cfg.idle_sleep_us * 1000);
  d->tsc_clock_ = TscClock::create();
  const Clock* clock =
      d->tsc_clock_ ? static_cast<const Clock*>(d->tsc_clock_.get()) : &d->steady_clock_;
  d->engine_ = std::make_unique<Engine>(ec, io, clock);
  for (const auto& n : cfg.neighbors) d->engine_->neighbors().add_static(n.ip, n.mac);

  NeighborConfig nc;
  d->agent_ = std::make_unique<NeighborAgent>(d->engine_->neighbors(), d->mac_, d->gids_, ec.vlan,
                                              ec.vlan_tci, nc, &Device::send_frame,
                                              &Device::on_resolved, d.get(), &Device::on_failed);
  d->engine_->set_net_handler(&Device::on_net_frame, d.get());
  d->engine_->set_periodic(&Device::tick, d.get());
  if (!cfg.pcap.empty()) {
    if (!d->capture_.open(cfg.pcap, err)) return nullptr;
    d->engine_->set_tap(&Device::on_tap, d.get());
  }

  IdlePolicy idle;
  idle.max_sleep_ns = cfg.idle_sleep_us * 1000;
  if (idle.min_sleep_ns > idle.max_sleep_ns) idle.min_sleep_ns = idle.max_sleep_ns;
  d->runner_ = std::make_unique<EngineRunner>(*d->engine_, !cfg.inline_mode, idle);
  d->runner_->start(
      cfg.cpu,
      [] {
        std::string e;
        Eal::register_current_thread(&e);
      },
      [] { Eal::unregister_current_thread(); });
  return d;
}

void Device::write_counters() {
  if (!counters_out_) return;
  if (runner_) std::fputs(counters_text().c_str(), counters_out_);
  if (counters_out_ == stderr) {
    std::fflush(stderr);
  } else {
    std::fclose(counters_out_);
    if (!runner_) std::remove(cfg_.counters.c_str());  // the open failed: no empty file left
  }
  counters_out_ = nullptr;
}

Device::~Device() {
  write_counters();
  if (runner_) runner_->stop();
  if (!capture_.close())
    std::fprintf(stderr, "device %s: %s\n", cfg_.name.c_str(), capture_.error().c_str());
  engine_.reset();  // returns its buffers to the port's pool
  agent_.reset();
  faults_.reset();
  if (port_) port_->stop();
  port_.reset();
}

uint32_t Device::max_frame_len() const { return port_->max_frame_len(); }

uint32_t Device::buffers_in_use() const { return port_->buffers_in_use(); }

uint32_t Device::link_speed_mbps() const { return port_->link_speed_mbps(); }

bool Device::link_up() const {
  const bool up = port_->link_up();
  if (up && !link_seen_up_.load(std::memory_order_relaxed)) link_seen_up_.store(true);
  return up;
}

bool Device::link_lost() const {
  // Read before asking the port: a link that comes up between the two is not called lost.
  const bool seen = link_seen_up_.load();
  return !link_up() && seen;
}

bool Device::ready_link() {
  uint8_t expected = kLinkNotReady;
  if (link_ready_.compare_exchange_strong(expected, kLinkPrefaulting)) {
    port_->prefault_shared_memory();
    // Unless the link went down meanwhile (tick() reset the state: prefault again next time).
    expected = kLinkPrefaulting;
    link_ready_.compare_exchange_strong(expected, kLinkReady);
  }
  return link_ready_.load() == kLinkReady;
}

bool Device::wait_link_up(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Up, and for a memif port its shared memory populated, by this thread or by the engine
  // thread (which may have started first: then wait for it to finish, so that what the caller
  // measures next takes no page faults).
  while (!link_up() || (port_->shares_peer_memory() && !ready_link())) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Sleep rather than spin: a net_memif link comes up through control messages that the
    // process's interrupt thread handles, maybe on this core.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void Device::on_net_frame(void* ctx, const wire::PacketInfo& info, wire::ParseError) {
  auto* d = static_cast<Device*>(ctx);
  d->agent_->on_frame(info.frame, info.frame_len, d->engine_->now_ns());
}

bool Device::send_frame(void* ctx, const uint8_t* frame, uint32_t len) {
  return static_cast<Device*>(ctx)->engine_->send_raw(frame, len);
}

void Device::on_resolved(void* ctx, const Gid& ip) {
  static_cast<Device*>(ctx)->engine_->on_neighbor_resolved(ip);
}

void Device::on_failed(void* ctx, const Gid& ip) {
  static_cast<Device*>(ctx)->engine_->on_neighbor_failed(ip);
}

double Device::line_gbps_for(bool virtual_device, uint32_t link_mbps) {
  return !virtual_device && link_mbps ? link_mbps / 1000.0 : DeviceConfig::kLineGbps;
}

void Device::follow_link_speed(uint64_t now_ns) {
  if (!line_from_link_ || now_ns < next_speed_check_ns_) return;
  next_speed_check_ns_ = now_ns + 100'000'000;
  const uint32_t mbps = port_->link_speed_mbps();
  if (mbps == 0 || mbps == line_mbps_) return;  // down, unknown, or unchanged: keep the rate
  line_mbps_ = mbps;
  cc::DcqcnParams p;
  std::string err;
  if (!cfg_.dcqcn_params(&p, &err, line_gbps_for(false, mbps))) {
    // The link came up below a rate cc_params gives (e.g. first_cnp_rate_gbps): open() would
    // have refused it; now the QPs keep the line rate they have. Once per speed seen.
    std::fprintf(stderr, "device %s: the link is at %u Mb/s, but %s; DCQCN keeps %g Gb/s\n",
                 cfg_.name.c_str(), mbps, err.c_str(), engine_->line_rate_gbps());
    return;
  }
  engine_->set_line_rate(p.line_gbps);
}

uint64_t Device::tick(void* ctx, uint64_t now_ns) {
  auto* d = static_cast<Device*>(ctx);
  if (d->tsc_clock_) d->tsc_clock_->reanchor();  // (every 10 ms at most: it says when)
  d->follow_link_speed(now_ns);
  const uint64_t next = d->agent_->tick(now_ns);
  // A net_memif peer maps the shared rings when the link comes up (again after a reconnect):
  // fault them in now rather than one page at a time under the first messages.
  if (d->port_->shares_peer_memory()) {
    if (d->link_up()) {
      d->ready_link();
    } else {
      d->link_ready_.store(kLinkNotReady);
    }
  }
  // The capture reaches its file within a second or so (readable during a run; a process
  // that is killed loses at most that much), one write(2) for all frames since the last.
  if (d->capture_.is_open() && now_ns >= d->next_capture_flush_ns_) {
    d->capture_.flush();
    d->next_capture_flush_ns_ = now_ns + 1'000'000'000;
  }
  // Look at new resolution requests (QPs that just went to RTR) at least every millisecond.
  return std::min<uint64_t>(next, now_ns + 1'000'000);
}

void Device::on_tap(void* ctx, const uint8_t* frame, uint32_t len, bool, uint64_t now_ns) {
  auto* d = static_cast<Device*>(ctx);
  d->capture_.write(frame, len,
                    static_cast<uint64_t>(static_cast<int64_t>(now_ns) + d->wall_offset_ns_));
}

void Device::flush_capture() {
  runner_->run([this] { capture_.flush(); });
}

std::string Device::counters_text() {
  return runner_->run([this] {
    std::string s = "device " + cfg_.name + " (" + cfg_.port + ", " + format_mac(mac_) + ")\n";
    {
      char line[160];
      std::snprintf(line, sizeof line, "  link %u Mb/s%s, dcqcn line rate %g Gb/s\n",
                    port_->link_speed_mbps(), port_->virtual_device() ? " (nominal: a vdev)" : "",
                    engine_->line_rate_gbps());
      s += line;
    }
    s += format_engine_counters(*engine_);
    const RunnerStats rs = runner_->stats();
    s += runner_->threaded() ? format_runner_counters(rs) : format_standby_counters(rs);
    const PortCounters pc = port_->counters();
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "driver:\n  rx %llu frames %llu bytes, tx %llu frames %llu bytes, "
                  "linearized %llu, dropped chained %llu, oversize %llu, tx rejected %llu\n",
                  (unsigned long long)pc.rx_packets, (unsigned long long)pc.rx_bytes,
                  (unsigned long long)pc.tx_packets, (unsigned long long)pc.tx_bytes,
                  (unsigned long long)pc.rx_linearized, (unsigned long long)pc.rx_dropped_chained,
                  (unsigned long long)pc.rx_dropped_oversize, (unsigned long long)pc.tx_rejected);
    s += buf;
    EthStats es;
    std::string e;
    if (port_->eth_stats(&es, &e)) {
      std::snprintf(buf, sizeof buf,
                    "  imissed %llu (af_packet ring full %llu) ierrors %llu oerrors %llu "
                    "rx_nombuf %llu\n",
                    (unsigned long long)es.imissed, (unsigned long long)es.ring_drops,
                    (unsigned long long)es.ierrors, (unsigned long long)es.oerrors,
                    (unsigned long long)es.rx_nombuf);
      s += buf;
    }
    std::snprintf(buf, sizeof buf, "  mbufs in use %u of %u\n", port_->buffers_in_use(),
                  cfg_.buffers);
    s += buf;
    if (port_->burst_gated()) {
      const burst_gate::Stats g = burst_gate::stats();
      std::snprintf(buf, sizeof buf,
                    "  bursts skipped while EAL's interrupt thread ran %llu (the process's gate "
                    "closed %llu times, waited for a burst %llu times)\n",
                    (unsigned long long)pc.bursts_gated, (unsigned long long)g.closes,
                    (unsigned long long)g.waits);
      s += buf;
    }
    if (faults_) {
      std::snprintf(buf, sizeof buf, "fault injection: dropped rx %llu tx %llu, CE marked %llu\n",
                    (unsigned long long)faults_->counters().rx_dropped,
                    (unsigned long long)faults_->counters().tx_dropped,
                    (unsigned long long)faults_->counters().tx_ce_marked);
      s += buf;
    }
    const NeighborCounters& n = agent_->counters();
    std::snprintf(buf, sizeof buf,
                  "neighbour: arp req rx %llu rep tx %llu req tx %llu rep rx %llu; ns rx %llu "
                  "na tx %llu ns tx %llu na rx %llu; echo %llu/%llu echo6 %llu/%llu; "
                  "resolved %llu failed %llu\n",
                  (unsigned long long)n.arp_requests_rx, (unsigned long long)n.arp_replies_tx,
                  (unsigned long long)n.arp_requests_tx, (unsigned long long)n.arp_replies_rx,
                  (unsigned long long)n.ns_rx, (unsigned long long)n.na_tx,
                  (unsigned long long)n.ns_tx, (unsigned long long)n.na_rx,
                  (unsigned long long)n.echo_requests_rx, (unsigned long long)n.echo_replies_tx,
                  (unsigned long long)n.echo6_requests_rx, (unsigned long long)n.echo6_replies_tx,
                  (unsigned long long)n.resolved, (unsigned long long)n.failed);
    s += buf;
    return s;
  });
}

}  // namespace roce::dpdk
