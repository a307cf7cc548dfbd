// One check per operation: runs it on a communicator with coll_data.h's inputs and compares the
// result bit for bit with the reference. Each returns "" or what went wrong; the in-process
// gtest (comm_threads_test.cc) and the per-process rank program (coll_check.cc) share them.
#pragma once

#include <string>
#include <vector>

#include "coll_data.h"
#include "collectives/communicator.h"

namespace roce::coll::test {

inline std::string diff(const uint8_t* got, const uint8_t* want, size_t bytes, size_t es) {
  if (bytes == 0 || std::memcmp(got, want, bytes) == 0) return "";
  size_t i = 0;
  while (std::memcmp(got + i, want + i, es) == 0) i += es;
  return "first difference at element " + std::to_string(i / es) + " of " +
         std::to_string(bytes / es);
}

inline std::string what(const char* op, size_t count, DataType t, ReduceOp rop, bool in_place,
                        int root = -1) {
  std::string s = std::string(op) + " count " + std::to_string(count) + " " + std::string(name(t)) +
                  " " + std::string(name(rop)) + (in_place ? " in place" : " out of place");
  if (root >= 0) s += " root " + std::to_string(root);
  return s;
}

inline std::string failed(const std::string& op, const std::string& d) {
  return d.empty() ? "" : op + ": " + d;
}

inline std::string check_all_reduce(Communicator& c, size_t count, DataType t, ReduceOp op,
                                    bool in_place) {
  const size_t es = size_of(t);
  auto in = make_input(c.rank(), count, t, op);
  std::vector<uint8_t> out(count * es, 0xee);
  uint8_t* dst = in_place ? in.data() : out.data();
  c.all_reduce(in.data(), dst, count, t, op);
  return failed(what("all_reduce", count, t, op, in_place),
                diff(dst, reference(c.size(), count, t, op).data(), count * es, es));
}

inline std::string check_reduce_scatter(Communicator& c, size_t count, DataType t, ReduceOp op,
                                        bool in_place) {
  const size_t es = size_of(t), n = c.size();
  auto in = make_input(c.rank(), count * n, t, op);
  std::vector<uint8_t> out(count * es, 0xee);
  uint8_t* dst = in_place ? in.data() + c.rank() * count * es : out.data();
  c.reduce_scatter(in.data(), dst, count, t, op);
  const auto want = reference(c.size(), count, t, op, c.rank() * count);
  return failed(what("reduce_scatter", count, t, op, in_place),
                diff(dst, want.data(), count * es, es));
}

// Rank r's block of an all_gather / broadcast.
inline std::vector<uint8_t> block_of(int r, size_t count, DataType t) {
  return make_input(r, count, t, ReduceOp::kSum);
}

inline std::string check_all_gather(Communicator& c, size_t count, DataType t, bool in_place) {
  const size_t es = size_of(t), n = c.size();
  std::vector<uint8_t> out(count * es * n, 0xee);
  auto mine = block_of(c.rank(), count, t);
  const uint8_t* src = mine.data();
  if (in_place) {
    std::copy(mine.begin(), mine.end(), out.begin() + c.rank() * count * es);
    src = out.data() + c.rank() * count * es;
  }
  c.all_gather(src, out.data(), count, t);
  for (int r = 0; r < c.size(); ++r) {
    auto d = diff(out.data() + r * count * es, block_of(r, count, t).data(), count * es, es);
    if (!d.empty()) {
      return what("all_gather", count, t, ReduceOp::kSum, in_place) + " block " +
             std::to_string(r) + ": " + d;
    }
  }
  return "";
}

inline std::string check_broadcast(Communicator& c, size_t count, DataType t, bool in_place,
                                   int root) {
  const size_t es = size_of(t);
  auto in = block_of(root, count, t);
  std::vector<uint8_t> out(count * es, 0xee);
  if (in_place && c.rank() == root) out = in;
  const void* src = c.rank() == root ? (in_place ? out.data() : in.data()) : nullptr;
  c.broadcast(src, out.data(), count, t, root);
  return failed(what("broadcast", count, t, ReduceOp::kSum, in_place, root),
                diff(out.data(), in.data(), count * es, es));
}

inline std::string check_reduce(Communicator& c, size_t count, DataType t, ReduceOp op,
                                bool in_place, int root) {
  const size_t es = size_of(t);
  auto in = make_input(c.rank(), count, t, op);
  std::vector<uint8_t> out(count * es, 0xee);
  uint8_t* dst = in_place ? in.data() : out.data();
  c.reduce(in.data(), dst, count, t, op, root);
  if (c.rank() != root) return "";
  return failed(what("reduce", count, t, op, in_place, root),
                diff(dst, reference(c.size(), count, t, op).data(), count * es, es));
}

// Rank `from`'s data for rank `to` in an all_to_all(v).
inline std::vector<uint8_t> a2a_block(int from, int to, size_t count, DataType t) {
  return make_input(from * 31 + to, count, t, ReduceOp::kSum);
}

inline std::string check_all_to_all(Communicator& c, size_t count, DataType t, bool in_place) {
  const size_t es = size_of(t), n = c.size(), b = count * es;
  std::vector<uint8_t> in(b * n), out(b * n, 0xee);
  for (size_t q = 0; q < n; ++q) {
    auto blk = a2a_block(c.rank(), int(q), count, t);
    std::copy(blk.begin(), blk.end(), in.begin() + q * b);
  }
  uint8_t* dst = in_place ? in.data() : out.data();
  c.all_to_all(in.data(), dst, count, t);
  for (size_t q = 0; q < n; ++q) {
    auto d = diff(dst + q * b, a2a_block(int(q), c.rank(), count, t).data(), b, es);
    if (!d.empty()) {
      return what("all_to_all", count, t, ReduceOp::kSum, in_place) + " from " + std::to_string(q) +
             ": " + d;
    }
  }
  return "";
}

// Uneven blocks: rank r sends (r + q) % 3 * unit + q elements to q, at displacements with gaps.
inline size_t a2av_count(int from, int to, size_t unit) { return (from + to) % 3 * unit + to; }

inline std::string check_all_to_all_v(Communicator& c, size_t unit, DataType t) {
  const int n = c.size(), r = c.rank();
  const size_t es = size_of(t);
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t in_n = 0, out_n = 0;
  for (int q = 0; q < n; ++q) {
    sc[q] = a2av_count(r, q, unit), sd[q] = in_n, in_n += sc[q] + 5;
    rc[q] = a2av_count(q, r, unit), rd[q] = out_n, out_n += rc[q] + 3;
  }
  std::vector<uint8_t> in(in_n * es), out(out_n * es, 0xee);
  for (int q = 0; q < n; ++q) {
    auto blk = a2a_block(r, q, sc[q], t);
    std::copy(blk.begin(), blk.end(), in.begin() + sd[q] * es);
  }
  c.all_to_all_v(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), t);
  for (int q = 0; q < n; ++q) {
    auto d = diff(out.data() + rd[q] * es, a2a_block(q, r, rc[q], t).data(), rc[q] * es, es);
    if (!d.empty())
      return "all_to_all_v unit " + std::to_string(unit) + " from " + std::to_string(q) + ": " + d;
  }
  return "";
}

// Each rank sends to r + 1 and receives from r - 1: with send_recv, and with send and recv (even
// ranks send first, so that two ranks never both wait for the other's receive).
inline std::string check_send_recv(Communicator& c, size_t count, DataType t) {
  const int n = c.size(), r = c.rank();
  if (n == 1) return "";
  const size_t es = size_of(t);
  const int to = (r + 1) % n, from = (r + n - 1) % n;
  auto mine = block_of(r * 7 + 1, count, t);
  std::vector<uint8_t> got(count * es, 0xee);
  if (r % 2 == 0) {
    c.send(mine.data(), count, t, to);
    c.recv(got.data(), count, t, from);
  } else {
    c.recv(got.data(), count, t, from);
    c.send(mine.data(), count, t, to);
  }
  auto d = diff(got.data(), block_of(from * 7 + 1, count, t).data(), count * es, es);
  if (!d.empty()) return "send/recv count " + std::to_string(count) + ": " + d;
  std::fill(got.begin(), got.end(), 0xee);
  c.send_recv(mine.data(), to, got.data(), from, count, t);
  return failed("send_recv count " + std::to_string(count),
                diff(got.data(), block_of(from * 7 + 1, count, t).data(), count * es, es));
}

}  // namespace roce::coll::test
