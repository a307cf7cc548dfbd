// The loop every vector ISA shares: combine four registers a step, the tail in the scalar
// kernel, dispatch on type and operation. Included only by the ISA units (reduce_avx2.cc,
// reduce_avx512.cc), and instantiated only with lane types of their anonymous namespaces: each
// instantiation then has internal linkage and is compiled for its unit's ISA, so the linker can
// never keep an AVX-512 copy for the AVX2 path (reduce_isa.h).
//
// A lane type L has Elem, Reg, kLanes, load, store, sum, prod, min, max (and div, splat for
// the floating-point types); a lane set S names one lane type per DataType (S::I8 ... S::F64).
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/reduce_isa.h"

namespace roce::coll::detail::lanes {

template <class L, ReduceOp Op>
typename L::Reg combine(typename L::Reg a, typename L::Reg b) {
  if constexpr (Op == ReduceOp::kProd) {
    return L::prod(a, b);
  } else if constexpr (Op == ReduceOp::kMin) {
    return L::min(a, b);
  } else if constexpr (Op == ReduceOp::kMax) {
    return L::max(a, b);
  } else {
    return L::sum(a, b);
  }
}

template <class L, ReduceOp Op>
void reduce_lanes(void* dst, const void* a, const void* b, size_t count, DataType type) {
  using E = typename L::Elem;
  auto* d = static_cast<E*>(dst);
  const auto* x = static_cast<const E*>(a);
  const auto* y = static_cast<const E*>(b);
  constexpr size_t n = L::kLanes;
  size_t i = 0;
  // Four registers per step keep enough loads in flight to run at memory bandwidth. All four
  // are loaded before any store, which is also what makes dst == a or dst == b safe.
  for (; i + 4 * n <= count; i += 4 * n) {
    auto r0 = combine<L, Op>(L::load(x + i), L::load(y + i));
    auto r1 = combine<L, Op>(L::load(x + i + n), L::load(y + i + n));
    auto r2 = combine<L, Op>(L::load(x + i + 2 * n), L::load(y + i + 2 * n));
    auto r3 = combine<L, Op>(L::load(x + i + 3 * n), L::load(y + i + 3 * n));
    L::store(d + i, r0);
    L::store(d + i + n, r1);
    L::store(d + i + 2 * n, r2);
    L::store(d + i + 3 * n, r3);
  }
  for (; i + n <= count; i += n) L::store(d + i, combine<L, Op>(L::load(x + i), L::load(y + i)));
  if (i < count) reduce_scalar(d + i, x + i, y + i, count - i, type, Op);
}

template <class L>
void reduce_type(void* dst, const void* a, const void* b, size_t count, DataType type,
                 ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return reduce_lanes<L, ReduceOp::kProd>(dst, a, b, count, type);
    case ReduceOp::kMin:
      return reduce_lanes<L, ReduceOp::kMin>(dst, a, b, count, type);
    case ReduceOp::kMax:
      return reduce_lanes<L, ReduceOp::kMax>(dst, a, b, count, type);
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return reduce_lanes<L, ReduceOp::kSum>(dst, a, b, count, type);
  }
}

// Floating-point types only; integer division stays scalar (once per chunk, at avg's end).
template <class L>
void divide_lanes(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  using E = typename L::Elem;
  auto* d = static_cast<E*>(dst);
  const auto* s = static_cast<const E*>(src);
  const auto q = L::splat(divisor);
  size_t i = 0;
  for (; i + L::kLanes <= count; i += L::kLanes) L::store(d + i, L::div(L::load(s + i), q));
  if (i < count) divide_scalar(d + i, s + i, count - i, type, divisor);
}

template <class S>
void reduce_any(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::kInt8:
      return reduce_type<typename S::I8>(dst, a, b, count, type, op);
    case DataType::kUint8:
      return reduce_type<typename S::U8>(dst, a, b, count, type, op);
    case DataType::kInt32:
      return reduce_type<typename S::I32>(dst, a, b, count, type, op);
    case DataType::kUint32:
      return reduce_type<typename S::U32>(dst, a, b, count, type, op);
    case DataType::kInt64:
      return reduce_type<typename S::I64>(dst, a, b, count, type, op);
    case DataType::kUint64:
      return reduce_type<typename S::U64>(dst, a, b, count, type, op);
    case DataType::kFloat16:
      return reduce_type<typename S::F16>(dst, a, b, count, type, op);
    case DataType::kBfloat16:
      return reduce_type<typename S::Bf16>(dst, a, b, count, type, op);
    case DataType::kFloat32:
      return reduce_type<typename S::F32>(dst, a, b, count, type, op);
    case DataType::kFloat64:
      return reduce_type<typename S::F64>(dst, a, b, count, type, op);
  }
}

template <class S>
void divide_any(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  switch (type) {
    case DataType::kFloat16:
      return divide_lanes<typename S::F16>(dst, src, count, type, divisor);
    case DataType::kBfloat16:
      return divide_lanes<typename S::Bf16>(dst, src, count, type, divisor);
    case DataType::kFloat32:
      return divide_lanes<typename S::F32>(dst, src, count, type, divisor);
    case DataType::kFloat64:
      return divide_lanes<typename S::F64>(dst, src, count, type, divisor);
    default:
      return divide_scalar(dst, src, count, type, divisor);
  }
}

}  // namespace roce::coll::detail::lanes
