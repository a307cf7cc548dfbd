// AlltoAll(v): every pair exchanges its block directly, final offset to final offset, with
// every peer in flight at once (each within its own grant window).
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"

namespace roce::coll {

void all_to_all_v(Op& op, const void* in, const size_t* send_counts, const size_t* send_displs,
                  void* out, const size_t* recv_counts, const size_t* recv_displs, DataType type) {
  const int n = op.size, r = op.rank;
  const size_t es = size_of(type);
  size_t in_end = 0, out_end = 0;
  for (int q = 0; q < n; ++q) {
    in_end = std::max(in_end, (send_displs[q] + send_counts[q]) * es);
    out_end = std::max(out_end, (recv_displs[q] + recv_counts[q]) * es);
  }
  if (send_counts[r] != recv_counts[r]) {
    throw Error(ErrorKind::kInvalidArgument,
                op.label() + ": this rank sends itself " + std::to_string(send_counts[r]) +
                    " elements but expects " + std::to_string(recv_counts[r]));
  }
  // In place, the blocks still to send would be overwritten by those arriving: send a copy.
  std::vector<uint8_t> copy;
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (in_end && dst < src + in_end && src < dst + out_end) {
    copy.assign(src, src + in_end);
    src = copy.data();
  }
  copy_local(dst + recv_displs[r] * es, src + send_displs[r] * es, send_counts[r] * es);
  if (n == 1) return;
  const Keys in_keys = op.keys(src, in_end), out_keys = op.keys(dst, out_end);
  const size_t per = op.chunk_bytes;
  struct Pair {
    int q;
    uint64_t send_chunks, recv_chunks, granted = 0, sent = 0, arrivals0;
  };
  std::vector<Pair> pairs;
  std::vector<int> waiting;
  for (int i = 1; i < n; ++i) {  // from r + 1 on, so that ranks do not all start at rank 0
    const int q = (r + i) % n;
    pairs.push_back({q, chunks_for(send_counts[q] * es, per), chunks_for(recv_counts[q] * es, per),
                     0, 0, op.t.peer(q).arrivals()});
    waiting.push_back(q);
  }
  for (;;) {
    bool done = true;
    for (Pair& p : pairs) {
      const size_t in_bytes = recv_counts[p.q] * es, out_bytes = send_counts[p.q] * es;
      while (p.granted < p.recv_chunks) {
        const Span sp = chunk_of(in_bytes, per, p.granted);
        if (!op.try_grant(p.q, dst + recv_displs[p.q] * es + sp.begin, sp.count, out_keys,
                          in_bytes)) {
          break;
        }
        ++p.granted;
      }
      while (p.sent < p.send_chunks) {
        const Span sp = chunk_of(out_bytes, per, p.sent);
        if (!op.try_send(p.q, src + send_displs[p.q] * es + sp.begin, sp.count, in_keys.lkey,
                         out_bytes)) {
          break;
        }
        ++p.sent;
      }
      done &= p.sent == p.send_chunks && op.t.peer(p.q).arrivals() - p.arrivals0 == p.recv_chunks;
    }
    if (done) break;
    op.progress(waiting);
  }
  op.drain_sends(waiting);
}

}  // namespace roce::coll
