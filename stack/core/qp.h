// A queue pair: its application side (post_send / post_recv into the work queues, then a
// doorbell) and its engine-private transport state (requester, completer, responder). The
// engine owns every field below "engine-private"; the application touches only the queues
// and reads the state shadow.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

#include "stack/cc/dcqcn.h"
#include "stack/core/queues.h"
#include "stack/core/types.h"
#include "stack/util/doorbell.h"
#include "stack/util/spsc_queue.h"
#include "stack/util/timer_wheel.h"
#include "stack/wire/builder.h"

namespace roce {

// Congestion control of a QP, chosen when it is created (IBA leaves it to the implementation;
// RoCE NICs run DCQCN per QP).
enum class CcKind : uint8_t { kEngineDefault, kNone, kDcqcn };

struct QpInitAttr {
  QpType type = QpType::kRc;
  CcKind cc = CcKind::kEngineDefault;
  uint32_t pd = 0;
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  SharedReceiveQueue* srq = nullptr;
  QpCap cap{};
  bool sq_sig_all = false;
  uint64_t user_context = 0;
};

// Per-QP counters (engine thread writes; readers tolerate torn snapshots).
struct QpCounters {
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t retransmitted_packets = 0;
  uint64_t retransmit_events = 0;  // go-back-N rewinds (NAK or timeout)
  uint64_t local_ack_timeouts = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t seq_naks_received = 0;
  uint64_t seq_naks_sent = 0;
  uint64_t error_naks_received = 0;  // invalid request / remote access / remote op
  uint64_t error_naks_sent = 0;
  uint64_t duplicate_requests = 0;
  uint64_t out_of_sequence = 0;
  uint64_t implicit_naks = 0;        // READ/atomic responses missing behind a later ACK
  uint64_t dropped_responses = 0;    // ghost / stale responses
  uint64_t uc_messages_dropped = 0;  // UC: incoming messages cut by a gap or refused
  uint64_t atomics_executed = 0;
  uint64_t cnps_received = 0;
  uint64_t cnps_sent = 0;
};

// sum += c, field by field (QpCounters is nothing but uint64_t counters): the engine keeps the
// sum of its destroyed QPs' counters.
inline void add_counters(QpCounters& sum, const QpCounters& c) {
  static_assert(sizeof(QpCounters) % sizeof(uint64_t) == 0 &&
                std::is_trivially_copyable_v<QpCounters>);
  constexpr size_t n = sizeof(QpCounters) / sizeof(uint64_t);
  uint64_t a[n], b[n];
  std::memcpy(a, &sum, sizeof a);
  std::memcpy(b, &c, sizeof b);
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
  std::memcpy(&sum, a, sizeof a);
}

// Engine-private state of one send-queue slot.
struct SendSlot {
  uint32_t first_psn = 0;
  uint32_t npkts = 0;     // PSNs the WQE consumes (a READ: its response packets)
  uint32_t read_end = 0;  // a READ: the PSN after the last response its latest request asks for
  bool started = false;
  WcStatus error = WcStatus::kSuccess;  // a local error found while sending it
};

// Responder output, in PSN order: ACK/NAKs, READ response streams, atomic ACKs.
struct RespOut {
  enum Kind : uint8_t { kAck, kRead, kAtomic };
  Kind kind = kAck;
  uint8_t syndrome = 0;  // ACK / NAK / RNR NAK syndrome
  uint32_t psn = 0;      // ACK: PSN acknowledged; READ: next response PSN
  uint32_t msn = 0;
  // READ stream.
  uint32_t rkey = 0;
  uint64_t va = 0;
  uint32_t remaining = 0;
  bool first = true;             // next response is the first of the stream
  bool whole = true;             // the stream covers the whole READ (FIRST/ONLY opcodes allowed)
  uint64_t orig = 0;             // atomic result
  uint64_t not_before_poll = 0;  // a plain ACK: the engine poll it may leave in
};

// Saved READ / atomic requests, for duplicates (IBA 9.7.5.1.5: re-execute READs, answer
// atomics from the saved result).
struct RdResource {
  enum Kind : uint8_t { kEmpty, kRead, kAtomic };
  Kind kind = kEmpty;
  uint32_t first_psn = 0;
  uint32_t last_psn = 0;
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint64_t orig = 0;
};

class Qp {
 public:
  Qp(uint32_t qpn, const QpInitAttr& init, DoorbellSet* doorbells);
  bool init_queues();  // false on allocation failure

  uint32_t qpn() const { return qpn_; }
  QpType type() const { return init_.type; }
  const QpInitAttr& init_attr() const { return init_; }
  QpState state() const { return state_shadow_.load(std::memory_order_acquire); }

  // --- application side ---
  // 0, or an errno: EINVAL (bad request for this QP, or wrong state), ENOMEM (queue full).
  int post_send(const SendWr& wr);
  int post_recv(const RecvWr& wr);
  // Posts several and rings the doorbell once; *bad gets the index of the first failure.
  int post_send_list(const SendWr* wrs, uint32_t n, uint32_t* bad);

  // --- engine-private (engine thread only) ---
  QpInitAttr init_;
  uint32_t qpn_;
  DoorbellSet* doorbells_;
  std::atomic<QpState> state_shadow_{QpState::kReset};
  SpscQueue sq_;
  SpscQueue rq_;
  std::unique_ptr<SendSlot[]> slots_;

