// The element types and reductions of the collectives, with the names nccl-tests and the C API
// use. float16 and bfloat16 are reduced in float32 and rounded once per step (reduce.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace roce::coll {

enum class DataType : uint8_t {
  kInt8,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kBfloat16,
  kFloat32,
  kFloat64,
};
inline constexpr int kDataTypeCount = 10;

enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kAvg };
inline constexpr int kReduceOpCount = 5;

size_t size_of(DataType t);
// nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double.
std::string_view name(DataType t);
std::string_view name(ReduceOp op);  // sum prod min max avg
// Accepts the names above and the aliases float16, float32, float64, fp16, bf16.
std::optional<DataType> parse_data_type(std::string_view s);
std::optional<ReduceOp> parse_reduce_op(std::string_view s);

}  // namespace roce::coll
