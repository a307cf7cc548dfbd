// Work requests, completion queues and shared receive queues: what applications and the engine
// exchange, the way software exchanges WQEs and CQEs with a hardware NIC.
//
// Threading: the application side (post_*, poll) of one queue is single-producer or
// single-consumer; callers that post from several threads serialise per queue (the verbs shim
// does, with a per-queue lock). The engine side is touched by the engine's thread only.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "stack/core/types.h"
#include "stack/util/spsc_queue.h"

namespace roce {

// Device limits (reported by query_device; enforced at create and post time).
inline constexpr uint32_t kMaxSge = 16;
inline constexpr uint32_t kMaxInlineData = 512;
inline constexpr uint32_t kMaxQpWr = 16384;
inline constexpr uint32_t kMaxCqe = 1u << 20;
inline constexpr uint32_t kMaxMsgSize = 1u << 31;
inline constexpr uint8_t kMaxRdAtomic = 16;

// --- work requests (application input) ---
struct SendWr {
  uint64_t wr_id = 0;
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint8_t send_flags = 0;
  uint32_t imm_data = 0;  // network byte order (opaque), or the rkey for SEND_WITH_INV
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  // UD only.
  uint32_t ah = 0;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
};

// --- queue slots ---
// A send WQE in the send queue: this header, then num_sge Sge entries or `length` inline bytes.
struct SendWqe {
  uint64_t wr_id;
  uint64_t remote_addr;
  uint64_t compare_add;
  uint64_t swap;
  uint32_t rkey;
  uint32_t imm_data;
  uint32_t length;  // total payload bytes
  uint32_t ah;
  uint32_t remote_qpn;
  uint32_t remote_qkey;
  WrOpcode opcode;
  uint8_t flags;  // SendFlags
  uint8_t num_sge;
  uint8_t pad_[5];

  Sge* sges() { return reinterpret_cast<Sge*>(this + 1); }
  const Sge* sges() const { return reinterpret_cast<const Sge*>(this + 1); }
  uint8_t* inline_data() { return reinterpret_cast<uint8_t*>(this + 1); }
  const uint8_t* inline_data() const { return reinterpret_cast<const uint8_t*>(this + 1); }
  bool is_inline() const { return flags & kSendInline; }
};
static_assert(sizeof(SendWqe) == 64);

struct RecvWqe {
  uint64_t wr_id;
  uint32_t length;  // total capacity of the SGEs
  uint32_t num_sge;
  Sge* sges() { return reinterpret_cast<Sge*>(this + 1); }
  const Sge* sges() const { return reinterpret_cast<const Sge*>(this + 1); }
};
static_assert(sizeof(RecvWqe) == 16);

inline uint32_t send_slot_bytes(const QpCap& cap) {
  const uint32_t body = cap.max_send_sge * sizeof(Sge);
  return sizeof(SendWqe) + (body > cap.max_inline_data ? body : cap.max_inline_data);
}
inline uint32_t recv_slot_bytes(uint32_t max_sge) {
  return sizeof(RecvWqe) + max_sge * sizeof(Sge);
}

// Writes a receive WQE into slot `w`; 0 or an errno.
int fill_recv_wqe(const RecvWr& wr, uint32_t max_sge, RecvWqe* w);

// --- completion queue ---
class CompletionQueue;

// The completion notifications (CQ events) raised during one engine poll, held until the poll
// has put its output on the wire (Engine::poll). A notification wakes a thread blocked on a
// completion channel, and waking it may preempt the engine thread on its core: the ACKs this
// poll owes its peers would then wait, for milliseconds on a busy machine, while the woken
// application runs (and a peer that tears down on our answer aborts for the missing send
// completion of its last message). A NIC's ACKs do not wait for the host's scheduler.
// Engine side only.
struct NotifyBatch {
  bool open = false;  // notifications raised now are held
  CompletionQueue* head = nullptr;
  CompletionQueue* tail = nullptr;
  bool empty() const { return head == nullptr; }
  // Delivers the held notifications, oldest first; closes the batch.
  void fire() {
    open = false;
    if (head) [[unlikely]]
      deliver();
  }
  void deliver();
};

class CompletionQueue {
 public:
  using Notify = void (*)(void* ctx, CompletionQueue* cq);

  bool init(uint32_t cqn, uint32_t depth);
  uint32_t cqn() const { return cqn_; }
  uint32_t depth() const { return depth_; }

