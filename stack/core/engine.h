// The engine: one per port. It owns the port's packet I/O and every QP, CQ, SRQ, MR, AH,
// neighbour entry and timer bound to it, and it alone touches them, so the datapath takes no
// locks. One poll() is one iteration of:
//
//   rx burst -> parse + validate (ICRC, addresses, P_Key, QP state) -> dispatch by QPN to the
//   responder (requests) or the completer (responses) -> doorbells -> timers -> responder and
//   requester output within window and rate -> tx burst.
//
// Methods are split by topic over engine.cc (loop, rx, tx), engine_control.cc (objects, modify
// QP), requester.cc, completer.cc and responder.cc. Every method is "owning thread only": the
// application reaches the engine through the QP/CQ/SRQ queues, and runs control operations on
// the engine's thread (EngineRunner) or with the engine not running (simulation, inline mode).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "stack/core/mr.h"
#include "stack/core/qp.h"
#include "stack/core/queues.h"
#include "stack/core/types.h"
#include "stack/io/packet_io.h"
#include "stack/net/neighbors.h"
#include "stack/util/clock.h"
#include "stack/util/doorbell.h"
#include "stack/util/timer_wheel.h"
#include "stack/wire/builder.h"
#include "stack/wire/icrc.h"
#include "stack/wire/parser.h"

