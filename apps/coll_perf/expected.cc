#include "apps/coll_perf/expected.h"

#include <cstring>
#include <vector>

#include "apps/coll_perf/exact_values.h"
#include "collectives/reduce.h"

namespace roce::coll::perf {
namespace {

void generate(uint8_t* p, size_t count, DataType t, ReduceOp op, int seed, size_t first = 0) {
  const size_t es = size_of(t);
  for (size_t i = 0; i < count; ++i) store_exact(p + i * es, t, exact_value(seed, first + i, op));
}

std::vector<uint8_t> generated(size_t count, DataType t, ReduceOp op, int seed, size_t first = 0) {
  std::vector<uint8_t> v(count * size_of(t));
  generate(v.data(), count, t, op, seed, first);
  return v;
}

// Elements [first, first + count) reduced over every rank's inputs.
std::vector<uint8_t> reduced(size_t count, DataType t, ReduceOp op, int ranks, size_t first) {
  auto acc = generated(count, t, op, 0, first);
  for (int q = 1; q < ranks; ++q) {
    const auto x = generated(count, t, op, q, first);
    reduce(acc.data(), acc.data(), x.data(), count, t, op);
  }
  if (op == ReduceOp::kAvg) divide(acc.data(), acc.data(), count, t, uint64_t(ranks));
  return acc;
}

int64_t differing(const uint8_t* got, const std::vector<uint8_t>& want, size_t es) {
  int64_t n = 0;
  for (size_t i = 0; i < want.size(); i += es) n += std::memcmp(got + i, want.data() + i, es) != 0;
  return n;
}

// Where this rank's output is, and how many elements.
const uint8_t* output(const Case& k, int rank, bool ip, const uint8_t* recv) {
  const size_t es = size_of(k.type);
  return k.op == Collective::kReduceScatter && ip ? recv + rank * k.shape.block * es : recv;
}

int pair_seed(int from, int to) { return from * 31 + to; }

}  // namespace

void fill_inputs(const Case& k, int rank, int ranks, bool ip, uint8_t* send, uint8_t* recv) {
  const Shape& s = k.shape;
  const size_t es = size_of(k.type);
  std::memset(recv, 0xee, std::max(s.recv, s.send) * es);
  uint8_t* in = ip && k.op != Collective::kSendRecv ? recv : send;
  switch (k.op) {
    case Collective::kAllGather:
      generate(ip ? recv + rank * s.block * es : send, s.block, k.type, k.redop, rank);
      return;
    case Collective::kAllToAll:
    case Collective::kAllToAllV:
      for (int q = 0; q < ranks; ++q) {
        generate(in + q * s.block * es, s.block, k.type, k.redop, pair_seed(rank, q));
      }
      return;
    default:
      generate(in, s.send, k.type, k.redop, rank);
  }
}

int64_t count_wrong(const Case& k, int rank, int ranks, bool ip, const uint8_t*,
                    const uint8_t* recv) {
  const Shape& s = k.shape;
  const size_t es = size_of(k.type);
  const uint8_t* out = output(k, rank, ip, recv);
  switch (k.op) {
    case Collective::kAllReduce:
      return differing(out, reduced(s.count, k.type, k.redop, ranks, 0), es);
    case Collective::kReduce:
      return rank == k.root ? differing(out, reduced(s.count, k.type, k.redop, ranks, 0), es) : 0;
    case Collective::kReduceScatter:
      return differing(out, reduced(s.block, k.type, k.redop, ranks, rank * s.block), es);
    case Collective::kBroadcast:
      return differing(out, generated(s.count, k.type, k.redop, k.root), es);
    case Collective::kSendRecv:
      return differing(out, generated(s.count, k.type, k.redop, (rank + ranks - 1) % ranks), es);
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllV: {
      int64_t n = 0;
      for (int q = 0; q < ranks; ++q) {
        const int seed = k.op == Collective::kAllGather ? q : pair_seed(q, rank);
        n += differing(out + q * s.block * es, generated(s.block, k.type, k.redop, seed), es);
      }
      return n;
    }
  }
  return 0;
}

void corrupt_output(const Case& k, int rank, bool ip, uint8_t* recv) {
  if (k.shape.recv == 0) return;
  uint8_t* out = const_cast<uint8_t*>(output(k, rank, ip, recv));
  out[0] ^= 0x5a;
}

}  // namespace roce::coll::perf
