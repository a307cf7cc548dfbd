// One peer of a communicator: the RC QP to it and the grant / message counters of both
// directions. Receiver side: grant() the peer's next message, arrivals() counts those that
// landed. Sender side: next_grant() reads the grant ring for our next message, send() writes it.
// Messages of each direction are numbered from 0 for the communicator's life; both ranks count
// the same way because they issue the same operations in the same order.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/records.h"

namespace roce::coll {

enum class WrKind : uint8_t { kData = 1, kGrant, kProbe, kAbort, kRecv };
inline uint64_t make_wr_id(WrKind k, uint32_t peer) { return uint64_t{uint8_t(k)} << 56 | peer; }
inline WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
inline uint32_t wr_peer(uint64_t id) { return static_cast<uint32_t>(id); }

struct RemoteRegion {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

class Peer {
 public:
  // `ring`: the grant ring in our control region that this peer writes; `outbox`: `slots`
  // records of local, registered staging for our grants to it (lkey `outbox_lkey`).
  Peer(int rank, ibv_qp* qp, uint32_t slots, const GrantRecord* ring, GrantRecord* outbox,
       uint32_t outbox_lkey);
  int rank() const { return rank_; }
  ibv_qp* qp() const { return qp_; }
  // Where our grant ring, abort slot and probe word sit in the peer's control region.
  void set_remote(RemoteRegion ring, RemoteRegion abort_slot, RemoteRegion probe_word) {
    remote_ring_ = ring, remote_abort_ = abort_slot, remote_probe_ = probe_word;
  }

  // --- receiver side
  bool can_grant() const { return grants_posted_ - arrivals_ < slots_; }
  // Grants message grants_posted(): the peer may write up to `len` bytes at addr / rkey.
  // Returns 0 or the errno of ibv_post_send.
  int grant(uint64_t addr, uint32_t rkey, uint32_t len, uint32_t sig, uint32_t total);
  uint64_t grants_posted() const { return grants_posted_; }
  uint64_t arrivals() const { return arrivals_; }
  // A WRITE_WITH_IMM landed; false if its immediate is not the message we expect. *granted:
  // the length its grant allowed (what it gives back to the receive budget).
  bool on_arrival(uint32_t imm, uint32_t* granted);
  int post_recvs(uint32_t n);

  // --- sender side
  // The grant for message sends_posted(), once the peer wrote it; nullptr until then.
  const GrantRecord* next_grant();
  // Writes message sends_posted() (len <= the grant's) from `src` into the grant's region.
  int send(const void* src, uint32_t lkey, uint32_t len, const GrantRecord& g);
  uint64_t sends_posted() const { return sends_posted_; }
  uint64_t sends_completed() const { return sends_completed_; }
  void on_send_complete() { ++sends_completed_; }

  // --- liveness and failure
  bool probe_outstanding() const { return probe_outstanding_; }
  int probe(const void* src, uint32_t lkey);
  void on_probe_complete() { probe_outstanding_ = false; }
  int write_abort(const AbortRecord* src, uint32_t lkey);

 private:
  int post_write(WrKind kind, const void* src, uint32_t lkey, uint32_t len, RemoteRegion to,
                 bool with_imm, uint32_t imm);

  int rank_;
  ibv_qp* qp_;
  uint32_t slots_;
  const GrantRecord* ring_;
  GrantRecord* outbox_;
  uint32_t outbox_lkey_;
  RemoteRegion remote_ring_, remote_abort_, remote_probe_;
  uint64_t grants_posted_ = 0, arrivals_ = 0;
  uint64_t sends_posted_ = 0, sends_completed_ = 0;
  GrantRecord current_{};              // the grant next_grant() read last
  std::vector<uint32_t> granted_len_;  // [message % slots]: the length of our grant for it
  bool current_valid_ = false;
  bool probe_outstanding_ = false;
};

}  // namespace roce::coll
