// The algorithms, each over Op (op.h). Buffers are the caller's; counts are in elements of
// `type`. Every rank calls the same algorithm with the same counts, type, op and root.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/op.h"

namespace roce::coll {

// Ring: reduce-scatter then all-gather, 2(n - 1) steps (ring.h).
void all_reduce_ring(Op& op, const void* in, void* out, size_t count, DataType type, ReduceOp rop);
// Recursive doubling, log2(n) exchanges of the whole buffer (one chunk at most); ranks beyond
// the largest power of two first fold their data into a partner and get the result back.
void all_reduce_recursive_doubling(Op& op, const void* in, void* out, size_t count, DataType type,
                                   ReduceOp rop);
void reduce_scatter_ring(Op& op, const void* in, void* out, size_t recv_count, DataType type,
                         ReduceOp rop);
void all_gather_ring(Op& op, const void* in, void* out, size_t count, DataType type);
// Pipelined chains: root -> root + 1 -> ... for broadcast; root + 1 -> ... -> root for reduce.
void broadcast_chain(Op& op, const void* in, void* out, size_t count, DataType type, int root);
void reduce_chain(Op& op, const void* in, void* out, size_t count, DataType type, ReduceOp rop,
                  int root);
// Pairwise exchanges with every peer, all in flight at once; counts and displacements in
// elements, per peer.
void all_to_all_v(Op& op, const void* in, const size_t* send_counts, const size_t* send_displs,
                  void* out, const size_t* recv_counts, const size_t* recv_displs, DataType type);
// Dissemination barrier: ceil(log2 n) rounds of empty messages.
void barrier_dissemination(Op& op);
void send_to(Op& op, const void* buf, size_t count, DataType type, int peer);
void recv_from(Op& op, void* buf, size_t count, DataType type, int peer);
// Both at once (a ring of ranks each sending to the next and receiving from the one before).
void send_recv(Op& op, const void* send_buf, int to, void* recv_buf, int from, size_t count,
               DataType type);

}  // namespace roce::coll
