// The records ranks write into each other's control region with RDMA WRITE, and its layout.
//
// Receiver advertises, sender writes: a receiver grants the next message of a peer by writing a
// GrantRecord {address, rkey, length, ...} into the grant ring that peer polls, in the peer's
// own registered memory (no receive WQE is spent on a grant, as NCCL's CTS FIFO). The sender
// writes the message there with one RDMA WRITE_WITH_IMM (imm = the grant's sequence), which
// consumes one zero-length receive at the receiver and tells it the message has landed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace roce::coll {

struct GrantRecord {
  uint64_t addr;
  uint32_t rkey;
  uint32_t len;    // the most the sender may write
  uint32_t seq;    // kSeqBit | (message number mod 2^31): never 0, so a zeroed slot is empty
  uint32_t sig;    // the operation the receiver is in (op_signature); the sender checks it
  uint32_t total;  // the bytes the receiver expects from this sender in the operation (mod 2^32)
  uint32_t check;  // a hash of the fields above: a record read half-written does not match
};
static_assert(sizeof(GrantRecord) == 32);

inline constexpr uint32_t kSeqBit = 0x80000000u;
inline uint32_t grant_seq(uint64_t message) {
  return kSeqBit | static_cast<uint32_t>(message & 0x7fffffffu);
}

inline uint32_t mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

inline uint32_t grant_check(const GrantRecord& g) {
  return mix32(g.addr ^ (uint64_t{g.rkey} << 32 | g.len) ^
               (uint64_t{g.seq} << 32 | g.sig) * 0x9e3779b97f4a7c15ull ^ g.total);
}

// A rank that gives up writes this to every other rank, so that all of them fail soon and name
// the same rank, instead of each waiting out its own timeout on a neighbour that is alive.
struct AbortRecord {
  uint32_t magic;  // kAbortMagic once written
  int32_t failed_rank;
  uint32_t kind;     // ErrorKind
  uint32_t check;    // mix32 of the fields above and the reason
  char reason[112];  // what the reporter saw, NUL-terminated
};
static_assert(sizeof(AbortRecord) == 128);
inline constexpr uint32_t kAbortMagic = 0xab0e7ed5u;
inline uint32_t abort_check(const AbortRecord& a) {
  uint64_t head = 0;
  for (int i = 0; i < 8; ++i) head = head << 8 | static_cast<uint8_t>(a.reason[i]);
  return mix32((uint64_t(uint32_t(a.failed_rank)) << 32 | a.kind) ^ head * 31);
}

// The control region of one rank: per peer, the grant ring that peer writes, its abort slot
// and a word its liveness probes write.
struct ControlLayout {
  uint32_t ranks;
  uint32_t slots;
  size_t ring_bytes() const { return size_t{slots} * sizeof(GrantRecord); }
  size_t ring(uint32_t from) const { return from * ring_bytes(); }
  size_t abort_slot(uint32_t from) const {
    return ranks * ring_bytes() + from * sizeof(AbortRecord);
  }
  size_t probe_word(uint32_t from) const {
    return ranks * (ring_bytes() + sizeof(AbortRecord)) + from * sizeof(uint64_t);
  }
  size_t bytes() const { return ranks * (ring_bytes() + sizeof(AbortRecord) + sizeof(uint64_t)); }
};

}  // namespace roce::coll