namespace roce {

struct EngineConfig {
  Mac mac{0x02, 0, 0, 0, 0, 0x01};
  // GID table of the port: RoCEv2 GIDs (IPv6 addresses; ::ffff:a.b.c.d for IPv4).
  std::vector<Gid> gids;
  // Frames are sent with an 802.1Q tag of vlan_tci. Received ones count as ours untagged,
  // priority-tagged (VID 0) or tagged with this VID; another VID is another network, dropped
  // (rx_other_vlan), as the neighbour agent ignores it. Without vlan, only VID 0 is ours.
  bool vlan = false;
  uint16_t vlan_tci = 0;  // PCP(3) DEI(1) VID(12)
  // Largest IB path MTU the port offers (also capped by the port's frame size).
  Mtu max_mtu = Mtu::k4096;
  uint32_t max_qps = 4096;  // QPNs 0x11 .. max_qps-1
  uint32_t max_cqs = 4096;
  uint32_t max_srqs = 1024;
  uint32_t max_ahs = 4096;
  uint16_t burst = 32;
  // Go-back-N window: PSNs a QP may have unacknowledged.
  uint32_t max_inflight_psns = 256;
  // Port-wide bound on the PSNs all RC requesters together may have unacknowledged (0: none).
  // Each QP's window fits a receive ring, but several QPs' windows together do not: 64 QPs
  // writing over net_af_packet (a 512-frame ring) lost 28 % of their frames and sat out
  // thousands of local ACK timeouts. A READ request counts all its response PSNs (its pieces
  // shrink to the room left). Above max_inflight_psns it binds only several QPs together.
  // The engine takes at most half the receive ring its port reports (PacketIo::rx_ring_frames):
  // READ responses come back into that ring all at once, as fast as the responder sends them,
  // and the peer's own requests share it (its budget being the same half of a ring like ours);
  // a 512-frame af_packet ring with 512 PSNs of READs outstanding each way overflowed.
  uint32_t port_inflight_psns = 512;
  // The requester asks for an ACK at least every this many packets (and on every last packet).
  uint32_t ack_req_every = 64;
  // A gap between two polls at least this long is a stall: the engine did not run (its thread
  // descheduled on a loaded machine, an application that drives it inline and stopped). A
  // local ACK timer that expired meanwhile measured time in which the engine could see no ACK
  // (it may be waiting in the receive ring), so it restarts instead of counting a retry.
  // It must be above the longest time the engine is left unpolled on purpose: 0 (off) here,
  // since a simulator polls only when something is due; Device sets 2 ms or 4 x idle_sleep_us.
  uint64_t stall_ns = 0;
  bool verify_icrc = true;
  uint64_t seed = 0;  // key generation; 0 = from std::random_device
  // Congestion control for QPs that do not choose (QpInitAttr::cc), and its parameters.
  CcKind default_cc = CcKind::kNone;
  cc::DcqcnParams dcqcn = cc::DcqcnParams::paper(100.0);
  // Mark data packets ECN-capable (ECT) even without DCQCN (DCQCN QPs always mark).
  bool ecn_mark = false;
};

// Why received frames were dropped (per engine).
struct EngineCounters {
  uint64_t rx_frames = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_roce = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_parse_error[static_cast<unsigned>(wire::ParseError::kCount)] = {};
  uint64_t rx_not_roce = 0;  // ARP / ICMP / other, handed to the neighbour code
  uint64_t rx_unknown_qp = 0;
  uint64_t rx_bad_qp_state = 0;
  uint64_t rx_wrong_transport = 0;  // e.g. a UD opcode for an RC QP
  uint64_t rx_pkey_mismatch = 0;
  uint64_t rx_addr_mismatch = 0;  // source/destination IP not the QP's path
  uint64_t rx_not_our_mac = 0;
  uint64_t rx_other_vlan = 0;    // tagged with a VID that is not the port's (EngineConfig::vlan)
  uint64_t tx_no_buffer = 0;     // alloc failed: output deferred
  uint64_t tx_backpressure = 0;  // tx_burst took fewer than offered
  uint64_t cq_overflow = 0;
  uint64_t ud_qkey_mismatch = 0;
  uint64_t ud_no_recv = 0;
  uint64_t ud_too_long = 0;
  uint64_t ud_not_our_address = 0;  // destination IP not in the GID table (nor multicast)
  uint64_t neighbor_wait = 0;       // sends held while a destination MAC resolves
  // Sends whose destination never resolved: RC / UC WQEs failed, UD datagrams dropped.
  uint64_t neighbor_failed_sends = 0;
  uint64_t rx_ce = 0;  // CE-marked RoCE packets received
  uint64_t cnps_sent = 0;
  uint64_t cnps_received = 0;
  uint64_t cnps_ignored = 0;   // unknown QP, not RC, not connected, wrong P_Key or source, no DCQCN
  uint64_t paced = 0;          // times a QP waited for its pacer
  uint64_t farewell_acks = 0;  // re-sent last ACKs of destroyed RC QPs
  uint64_t port_budget_waits = 0;  // times a requester waited for the port's in-flight budget
  uint64_t loopback_frames = 0;    // frames to our own MAC, received without the port
  uint64_t loopback_waits = 0;     // times such frames waited for room in the loopback ring
  // The longest time between two polls, in microseconds: how long the engine did not run (its
  // thread descheduled, an application that drove it inline and stopped). A peer's local ACK
  // timeout shorter than this can expire with nothing lost.
  // (Counted after a poll that found work or with a timer armed: an idle engine sleeps.)
  uint64_t longest_poll_gap_us = 0;
  uint64_t stalls = 0;                  // gaps between polls of at least EngineConfig::stall_ns
  uint64_t stall_restarted_timers = 0;  // local ACK timers that expired in a stall, restarted
};

// Asynchronous events (ibv_event_type values).
enum class AsyncEventType : uint8_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kSqDrained = 5,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
};
struct AsyncEvent {
  AsyncEventType type;
  uint32_t id;  // QPN, CQN or SRQN
};

struct AddressHandle {
  AhAttr attr{};
  wire::PathSpec path{};
  uint32_t pd = 0;
  bool path_ready = false;
  bool unreachable = false;  // the destination did not resolve: datagrams are dropped meanwhile
  bool in_use = false;
};

