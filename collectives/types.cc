// Names of element types and reductions, as nccl-tests prints and parses them.
#include "collectives/types.h"

#include <array>

namespace roce::coll {
namespace {

struct TypeName {
  std::string_view name;
  DataType type;
};

// The canonical name of each type comes first; aliases follow.
constexpr std::array<TypeName, 15> kTypeNames{{
    {"int8", DataType::kInt8},
    {"uint8", DataType::kUint8},
    {"int32", DataType::kInt32},
    {"uint32", DataType::kUint32},
    {"int64", DataType::kInt64},
    {"uint64", DataType::kUint64},
    {"half", DataType::kFloat16},
    {"bfloat16", DataType::kBfloat16},
    {"float", DataType::kFloat32},
    {"double", DataType::kFloat64},
    {"float16", DataType::kFloat16},
    {"fp16", DataType::kFloat16},
    {"bf16", DataType::kBfloat16},
    {"float32", DataType::kFloat32},
    {"float64", DataType::kFloat64},
}};

// name(DataType) indexes kTypeNames by the enum's value.
constexpr bool canonical_names_in_enum_order() {
  for (size_t i = 0; i < kDataTypeCount; ++i) {
    if (kTypeNames[i].type != static_cast<DataType>(i)) return false;
  }
  return true;
}
static_assert(canonical_names_in_enum_order());

constexpr std::array<std::string_view, kReduceOpCount> kOpNames{"sum", "prod", "min", "max", "avg"};

}  // namespace

size_t size_of(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

std::string_view name(DataType t) {
  auto i = static_cast<size_t>(t);
  return i < kDataTypeCount ? kTypeNames[i].name : "unknown";
}

std::string_view name(ReduceOp op) {
  auto i = static_cast<size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : "unknown";
}

std::optional<DataType> parse_data_type(std::string_view s) {
  for (const TypeName& t : kTypeNames) {
    if (t.name == s) return t.type;
  }
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == s) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

}  // namespace roce::coll
