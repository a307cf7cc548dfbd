// The scalar kernels (the reference the vector ones must match bit for bit), the float16 /
// bfloat16 conversions, and the run-time choice among scalar, AVX2 and AVX-512.
#include "collectives/reduce.h"

#include <cpuid.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "collectives/error.h"
#include "collectives/reduce_isa.h"

namespace roce::coll {

namespace {

// The conversions are defined here, inline, so that the scalar loops inline them too; the
// public functions below are these.
inline float widen_half(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) {
    // Inf, or NaN made quiet with its payload kept, as F16C's vcvtph2ps does.
    uint32_t quiet = mant != 0 ? 0x400000 : 0;
    return std::bit_cast<float>(sign | 0x7F800000 | quiet | (mant << 13));
  }
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float32.
    float mag = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(mag));
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// Drops the low `shift` bits of v, rounding to nearest, ties to even.
inline uint32_t shift_round_even(uint32_t v, unsigned shift) {
  uint32_t kept = v >> shift;
  uint32_t rest = v & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

inline uint16_t narrow_half(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  auto sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t mag = u & 0x7FFFFFFF;
  if (mag > 0x7F800000) {
    // NaN: quiet, top of the payload kept (vcvtps2ph's result).
    return static_cast<uint16_t>(sign | 0x7E00 | ((mag >> 13) & 0x3FF));
  }
  if (mag >= 0x477FF000) return sign | 0x7C00;  // >= 65520 rounds past 65504: inf
  if (mag >= 0x38800000) {
    // Normal: rebias the exponent (127 -> 15); a rounding carry moves into it correctly.
    return static_cast<uint16_t>(sign | shift_round_even(mag - 0x38000000, 13));
  }
  uint32_t exp = mag >> 23;
  if (exp < 102) return sign;  // below 2^-25: rounds to zero
  // Subnormal half: the significand (with its hidden bit) times 2^(exp - 126) quanta of 2^-24.
  uint32_t sig = (mag & 0x7FFFFF) | 0x800000;
  return static_cast<uint16_t>(sign | shift_round_even(sig, 126 - exp));
}

inline float widen_bf16(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t narrow_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  // NaN: truncate and make quiet (rounding could carry a small payload into infinity).
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x40);
  // Nearest even: adding 0x7FFF plus the lowest kept bit carries exactly when we round up.
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

float half_to_float(uint16_t h) { return widen_half(h); }
uint16_t float_to_half(float f) { return narrow_half(f); }
float bfloat16_to_float(uint16_t b) { return widen_bf16(b); }
uint16_t float_to_bfloat16(float f) { return narrow_bf16(f); }

namespace {

// Storage of the 16-bit floats; distinct types so the templates below pick their arithmetic.
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

float widen(Half h) { return widen_half(h.bits); }
float widen(Bf16 b) { return widen_bf16(b.bits); }
void narrow(float f, Half& h) { h.bits = narrow_half(f); }
void narrow(float f, Bf16& b) { b.bits = narrow_bf16(f); }

// min and max select b when b is NaN or strictly better, otherwise a: NaN propagates, and for
// -0 / +0 the result is a. The vector kernels reproduce exactly this selection.
template <class F, ReduceOp Op>
F combine_float(F a, F b) {
  if constexpr (Op == ReduceOp::kProd) {
    return a * b;
  } else if constexpr (Op == ReduceOp::kMin) {
    return (std::isnan(b) || b < a) ? b : a;
  } else if constexpr (Op == ReduceOp::kMax) {
    return (std::isnan(b) || b > a) ? b : a;
  } else {
    return a + b;
  }
}

template <class T, ReduceOp Op>
T combine(T a, T b) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, Bf16>) {
    T r;
    narrow(combine_float<float, Op>(widen(a), widen(b)), r);
    return r;
  } else if constexpr (std::is_floating_point_v<T>) {
    return combine_float<T, Op>(a, b);
  } else {
    // Integer sums and products in the unsigned type: they wrap, without undefined behaviour.
    using U = std::make_unsigned_t<T>;
    if constexpr (Op == ReduceOp::kProd) {
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else if constexpr (Op == ReduceOp::kMin) {
      return b < a ? b : a;
    } else if constexpr (Op == ReduceOp::kMax) {
      return b > a ? b : a;
    } else {
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  }
}

// Element access by memcpy: callers' buffers need not be aligned to the element size.
template <class T>
T load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}

template <class T, ReduceOp Op>
void reduce_loop(void* dst, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) store(dst, i, combine<T, Op>(load<T>(a, i), load<T>(b, i)));
}

template <class T>
void reduce_typed(void* dst, const void* a, const void* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
      return reduce_loop<T, ReduceOp::kProd>(dst, a, b, count);
    case ReduceOp::kMin:
      return reduce_loop<T, ReduceOp::kMin>(dst, a, b, count);
    case ReduceOp::kMax:
      return reduce_loop<T, ReduceOp::kMax>(dst, a, b, count);
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return reduce_loop<T, ReduceOp::kSum>(dst, a, b, count);
  }
}

