// Test data for the collectives: inputs whose reductions are exact in every type and any order
// (small integers: sums within every format's exact range, products of +-1 and +-2), the
// reference result computed independently, and a bit-for-bit comparison.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "apps/coll_perf/exact_values.h"
#include "collectives/reduce.h"
#include "collectives/types.h"

namespace roce::coll::test {

inline double input_value(int r, size_t i, ReduceOp op) { return exact_value(r, i, op); }
inline void store(uint8_t* p, DataType t, double v) { store_exact(p, t, v); }

inline bool is_float(DataType t) { return t >= DataType::kFloat16; }
inline bool is_signed(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}

inline std::vector<uint8_t> make_input(int r, size_t count, DataType t, ReduceOp op,
                                       size_t first = 0) {
  const size_t es = size_of(t);
  std::vector<uint8_t> v(count * es);
  for (size_t i = 0; i < count; ++i) store(v.data() + i * es, t, input_value(r, first + i, op));
  return v;
}

// An integer type's value of `bits` (its low bytes), as a signed or unsigned 64-bit value.
inline int64_t as_signed(uint64_t bits, size_t es) {
  const int shift = int(64 - 8 * es);
  return static_cast<int64_t>(bits << shift) >> shift;
}
inline uint64_t as_unsigned(uint64_t bits, size_t es) {
  return es == 8 ? bits : bits & ((uint64_t{1} << (8 * es)) - 1);
}

// Element i of the reduction over ranks 0..n-1, for an integer type (wrapping arithmetic).
inline void reference_integer(uint8_t* p, int n, size_t i, DataType t, ReduceOp op) {
  const size_t es = size_of(t);
  const bool sgn = is_signed(t);
  uint64_t acc = static_cast<uint64_t>(static_cast<int64_t>(input_value(0, i, op)));
  for (int r = 1; r < n; ++r) {
    const uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(input_value(r, i, op)));
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += x;
        break;
      case ReduceOp::kProd:
        acc *= x;
        break;
      case ReduceOp::kMin:
        if (sgn ? as_signed(x, es) < as_signed(acc, es) : as_unsigned(x, es) < as_unsigned(acc, es))
          acc = x;
        break;
      case ReduceOp::kMax:
        if (sgn ? as_signed(x, es) > as_signed(acc, es) : as_unsigned(x, es) > as_unsigned(acc, es))
          acc = x;
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    acc = sgn ? static_cast<uint64_t>(as_signed(acc, es) / int64_t(n))
              : as_unsigned(acc, es) / uint64_t(n);
  }
  std::memcpy(p, &acc, es);  // little-endian: the low bytes
}

// Element i of the reduction over ranks 0..n-1 (avg: the sum divided as the kernels divide).
inline void reference_element(uint8_t* p, int n, size_t i, DataType t, ReduceOp op) {
  if (!is_float(t)) return reference_integer(p, n, i, t, op);
  double acc = input_value(0, i, op);
  for (int r = 1; r < n; ++r) {
    const double x = input_value(r, i, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += x;
        break;
      case ReduceOp::kProd:
        acc *= x;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, x);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, x);
        break;
    }
  }
  if (op == ReduceOp::kAvg) {
    acc = t == DataType::kFloat64 ? acc / n : double(float(acc) / float(n));
  }
  store(p, t, acc);
}

inline std::vector<uint8_t> reference(int n, size_t count, DataType t, ReduceOp op,
                                      size_t first = 0) {
  const size_t es = size_of(t);
  std::vector<uint8_t> v(count * es);
  for (size_t i = 0; i < count; ++i) reference_element(v.data() + i * es, n, first + i, t, op);
  return v;
}

}  // namespace roce::coll::test
