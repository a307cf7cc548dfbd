#include "collectives/peer.h"

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace roce::coll {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

Peer::Peer(int rank, PeerQps qps, const CommOptions& o, const GrantRecord* ring,
           GrantRecord* outbox, uint32_t outbox_lkey)
    : rank_(rank),
      qps_(std::move(qps)),
      slots_(o.slots),
      window_(o.window()),
      spread_(o.qp_spread),
      ring_(ring),
      outbox_(outbox),
      outbox_lkey_(outbox_lkey),
      in_(o.slots),
      out_(o.slots) {}

int Peer::post_write(ibv_qp* qp, uint64_t wr_id, const void* src, uint32_t lkey, uint32_t len,
                     RemoteRegion to, bool with_imm, uint32_t imm) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(src), len, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = to.addr;
  wr.wr.rdma.rkey = to.rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

int Peer::grant(uint64_t addr, uint32_t rkey, uint32_t len, uint32_t sig, uint32_t total) {
  const uint32_t slot = static_cast<uint32_t>(grants_posted_ % slots_);
  GrantRecord& g = outbox_[slot];
  g = GrantRecord{addr, rkey, len, grant_seq(grants_posted_), sig, total, 0};
  g.check = grant_check(g);
  const RemoteRegion to{remote_ring_.addr + slot * sizeof(GrantRecord), remote_ring_.rkey};
  const uint64_t id = make_wr_id(WrKind::kGrant, static_cast<uint32_t>(rank_));
  if (int rc = post_write(qps_.control, id, &g, outbox_lkey_, sizeof g, to, false, 0)) return rc;
  in_[slot] = Slot{len, pieces(len), 0};
  ++grants_posted_;
  ++counters_.grants_sent;
  granted_bytes_ += len;
  counters_.peak_granted_bytes = std::max(counters_.peak_granted_bytes, granted_bytes_);
  return 0;
}

// Pieces of one message may land in any order across QPs, and messages on different QPs too:
// the immediate says which granted message a piece belongs to.
bool Peer::on_arrival(uint32_t imm, uint32_t* released) {
  *released = 0;
  if (!(imm & kSeqBit)) return false;
  const uint64_t ahead = (imm - grant_seq(arrivals_)) & 0x7fffffffu;
  if (ahead >= grants_posted_ - arrivals_) return false;
  Slot& s = in_[(arrivals_ + ahead) % slots_];
  if (s.pieces_left == 0) return false;  // that message is already complete
  if (--s.pieces_left == 0) {
    *released = s.granted;
    granted_bytes_ -= s.granted;
  }
  while (arrivals_ < grants_posted_ && in_[arrivals_ % slots_].pieces_left == 0) ++arrivals_;
  return true;
}

int Peer::post_recvs(uint32_t qp, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(WrKind::kRecv, static_cast<uint32_t>(rank_), qp);
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(qps_.data[qp], &wr, &bad)) return rc;
  }
  return 0;
}

// The peer's RDMA WRITE fills the record in an order no provider promises, so the record is
// taken only when its sequence is the one expected and its check matches the other fields.
const GrantRecord* Peer::next_grant() {
  if (sends_posted_ - sends_completed_ >= window_) return nullptr;
  if (current_valid_) return &current_;
  const GrantRecord& slot = ring_[sends_posted_ % slots_];
  const uint32_t want = grant_seq(sends_posted_);
  if (__atomic_load_n(&slot.seq, __ATOMIC_ACQUIRE) == want) {
    std::memcpy(&current_, &slot, sizeof current_);
    current_valid_ = current_.seq == want && current_.check == grant_check(current_);
  }
  if (!current_valid_) {
    if (wait_since_ns_ == 0) wait_since_ns_ = now_ns();
    return nullptr;
  }
  if (wait_since_ns_ != 0) {
    counters_.grant_wait_ns += now_ns() - wait_since_ns_;
    wait_since_ns_ = 0;
  }
  return &current_;
}

int Peer::send(const void* src, uint32_t lkey, uint32_t len, const GrantRecord& g) {
  const uint64_t m = sends_posted_;
  const uint32_t slot = static_cast<uint32_t>(m % slots_);
  const uint32_t n = pieces(g.len);
  // Even pieces, cut on 64-byte boundaries; the last takes the rest.
  const uint32_t step = ((len + n - 1) / n + 63) & ~63u;
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t off = std::min(len, i * step);
    const uint32_t piece = std::min(step, len - off);
    const uint32_t qp = n == 1 ? static_cast<uint32_t>(m % nqps()) : i;
    const uint64_t id = make_wr_id(WrKind::kData, static_cast<uint32_t>(rank_), qp, slot);
    if (int rc = post_write(qps_.data[qp], id, bytes + off, lkey, piece, {g.addr + off, g.rkey},
                            true, g.seq)) {
      return rc;
    }
  }
  out_[slot] = Slot{0, n, len};
  ++sends_posted_;
  current_valid_ = false;
  ++counters_.grants_received;
  counters_.bytes_sent += len;
  inflight_bytes_ += len;
  counters_.peak_inflight_bytes = std::max(counters_.peak_inflight_bytes, inflight_bytes_);
  return 0;
}

void Peer::on_send_complete(uint32_t slot) {
  if (slot >= slots_ || out_[slot].pieces_left == 0) return;
  --out_[slot].pieces_left;
  while (sends_completed_ < sends_posted_ && out_[sends_completed_ % slots_].pieces_left == 0) {
    inflight_bytes_ -= out_[sends_completed_ % slots_].sent;
    ++sends_completed_;
  }
}

int Peer::probe(const void* src, uint32_t lkey) {
  const uint64_t id = make_wr_id(WrKind::kProbe, static_cast<uint32_t>(rank_));
  if (int rc = post_write(qps_.control, id, src, lkey, sizeof(uint64_t), remote_probe_, false, 0)) {
    return rc;
  }
  probe_outstanding_ = true;
  return 0;
}

int Peer::write_abort(const AbortRecord* src, uint32_t lkey) {
  const uint64_t id = make_wr_id(WrKind::kAbort, static_cast<uint32_t>(rank_));
  return post_write(qps_.control, id, src, lkey, sizeof *src, remote_abort_, false, 0);
}

}  // namespace roce::coll