  QpAttr attr_{};
  QpCounters counters_{};
  uint32_t mtu_ = 1024;
  // The path's headers and their template (made of path_ by set_path / set_dst_mac, the only
  // writers of path_ but its per-frame traffic_class and ipv4_id, which frames take from path_).
  wire::PathSpec path_{};
  wire::L2L4Template l2l4_{};
  void set_path(const wire::PathSpec& p) {
    path_ = p;
    l2l4_ = wire::make_l2l4_template(p);
  }
  void set_dst_mac(const wire::MacAddr& mac) {
    path_.dst_mac = mac;
    l2l4_ = wire::make_l2l4_template(path_);
  }
  bool path_ready_ = false;   // destination MAC resolved
  bool path_failed_ = false;  // ... and the neighbour agent gave up on it (on_neighbor_failed)

  // Requester + completer.
  struct Send {
    uint32_t head = 0;       // oldest WQE not completed (published to the app as sq_ consumer)
    uint32_t send = 0;       // WQE being sent / next to start
    uint32_t tail = 0;       // WQEs seen posted
    uint32_t offset = 0;     // bytes of WQE `send` already sent
    uint32_t psn = 0;        // next PSN to send
    uint32_t max_psn = 0;    // one past the highest PSN sent so far
    uint32_t comp_psn = 0;   // oldest PSN not acknowledged
    uint32_t rd_atomic = 0;  // READ/atomic WQEs started and not completed
    uint32_t noack_pkts = 0;
    uint8_t retry_left = 0;
    uint8_t rnr_retry_left = 0;
    bool rnr_wait = false;
    // Gap-triggered rewinds (missing READ responses, implicit NAKs) are spaced by a hold-off,
    // so the responses of the stream being replaced drain before the next one is asked for.
    // Each hold-off that ends with the last retry unanswered (comp_psn has not moved) doubles
    // the next, up to 64x: a peer slower than the hold-off is not flooded with re-requests;
    // the local ACK timeout still retransmits.
    uint64_t ack_deadline_ns = UINT64_MAX;  // the local ACK timeout, while armed
    uint64_t last_gap_retry_ns = 0;
    uint32_t gap_retry_psn = 0;  // comp_psn when the last gap retry was made
    uint8_t gap_backoff = 0;     // the hold-off is gap_holdoff_ns << gap_backoff
    bool gap_retried = false;
    bool gap_owed = false;       // a gap seen during the hold-off: retry when it ends
    bool active = false;         // on the engine's requester list
    bool drained_event = false;  // SQD: async event raised
    TimerNode retransmit{};
    TimerNode rnr{};
  } snd_;

  // Responder.
  struct Recv {
    uint32_t epsn = 0;
    uint32_t msn = 0;
    bool nak_sent = false;  // a sequence-error / RNR NAK is outstanding: drop until epsn
    bool uc_drop = false;   // UC: the message in progress was dropped: skip to a FIRST / ONLY
    // A fatal NAK (resp_fatal) waiting for the responses queued ahead of it to leave.
    bool fatal_pending = false;
    wire::NakCode fatal_code = wire::NakCode::kInvalidRequest;
    uint32_t fatal_psn = 0;
    WcStatus fatal_status = WcStatus::kSuccess;
    enum InMsg : uint8_t { kNone, kSend, kWrite } in_msg = kNone;
    bool have_wqe = false;
    uint32_t offset = 0;  // bytes received into the current message
    uint64_t write_va = 0;
    uint32_t write_rkey = 0;
    uint32_t write_remaining = 0;
    uint32_t write_len = 0;
    std::unique_ptr<uint8_t[]> wqe_buf;  // the receive WQE in use (copied out of RQ/SRQ)
    RdResource rd[kMaxRdAtomic];
    uint32_t rd_next = 0;
    static constexpr uint32_t kOutSize = 2 * kMaxRdAtomic + 4;
    RespOut out[kOutSize];
    uint32_t out_head = 0;
    uint32_t out_tail = 0;
    bool active = false;  // on the engine's responder list
    RecvWqe* wqe() { return reinterpret_cast<RecvWqe*>(wqe_buf.get()); }
  } rcv_;

  // Congestion control: the reaction point paces what this QP sends (requests, READ
  // responses); the notification point turns CE marks on what it receives into CNPs. A rate
  // limit (IBV_QP_RATE_LIMIT) paces the same frames at its own rate, under DCQCN's or alone.
  struct Cc {
    CcKind kind = CcKind::kNone;
    cc::DcqcnRp rp;
    cc::DcqcnNp np;
    bool limited = false;  // attr_.rate_limit != 0
    cc::Pacer limit;
    TimerNode pace{};   // the pacer allows the next packet
    TimerNode timer{};  // the RP's rate-increase / deferred-cut timer
  } cc_;
  uint8_t data_tclass_ = 0;  // traffic class of data packets (ECT when marking)
  uint8_t ctrl_tclass_ = 0;  // of ACKs, NAKs and CNPs

  // Intrusive links for the engine's schedule lists.
  Qp* next_req_ = nullptr;
  Qp* next_resp_ = nullptr;

  // The port's in-flight budget (EngineConfig::port_inflight_psns): the unacknowledged PSNs this
  // QP counts in the engine's total, and its place among the QPs waiting for room. Kept outside
  // snd_, which a reset clears, so that nothing the engine counted is lost.
  uint32_t port_charge_ = 0;
  bool budget_wait_ = false;
  Qp* next_budget_ = nullptr;
};

}  // namespace roce
