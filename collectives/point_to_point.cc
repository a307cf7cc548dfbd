// Send / receive between two ranks, and the barrier, over the same grants as the collectives.
#include <algorithm>

#include "collectives/algorithms.h"

namespace roce::coll {

void send_to(Op& op, const void* buf, size_t count, DataType type, int peer) {
  const size_t bytes = count * size_of(type), per = op.chunk_bytes;
  const auto* src = static_cast<const uint8_t*>(buf);
  const Keys keys = op.keys(src, bytes);
  // An empty message still travels, so the receiver's matching recv completes.
  const uint64_t chunks = std::max<uint64_t>(1, chunks_for(bytes, per));
  for (uint64_t k = 0; k < chunks;) {
    const Span sp = chunk_of(bytes, per, k);
    if (op.try_send(peer, src + sp.begin, sp.count, keys.lkey, bytes)) {
      ++k;
    } else {
      op.progress({peer});
    }
  }
  op.drain_sends({peer});
}

void recv_from(Op& op, void* buf, size_t count, DataType type, int peer) {
  const size_t bytes = count * size_of(type), per = op.chunk_bytes;
  auto* dst = static_cast<uint8_t*>(buf);
  const Keys keys = op.keys(dst, bytes);
  const uint64_t chunks = std::max<uint64_t>(1, chunks_for(bytes, per));
  Peer& p = op.t.peer(peer);
  const uint64_t arrivals0 = p.arrivals();
  uint64_t granted = 0;
  while (granted < chunks || p.arrivals() - arrivals0 < chunks) {
    if (granted < chunks) {
      const Span sp = chunk_of(bytes, per, granted);
      if (op.try_grant(peer, dst + sp.begin, sp.count, keys, bytes)) {
        ++granted;
        continue;
      }
    }
    op.progress({peer});
  }
}

void send_recv(Op& op, const void* send_buf, int to, void* recv_buf, int from, size_t count,
               DataType type) {
  const size_t bytes = count * size_of(type), per = op.chunk_bytes;
  const auto* src = static_cast<const uint8_t*>(send_buf);
  auto* dst = static_cast<uint8_t*>(recv_buf);
  const Keys skeys = op.keys(src, bytes), rkeys = op.keys(dst, bytes);
  const uint64_t chunks = std::max<uint64_t>(1, chunks_for(bytes, per));
  Peer& f = op.t.peer(from);
  const uint64_t arrivals0 = f.arrivals();
  uint64_t granted = 0, sent = 0;
  while (sent < chunks || f.arrivals() - arrivals0 < chunks) {
    while (granted < chunks) {
      const Span sp = chunk_of(bytes, per, granted);
      if (!op.try_grant(from, dst + sp.begin, sp.count, rkeys, bytes)) break;
      ++granted;
    }
    while (sent < chunks) {
      const Span sp = chunk_of(bytes, per, sent);
      if (!op.try_send(to, src + sp.begin, sp.count, skeys.lkey, bytes)) break;
      ++sent;
    }
    if (sent == chunks && f.arrivals() - arrivals0 == chunks) break;
    op.progress({from, to});
  }
  op.drain_sends({to});
}

void barrier_dissemination(Op& op) {
  const int n = op.size, r = op.rank;
  for (int d = 1; d < n; d *= 2) {
    const int to = (r + d) % n, from = mod(r - d, n);
    Peer& f = op.t.peer(from);
    const uint64_t arrivals = f.arrivals() + 1;
    while (!op.try_grant(from, nullptr, 0, Keys{}, 0)) op.progress({from});
    while (!op.try_send(to, nullptr, 0, 0, 0)) op.progress({to});
    while (f.arrivals() < arrivals) op.progress({from, to});
  }
  std::vector<int> all;
  for (int q = 0; q < n; ++q) {
    if (q != r) all.push_back(q);
  }
  op.drain_sends(all);
}

}  // namespace roce::coll
