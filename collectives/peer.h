// One peer of a communicator: the RC QPs to it and the grant / message counters of both
// directions. Receiver side: grant() the peer's next message, arrivals() counts those that
// landed. Sender side: next_grant() reads the grant ring for our next message, send() writes it.
// Messages of each direction are numbered from 0 for the communicator's life; both ranks count
// the same way because they issue the same operations in the same order.
//
// Data may use several QPs (CommOptions::qps_per_peer): whole messages round robin, or each
// message split into pieces, one per QP, each a WRITE_WITH_IMM of its own so that each QP's
// notification follows its own data. Messages then land and complete out of order; arrivals()
// and sends_completed() count the messages done in order from the first, which is what the
// algorithms wait on. Grants, probes and abort notices use the control QP: the first data QP,
// or a QP of their own when grants have a traffic class of their own.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/config.h"
#include "collectives/peer_counters.h"
#include "collectives/records.h"

namespace roce::coll {

enum class WrKind : uint8_t { kData = 1, kGrant, kProbe, kAbort, kRecv };
// wr_id: kind (8 bits) | QP index (8) | message slot (16) | peer rank (32).
inline uint64_t make_wr_id(WrKind k, uint32_t peer, uint32_t qp = 0, uint32_t slot = 0) {
  return uint64_t{uint8_t(k)} << 56 | uint64_t{qp & 0xff} << 48 | uint64_t{slot & 0xffff} << 32 |
         peer;
}
inline WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline uint32_t wr_peer(uint64_t id) { return static_cast<uint32_t>(id); }
inline uint32_t wr_qp(uint64_t id) { return static_cast<uint32_t>(id >> 48) & 0xff; }
inline uint32_t wr_slot(uint64_t id) { return static_cast<uint32_t>(id >> 32) & 0xffff; }

// Split messages are cut into pieces of at least this many bytes: below it a piece's headers
// and completion cost more than the parallelism gives.
inline constexpr uint32_t kMinPiece = 4096;
// The pieces a message of `granted` bytes is cut into (both ends compute it from the grant).
inline uint32_t pieces_for(uint32_t granted, uint32_t qps, QpSpread spread) {
  if (spread == QpSpread::kRoundRobin || qps == 1) return 1;
  const uint32_t by_size = (granted + kMinPiece - 1) / kMinPiece;
  return by_size < 1 ? 1 : by_size < qps ? by_size : qps;
}

struct RemoteRegion {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

struct PeerQps {
  std::vector<ibv_qp*> data;  // 1..16
  ibv_qp* control = nullptr;  // data[0], or a QP of its own
};

class Peer {
 public:
  // `ring`: the grant ring in our control region that this peer writes; `outbox`: `slots`
  // records of local, registered staging for our grants to it (lkey `outbox_lkey`).
  Peer(int rank, PeerQps qps, const CommOptions& o, const GrantRecord* ring, GrantRecord* outbox,
       uint32_t outbox_lkey);
  int rank() const { return rank_; }
  const PeerQps& qps() const { return qps_; }
  // Where our grant ring, abort slot and probe word sit in the peer's control region.
  void set_remote(RemoteRegion ring, RemoteRegion abort_slot, RemoteRegion probe_word) {
    remote_ring_ = ring, remote_abort_ = abort_slot, remote_probe_ = probe_word;
  }

  // --- receiver side
  bool can_grant() const { return grants_posted_ - arrivals_ < window_; }
  // Grants message grants_posted(): the peer may write up to `len` bytes at addr / rkey.
  // Returns 0 or the errno of ibv_post_send.
  int grant(uint64_t addr, uint32_t rkey, uint32_t len, uint32_t sig, uint32_t total);
  uint64_t grants_posted() const { return grants_posted_; }
  uint64_t arrivals() const { return arrivals_; }
  // A WRITE_WITH_IMM landed; false if its immediate names no message granted and not yet
  // complete. *released: the granted length of the message it completed, else 0 (what goes
  // back to the receive budget).
  bool on_arrival(uint32_t imm, uint32_t* released);
  // Posts n receives on data QP `qp` (each WRITE_WITH_IMM consumes one on its QP).
  int post_recvs(uint32_t qp, uint32_t n);

  // --- sender side
  // The grant for message sends_posted(), once the peer wrote it and fewer than the window's
  // messages are unacknowledged; nullptr until then.
  const GrantRecord* next_grant();
  // Writes message sends_posted() (len <= the grant's) from `src` into the grant's region.
  int send(const void* src, uint32_t lkey, uint32_t len, const GrantRecord& g);
  uint64_t sends_posted() const { return sends_posted_; }
  uint64_t sends_completed() const { return sends_completed_; }
  // A data write of message slot `slot` completed.
  void on_send_complete(uint32_t slot);

  // --- liveness and failure
  bool probe_outstanding() const { return probe_outstanding_; }
  int probe(const void* src, uint32_t lkey);
  void on_probe_complete() { probe_outstanding_ = false; }
  int write_abort(const AbortRecord* src, uint32_t lkey);

  const PeerCounters& counters() const { return counters_; }

 private:
  int post_write(ibv_qp* qp, uint64_t wr_id, const void* src, uint32_t lkey, uint32_t len,
                 RemoteRegion to, bool with_imm, uint32_t imm);
  uint32_t pieces(uint32_t granted) const { return pieces_for(granted, nqps(), spread_); }
  uint32_t nqps() const { return static_cast<uint32_t>(qps_.data.size()); }

  // One message slot's state (index: message number mod slots).
  struct Slot {
    uint32_t granted = 0;      // receiver: the length its grant allowed
    uint32_t pieces_left = 0;  // receiver: pieces not landed; sender: writes not completed
    uint32_t sent = 0;         // sender: bytes written
  };

  int rank_;
  PeerQps qps_;
  uint32_t slots_, window_;
  QpSpread spread_;
  const GrantRecord* ring_;
  GrantRecord* outbox_;
  uint32_t outbox_lkey_;
  RemoteRegion remote_ring_, remote_abort_, remote_probe_;
  uint64_t grants_posted_ = 0, arrivals_ = 0;
  uint64_t sends_posted_ = 0, sends_completed_ = 0;
  std::vector<Slot> in_, out_;  // [message % slots]: receiving, sending
  uint64_t granted_bytes_ = 0, inflight_bytes_ = 0;
  uint64_t wait_since_ns_ = 0;  // when next_grant() started finding none (0: not waiting)
  GrantRecord current_{};       // the grant next_grant() read last
  bool current_valid_ = false;
  bool probe_outstanding_ = false;
  PeerCounters counters_;
};

}  // namespace roce::coll