  // Application side: copies up to n completions out, returns how many.
  int poll(Cqe* out, int n);
  // The same, handing each completion to fn(const Cqe&) in place (no copy, no buffer).
  template <typename F>
  int poll_each(int n, F&& fn) {
    const uint32_t cons = ring_.cons_local();
    const uint32_t avail = ring_.prod_acquire() - cons;
    const uint32_t take = avail < static_cast<uint32_t>(n) ? avail : static_cast<uint32_t>(n);
    for (uint32_t i = 0; i < take; ++i) fn(*ring_.at<Cqe>(cons + i));
    if (take) ring_.retire(cons + take);
    return static_cast<int>(take);
  }
  // Requests a notification for the next completion (any, or solicited only: one with the
  // Solicited Event bit, or an unsuccessful one).
  // Arm, then poll: a completion pushed concurrently is either seen by that poll or notified.
  // Both sides store, then load the other's store (push: publish, then read armed_; arm: set
  // armed_, then poll), which needs a store-load barrier on each. A CQ that was never armed,
  // as every CQ of a program that only polls, spares push_commit() its fence: the first arm()
  // makes every thread of the process execute one instead (membarrier) and marks the CQ, and
  // pushes fence from then on.
  void arm(bool solicited_only);
  void set_notify(Notify fn, void* ctx) {
    notify_ = fn;
    notify_ctx_ = ctx;
  }
  // Engine side: notifications raised while `batch` is open join it (NotifyBatch).
  void set_notify_batch(NotifyBatch* batch) { batch_ = batch; }
  bool overflowed() const { return overflow_.load(std::memory_order_acquire); }
  // Any thread: armed, its notification not yet raised.
  bool armed() const { return armed_.load(std::memory_order_acquire) != kDisarmed; }
  // Application side: whether a poll would return a completion (nothing is taken).
  bool ready() const { return ring_.prod_acquire() != ring_.cons_local(); }

  // Engine side: false (and the CQ marked overflowed) if the queue is full.
  bool push(const Cqe& c, bool solicited) {
    Cqe* d = push_begin();
    if (!d) return false;
    *d = c;
    push_commit(solicited);
    return true;
  }
  // push() in two steps, for a producer that fills the slot in place: a Cqe filled field by
  // field in a local and then copied is loaded in wide pieces over its narrow stores, which
  // cannot be forwarded and wait for them to reach the cache. push_begin returns the slot
  // (nullptr, and the CQ marked overflowed, if the queue is full); push_commit publishes it.
  Cqe* push_begin() {
    if (ring_.free_slots() == 0) {
      overflow_.store(true, std::memory_order_release);
      return nullptr;
    }
    return ring_.at<Cqe>(ring_.prod_local());
  }
  void push_commit(bool solicited);
  uint32_t pending() const { return ring_.prod_local() - ring_.cons_local(); }
  // Both ends stopped (the engine's thread, with the application's polls held off): what a
  // provider does to its CQ under the CQ lock.
  // Drops every pending completion of QP `qpn`, the others kept in order; how many went. mlx5
  // cleans a QP's completions out of its CQs when the QP is reset or destroyed
  // (__mlx5_cq_clean), so a reused QP never meets its former flushes.
  uint32_t discard_qp(uint32_t qpn);
  // A new ring for `depth` completions holding the pending ones in order (ibv_resize_cq). As
  // rxe: EINVAL for a depth of 0, above kMaxCqe or below the completions pending; ENOMEM.
  // Nothing changes on failure.
  int resize(uint32_t depth);
  // Engine side, after an overflow: true the first time only (one CQ error event per CQ).
  bool take_overflow_report() { return !std::exchange(overflow_reported_, true); }

 private:
  static constexpr uint8_t kDisarmed = 0, kArmedSolicited = 1, kArmedAny = 2;
  SpscQueue ring_;
  uint32_t cqn_ = 0;
  uint32_t depth_ = 0;
  std::atomic<uint8_t> armed_{kDisarmed};
  // Set by the first arm(), or by init() where membarrier is not available: pushes fence.
  std::atomic<bool> fenced_{true};
  std::atomic<bool> overflow_{false};
  bool overflow_reported_ = false;  // engine side
  Notify notify_ = nullptr;
  void* notify_ctx_ = nullptr;
  NotifyBatch* batch_ = nullptr;  // engine side
  CompletionQueue* next_held_ = nullptr;
  bool held_ = false;  // in batch_, its notification not yet delivered
  friend struct NotifyBatch;
};

// --- shared receive queue ---
class SharedReceiveQueue {
 public:
  bool init(uint32_t srqn, uint32_t pd, uint32_t max_wr, uint32_t max_sge);
  uint32_t srqn() const { return srqn_; }
  uint32_t pd() const { return pd_; }
  uint32_t max_wr() const { return max_wr_; }
  uint32_t max_sge() const { return max_sge_; }
  // Application side.
  int post_recv(const RecvWr& wr);
  // Limit event: when fewer than `limit` WQEs remain, the engine raises IBV_EVENT_SRQ_LIMIT_REACHED
  // once and disarms (0 = disarmed).
  void set_limit(uint32_t limit) { limit_.store(limit, std::memory_order_release); }
  uint32_t limit() const { return limit_.load(std::memory_order_acquire); }

  // Engine side: copies the oldest WQE into `out` (capacity max_sge) and retires it.
  bool take(RecvWqe* out);
  uint32_t available() const { return ring_.prod_acquire() - ring_.cons_local(); }
  bool take_limit_event();

 private:
  SpscQueue ring_;
  uint32_t srqn_ = 0;
  uint32_t pd_ = 0;
  uint32_t max_wr_ = 0;
  uint32_t max_sge_ = 0;
  std::atomic<uint32_t> limit_{0};
};

}  // namespace roce
