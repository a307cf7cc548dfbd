// The progress loop: completions, failures, liveness probes and the stall timeout.
#include <arpa/inet.h>
#include <sched.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "collectives/transport.h"

namespace roce::coll {
namespace {

using Clock = std::chrono::steady_clock;

const char* wr_kind_name(WrKind k) {
  switch (k) {
    case WrKind::kData:
      return "data write";
    case WrKind::kGrant:
      return "grant write";
    case WrKind::kProbe:
      return "liveness probe";
    case WrKind::kAbort:
      return "abort notice";
    case WrKind::kRecv:
      return "receive";
  }
  return "work request";
}

std::string seconds(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

void Transport::poll() {
  if (failure_) throw *failure_;
  ibv_wc wc[32];
  const int n = ibv_poll_cq(cq_, 32, wc);
  if (n < 0) fail(Error(ErrorKind::kSystem, "ibv_poll_cq failed"));
  bool moved = false;
  for (int i = 0; i < n; ++i) moved |= dispatch(wc[i]);
  if (moved) {
    note_progress();
    idle_polls_ = 0;
  } else if (++idle_polls_ > 1024) {
    // Nothing for a while: give the core to the provider's threads and the other ranks, and
    // sleep once it has been long (a rank waiting on a slow peer must not burn a core).
    if (Clock::now() - last_progress_ > std::chrono::milliseconds(10)) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else {
      sched_yield();
    }
  }
  if ((++abort_scan_ & 15) == 0) check_aborts();
}

// Returns whether the operation moved: a probe answered by a live peer is not progress.
bool Transport::dispatch(const ibv_wc& wc) {
  const WrKind kind = wr_kind(wc.wr_id);
  const int q = static_cast<int>(wr_peer(wc.wr_id));
  if (q < 0 || q >= size_ || !peers_[q]) return false;
  Peer& p = *peers_[q];
  if (wc.status != IBV_WC_SUCCESS) {
    if (failure_ || kind == WrKind::kAbort) return false;  // flushed after we gave up
    std::string why = std::string(wr_kind_name(kind)) + " failed: " + ibv_wc_status_str(wc.status);
    if (wc.status == IBV_WC_RETRY_EXC_ERR) {
      why +=
          " (no acknowledgement within the local ACK timeout and retries: the rank is gone "
          "or unreachable)";
    }
    fail(Error(ErrorKind::kPeerFailed, "rank " + std::to_string(q) + ": " + why, q));
  }
  switch (kind) {
    case WrKind::kData:
      p.on_send_complete(wr_slot(wc.wr_id));
      break;
    case WrKind::kProbe:
      p.on_probe_complete();
      break;
    case WrKind::kGrant:
    case WrKind::kAbort:
      break;
    case WrKind::kRecv:
      uint32_t released = 0;
      if (!(wc.wc_flags & IBV_WC_WITH_IMM) || !p.on_arrival(ntohl(wc.imm_data), &released)) {
        fail(Error(ErrorKind::kMismatch,
                   "rank " + std::to_string(q) + " wrote a message this rank did not grant", q));
      }
      granted_bytes_ -= released;
      check_post(p.post_recvs(wr_qp(wc.wr_id), 1), "ibv_post_recv", q);
      return true;
  }
  return false;
}

void Transport::check_aborts() {
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const auto* slot = reinterpret_cast<const AbortRecord*>(control_ + layout_.abort_slot(q));
    if (__atomic_load_n(&slot->magic, __ATOMIC_ACQUIRE) != kAbortMagic) continue;
    AbortRecord a;
    std::memcpy(&a, slot, sizeof a);
    a.reason[sizeof a.reason - 1] = 0;
    if (a.check != abort_check(a)) continue;
    const bool about_us = a.failed_rank == rank_;
    std::string who = "rank " + std::to_string(q) + " gave up (";
    if (about_us) {
      who = "rank " + std::to_string(q) + " gave up on this rank (";
    } else if (a.failed_rank >= 0) {
      who = "rank " + std::to_string(a.failed_rank) + " failed (reported by rank " +
            std::to_string(q) + ": ";
    }
    const ErrorKind kind =
        a.kind <= uint32_t(ErrorKind::kMismatch) ? ErrorKind(a.kind) : ErrorKind::kPeerFailed;
    failure_ =
        Error(kind, who + a.reason + ")", a.failed_rank >= 0 && !about_us ? a.failed_rank : q);
    throw *failure_;
  }
}

void Transport::fail(const Error& e) {
  if (failure_) throw *failure_;
  failure_ = e;
  if (!connected_) throw e;
  // Tell everyone else, so each fails now and names the same rank.
  AbortRecord* notice = notice_;
  *notice = AbortRecord{kAbortMagic, e.peer(), uint32_t(e.kind()), 0, {}};
  std::strncpy(notice->reason, e.what(), sizeof notice->reason - 1);
  notice->check = abort_check(*notice);
  int posted = 0;
  for (int q = 0; q < size_; ++q) {
    // A dead peer gets none; a live one named by a timeout or a mismatch must learn of it too.
    const bool dead = q == e.peer() && e.kind() == ErrorKind::kPeerFailed;
    if (q != rank_ && !dead && peers_[q]->write_abort(notice, control_mr_->lkey) == 0) {
      ++posted;
    }
  }
  // Let the notices leave (a provider in inline mode moves them only while polled).
  const auto end = Clock::now() + std::chrono::milliseconds(200);
  ibv_wc wc[16];
  while (posted > 0 && Clock::now() < end) {
    const int n = ibv_poll_cq(cq_, 16, wc);
    if (n < 0) break;
    for (int i = 0; i < n; ++i) posted -= wr_kind(wc[i].wr_id) == WrKind::kAbort;
    if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  throw e;
}

void Transport::send_probes(const std::vector<int>& peers) {
  const void* src = probe_src_;
  for (int q : peers) {
    if (q != rank_ && !peers_[q]->probe_outstanding()) {
      check_post(peers_[q]->probe(src, control_mr_->lkey), "ibv_post_send(probe)", q);
    }
  }
}

void Transport::check_stall(const char* what, const std::vector<int>& peers) {
  // The clock is read on every 64th turn only: the wait loop turns far more often than the
  // probe interval and timeout need, and reading it each time cost 3 % of a rank's CPU.
  if ((++stall_checks_ & 63) != 0) return;
  const auto now = Clock::now();
  const auto idle = now - last_progress_;
  if (idle < options_.probe_interval) return;
  if (now - last_probe_ >= options_.probe_interval) {
    last_probe_ = now;
    send_probes(peers);
  }
  if (idle < options_.timeout) return;
  std::string list, silent;
  for (int q : peers) {
    list += (list.empty() ? "" : ", ") + std::to_string(q);
    if (peers_[q]->probe_outstanding()) silent += (silent.empty() ? "" : ", ") + std::to_string(q);
  }
  // A probe still unanswered means the timeout is shorter than the QPs' retries
  // (ROCE_COLL_IB_TIMEOUT x ROCE_COLL_RETRY_CNT): liveness is not known yet.
  const std::string why =
      silent.empty() ? ", which still acknowledge RDMA writes: alive but not in this operation (do "
                       "all ranks call the same collectives in the same order?)"
                     : "; no answer yet to liveness probes of rank " + silent +
                           " (the timeout is shorter than the QPs' retries)";
  fail(Error(ErrorKind::kTimeout,
             std::string(what) + ": no progress for " + seconds(idle) + " waiting on rank" +
                 (peers.size() > 1 ? "s " : " ") + list + why,
             peers.size() == 1 ? peers[0] : -1));
}

}  // namespace roce::coll
