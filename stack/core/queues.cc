#include "stack/core/queues.h"

#include <cstring>

#include "stack/util/asym_barrier.h"

namespace roce {

int fill_recv_wqe(const RecvWr& wr, uint32_t max_sge, RecvWqe* w) {
  if (wr.num_sge > max_sge) return EINVAL;
  uint64_t total = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
  if (total > kMaxMsgSize) return EINVAL;
  w->wr_id = wr.wr_id;
  w->num_sge = wr.num_sge;
  w->length = static_cast<uint32_t>(total);
  if (wr.num_sge) std::memcpy(w->sges(), wr.sg_list, wr.num_sge * sizeof(Sge));
  return 0;
}

// --- CompletionQueue ---
bool CompletionQueue::init(uint32_t cqn, uint32_t depth) {
  cqn_ = cqn;
  depth_ = depth;
  fenced_.store(!asym_barrier::available(), std::memory_order_relaxed);
  return ring_.init(depth, sizeof(Cqe));
}

void CompletionQueue::arm(bool solicited_only) {
  armed_.store(solicited_only ? kArmedSolicited : kArmedAny, std::memory_order_release);
  if (fenced_.load(std::memory_order_relaxed)) {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with push_commit()'s
    return;
  }
  // The first arm. A push that did not fence either had its publish made visible by the
  // barrier membarrier runs on its thread (and the caller's poll after this sees it), or reads
  // armed_ after that barrier, when the store above is visible (and notifies). A push that
  // reads fenced_ after the barrier sees it set and fences, as arm() does from now on.
  fenced_.store(true, std::memory_order_relaxed);
  asym_barrier::heavy();
}

uint32_t CompletionQueue::discard_qp(uint32_t qpn) {
  const uint32_t prod = ring_.prod_local();
  uint32_t kept = ring_.cons_local();
  for (uint32_t i = kept; i != prod; ++i) {
    const Cqe* c = ring_.at<Cqe>(i);
    if (c->qp_num == qpn) continue;
    if (kept != i) *ring_.at<Cqe>(kept) = *c;
    ++kept;
  }
  ring_.publish(kept);
  return prod - kept;
}

int CompletionQueue::resize(uint32_t depth) {
  if (depth == 0 || depth > kMaxCqe || depth < pending()) return EINVAL;
  if (!ring_.resize(depth)) return ENOMEM;
  depth_ = depth;
  return 0;
}

int CompletionQueue::poll(Cqe* out, int n) {
  return poll_each(n, [&out](const Cqe& c) { *out++ = c; });
}

void CompletionQueue::push_commit(bool solicited) {
  const uint32_t prod = ring_.prod_local();
  ring_.publish(prod + 1);
  // Store-load ordering against arm(): either the consumer's poll after arming sees this
  // completion, or this load sees the armed flag. Release/acquire alone lets both miss. Until
  // the CQ is first armed, that arm()'s membarrier stands in for the fence.
  if (fenced_.load(std::memory_order_relaxed)) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    asym_barrier::light();
  }
  // A solicited arm is also satisfied by an unsuccessful completion (IBA 11.4.2.2;
  // ibv_req_notify_cq(3): "A CQE is solicited if it is a receive completion for a message with
  // the Solicited Event header bit set, or if the status is not successful"), so a program that
  // waits for solicited completions learns of errors and flushes. Producers pass `solicited`
  // for the header bit only; the status is read here, and only under a solicited arm. The slot
  // may still be read: the consumer never writes it, and only this thread refills it.
  const uint8_t armed = armed_.load(std::memory_order_acquire);
  if (armed == kArmedAny || (armed == kArmedSolicited &&
                             (solicited || ring_.at<Cqe>(prod)->status != WcStatus::kSuccess))) {
    if (armed_.exchange(kDisarmed, std::memory_order_acq_rel) != kDisarmed && notify_) {
      if (!batch_ || !batch_->open) {
        notify_(notify_ctx_, this);
      } else if (!held_) {  // (armed again meanwhile: one event for both)
        held_ = true;
        next_held_ = nullptr;
        (batch_->tail ? batch_->tail->next_held_ : batch_->head) = this;
        batch_->tail = this;
      }
    }
  }
}

void NotifyBatch::deliver() {
  while (CompletionQueue* cq = head) {
    head = cq->next_held_;
    cq->held_ = false;
    cq->notify_(cq->notify_ctx_, cq);
  }
  tail = nullptr;
}

// --- SharedReceiveQueue ---
bool SharedReceiveQueue::init(uint32_t srqn, uint32_t pd, uint32_t max_wr, uint32_t max_sge) {
  srqn_ = srqn;
  pd_ = pd;
  max_wr_ = max_wr;
  max_sge_ = max_sge;
  return ring_.init(max_wr, recv_slot_bytes(max_sge));
}

int SharedReceiveQueue::post_recv(const RecvWr& wr) {
  if (ring_.free_slots() == 0) return ENOMEM;
  const uint32_t prod = ring_.prod_local();
  int rc = fill_recv_wqe(wr, max_sge_, ring_.at<RecvWqe>(prod));
  if (rc) return rc;
  ring_.publish(prod + 1);
  return 0;
}

bool SharedReceiveQueue::take(RecvWqe* out) {
  const uint32_t cons = ring_.cons_local();
  if (ring_.prod_acquire() == cons) return false;
  const RecvWqe* w = ring_.at<RecvWqe>(cons);
  std::memcpy(out, w, recv_slot_bytes(w->num_sge < max_sge_ ? w->num_sge : max_sge_));
  ring_.retire(cons + 1);
  return true;
}

bool SharedReceiveQueue::take_limit_event() {
  const uint32_t lim = limit_.load(std::memory_order_acquire);
  if (lim == 0 || available() >= lim) return false;
  uint32_t expected = lim;
  return limit_.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

}  // namespace roce
