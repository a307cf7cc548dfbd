// The poll loop, receive dispatch and transmit machinery.
#include "stack/core/engine.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "stack/wire/icrc.h"
#include "stack/wire/opcode.h"
#include "stack/wire/psn.h"

namespace roce {

using wire::OpcodeInfo;
using wire::PacketInfo;
using wire::ParseError;

namespace {
uint64_t seed_or_random(uint64_t seed) {
  if (seed) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

Mtu mtu_for_frame(uint32_t max_frame, bool vlan, Mtu cap) {
  // Largest IB MTU whose biggest packet (IPv6, RETH + ImmDt, pad, ICRC) fits the frame.
  const uint32_t overhead = wire::l2l4_header_len(vlan, wire::IpFamily::kIpv6) + 12 + 16 + 4 + 4;
  Mtu best = Mtu::k256;
  for (uint8_t m = 1; m <= static_cast<uint8_t>(cap); ++m) {
    if (mtu_bytes(static_cast<Mtu>(m)) + overhead <= max_frame) best = static_cast<Mtu>(m);
  }
  return best;
}
}  // namespace

Engine::Engine(const EngineConfig& cfg, PacketIo* io, const Clock* clock)
    : cfg_(cfg), io_(io), clock_(clock), mrs_(seed_or_random(cfg.seed)), timers_(clock->now_ns()) {
  if (cfg_.burst == 0 || cfg_.burst > 256) cfg_.burst = 32;
  if (cfg_.max_qps < 0x12) cfg_.max_qps = 0x12;
  if (cfg_.max_qps > (1u << 24)) cfg_.max_qps = 1u << 24;
  if (cfg_.max_inflight_psns == 0 || cfg_.max_inflight_psns > (1u << 22)) {
    cfg_.max_inflight_psns = 256;
  }
  if (cfg_.ack_req_every == 0) cfg_.ack_req_every = 64;
  if (const uint32_t ring = io->rx_ring_frames(); ring != 0 && cfg_.port_inflight_psns != 0) {
    cfg_.port_inflight_psns = std::min(cfg_.port_inflight_psns, std::max(1u, ring / 2));
  }
  now_ = clock->now_ns();
  active_mtu_ = mtu_for_frame(io->max_frame_len(), cfg_.vlan, cfg_.max_mtu);
  rx_vid_ = cfg_.vlan ? cfg_.vlan_tci & 0x0FFF : 0;
  doorbells_.init(cfg_.max_qps);
  qps_.resize(cfg_.max_qps);
  pd_users_.reserve(16);
}

Engine::~Engine() {
  // Return every buffer we still hold to the port.
  if (n_txq_) io_->free(txq_, static_cast<uint16_t>(n_txq_));
  if (n_loop_) io_->free(loop_, static_cast<uint16_t>(n_loop_));
  if (n_spare_) io_->free(spare_, static_cast<uint16_t>(n_spare_));
}

std::optional<AsyncEvent> Engine::next_async_event() {
  std::lock_guard<std::mutex> lock(events_mu_);
  if (events_.empty()) return std::nullopt;
  AsyncEvent e = events_.front();
  events_.pop_front();
  return e;
}

void Engine::raise_event(AsyncEventType t, uint32_t id) {
  std::lock_guard<std::mutex> lock(events_mu_);
  if (events_.size() < 4096) events_.push_back({t, id});
}

// ---------------------------------------------------------------------------------------------
// The loop.

// A gap between two polls: a stall (EngineConfig::stall_ns: timers that expired in it restart,
// completer.cc) or the longest seen while the engine had work or timers (a counter).
void Engine::note_poll_gap(uint64_t gap) {
  if (cfg_.stall_ns != 0 && gap >= cfg_.stall_ns && poll_seq_ != 0) {
    stalled_ = true;
    ++ctr_.stalls;
  }
  if ((busy_ || timers_.armed()) && gap > longest_gap_ns_) {
    longest_gap_ns_ = gap;
    ctr_.longest_poll_gap_us = gap / 1000;
  }
  gap_watch_ns_ = longest_gap_ns_;
  if (cfg_.stall_ns != 0) gap_watch_ns_ = std::min(gap_watch_ns_, cfg_.stall_ns - 1);
}

bool Engine::poll() {
  const uint64_t gap = clock_->now_ns() - now_;
  now_ += gap;
  stalled_ = false;
  // One comparison a poll: a gap that may be a stall or a new longest is looked at out of line.
  if (gap > gap_watch_ns_) [[unlikely]]
    note_poll_gap(gap);
  ++poll_seq_;
  bool work = false;
  notify_batch_.open = true;

  const uint16_t n = io_->rx_burst(rx_, cfg_.burst);
  if (n) {
    work = true;
    for (uint16_t i = 0; i < n; ++i) {
      if (i + 1 < n) __builtin_prefetch(rx_[i + 1].data);
      handle_rx(rx_[i]);
    }
    io_->free(rx_, n);
  }
  if (n_loop_) [[unlikely]] {
    work = true;
    deliver_loopback();
  }

  doorbells_.drain([this](uint32_t qpn) {
    Qp* q = qpn < qps_.size() ? qps_[qpn].get() : nullptr;
    if (!q) return;
    if (q->attr_.qp_state == QpState::kErr) {
      flush_qp(*q);
      return;
    }
    if (q->attr_.qp_state == QpState::kSqe) {  // sends posted in SQE are flushed
      flush_sq(*q);
      return;
    }
    schedule_req(*q);
  });

  if (periodic_ && now_ >= next_periodic_) next_periodic_ = periodic_(periodic_ctx_, now_);

  if (timers_.armed()) {
    const size_t before = timers_.armed();
    timers_.advance(now_, [this](TimerNode& t) { fire_timer(t); });
    work |= timers_.armed() != before;
  }

  // Output waiting for a port that takes nothing (a link that is down, a peer that is gone)
  // is no progress: such polls count as idle, so that the engine thread backs off instead of
  // holding its core until the QPs give up (never, with retry_cnt 7). So is output that found
  // no frame buffer and built nothing (the port's pool ran dry: the QPs stay scheduled, and a
  // later poll finds the buffers the port got back).
  if ((req_head_ || resp_head_ || budget_waiter_ready()) && tx_room()) {
    const uint64_t no_buffer = ctr_.tx_no_buffer, sent = ctr_.tx_frames;
    const uint32_t queued = n_txq_;
    run_output();
    work |= ctr_.tx_no_buffer == no_buffer || n_txq_ != queued || ctr_.tx_frames != sent;
  }
  if (n_txq_) {
    const uint64_t sent = ctr_.tx_frames;
    flush_tx();
    work |= ctr_.tx_frames != sent;
  }
  // Wake the applications only now, with this poll's ACKs on the wire (NotifyBatch).
  notify_batch_.fire();
  busy_ = work;
  return work;
}

void Engine::fire_timer(TimerNode& t) {
  Qp* q = t.owner < qps_.size() ? qps_[t.owner].get() : nullptr;
  if (!q) return;
  switch (t.kind) {
    case kTimerRetransmit:
      comp_timeout(*q);
      break;
    case kTimerRnr:
      comp_rnr_expired(*q);
      break;
    case kTimerPace:
      schedule_req(*q);
      schedule_resp(*q);
      break;
    case kTimerCc:
      cc_timer(*q);
      break;
    default:
      break;
  }
  charge_port(*q);
}

// Responders first (ACKs and READ responses unblock peers), then requesters, round robin, a
// bounded number of packets per QP per turn.
void Engine::run_output() {
  constexpr uint32_t kQuantum = 16;
  // Responders: one pass over the QPs on the list when we started.
  Qp* stop = resp_tail_;
  while (resp_head_ && tx_room()) {
    Qp* q = resp_head_;
    resp_head_ = q->next_resp_;
    if (!resp_head_) resp_tail_ = nullptr;
    q->next_resp_ = nullptr;
    q->rcv_.active = false;
    if (resp_step(*q, kQuantum)) schedule_resp(*q);
    if (n_txq_ >= cfg_.burst) flush_tx();
    if (q == stop) break;
  }
  // Requesters, likewise; but while the port's budget has room, the QPs that waited for it go
  // first, oldest first, one at a time (each takes a PSN at least): ahead of QPs that did not
  // have to wait, which would otherwise take the room every time (waiters starved into local
  // ACK timeouts). Waking every waiter whenever an ACK made room instead sent a herd straight
  // back to waiting (~57 wake-ups a WRITE with 1,024 QPs).
  stop = req_tail_;
  while (tx_room()) {
    Qp* q;
    if (budget_waiter_ready()) {
      q = budget_head_;
      budget_head_ = q->next_budget_;
      if (!budget_head_) budget_tail_ = nullptr;
      q->next_budget_ = nullptr;
      q->budget_wait_ = false;
      if (q->snd_.active) continue;  // on the requester list too: stepped there
    } else if (req_head_) {
      q = req_head_;
      req_head_ = q->next_req_;
      if (!req_head_) req_tail_ = nullptr;
      q->next_req_ = nullptr;
      q->snd_.active = false;
    } else {
      break;
    }
    if (req_step(*q, kQuantum)) schedule_req(*q);
    if (n_txq_ >= cfg_.burst) flush_tx();
    if (q == stop) break;
  }
}

namespace {
// Appends to one of the engine's intrusive FIFO lists of QPs.
void push_back(Qp*& head, Qp*& tail, Qp& q, Qp* Qp::*next) {
  q.*next = nullptr;
  if (tail) {
    tail->*next = &q;
  } else {
    head = &q;
  }
  tail = &q;
}
}  // namespace

void Engine::schedule_req(Qp& q) {
  if (q.snd_.active) return;
  q.snd_.active = true;
  push_back(req_head_, req_tail_, q, &Qp::next_req_);
}

void Engine::schedule_resp(Qp& q) {
  if (q.rcv_.active) return;
  q.rcv_.active = true;
  push_back(resp_head_, resp_tail_, q, &Qp::next_resp_);
}

void Engine::charge_port(Qp& q, bool gone) {
  uint32_t now = 0;
  const QpState st = q.attr_.qp_state;
  if (!gone && q.type() == QpType::kRc &&
      (st == QpState::kRts || st == QpState::kSqd || st == QpState::kSqe)) {
    const int32_t d = wire::psn_diff(q.snd_.psn, q.snd_.comp_psn);
    now = d > 0 ? static_cast<uint32_t>(d) : 0;
  }
  const uint32_t before = q.port_charge_;
  port_inflight_ = port_inflight_ - before + now;
  port_qps_charged_ += (now != 0) - (before != 0);
  q.port_charge_ = now;
}

void Engine::wait_port_budget(Qp& q) {
  ++ctr_.port_budget_waits;
  if (q.budget_wait_) return;
  q.budget_wait_ = true;
  push_back(budget_head_, budget_tail_, q, &Qp::next_budget_);
}

// ---------------------------------------------------------------------------------------------
// Receive.

bool Engine::check_path(const Qp& qp, const PacketInfo& info) {
  // A connected QP accepts packets only from its peer's address to its own (IBA A17.4: the
  // GRH/IP header must match the QP's address vector).
  const wire::PathSpec& p = qp.path_;
  if (info.family == wire::IpFamily::kIpv6) {
    const wire::Ipv6Hdr& ip = info.ipv6();
    return std::memcmp(ip.src.data(), p.dst_gid.data(), 16) == 0 &&
           std::memcmp(ip.dst.data(), p.src_gid.data(), 16) == 0;
  }
  const wire::Ipv4Hdr& ip = info.ipv4();
  return p.family == wire::IpFamily::kIpv4 &&
         std::memcmp(ip.src.data(), p.dst_gid.data() + 12, 4) == 0 &&
         std::memcmp(ip.dst.data(), p.src_gid.data() + 12, 4) == 0;
}

bool Engine::is_own_gid(const Gid& gid) const {
  for (const Gid& g : cfg_.gids) {
    if (g == gid) return true;
  }
  return false;
}

bool Engine::dst_is_ours(const PacketInfo& info) const {
  Gid dst{};
  if (info.family == wire::IpFamily::kIpv6) {
    std::memcpy(dst.data(), info.ipv6().dst.data(), 16);
  } else {
    dst[10] = dst[11] = 0xFF;  // ::ffff:a.b.c.d, as the GID table holds IPv4 addresses
    std::memcpy(dst.data() + 12, info.ipv4().dst.data(), 4);
  }
  return is_own_gid(dst);
}

namespace {
// P_Key: the low 15 bits must match, and at least one side must be a full member (IBA 10.9.3).
// Our only P_Key is the default 0xFFFF, a full member, so the packet's membership bit does not
// matter: 0x7FFF (a limited member of the default partition) matches.
bool pkey_ok(const PacketInfo& info) { return (info.pkey & 0x7FFF) == 0x7FFF; }
// RESET, INIT and ERR drop what arrives (IBA 10.3.1); RTR on, a QP takes packets.
bool takes_packets(QpState st) {
  return st != QpState::kReset && st != QpState::kInit && st != QpState::kErr;
}
}  // namespace

void Engine::handle_rx(const PktBuf& b) {
  ++ctr_.rx_frames;
  ctr_.rx_bytes += b.len;
  PacketInfo info;
  const ParseError err = wire::parse_frame(b.data, b.len, info, {.verify_icrc = cfg_.verify_icrc});
  if (err != ParseError::kOk) {
    // An IPv4 packet with options is RoCEv2's parse error only if it is UDP: an ICMP one (ping
    // with record-route or timestamp options) is the net handler's, which parses it itself.
    if (err == ParseError::kNotIp || err == ParseError::kNotUdp ||
        err == ParseError::kWrongUdpPort ||
        (err == ParseError::kIpv4Options && info.ip_proto != wire::kIpProtoUdp)) {
      ++ctr_.rx_not_roce;
      if (net_handler_) net_handler_(net_ctx_, info, err);
    } else {
      ++ctr_.rx_parse_error[static_cast<unsigned>(err)];
    }
    return;
  }
  // Frames addressed to another station (a bridge flooding, promiscuous ports).
  const wire::EthHdr& eth = info.eth();
  if (std::memcmp(eth.dst.data(), cfg_.mac.data(), 6) != 0) {
    ++ctr_.rx_not_our_mac;
    return;
  }
  // Another VLAN is another network, even for a frame with our MAC and a QP's addresses
  // (tenants' address spaces may overlap). An untagged frame has vlan_tci 0.
  const uint16_t vid = info.vlan_tci & 0x0FFF;
  if (vid != 0 && vid != rx_vid_) [[unlikely]] {
    ++ctr_.rx_other_vlan;
    return;
  }
  ++ctr_.rx_roce;
  if (tap_) tap_(tap_ctx_, b.data, b.len, false, now_);

  const OpcodeInfo& op = *info.op;
  const bool ce = info.ecn() == wire::Ecn::kCe;
  if (ce) ++ctr_.rx_ce;
  if (op.transport == wire::Transport::kCnp) {
    ++ctr_.cnps_received;
    // A CNP slows its QP down: only one that the QP's peer could have sent counts (the P_Key,
    // a state that takes packets, the peer's address to ours), not one from any host that
    // guessed a QP number.
    Qp* q = qp(info.dest_qp);
    if (q && q->type() == QpType::kRc && pkey_ok(info) && takes_packets(q->attr_.qp_state) &&
        check_path(*q, info)) {
      cc_on_cnp(*q);
    } else {
      ++ctr_.cnps_ignored;
    }
    return;
  }
  Qp* q = qp(info.dest_qp);
  if (!q) {
    ++ctr_.rx_unknown_qp;
    return;
  }
  const QpType t = q->type();
  const bool transport_ok = (t == QpType::kRc && op.transport == wire::Transport::kRc) ||
                            (t == QpType::kUd && op.transport == wire::Transport::kUd) ||
                            (t == QpType::kUc && op.transport == wire::Transport::kUc);
  if (!transport_ok) {
    ++ctr_.rx_wrong_transport;
    return;
  }
  if (!pkey_ok(info)) {
    ++ctr_.rx_pkey_mismatch;
    return;
  }
  if (!takes_packets(q->attr_.qp_state)) {
    ++ctr_.rx_bad_qp_state;
    return;
  }
  if (t == QpType::kUd) {
    // Connected QPs check both addresses against their path (check_path); a UD QP takes
    // datagrams from anyone, but only to this port's addresses (as rxe's rxe_chk_dgid): one
    // sent to our MAC for another IP, or to a multicast group (none is supported), is not ours.
    if (!dst_is_ours(info)) {
      ++ctr_.ud_not_our_address;
      return;
    }
    ud_receive(*q, info);
    return;
  }
  if (!check_path(*q, info)) {
    ++ctr_.rx_addr_mismatch;
    return;
  }
  ++q->counters_.rx_packets;
  q->counters_.rx_bytes += b.len;
  if (ce) cc_on_ce(*q);
  if (op.flags & wire::kOpRequest) {
    resp_handle(*q, info);
  } else if (q->attr_.qp_state != QpState::kRtr) {
    comp_handle(*q, info);  // responses need a send queue: RTS, SQD, SQE
    charge_port(*q);
  } else {
    ++ctr_.rx_bad_qp_state;
  }
}

// ---------------------------------------------------------------------------------------------
// Transmit.

PktBuf* Engine::tx_buf() {
  if (n_spare_ == 0) {
    n_spare_ = io_->alloc(spare_, kSpareCap);
    if (n_spare_ == 0) {
      ++ctr_.tx_no_buffer;
      return nullptr;
    }
  }
  PktBuf* b = &txq_[n_txq_];
  *b = spare_[--n_spare_];
  return b;
}

uint8_t* Engine::begin_frame(PktBuf* b, uint32_t hdr_len, uint32_t payload_len) {
  uint8_t* payload = b->data + hdr_len;
  // A payload crc32_copy copies in goes to a 32-byte boundary where the buffer has the room
  // (the frame then starts up to 31 bytes into it): its 32-byte stores then never split a cache
  // line. Copy and CRC of 4 KiB took 217 ns aligned against 256-267 ns on a Zen 3.
  if (payload_len >= kOnePassMin) {
    const auto skew = static_cast<uint32_t>(-reinterpret_cast<uintptr_t>(payload) & 31);
    if (hdr_len + skew + payload_len + wire::kTrailerRoom <= b->cap) payload += skew;
  }
  return payload;
}

void Engine::finish_frame(PktBuf* b, Qp& qp, uint8_t* payload, uint32_t len,
                          const wire::BthFields& bth, const wire::ExtHeaders& ext) {
  uint32_t frame_len = 0;
  uint8_t* frame = wire::build_around_payload(payload, len, qp.l2l4_, qp.path_.traffic_class,
                                              ip_id_++, bth, ext, &frame_len);
  queue_frame(b, qp, frame, frame_len);
}

void Engine::finish_frame(PktBuf* b, Qp& qp, wire::PathSpec& path, uint8_t* payload, uint32_t len,
                          const wire::BthFields& bth, const wire::ExtHeaders& ext) {
  path.ipv4_id = ip_id_++;
  uint32_t frame_len = 0;
  uint8_t* frame = wire::build_around_payload(payload, len, path, bth, ext, &frame_len);
  queue_frame(b, qp, frame, frame_len);
}

void Engine::queue_frame(PktBuf* b, Qp& qp, uint8_t* frame, uint32_t frame_len) {
  b->data = frame;
  b->len = frame_len;
  ++n_txq_;
  ++qp.counters_.tx_packets;
  qp.counters_.tx_bytes += frame_len;
  if (tap_) tap_(tap_ctx_, frame, frame_len, true, now_);
}

bool Engine::send_raw(const uint8_t* frame, uint32_t len) {
  if (!tx_room()) flush_tx();
  if (!tx_room() || len > io_->max_frame_len()) return false;
  PktBuf* b = tx_buf();
  if (!b || b->cap < len) return false;
  std::memcpy(b->data, frame, len);
  b->len = len;
  ++n_txq_;
  return true;
}

// A NIC does not put a frame for its own MAC on the wire (nor would the wire bring it back):
// loopback traffic is handed from the engine's transmit side to its receive side, as rxe's
// rxe_loopback does for a destination that is one of its own addresses. Such frames are sent
// (tx counters, capture) and received (rx counters, capture) in full, ICRC included.
uint32_t Engine::divert_loopback() {
  uint32_t kept = 0;
  uint32_t i = 0;
  for (; i < n_txq_; ++i) {
    PktBuf& b = txq_[i];
    if (std::memcmp(b.data, cfg_.mac.data(), 6) != 0) [[likely]] {
      if (kept != i) txq_[kept] = b;
      ++kept;
      continue;
    }
    if (n_loop_ == kLoopCap) {  // the next poll receives them and makes room
      ++ctr_.loopback_waits;
      break;
    }
    loop_[n_loop_++] = b;
    ++ctr_.loopback_frames;
    ++ctr_.tx_frames;
    ctr_.tx_bytes += b.len;
  }
  if (kept != i) {
    std::memmove(txq_ + kept, txq_ + i, (n_txq_ - i) * sizeof(PktBuf));
    n_txq_ -= i - kept;
  }
  return kept;
}

void Engine::deliver_loopback() {
  // Frames these answers loop back (an ACK flushed at once) join loop_ behind them and wait
  // for the next poll.
  const uint32_t n = n_loop_;
  for (uint32_t i = 0; i < n; ++i) handle_rx(loop_[i]);
  io_->free(loop_, static_cast<uint16_t>(n));
  n_loop_ -= n;
  if (n_loop_) std::memmove(loop_, loop_ + n, n_loop_ * sizeof(PktBuf));
}

void Engine::flush_tx() {
  const uint32_t ready = loopback_used_ ? divert_loopback() : n_txq_;
  uint32_t sent = 0;
  while (sent < ready) {
    const uint16_t chunk = static_cast<uint16_t>(ready - sent > 256 ? 256 : ready - sent);
    const uint16_t k = io_->tx_burst(txq_ + sent, chunk);
    for (uint16_t i = 0; i < k; ++i) {
      ctr_.tx_bytes += txq_[sent + i].len;
    }
    ctr_.tx_frames += k;
    sent += k;
    if (k < chunk) {
      ++ctr_.tx_backpressure;
      break;
    }
  }
  if (sent < n_txq_) {
    std::memmove(txq_, txq_ + sent, (n_txq_ - sent) * sizeof(PktBuf));
  }
  n_txq_ -= sent;
}

void Engine::push_cqe(CompletionQueue* cq, const Cqe& c, bool solicited, Qp* qp) {
  if (!cq->push(c, solicited)) cq_overflow(cq, qp);
}

void Engine::cq_overflow(CompletionQueue* cq, Qp* qp) {
  // IBA 11.4.2.1: CQ overrun is a CQ error, reported once (the CQ stays overflowed); the QPs
  // using it go to the error state.
  ++ctr_.cq_overflow;
  if (cq->take_overflow_report()) raise_event(AsyncEventType::kCqErr, cq->cqn());
  if (qp && qp->attr_.qp_state != QpState::kErr) qp_error(*qp);
}

}  // namespace roce
