// Values whose reductions are exact in every data type and in any order: small integers (sums
// stay within every format's exact range) and, for products, +-1 and +-2. The benchmark's check
// (expected.cc) and the collectives' tests (tests/collectives/coll_data.h) both draw on them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "collectives/reduce.h"
#include "collectives/types.h"

namespace roce::coll {

// Element i of what `r` (a rank, or any seed) contributes for `op`, as an exact double.
inline double exact_value(int r, size_t i, ReduceOp op) {
  if (op == ReduceOp::kProd) {
    static constexpr double kFactors[] = {-2, -1, 1, 2, 1, 1, -1};
    return kFactors[(i * 3 + size_t(r) * 5) % 7];
  }
  return double(int((i * 7 + size_t(r) * 13 + i / 5) % 9) - 4);
}

// Stores an exact value as `type` (integers wrap, as two's complement).
inline void store_exact(uint8_t* p, DataType t, double v) {
  const int64_t iv = static_cast<int64_t>(v);
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
      *p = static_cast<uint8_t>(iv);
      break;
    case DataType::kInt32:
    case DataType::kUint32: {
      const uint32_t x = static_cast<uint32_t>(iv);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kInt64:
    case DataType::kUint64:
      std::memcpy(p, &iv, 8);
      break;
    case DataType::kFloat16: {
      const uint16_t h = float_to_half(float(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DataType::kBfloat16: {
      const uint16_t h = float_to_bfloat16(float(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DataType::kFloat32: {
      const float f = float(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DataType::kFloat64:
      std::memcpy(p, &v, 8);
      break;
  }
}

}  // namespace roce::coll
