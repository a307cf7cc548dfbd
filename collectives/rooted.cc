// Broadcast and reduce as pipelined chains: the buffer moves chunk by chunk, each rank
// forwarding a chunk as soon as it has it, so n - 1 hops cost one chunk's time each, not the
// whole buffer's.
#include <algorithm>
#include <cstring>
#include <deque>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"

namespace roce::coll {

void broadcast_chain(Op& op, const void* in, void* out, size_t count, DataType type, int root) {
  const int n = op.size;
  const size_t es = size_of(type), bytes = count * es;
  auto* o = static_cast<uint8_t*>(out);
  const int pos = mod(op.rank - root, n);
  if (pos == 0) copy_local(o, in, bytes);
  if (n == 1 || count == 0) return;
  const int prev = mod(op.rank - 1, n), next = mod(op.rank + 1, n);
  const bool receives = pos > 0, forwards = pos < n - 1;
  const size_t per = std::max<size_t>(1, op.chunk_bytes);
  const uint64_t chunks = chunks_for(bytes, per);
  const Keys keys = op.keys(o, bytes);
  Peer& from = op.t.peer(prev);
  const uint64_t arrivals0 = from.arrivals();
  uint64_t granted = receives ? 0 : chunks, sent = forwards ? 0 : chunks;
  std::vector<int> waiting;
  if (receives) waiting.push_back(prev);
  if (forwards) waiting.push_back(next);
  for (;;) {
    while (granted < chunks) {
      const Span sp = chunk_of(bytes, per, granted);
      if (!op.try_grant(prev, o + sp.begin, sp.count, keys, bytes)) break;
      ++granted;
    }
    while (sent < chunks && (!receives || from.arrivals() - arrivals0 > sent)) {
      const Span sp = chunk_of(bytes, per, sent);
      if (!op.try_send(next, o + sp.begin, sp.count, keys.lkey, bytes)) break;
      ++sent;
    }
    if (sent == chunks && (!receives || from.arrivals() - arrivals0 == chunks)) break;
    op.progress(waiting);
  }
  if (forwards) op.drain_sends({next});
}

void reduce_chain(Op& op, const void* in, void* out, size_t count, DataType type, ReduceOp rop,
                  int root) {
  const int n = op.size;
  const size_t es = size_of(type), bytes = count * es;
  const auto* src = static_cast<const uint8_t*>(in);
  auto* o = static_cast<uint8_t*>(out);
  const int pos = mod(op.rank - root - 1, n);  // root + 1 starts, root ends
  if (n == 1) {
    copy_local(o, src, bytes);
    return;
  }
  if (count == 0) return;
  const int prev = mod(op.rank - 1, n), next = mod(op.rank + 1, n);
  const bool receives = pos > 0, forwards = pos < n - 1;
  const size_t per = std::max<size_t>(1, op.chunk_bytes / es);
  const uint64_t chunks = chunks_for(count, per);
  const uint32_t slots = op.t.options().slots;
  const Keys in_keys = op.keys(src, bytes);
  Keys sk{};
  uint8_t* scratch = receives ? op.t.scratch(prev, &sk) : nullptr;
  auto slot = [&](uint64_t k) { return scratch + (k % slots) * op.chunk_bytes; };
  Peer& from = op.t.peer(prev);
  Peer& to = op.t.peer(next);
  const uint64_t arrivals0 = from.arrivals();
  std::vector<bool> busy(slots);
  std::deque<std::pair<uint64_t, uint32_t>> releases;  // (send number on `to`, slot)
  uint64_t granted = receives ? 0 : chunks, reduced = receives ? 0 : chunks, sent = 0;
  if (!forwards) sent = chunks;
  std::vector<int> waiting;
  if (receives) waiting.push_back(prev);
  if (forwards) waiting.push_back(next);
  for (;;) {
    while (granted < chunks && !busy[granted % slots]) {
      if (!op.try_grant(prev, slot(granted), chunk_of(count, per, granted).count * es, sk, bytes)) {
        break;
      }
      busy[granted % slots] = true;
      ++granted;
    }
    while (reduced < granted && from.arrivals() - arrivals0 > reduced) {
      const Span sp = chunk_of(count, per, reduced);
      if (forwards) {
        reduce(slot(reduced), src + sp.begin * es, slot(reduced), sp.count, type, rop);
      } else {  // the root: the result
        uint8_t* d = o + sp.begin * es;
        reduce(d, src + sp.begin * es, slot(reduced), sp.count, type, rop);
        if (rop == ReduceOp::kAvg) divide(d, d, sp.count, type, uint64_t(n));
        busy[reduced % slots] = false;
      }
      ++reduced;
    }
    while (sent < chunks && (!receives || reduced > sent)) {
      const Span sp = chunk_of(count, per, sent);
      const void* s = receives ? static_cast<const void*>(slot(sent)) : src + sp.begin * es;
      if (!op.try_send(next, s, sp.count * es, receives ? sk.lkey : in_keys.lkey, bytes)) break;
      if (receives) releases.emplace_back(to.sends_posted() - 1, uint32_t(sent % slots));
      ++sent;
    }
    while (!releases.empty() && to.sends_completed() > releases.front().first) {
      busy[releases.front().second] = false;
      releases.pop_front();
    }
    if (sent == chunks && reduced == granted && granted == chunks) break;
    op.progress(waiting);
  }
  if (forwards) op.drain_sends({next});
}

}  // namespace roce::coll