class Engine {
 public:
  Engine(const EngineConfig& cfg, PacketIo* io, const Clock* clock);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return cfg_; }
  const EngineCounters& counters() const { return ctr_; }
  // Unacknowledged PSNs of the port's RC requesters (what port_inflight_psns bounds).
  uint32_t port_inflight() const { return port_inflight_; }
  DoorbellSet& doorbells() { return doorbells_; }
  Mtu active_mtu() const { return active_mtu_; }
  NeighborTable& neighbors() { return neighbors_; }

  // --- control path (engine_control.cc); errno-style results ---
  uint32_t alloc_pd();
  int dealloc_pd(uint32_t pd);
  int reg_mr(uint32_t pd, void* addr, uint64_t length, uint64_t iova, uint32_t access,
             uint32_t* key);
  int dereg_mr(uint32_t key);
  // Changes a registered region's PD, translation and access in place (its key stays).
  int rereg_mr(uint32_t key, uint32_t pd, void* addr, uint64_t length, uint64_t iova,
               uint32_t access);
  const MrTable& mrs() const { return mrs_; }
  CompletionQueue* create_cq(uint32_t depth, int* err);
  int destroy_cq(CompletionQueue* cq);
  SharedReceiveQueue* create_srq(uint32_t pd, uint32_t max_wr, uint32_t max_sge, int* err);
  int destroy_srq(SharedReceiveQueue* srq);
  Qp* create_qp(const QpInitAttr& init, int* err);
  int destroy_qp(Qp* qp);
  int modify_qp(Qp* qp, const QpAttr& attr, uint32_t mask);
  int query_qp(const Qp* qp, QpAttr* attr) const;
  Qp* qp(uint32_t qpn) const { return qpn < qps_.size() ? qps_[qpn].get() : nullptr; }
  int create_ah(uint32_t pd, const AhAttr& attr, uint32_t* ah);
  int destroy_ah(uint32_t ah);
  // Pops the oldest asynchronous event (any thread).
  std::optional<AsyncEvent> next_async_event();

  // --- datapath (engine.cc) ---
  // One iteration. Returns true if it did any work (received, sent, built output, or fired a
  // timer); frames that wait because the port takes none count as no work.
  bool poll();
  // Earliest armed timer deadline (ns), UINT64_MAX if none. For simulators and idle sleep.
  uint64_t next_timer_ns() const { return timers_.next_deadline_ns(); }
  // Whether any QP has output waiting, or looped-back frames wait to be received (a simulator
  // must not skip time then, nor call the wire empty).
  bool has_pending_output() const { return req_head_ || resp_head_ || n_txq_ || n_loop_; }

  // Observes every RoCE frame received (tx=false) and sent (tx=true): capture files.
  using Tap = void (*)(void* ctx, const uint8_t* frame, uint32_t len, bool tx, uint64_t now_ns);
  void set_tap(Tap tap, void* ctx) {
    tap_ = tap;
    tap_ctx_ = ctx;
  }
  // Handles frames that are not RoCEv2 (ARP, ICMP, ND). Owning thread.
  using NetHandler = void (*)(void* ctx, const wire::PacketInfo& info, wire::ParseError why);
  void set_net_handler(NetHandler h, void* ctx) {
    net_handler_ = h;
    net_ctx_ = ctx;
  }
  // Periodic work on the engine thread (neighbour probes): called when its deadline passes;
  // returns the next deadline (UINT64_MAX: none).
  using Periodic = uint64_t (*)(void* ctx, uint64_t now_ns);
  void set_periodic(Periodic fn, void* ctx) {
    periodic_ = fn;
    periodic_ctx_ = ctx;
    next_periodic_ = 0;
  }
  // The counters of the QPs destroyed so far, summed, and how many: what a program that has
  // closed its QPs did on the wire (control path: counters).
  const QpCounters& destroyed_qp_counters() const { return destroyed_ctr_; }
  uint64_t destroyed_qps() const { return destroyed_qps_; }
  // Visits every QP (control path: counters, tools).
  template <typename F>
  void for_each_qp(F&& f) const {
    for (const auto& q : qps_) {
      if (q) f(*q);
    }
  }
  // Sends a raw frame (neighbour protocol replies): copies it into a tx buffer.
  bool send_raw(const uint8_t* frame, uint32_t len);
  // A neighbour resolved: QPs and AHs waiting for this address build their paths.
  void on_neighbor_resolved(const Gid& ip);
  void on_neighbor_failed(const Gid& ip);
  uint64_t now_ns() const { return now_; }
  // The port's in-flight budget in force (EngineConfig::port_inflight_psns, within half the
  // port's receive ring; 0: none).
  uint32_t port_inflight_budget() const { return cfg_.port_inflight_psns; }
  // DCQCN's line rate (EngineConfig::dcqcn.line_gbps) moves to `gbps` (> 0; others are ignored):
  // the port's link came up at, or moved to, another speed. QPs reaching RTR from now on start
  // at it, and DCQCN QPs already there move to it (cc::DcqcnRp::set_line_rate). Owning thread.
  void set_line_rate(double gbps);
  double line_rate_gbps() const { return cfg_.dcqcn.line_gbps; }

 private:
  friend class EngineTestPeer;
  // engine.cc
  void handle_rx(const PktBuf& b);
  // Whether the packet's destination IP is one of the port's GIDs (a UD datagram's check).
  bool dst_is_ours(const wire::PacketInfo& info) const;
  bool is_own_gid(const Gid& gid) const;
  bool check_path(const Qp& qp, const wire::PacketInfo& info);
  PktBuf* tx_buf();
  // Where a frame's payload goes in `b`, behind `hdr_len` bytes of headers: on a 32-byte
  // boundary when the payload is large enough for the one-pass copy and the buffer has room.
  uint8_t* begin_frame(PktBuf* b, uint32_t hdr_len, uint32_t payload_len = 0);
  // A frame around `payload` on the QP's path (its header template), or on `path` (a UD
  // datagram's address handle).
  void finish_frame(PktBuf* b, Qp& qp, uint8_t* payload, uint32_t len, const wire::BthFields& bth,
                    const wire::ExtHeaders& ext);
  void finish_frame(PktBuf* b, Qp& qp, wire::PathSpec& path, uint8_t* payload, uint32_t len,
                    const wire::BthFields& bth, const wire::ExtHeaders& ext);
  // A data frame of `len` payload bytes on the QP's path, which fill(dst, crc) puts at `payload`
  // (chaining them into *crc when crc is not null); false, with nothing queued, if fill fails.
  // Payloads of kOnePassMin bytes and more are built headers first: the payload is then copied
  // in and CRCed in the same pass (wire::crc32_copy), one pass over it instead of a copy and
  // then a CRC. Smaller ones are copied, then built around (the short-frame ICRC is faster).
  static constexpr uint32_t kOnePassMin = 256;
  template <typename Fill>
  bool build_data_frame(PktBuf* b, Qp& qp, uint8_t* payload, uint32_t len,
                        const wire::BthFields& bth, const wire::ExtHeaders& ext, Fill&& fill) {
    if (len < kOnePassMin) {
      if (!fill(payload, nullptr)) return false;
      finish_frame(b, qp, payload, len, bth, ext);
      return true;
    }
    uint32_t crc = 0;
    uint8_t* frame = wire::build_headers(payload, len, qp.l2l4_, qp.path_.traffic_class, ip_id_++,
                                         bth, ext, &crc);
    if (!fill(payload, &crc)) return false;
    queue_frame(b, qp, frame, wire::finish_icrc(frame, payload, len, crc));
    return true;
  }
  void queue_frame(PktBuf* b, Qp& qp, uint8_t* frame, uint32_t frame_len);
  // A build_data_frame fill's copy: `n` bytes into the frame, CRCed on the way when `crc` is set.
  static void copy_payload(uint8_t* dst, const uint8_t* src, uint32_t n, uint32_t* crc) {
    if (crc) {
      *crc = wire::crc32_copy(*crc, dst, src, n);
    } else if (n) {
      std::memcpy(dst, src, n);
    }
  }
  bool tx_room() const { return n_txq_ < kTxqCap - 1; }
  void flush_tx();
  // Moves the frames of txq_ addressed to our own MAC to loop_; returns how many of those left
  // at its front may go to the port (the rest wait: loop_ was full).
  uint32_t divert_loopback();
  // Receives the frames flush_tx looped back, as if they came from the port.
  void deliver_loopback();
  void fire_timer(TimerNode& n);
  void schedule_req(Qp& qp);
  void schedule_resp(Qp& qp);
  void note_poll_gap(uint64_t gap);
  void run_output();
  // The port's in-flight budget. charge_port brings the QP's share of port_inflight_ up to
  // date (its unacknowledged PSNs; none unless it can send); every way into a QP's requester
  // state ends with it: the requester, responses, timers, state changes and destroy.
  // PSNs the budget has left (UINT32_MAX without one).
  uint32_t port_room() const {
    if (cfg_.port_inflight_psns == 0) return UINT32_MAX;
    return port_inflight_ >= cfg_.port_inflight_psns ? 0 : cfg_.port_inflight_psns - port_inflight_;
  }
  bool port_budget_full() const { return port_room() == 0; }
  void charge_port(Qp& qp, bool gone = false);
  void wait_port_budget(Qp& qp);
  // A QP waits for the budget and the budget has room for it.
  bool budget_waiter_ready() const { return budget_head_ && !port_budget_full(); }
  // Packets between AckReqs. Only an ACK makes room in the budget, and a responder answers
  // only packets that ask (AckReq): with every QP's share of the budget sent without asking, the
  // port would wait for the local ACK timeout. So each QP asks at least every half of its share
  // (at most every ack_req_every packets, as without the budget), and the packet that fills the
  // budget always asks (req_send_packet).
  uint32_t ack_req_interval() const {
    if (cfg_.port_inflight_psns == 0) return cfg_.ack_req_every;
    const uint32_t share = cfg_.port_inflight_psns / (2 * std::max(1u, port_qps_charged_));
    return std::clamp(share, 1u, cfg_.ack_req_every);
  }
  void push_cqe(CompletionQueue* cq, const Cqe& c, bool solicited, Qp* qp);
  // A completion written in place (the datapath's own: see CompletionQueue::push_begin):
  // cqe_begin gives a cleared slot, or nullptr if the CQ is full; cqe_commit publishes it, or
  // handles the overflow when the slot was nullptr.
  Cqe* cqe_begin(CompletionQueue* cq) {
    Cqe* d = cq->push_begin();
    if (d) *d = Cqe{};
    return d;
  }
  void cqe_commit(CompletionQueue* cq, Cqe* d, bool solicited, Qp* qp) {
    if (d) {
      cq->push_commit(solicited);
    } else {
      cq_overflow(cq, qp);
    }
  }
  void cq_overflow(CompletionQueue* cq, Qp* qp);
  // cqe_begin on the send CQ, filled with the completion of `w` with status `st`.
  Cqe* begin_send_cqe(Qp& qp, const SendWqe& w, WcStatus st);
  void raise_event(AsyncEventType t, uint32_t id);

  // engine_control.cc
  int validate_modify(const Qp& qp, const QpAttr& a, uint32_t mask, QpState cur, QpState next);
  bool build_path(const AhAttr& ah, uint32_t local_qpn, uint32_t remote_qpn, wire::PathSpec* path,
                  bool* ready);
  void reset_qp_state(Qp& qp);
  void set_state(Qp& qp, QpState s);
  // Moves the QP to ERR and flushes both queues (IBA 10.3.1: error state); a QP on an SRQ
  // then raises Last WQE Reached.
  void qp_error(Qp& qp);
  // After a send completed in error (IBA 10.3.1): an RC QP goes to ERR; a UD or UC QP goes to
  // SQE, where its send queue is flushed and its receive queue goes on.
  void send_queue_error(Qp& qp);
  // Completes what the QP holds with WR_FLUSH_ERR: at the move to ERR, and on each doorbell in
  // ERR.
  void flush_qp(Qp& qp);
  // The send queue's part of flush_qp: at the move to SQE, and on each doorbell in SQE.
  void flush_sq(Qp& qp);

  // congestion.cc
  void cc_setup(Qp& qp);  // at RTR: starts the RP and the NP
  // Whether a pacer (DCQCN's, the QP's rate limit) holds the QP: false, and a timer wakes it.
  // The check for an unpaced QP is inline: it is made for every packet sent.
  static bool paced(const Qp& qp) { return qp.cc_.kind == CcKind::kDcqcn || qp.cc_.limited; }
  bool cc_may_send(Qp& qp) { return !paced(qp) || cc_pacers_allow(qp); }
  bool cc_pacers_allow(Qp& qp);
  uint64_t cc_tx_time(const Qp& qp) const;
  void repace(Qp& qp);
  void cc_set_limit(Qp& qp);
  uint32_t largest_data_frame(const Qp& qp) const;
  void cc_on_sent(Qp& qp, uint32_t frame_len) {
    if (paced(qp)) cc_charge(qp, frame_len);
  }
  void cc_charge(Qp& qp, uint32_t frame_len);
  void cc_on_ce(Qp& qp);  // a CE-marked packet arrived for this QP
  void cc_on_cnp(Qp& qp);
  void cc_timer(Qp& qp);
  void send_cnp(Qp& qp);

  // requester.cc
  bool req_step(Qp& qp, uint32_t budget);  // true while the QP has more to send
  bool req_can_start(Qp& qp, const SendWqe& w);
  bool req_send_packet(Qp& qp, SendWqe& w, SendSlot& slot);
  uint32_t read_request_psns(Qp& qp, const SendWqe& w, SendSlot& slot);
  void req_rewind(Qp& qp, uint32_t psn);
  bool ud_send(Qp& qp, SendWqe& w);
  // Copies the WQE's bytes [offset, offset + len) to dst; with `crc`, chains them into *crc.
  bool gather(Qp& qp, const SendWqe& w, uint32_t offset, uint8_t* dst, uint32_t len, WcStatus* err,
              uint32_t* crc = nullptr);

  // completer.cc
  void comp_handle(Qp& qp, const wire::PacketInfo& info);
  void comp_ack_upto(Qp& qp, uint32_t psn);  // completes SEND/WRITE WQEs with last PSN <= psn
  void reset_retry_budgets(Qp& qp);
  void fail_unresolved(Qp& qp);
  void comp_complete_head(Qp& qp, WcStatus st);
  void comp_error(Qp& qp, WcStatus st);
  void comp_timeout(Qp& qp);
  void comp_rnr_expired(Qp& qp);
  void comp_progress(Qp& qp);
  void note_drained(Qp& qp);  // SQD: raises SQ Drained once nothing is under way
  void arm_retransmit(Qp& qp);
  void rearm_retransmit(Qp& qp);
  void stop_retransmit(Qp& qp);
  bool gap_retry_allowed(Qp& qp);
  bool scatter_read(Qp& qp, const SendWqe& w, uint32_t offset, const uint8_t* src, uint32_t len);

  // responder.cc
  void uc_abandon(Qp& qp);
  void uc_drop_message(Qp& qp);
  void resp_not_ready(Qp& qp, uint32_t psn);
  void resp_handle(Qp& qp, const wire::PacketInfo& info);
  void resp_duplicate(Qp& qp, const wire::PacketInfo& info);
  void resp_push_ack(Qp& qp, uint8_t syndrome, uint32_t psn);
  void send_ack_now(Qp& qp, uint8_t syndrome, uint32_t psn);
  void resp_farewell(Qp& qp);
  void resp_fatal(Qp& qp, wire::NakCode code, uint32_t psn, WcStatus recv_status);
  void resp_enter_error(Qp& qp, wire::NakCode code, WcStatus recv_status);
  bool resp_take_wqe(Qp& qp);
  bool resp_scatter(Qp& qp, const uint8_t* src, uint32_t len);
  void resp_complete_recv(Qp& qp, const wire::PacketInfo& info, WcStatus st, bool write_imm);
  bool resp_step(Qp& qp, uint32_t budget);  // emits queued responses; true while more remain
  RespOut* resp_out_push(Qp& qp);
  void ud_receive(Qp& qp, const wire::PacketInfo& info);

  EngineConfig cfg_;
  PacketIo* io_;
  const Clock* clock_;
  uint64_t now_ = 0;
  bool busy_ = false;            // the last poll found work
  bool stalled_ = false;         // this poll ends a stall (EngineConfig::stall_ns)
  uint64_t gap_watch_ns_ = 0;    // a longer gap between polls goes to note_poll_gap
  uint64_t longest_gap_ns_ = 0;  // EngineCounters::longest_poll_gap_us, in ns
  uint64_t poll_seq_ = 0;        // polls so far (plain ACKs wait for the poll after their own)
  NotifyBatch notify_batch_;     // the CQ events of the poll under way, raised at its end
  Mtu active_mtu_ = Mtu::k1024;
  uint16_t rx_vid_ = 0;  // the VID received frames may carry besides 0 (EngineConfig::vlan)
  EngineCounters ctr_{};
  QpCounters destroyed_ctr_{};
  uint64_t destroyed_qps_ = 0;
  MrTable mrs_;
  NeighborTable neighbors_;
  TimerWheel timers_;
  DoorbellSet doorbells_;

  std::vector<std::unique_ptr<Qp>> qps_;
  uint32_t next_qpn_ = 0x11;
  std::vector<std::unique_ptr<CompletionQueue>> cqs_;
  std::vector<std::unique_ptr<SharedReceiveQueue>> srqs_;
  std::vector<AddressHandle> ahs_;
  std::vector<uint32_t> pd_users_;  // index = PD number; UINT32_MAX = free
  uint16_t ip_id_ = 0;

  // Output scheduling: FIFO lists of QPs with work (intrusive).
  Qp* req_head_ = nullptr;
  Qp* req_tail_ = nullptr;
  Qp* resp_head_ = nullptr;
  Qp* resp_tail_ = nullptr;
  // The port's in-flight budget: PSNs counted, and the QPs waiting for room (FIFO).
  uint32_t port_inflight_ = 0;
  uint32_t port_qps_charged_ = 0;  // QPs with unacknowledged PSNs
  Qp* budget_head_ = nullptr;
  Qp* budget_tail_ = nullptr;

  // tx buffers.
  static constexpr uint32_t kTxqCap = 256;
  static constexpr uint32_t kSpareCap = 64;
  PktBuf txq_[kTxqCap];
  uint32_t n_txq_ = 0;
  PktBuf spare_[kSpareCap];
  uint32_t n_spare_ = 0;
  PktBuf rx_[256];
  // Frames to this port's own MAC (loopback: a QP connected to another QP of this port, a UD
  // datagram to one of its GIDs), taken out of txq_ by flush_tx and received at the next poll.
  static constexpr uint32_t kLoopCap = 512;
  PktBuf loop_[kLoopCap];
  uint32_t n_loop_ = 0;
  bool loopback_used_ = false;  // a path or AH has led to our own GID: flush_tx looks for it

  Tap tap_ = nullptr;
  void* tap_ctx_ = nullptr;
  NetHandler net_handler_ = nullptr;
  void* net_ctx_ = nullptr;
  Periodic periodic_ = nullptr;
  void* periodic_ctx_ = nullptr;
  uint64_t next_periodic_ = 0;

  std::mutex events_mu_;  // async events only: rare, never per packet
  std::deque<AsyncEvent> events_;
};

// Timer kinds (TimerNode::kind).
enum TimerKind : uint8_t { kTimerRetransmit = 1, kTimerRnr = 2, kTimerPace = 3, kTimerCc = 4 };

}  // namespace roce
