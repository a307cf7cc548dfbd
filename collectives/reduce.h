// Reduction kernels, apart from data movement. Each is vectorised for the CPU it runs on: the
// widest of AVX-512 (F + BW), AVX2 (+ F16C) and scalar is chosen at run time, once, and
// ROCE_COLL_ISA=scalar|avx2|avx512 forces one (an ISA the CPU lacks is refused with one line).
//
// float16 and bfloat16 are widened to float32, reduced, and rounded to nearest even once per
// call. min and max propagate NaN (if either input is NaN the result is NaN, as IEEE 754-2019's
// minimum / maximum); -0 and +0 compare equal. Integers wrap (two's complement), as NCCL's do.
// avg reduces as sum; its final division is divide().
#pragma once

#include <cstddef>
#include <string_view>

#include "collectives/types.h"

namespace roce::coll {

enum class Isa { kScalar, kAvx2, kAvx512 };

// dst[i] = a[i] op b[i] for i < count. dst may be a or b (exactly, not a partial overlap).
void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);
// dst[i] = src[i] / divisor (avg's last step; integers truncate toward zero, as C's /).
void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor);

// The implementation reduce() and divide() use, and its name ("scalar", "avx2", "avx512").
Isa active_isa();
std::string_view name(Isa isa);
bool cpu_supports(Isa isa);
// One implementation explicitly (tests compare each against the scalar one); the ISA must be
// supported by the CPU.
void reduce_with(Isa isa, void* dst, const void* a, const void* b, size_t count, DataType type,
                 ReduceOp op);
void divide_with(Isa isa, void* dst, const void* src, size_t count, DataType type,
                 uint64_t divisor);

// float16 / bfloat16 <-> float32, round to nearest even (NaN stays NaN).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace roce::coll
