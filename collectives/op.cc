#include "collectives/op.h"

namespace roce::coll {

uint32_t op_signature(OpKind kind, DataType type, ReduceOp op, int root, uint64_t number) {
  return mix32(uint64_t(kind) | uint64_t(type) << 8 | uint64_t(op) << 16 |
               uint64_t(uint16_t(root)) << 24 | number << 40);
}

Op::Op(Transport& transport, std::string label, uint32_t sig)
    : t(transport),
      rank(transport.rank()),
      size(transport.size()),
      chunk_bytes(transport.options().chunk_bytes),
      label_(std::move(label)),
      sig_(sig) {
  t.poll();  // a failed communicator fails every later call with its first error
  t.start_operation();
}

Op::~Op() { t.mrs().release_implicit(); }

Keys Op::keys(const void* p, size_t n) { return n ? t.mrs().keys(p, n) : Keys{}; }

bool Op::try_grant(int q, void* dst, size_t len, Keys k, uint64_t total) {
  Peer& p = t.peer(q);
  if (!p.can_grant() || !t.grant_fits(len)) return false;
  t.check_post(p.grant(reinterpret_cast<uintptr_t>(dst), k.rkey, static_cast<uint32_t>(len), sig_,
                       static_cast<uint32_t>(total)),
               "ibv_post_send(grant)", q);
  t.on_granted(len);
  return true;
}

bool Op::try_send(int q, const void* src, size_t len, uint32_t lkey, uint64_t total) {
  Peer& p = t.peer(q);
  const GrantRecord* g = p.next_grant();
  if (!g) return false;
  t.note_progress();
  if (g->sig != sig_) {
    t.fail(Error(ErrorKind::kMismatch,
                 label_ + ": rank " + std::to_string(q) +
                     " is in another collective, or in this one with another type, operation or "
                     "root (all ranks must issue the same collectives in the same order)",
                 q));
  }
  if (g->total != static_cast<uint32_t>(total) || len > g->len) {
    t.fail(Error(ErrorKind::kMismatch,
                 label_ + ": rank " + std::to_string(q) + " expects " + std::to_string(g->total) +
                     " bytes from this rank, which has " + std::to_string(total) +
                     " to send (the ranks' counts differ)",
                 q));
  }
  t.check_post(p.send(src, lkey, static_cast<uint32_t>(len), *g), "ibv_post_send(data)", q);
  return true;
}

void Op::progress(const std::vector<int>& waiting) {
  t.poll();
  t.check_stall(label_.c_str(), waiting);
}

void Op::drain_sends(const std::vector<int>& peers) {
  for (;;) {
    bool done = true;
    for (int q : peers) done &= t.peer(q).sends_completed() == t.peer(q).sends_posted();
    if (done) return;
    progress(peers);
  }
}

}  // namespace roce::coll
