#include "apps/coll_perf/bench.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "apps/coll_perf/expected.h"

namespace roce::coll::perf {

bool reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}
bool rooted(Collective c) { return c == Collective::kBroadcast || c == Collective::kReduce; }

Shape shape_of(Collective c, size_t bytes, size_t elem, int n) {
  Shape s;
  const size_t count = bytes / elem;
  switch (c) {
    case Collective::kAllReduce:
      return {count, count, count, 0, 2.0 * (n - 1) / n};
    case Collective::kAllGather:
      s.block = count / n;
      return {s.block * n, s.block, s.block * n, s.block, double(n - 1) / n};
    case Collective::kReduceScatter:
      s.block = count / n;
      return {s.block * n, s.block * n, s.block, s.block, double(n - 1) / n};
    case Collective::kAllToAll:
    case Collective::kAllToAllV:
      s.block = count / n;
      return {s.block * n, s.block * n, s.block * n, s.block, double(n - 1) / n};
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      return {count, count, count, 0, 1.0};
  }
  return s;
}

Bench::Bench(Communicator& comm, const Options& o) : comm_(comm), o_(o) {
  // Every size fits in the largest; registered once, as an application would (ncclCommRegister).
  capacity_ = o.max_bytes + 64;
  send_ = static_cast<uint8_t*>(std::aligned_alloc(4096, (capacity_ + 4095) & ~size_t{4095}));
  recv_ = static_cast<uint8_t*>(std::aligned_alloc(4096, (capacity_ + 4095) & ~size_t{4095}));
  std::memset(send_, 0, capacity_);
  std::memset(recv_, 0, capacity_);
  comm_.register_memory(send_, capacity_);
  comm_.register_memory(recv_, capacity_);
}

Bench::~Bench() {
  try {  // a communicator that failed has nothing to deregister
    comm_.deregister_memory(send_);
    comm_.deregister_memory(recv_);
  } catch (const Error&) {
  }
  std::free(send_);
  std::free(recv_);
}

// The buffers of one run: in place, the input lives in the output buffer where nccl-tests puts
// it (all_gather: this rank's block; reduce_scatter: the whole input, the output inside it).
Work Bench::once(const Case& k, bool ip, bool async) {
  const Shape& s = k.shape;
  const size_t es = size_of(k.type);
  const int r = comm_.rank(), n = comm_.size();
  uint8_t* out = recv_;
  const uint8_t* in = ip ? recv_ : send_;
  Work w;
  switch (k.op) {
    case Collective::kAllReduce:
      if (async)
        w = comm_.all_reduce_async(in, out, s.count, k.type, k.redop);
      else
        comm_.all_reduce(in, out, s.count, k.type, k.redop);
      break;
    case Collective::kAllGather:
      if (ip) in = recv_ + r * s.block * es;
      if (async)
        w = comm_.all_gather_async(in, out, s.block, k.type);
      else
        comm_.all_gather(in, out, s.block, k.type);
      break;
    case Collective::kReduceScatter:
      if (ip) out = recv_ + r * s.block * es;
      if (async)
        w = comm_.reduce_scatter_async(in, out, s.block, k.type, k.redop);
      else
        comm_.reduce_scatter(in, out, s.block, k.type, k.redop);
      break;
    case Collective::kBroadcast:
      if (async)
        w = comm_.broadcast_async(in, out, s.count, k.type, k.root);
      else
        comm_.broadcast(in, out, s.count, k.type, k.root);
      break;
    case Collective::kReduce:
      if (async)
        w = comm_.reduce_async(in, out, s.count, k.type, k.redop, k.root);
      else
        comm_.reduce(in, out, s.count, k.type, k.redop, k.root);
      break;
    case Collective::kAllToAll:
      if (async)
        w = comm_.all_to_all_async(in, out, s.block, k.type);
      else
        comm_.all_to_all(in, out, s.block, k.type);
      break;
    case Collective::kAllToAllV: {
      std::vector<size_t> counts(n, s.block), displs(n);
      for (int q = 0; q < n; ++q) displs[q] = q * s.block;
      comm_.all_to_all_v(in, counts.data(), displs.data(), out, counts.data(), displs.data(),
                         k.type);
      break;
    }
    case Collective::kSendRecv:
      // In place has no meaning for a send and a receive of different buffers: both run apart.
      comm_.send_recv(send_, (r + 1) % n, recv_, (r + n - 1) % n, s.count, k.type);
      break;
  }
  return w;
}

int64_t Bench::checked(const Case& k, bool ip) {
  int64_t wrong = 0;
  for (int i = 0; i < o_.check; ++i) {
    fill_inputs(k, comm_.rank(), comm_.size(), ip, send_, recv_);
    once(k, ip, false).wait();
    if (o_.test_corrupt && comm_.rank() == 0) corrupt_output(k, comm_.rank(), ip, recv_);
    wrong += count_wrong(k, comm_.rank(), comm_.size(), ip, send_, recv_);
  }
  comm_.all_reduce(&wrong, &wrong, 1, DataType::kInt64, ReduceOp::kSum);
  return wrong;
}

double Bench::over_ranks(double seconds) {
  switch (o_.average) {
    case 0:
      comm_.broadcast(&seconds, &seconds, 1, DataType::kFloat64, 0);
      return seconds;
    case 2:
      comm_.all_reduce(&seconds, &seconds, 1, DataType::kFloat64, ReduceOp::kMin);
      break;
    case 3:
      comm_.all_reduce(&seconds, &seconds, 1, DataType::kFloat64, ReduceOp::kMax);
      break;
    default:
      comm_.all_reduce(&seconds, &seconds, 1, DataType::kFloat64, ReduceOp::kAvg);
      break;
  }
  return seconds;
}

Placement Bench::run(const Case& k, bool ip) {
  for (int i = 0; i < o_.warmup; ++i) once(k, ip, false).wait();
  comm_.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  // -z 0: every iteration is started before any is waited for (they run in order on the
  // communicator's worker), as nccl-tests launches them on a stream.
  std::vector<Work> started;
  for (int i = 0; i < o_.iters; ++i) started.push_back(once(k, ip, o_.blocking == 0));
  for (Work& w : started) w.wait();
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o_.iters;
  Placement p;
  const double t = over_ranks(sec);
  p.time_us = t * 1e6;
  p.algbw = t > 0 ? double(k.shape.count * size_of(k.type)) / 1e9 / t : 0;
  p.busbw = p.algbw * k.shape.factor;
  p.wrong = o_.check ? checked(k, ip) : -1;
  return p;
}

}  // namespace roce::coll::perf