// x / divisor (> 0): integers truncate toward zero, as C's /; floats divide in their own
// precision (float16 and bfloat16 in float32) and round once.
template <class T>
T quotient(T x, uint64_t divisor) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, Bf16>) {
    T r;
    narrow(widen(x) / static_cast<float>(divisor), r);
    return r;
  } else if constexpr (std::is_floating_point_v<T>) {
    return x / static_cast<T>(divisor);
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(x / divisor);
  } else {
    auto v = static_cast<int64_t>(x);
    if (divisor > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      // Only INT64_MIN / 2^63 is nonzero; the divisor has no int64_t value.
      bool minus_one = v == std::numeric_limits<int64_t>::min() && divisor == 1ull << 63;
      return minus_one ? T{-1} : T{0};
    }
    return static_cast<T>(v / static_cast<int64_t>(divisor));
  }
}

template <class T>
void divide_typed(void* dst, const void* src, size_t count, uint64_t divisor) {
  for (size_t i = 0; i < count; ++i) store(dst, i, quotient(load<T>(src, i), divisor));
}

}  // namespace

namespace detail {

void reduce_scalar(void* dst, const void* a, const void* b, size_t count, DataType type,
                   ReduceOp op) {
  switch (type) {
    case DataType::kInt8:
      return reduce_typed<int8_t>(dst, a, b, count, op);
    case DataType::kUint8:
      return reduce_typed<uint8_t>(dst, a, b, count, op);
    case DataType::kInt32:
      return reduce_typed<int32_t>(dst, a, b, count, op);
    case DataType::kUint32:
      return reduce_typed<uint32_t>(dst, a, b, count, op);
    case DataType::kInt64:
      return reduce_typed<int64_t>(dst, a, b, count, op);
    case DataType::kUint64:
      return reduce_typed<uint64_t>(dst, a, b, count, op);
    case DataType::kFloat16:
      return reduce_typed<Half>(dst, a, b, count, op);
    case DataType::kBfloat16:
      return reduce_typed<Bf16>(dst, a, b, count, op);
    case DataType::kFloat32:
      return reduce_typed<float>(dst, a, b, count, op);
    case DataType::kFloat64:
      return reduce_typed<double>(dst, a, b, count, op);
  }
}

void divide_scalar(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  switch (type) {
    case DataType::kInt8:
      return divide_typed<int8_t>(dst, src, count, divisor);
    case DataType::kUint8:
      return divide_typed<uint8_t>(dst, src, count, divisor);
    case DataType::kInt32:
      return divide_typed<int32_t>(dst, src, count, divisor);
    case DataType::kUint32:
      return divide_typed<uint32_t>(dst, src, count, divisor);
    case DataType::kInt64:
      return divide_typed<int64_t>(dst, src, count, divisor);
    case DataType::kUint64:
      return divide_typed<uint64_t>(dst, src, count, divisor);
    case DataType::kFloat16:
      return divide_typed<Half>(dst, src, count, divisor);
    case DataType::kBfloat16:
      return divide_typed<Bf16>(dst, src, count, divisor);
    case DataType::kFloat32:
      return divide_typed<float>(dst, src, count, divisor);
    case DataType::kFloat64:
      return divide_typed<double>(dst, src, count, divisor);
  }
}

}  // namespace detail

