#include "scripted_port.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "stack/core/connect.h"

namespace roce::test {

namespace {
struct Buf {
  uint8_t data[9216];
};
}  // namespace

uint16_t ScriptedPort::rx_burst(PktBuf* bufs, uint16_t n) {
  uint16_t k = 0;
  while (k < n && !rx_.empty()) {
    const auto& f = rx_.front();
    if (f.size() > max_frame_len()) {  // a port drops frames longer than it takes
      rx_.pop_front();
      continue;
    }
    auto* b = new Buf;
    std::memcpy(b->data, f.data(), f.size());
    bufs[k++] = PktBuf{b, b->data, static_cast<uint32_t>(f.size()), sizeof b->data};
    rx_.pop_front();
    ++outstanding_;
  }
  return k;
}

uint16_t ScriptedPort::tx_burst(PktBuf* bufs, uint16_t n) {
  uint16_t k = 0;
  for (; k < n && tx_limit > 0; ++k, --tx_limit) {
    sent_.emplace_back(bufs[k].data, bufs[k].data + bufs[k].len);
    auto* buf = static_cast<Buf*>(bufs[k].handle);
    placements_.push_back({reinterpret_cast<uintptr_t>(bufs[k].data),
                           static_cast<uint32_t>(bufs[k].data - buf->data)});
    delete buf;
    --outstanding_;
  }
  return k;
}

uint16_t ScriptedPort::alloc(PktBuf* bufs, uint16_t n) {
  n = static_cast<uint16_t>(std::min<uint32_t>(n, alloc_limit));
  alloc_limit -= n;
  for (uint16_t i = 0; i < n; ++i) {
    auto* b = new Buf;
    bufs[i] = PktBuf{b, b->data, 0, std::min<uint32_t>(buf_cap, sizeof b->data)};
    ++outstanding_;
  }
  return n;
}

void ScriptedPort::free(PktBuf* bufs, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    delete static_cast<Buf*>(bufs[i].handle);
    --outstanding_;
  }
}

ProtocolHarness::ProtocolHarness(const Options& o) : opts_(o) {
  EngineConfig cfg;
  cfg.mac = {0x02, 0, 0, 0, 0, 0x01};
  cfg.gids = {Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
              Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1}};
  cfg.seed = 99;
  cfg.max_inflight_psns = o.max_inflight_psns;
  cfg.stall_ns = o.stall_ns;
  if (o.vlan_tci >= 0) {
    cfg.vlan = true;
    cfg.vlan_tci = static_cast<uint16_t>(o.vlan_tci);
  }
  port_.rx_ring = o.rx_ring_frames;
  engine_ = std::make_unique<Engine>(cfg, &port_, &clock_);
  const Gid peer_gid = o.ipv6 ? Gid{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
                              : Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 2};
  const Mac peer_mac{0x02, 0, 0, 0, 0, 0x02};
  peer_gid_ = peer_gid;
  peer_mac_ = peer_mac;
  if (o.peer_mac_known) engine_->neighbors().add_static(peer_gid, peer_mac);
  const uint32_t pd = engine_->alloc_pd();
  mem_.assign(o.mem_bytes, 0);
  if (o.mr_guard * 2 >= mem_.size()) throw std::runtime_error("mr_guard");
  std::memset(mem_.data(), kGuardByte, o.mr_guard);
  std::memset(mem_.data() + mem_.size() - o.mr_guard, kGuardByte, o.mr_guard);
  if (engine_->reg_mr(pd, mem_.data() + o.mr_guard, mem_.size() - 2 * o.mr_guard, addr(o.mr_guard),
                      o.mr_access, &key_)) {
    throw std::runtime_error("reg_mr");
  }
  int err = 0;
  cq_ = engine_->create_cq(4096, &err);
  QpInitAttr init;
  init.type = o.qp_type;
  init.cc = o.cc;
  init.pd = pd;
  init.send_cq = init.recv_cq = cq_;
  init.cap.max_send_wr = init.cap.max_recv_wr = 64;
  init.cap.max_send_sge = init.cap.max_recv_sge = 4;
  init.cap.max_inline_data = 64;
  init.sq_sig_all = o.sq_sig_all;
  qp_ = engine_->create_qp(init, &err);
  connect();
  peer_path_.src_mac = peer_mac;
  peer_path_.dst_mac = cfg.mac;
  peer_path_.family = o.ipv6 ? wire::IpFamily::kIpv6 : wire::IpFamily::kIpv4;
  peer_path_.src_gid = peer_gid;
  peer_path_.dst_gid = cfg.gids[o.ipv6 ? 0 : 1];
  peer_path_.udp_sport = 0xC123;
}

// RESET -> INIT -> RTR [-> RTS] with the harness's attributes (IBA table 91).
void ProtocolHarness::connect() {
  ConnectParams p;
  p.access = opts_.qp_access & (opts_.qp_type == QpType::kRc ? ~0u : kAccessRemoteWrite);
  p.qkey = opts_.qkey;
  p.ah.dgid = peer_gid_;
  p.ah.sgid_index = opts_.ipv6 ? 0 : 1;
  p.mtu = opts_.mtu;
  p.dest_qpn = kPeerQpn;
  p.rq_psn = kPeerPsn;
  p.max_dest_rd_atomic = opts_.max_dest_rd_atomic;
  p.min_rnr_timer = opts_.min_rnr_timer;
  p.to_rts = !opts_.stop_at_rtr;
  p.sq_psn = kLocalPsn;
  p.timeout = opts_.timeout;
  p.retry_cnt = opts_.retry_cnt;
  p.rnr_retry = opts_.rnr_retry;
  p.max_rd_atomic = opts_.max_rd_atomic;
  const char* step = nullptr;
  if (roce::connect_qp(*engine_, qp_, p, &step)) throw std::runtime_error(step);
}

