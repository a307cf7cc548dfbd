// Private to the kernels: the per-ISA entry points reduce.cc dispatches to. Each lives in its
// own translation unit, compiled for its ISA, so nothing here may be inline: an inline function
// compiled with -mavx512f in one unit could be the copy the linker keeps for all of them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/reduce.h"
#include "collectives/types.h"

namespace roce::coll::detail {

// Every kernel has reduce()'s and divide()'s contract; type and op are already validated.
void reduce_scalar(void* dst, const void* a, const void* b, size_t count, DataType type,
                   ReduceOp op);
void divide_scalar(void* dst, const void* src, size_t count, DataType type, uint64_t divisor);
void reduce_avx2(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);
void divide_avx2(void* dst, const void* src, size_t count, DataType type, uint64_t divisor);
void reduce_avx512(void* dst, const void* a, const void* b, size_t count, DataType type,
                   ReduceOp op);
void divide_avx512(void* dst, const void* src, size_t count, DataType type, uint64_t divisor);

// The ISA ROCE_COLL_ISA's value selects: nullptr or "" means the widest the CPU supports.
// Throws Error(kInvalidArgument) for an unknown name or an ISA the CPU lacks.
Isa parse_isa_env(const char* value);

}  // namespace roce::coll::detail
