// Ring reduce-scatter and all-gather: n - 1 steps around the ring r -> r + 1, each segment cut
// into chunks. Messages go chunk-major (for each chunk, every step), so a rank forwards message
// k as message k + 1 and two landing slots suffice for the ring never to wait on itself
// (CommOptions::slots >= 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/op.h"

namespace roce::coll {

// Where each rank's segment of a buffer sits, in elements.
struct Segments {
  std::vector<size_t> off, len;
  size_t max_len = 0;
  size_t end() const { return off.empty() ? 0 : off.back() + len.back(); }
};
// `count` elements split into n runs whose lengths differ by at most one (AllReduce).
Segments even_segments(size_t count, int n);
// n blocks of `block` elements, one after another (AllGather, ReduceScatter).
Segments equal_blocks(size_t block, int n);

// Afterwards `dst` holds segment `rank` of `in` reduced over all ranks (divided by n for avg).
// Scratch slots from the left neighbour hold the partial sums on their way round.
void ring_reduce_scatter(Op& op, const uint8_t* in, const Segments& seg, uint8_t* dst,
                         DataType type, ReduceOp rop, uint64_t total);
// Each rank's segment `rank` of `buf`, already in place there, reaches every rank's `buf`:
// written straight to its final offset, no copy.
void ring_all_gather(Op& op, uint8_t* buf, const Segments& seg, size_t elem, uint64_t total);

}  // namespace roce::coll