std::vector<uint8_t> ProtocolHarness::peer_frame(uint8_t opcode, uint32_t psn,
                                                 const wire::ExtHeaders& ext,
                                                 const uint8_t* payload, uint32_t len,
                                                 bool ack_req) {
  wire::BthFields bth;
  bth.opcode = opcode;
  bth.dest_qp = qp_->qpn();
  bth.psn = psn & 0xFFFFFF;
  bth.ack_req = ack_req;
  bth.solicited = peer_solicited_;
  std::vector<uint8_t> buf(len + wire::kMaxHeadersLen + wire::kTrailerRoom);
  const uint32_t n = wire::build_frame(buf.data(), static_cast<uint32_t>(buf.size()), peer_path_,
                                       bth, ext, payload, len);
  buf.resize(n);
  return buf;
}

std::vector<uint8_t> ProtocolHarness::peer_frame(uint8_t opcode, uint32_t psn,
                                                 const wire::ExtHeaders& ext, uint32_t len,
                                                 bool ack_req) {
  std::vector<uint8_t> payload(len);
  for (uint32_t i = 0; i < len; ++i) payload[i] = static_cast<uint8_t>(psn + i);
  return peer_frame(opcode, psn, ext, payload.data(), len, ack_req);
}

wire::ExtHeaders ProtocolHarness::reth(uint64_t va, uint32_t rkey, uint32_t len) const {
  wire::ExtHeaders e;
  e.reth.va.set(va);
  e.reth.rkey.set(rkey);
  e.reth.dma_length.set(len);
  return e;
}

wire::ExtHeaders ProtocolHarness::aeth(uint8_t syndrome, uint32_t msn) const {
  wire::ExtHeaders e;
  e.aeth.syndrome = syndrome;
  e.aeth.msn.set(msn);
  return e;
}

static std::vector<Emitted> parse_all(std::vector<std::vector<uint8_t>> frames) {
  std::vector<Emitted> out;
  for (auto& f : frames) {
    Emitted e;
    e.bytes = std::move(f);
    if (wire::parse_frame(e.bytes.data(), static_cast<uint32_t>(e.bytes.size()), e.info) !=
        wire::ParseError::kOk) {
      throw std::runtime_error("engine emitted a frame that does not parse");
    }
    out.push_back(std::move(e));
  }
  // The info points into e.bytes: vectors were moved, their buffers stayed put.
  return out;
}

bool ProtocolHarness::guards_intact() const {
  const size_t g = opts_.mr_guard, n = mem_.size();
  for (size_t i = 0; i < g; ++i) {
    if (mem_[i] != kGuardByte || mem_[n - 1 - i] != kGuardByte) return false;
  }
  return true;
}

void ProtocolHarness::fail_peer() { engine_->on_neighbor_failed(peer_gid_); }

void ProtocolHarness::resolve_peer() {
  engine_->neighbors().learn(peer_gid_, peer_mac_);
  engine_->on_neighbor_resolved(peer_gid_);
}

std::vector<Emitted> ProtocolHarness::exchange(std::vector<std::vector<uint8_t>> frames) {
  for (auto& f : frames) port_.inject(std::move(f));
  for (int i = 0; i < 1000 && engine_->poll(); ++i) {
  }
  return parse_all(port_.take_sent());
}

std::vector<Emitted> ProtocolHarness::advance(uint64_t dt_ns) {
  const uint64_t end = clock_.now_ns() + dt_ns;
  while (clock_.now_ns() < end) {
    clock_.advance(std::min<uint64_t>(1024, end - clock_.now_ns()));
    for (int i = 0; i < 1000 && engine_->poll(); ++i) {
    }
  }
  return parse_all(port_.take_sent());
}

std::vector<Cqe> ProtocolHarness::completions() {
  std::vector<Cqe> out;
  Cqe c[64];
  int n;
  while ((n = cq_->poll(c, 64)) > 0) out.insert(out.end(), c, c + n);
  return out;
}

void ProtocolHarness::post_recv(uint64_t wr_id, uint64_t off, uint32_t len) {
  Sge s{addr(off), len, key_};
  if (qp_->post_recv({.wr_id = wr_id, .sg_list = &s, .num_sge = 1})) {
    throw std::runtime_error("post_recv");
  }
}

int ProtocolHarness::post_send(WrOpcode op, uint64_t wr_id, uint64_t off, uint32_t len,
                               uint8_t flags, uint64_t remote_addr, uint32_t rkey, uint64_t cmp,
                               uint64_t swap) {
  Sge s{addr(off), len, key_};
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  wr.compare_add = cmp;
  wr.swap = swap;
  return qp_->post_send(wr);
}

}  // namespace roce::test