namespace {

bool has_avx2_fma_f16c() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  // F16C by CPUID (clang's __builtin_cpu_supports does not know "f16c"); the avx2 check above
  // already confirmed the OS saves the YMM state it uses.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

// What each ISA needs, for the refusal message.
const char* requirement(Isa isa) {
  return isa == Isa::kAvx512 ? "AVX-512 F, BW and VL" : "AVX2, FMA and F16C";
}

}  // namespace

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return has_avx2_fma_f16c();
    case Isa::kAvx512:
      // reduce_avx512.cc is also built with -mavx2 -mfma -mf16c, so it needs those too.
      return has_avx2_fma_f16c() && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }
  return false;
}

std::string_view name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

Isa detail::parse_isa_env(const char* value) {
  if (value == nullptr || *value == '\0') {
    if (cpu_supports(Isa::kAvx512)) return Isa::kAvx512;
    return cpu_supports(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar;
  }
  std::string_view v(value);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (v != name(isa)) continue;
    if (!cpu_supports(isa)) {
      throw Error(ErrorKind::kInvalidArgument,
                  "ROCE_COLL_ISA=" + std::string(v) + ": this CPU lacks " + requirement(isa));
    }
    return isa;
  }
  throw Error(ErrorKind::kInvalidArgument, "ROCE_COLL_ISA=" + std::string(v) +
                                               ": unknown ISA (expected scalar, avx2 or avx512)");
}

Isa active_isa() {
  // Read once: the choice must not change under a running collective.
  static const Isa isa = detail::parse_isa_env(std::getenv("ROCE_COLL_ISA"));
  return isa;
}

namespace {

void check_type_op(DataType type, ReduceOp op) {
  if (static_cast<int>(type) >= kDataTypeCount || static_cast<int>(op) >= kReduceOpCount) {
    throw Error(ErrorKind::kInvalidArgument,
                "reduce: invalid data type " + std::to_string(static_cast<int>(type)) +
                    " or operation " + std::to_string(static_cast<int>(op)));
  }
}

void check_divide(DataType type, uint64_t divisor) {
  if (static_cast<int>(type) >= kDataTypeCount) {
    throw Error(ErrorKind::kInvalidArgument,
                "divide: invalid data type " + std::to_string(static_cast<int>(type)));
  }
  if (divisor == 0) throw Error(ErrorKind::kInvalidArgument, "divide: divisor is 0");
}

void check_isa(Isa isa) {
  if (!cpu_supports(isa)) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(name(isa)) + " kernels: this CPU lacks " + requirement(isa));
  }
}

void run_reduce(Isa isa, void* dst, const void* a, const void* b, size_t count, DataType type,
                ReduceOp op) {
  check_type_op(type, op);
  if (count == 0) return;
  switch (isa) {
    case Isa::kAvx512:
      return detail::reduce_avx512(dst, a, b, count, type, op);
    case Isa::kAvx2:
      return detail::reduce_avx2(dst, a, b, count, type, op);
    case Isa::kScalar:
      return detail::reduce_scalar(dst, a, b, count, type, op);
  }
}

void run_divide(Isa isa, void* dst, const void* src, size_t count, DataType type,
                uint64_t divisor) {
  check_divide(type, divisor);
  if (count == 0) return;
  switch (isa) {
    case Isa::kAvx512:
      return detail::divide_avx512(dst, src, count, type, divisor);
    case Isa::kAvx2:
      return detail::divide_avx2(dst, src, count, type, divisor);
    case Isa::kScalar:
      return detail::divide_scalar(dst, src, count, type, divisor);
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op) {
  run_reduce(active_isa(), dst, a, b, count, type, op);
}

void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  run_divide(active_isa(), dst, src, count, type, divisor);
}

void reduce_with(Isa isa, void* dst, const void* a, const void* b, size_t count, DataType type,
                 ReduceOp op) {
  check_isa(isa);
  run_reduce(isa, dst, a, b, count, type, op);
}

void divide_with(Isa isa, void* dst, const void* src, size_t count, DataType type,
                 uint64_t divisor) {
  check_isa(isa);
  run_divide(isa, dst, src, count, type, divisor);
}

}  // namespace roce::coll
