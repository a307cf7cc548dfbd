#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"
#include "collectives/ring.h"

namespace roce::coll {

void all_reduce_ring(Op& op, const void* in, void* out, size_t count, DataType type, ReduceOp rop) {
  const size_t es = size_of(type);
  const uint64_t total = count * es;
  const Segments seg = even_segments(count, op.size);
  auto* o = static_cast<uint8_t*>(out);
  ring_reduce_scatter(op, static_cast<const uint8_t*>(in), seg, o + seg.off[op.rank] * es, type,
                      rop, total);
  ring_all_gather(op, o, seg, es, total);
}

namespace {

// One exchange of the whole buffer with `q`: q's copy lands in a scratch slot (or, with
// `into_out`, straight into out), ours goes to q. Returns where q's copy is.
const uint8_t* exchange(Op& op, int q, uint8_t* out, size_t bytes, Keys out_keys, bool send,
                        bool receive, bool into_out) {
  Keys sk;
  uint8_t* land = into_out ? out : op.t.scratch(q, &sk);
  Peer& p = op.t.peer(q);
  if (receive) {
    land += into_out ? 0 : (p.grants_posted() % op.t.options().slots) * op.chunk_bytes;
    while (!op.try_grant(q, land, bytes, into_out ? out_keys : sk, bytes)) op.progress({q});
  }
  const uint64_t arrivals = p.arrivals() + (receive ? 1 : 0);
  if (send) {
    while (!op.try_send(q, out, bytes, out_keys.lkey, bytes)) op.progress({q});
  }
  while (p.arrivals() < arrivals || p.sends_completed() < p.sends_posted()) op.progress({q});
  return land;
}

}  // namespace

void all_reduce_recursive_doubling(Op& op, const void* in, void* out, size_t count, DataType type,
                                   ReduceOp rop) {
  const int n = op.size, r = op.rank;
  const size_t es = size_of(type), bytes = count * es;
  auto* o = static_cast<uint8_t*>(out);
  copy_local(o, in, bytes);
  if (count == 0) return;
  const Keys keys = op.keys(o, bytes);
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int extra = n - pow2;
  // Fold: of ranks 0 .. 2 extra - 1, each even one hands its data to the odd one after it and
  // waits for the result.
  int vrank = r >= 2 * extra ? r - extra : r / 2;
  const bool folded = r < 2 * extra && r % 2 == 0;
  if (folded) {
    exchange(op, r + 1, o, bytes, keys, true, false, false);
    exchange(op, r + 1, o, bytes, keys, false, true, true);
  } else {
    if (r < 2 * extra) {
      const uint8_t* theirs = exchange(op, r - 1, o, bytes, keys, false, true, false);
      reduce(o, theirs, o, count, type, rop);  // r - 1's data first, as below
    }
    for (int mask = 1; mask < pow2; mask <<= 1) {
      const int vpeer = vrank ^ mask;
      const int q = vpeer < extra ? vpeer * 2 + 1 : vpeer + extra;
      const uint8_t* theirs = exchange(op, q, o, bytes, keys, true, true, false);
      // The lower rank's data first on both sides: the same bits even where an operation
      // tells equal operands apart (min / max of -0 and +0).
      if (r < q) {
        reduce(o, o, theirs, count, type, rop);
      } else {
        reduce(o, theirs, o, count, type, rop);
      }
    }
    if (r < 2 * extra) exchange(op, r - 1, o, bytes, keys, true, false, false);
  }
  if (rop == ReduceOp::kAvg) divide(o, o, count, type, uint64_t(n));
}

void reduce_scatter_ring(Op& op, const void* in, void* out, size_t recv_count, DataType type,
                         ReduceOp rop) {
  const size_t es = size_of(type);
  ring_reduce_scatter(op, static_cast<const uint8_t*>(in), equal_blocks(recv_count, op.size),
                      static_cast<uint8_t*>(out), type, rop, recv_count * es);
}

void all_gather_ring(Op& op, const void* in, void* out, size_t count, DataType type) {
  const size_t es = size_of(type);
  auto* o = static_cast<uint8_t*>(out);
  uint8_t* mine = o + op.rank * count * es;
  copy_local(mine, in, count * es);
  ring_all_gather(op, o, equal_blocks(count, op.size), es, count * es);
}

}  // namespace roce::coll
