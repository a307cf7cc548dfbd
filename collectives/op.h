// One running operation's view of the transport: the moves every algorithm is made of (grant
// a region to a peer, write into a region a peer granted, wait), with the checks that catch
// ranks calling different collectives, and the registration of the user's buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/transport.h"
#include "collectives/types.h"

namespace roce::coll {

class Op {
 public:
  // `sig` identifies the operation (kind, type, op, root, its number); `total` is what the
  // peers compare: the bytes that move between each pair, the same on both sides.
  Op(Transport& t, std::string label, uint32_t sig);
  ~Op();
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  Transport& t;
  const int rank, size;
  const size_t chunk_bytes;

  Keys keys(const void* p, size_t n);
  // Grants peer q's next message: up to `len` bytes at dst (lkey/rkey `k`). False while q's
  // ring is full.
  bool try_grant(int q, void* dst, size_t len, Keys k, uint64_t total);
  // Writes `len` bytes from src into peer q's next granted region, once q granted it; false
  // until then. Throws Error(kMismatch) if q's grant is for another operation or size.
  bool try_send(int q, const void* src, size_t len, uint32_t lkey, uint64_t total);
  // One turn of the wait loop: completions, aborts, and the stall timeout (naming `waiting`).
  void progress(const std::vector<int>& waiting);
  // Waits until every send posted to each of `peers` has completed.
  void drain_sends(const std::vector<int>& peers);

  const std::string& label() const { return label_; }

 private:
  std::string label_;
  uint32_t sig_;
};

// The operation numbers that make signatures: the same on every rank for the same call.
enum class OpKind : uint8_t {
  kAllReduce = 1,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kBarrier,
  kSendRecv,
};
uint32_t op_signature(OpKind kind, DataType type, ReduceOp op, int root, uint64_t number);

// Elements [begin, end) of chunk j of a run of `len` elements cut into chunks of `per` elements.
struct Span {
  size_t begin, count;
};
inline Span chunk_of(size_t len, size_t per, size_t j) {
  const size_t b = j * per;
  return b >= len ? Span{len, 0} : Span{b, len - b < per ? len - b : per};
}
inline size_t chunks_for(size_t len, size_t per) { return (len + per - 1) / per; }
inline int mod(int a, int n) { return ((a % n) + n) % n; }

// A local copy of n bytes (none when n is 0, where the buffers may be null; overlap allowed).
inline void copy_local(void* dst, const void* src, size_t n) {
  if (n && dst != src) std::memmove(dst, src, n);
}

}  // namespace roce::coll
