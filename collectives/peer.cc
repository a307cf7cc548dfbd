#include "collectives/peer.h"

#include <arpa/inet.h>

#include <cstring>

namespace roce::coll {

Peer::Peer(int rank, ibv_qp* qp, uint32_t slots, const GrantRecord* ring, GrantRecord* outbox,
           uint32_t outbox_lkey)
    : rank_(rank),
      qp_(qp),
      slots_(slots),
      ring_(ring),
      outbox_(outbox),
      outbox_lkey_(outbox_lkey),
      granted_len_(slots) {}

int Peer::post_write(WrKind kind, const void* src, uint32_t lkey, uint32_t len, RemoteRegion to,
                     bool with_imm, uint32_t imm) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(src), len, lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_wr_id(kind, static_cast<uint32_t>(rank_));
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = to.addr;
  wr.wr.rdma.rkey = to.rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp_, &wr, &bad);
}

int Peer::grant(uint64_t addr, uint32_t rkey, uint32_t len, uint32_t sig, uint32_t total) {
  const uint32_t slot = static_cast<uint32_t>(grants_posted_ % slots_);
  GrantRecord& g = outbox_[slot];
  g = GrantRecord{addr, rkey, len, grant_seq(grants_posted_), sig, total, 0};
  g.check = grant_check(g);
  const RemoteRegion to{remote_ring_.addr + slot * sizeof(GrantRecord), remote_ring_.rkey};
  if (int rc = post_write(WrKind::kGrant, &g, outbox_lkey_, sizeof g, to, false, 0)) return rc;
  granted_len_[slot] = len;
  ++grants_posted_;
  return 0;
}

bool Peer::on_arrival(uint32_t imm, uint32_t* granted) {
  if (imm != grant_seq(arrivals_)) return false;
  *granted = granted_len_[arrivals_ % slots_];
  ++arrivals_;
  return true;
}

int Peer::post_recvs(uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(WrKind::kRecv, static_cast<uint32_t>(rank_));
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(qp_, &wr, &bad)) return rc;
  }
  return 0;
}

// The peer's RDMA WRITE fills the record in an order no provider promises, so the record is
// taken only when its sequence is the one expected and its check matches the other fields.
const GrantRecord* Peer::next_grant() {
  if (current_valid_) return &current_;
  const GrantRecord& slot = ring_[sends_posted_ % slots_];
  const uint32_t want = grant_seq(sends_posted_);
  if (__atomic_load_n(&slot.seq, __ATOMIC_ACQUIRE) != want) {
    return nullptr;
  }
  std::memcpy(&current_, &slot, sizeof current_);
  if (current_.seq != want || current_.check != grant_check(current_)) return nullptr;
  current_valid_ = true;
  return &current_;
}

int Peer::send(const void* src, uint32_t lkey, uint32_t len, const GrantRecord& g) {
  if (int rc = post_write(WrKind::kData, src, lkey, len, {g.addr, g.rkey}, true, g.seq)) return rc;
  ++sends_posted_;
  current_valid_ = false;
  return 0;
}

int Peer::probe(const void* src, uint32_t lkey) {
  if (int rc = post_write(WrKind::kProbe, src, lkey, sizeof(uint64_t), remote_probe_, false, 0)) {
    return rc;
  }
  probe_outstanding_ = true;
  return 0;
}

int Peer::write_abort(const AbortRecord* src, uint32_t lkey) {
  return post_write(WrKind::kAbort, src, lkey, sizeof *src, remote_abort_, false, 0);
}

}  // namespace roce::coll
