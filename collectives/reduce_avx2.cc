// AVX2 kernels (built with -mavx2 -mfma -mf16c; reduce.cc calls them only on such CPUs). Each
// lane type loads a register's worth of elements (widening float16 / bfloat16 to float32),
// combines and stores; the tail shorter than a register is the scalar kernel's, which defines
// the results these must equal bit for bit.
#include <immintrin.h>

#include "collectives/reduce_isa.h"
#include "collectives/reduce_lanes.h"

namespace roce::coll::detail {
namespace {

// float32 lanes, also the arithmetic of float16 and bfloat16.
struct PsOps {
  static __m256 sum(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 prod(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  // vminps(b, a) is b < a ? b : a, so it returns a when either is NaN; a NaN b is then blended
  // in, which is the scalar kernel's selection exactly.
  static __m256 min(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_min_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
  static __m256 max(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_max_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
  static __m256 div(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
  static __m256 splat(uint64_t d) { return _mm256_set1_ps(static_cast<float>(d)); }
};

struct F32 : PsOps {
  using Elem = float;
  using Reg = __m256;
  static constexpr size_t kLanes = 8;
  static Reg load(const Elem* p) { return _mm256_loadu_ps(p); }
  static void store(Elem* p, Reg v) { _mm256_storeu_ps(p, v); }
};

struct F16 : PsOps {
  using Elem = uint16_t;
  using Reg = __m256;
  static constexpr size_t kLanes = 8;
  static Reg load(const Elem* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store(Elem* p, Reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

// bfloat16 is a float32 with the low 16 bits dropped, so it widens and narrows without
// shuffles: a register of 16 elements is two of float32, the even elements (shifted up) and
// the odd ones (masked in place); narrowed, the odd ones stay in the high halves and the even
// ones are shifted back down and blended between them.
struct Bf16 {
  using Elem = uint16_t;
  struct Reg {
    __m256 even, odd;
  };
  static constexpr size_t kLanes = 16;
  static Reg load(const Elem* p) {
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(x, 16)),
            _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(-0x10000)))};
  }
  // Rounded to nearest even, in the high half of each 32-bit lane. Adding 0x8000 rounds up
  // whatever is above the midpoint and the ties whose last kept bit is odd; a tie whose last
  // kept bit is even (low 17 bits exactly 0x08000) takes 1 less, the compare's all-ones. NaN is
  // made quiet instead, as rounding could carry its payload into infinity.
  static __m256i narrow_high(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i even_tie = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x1FFFF)),
                                          _mm256_set1_epi32(0x8000));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x8000)), even_tie);
    __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(r, quiet, nan);
  }
  static void store(Elem* p, Reg v) {
    __m256i even = _mm256_srli_epi32(narrow_high(v.even), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm256_blend_epi16(even, narrow_high(v.odd), 0xAA));
  }
  template <__m256 (*F)(__m256, __m256)>
  static Reg both(Reg a, Reg b) {
    return {F(a.even, b.even), F(a.odd, b.odd)};
  }
  static Reg sum(Reg a, Reg b) { return both<PsOps::sum>(a, b); }
  static Reg prod(Reg a, Reg b) { return both<PsOps::prod>(a, b); }
  static Reg min(Reg a, Reg b) { return both<PsOps::min>(a, b); }
  static Reg max(Reg a, Reg b) { return both<PsOps::max>(a, b); }
  static Reg div(Reg a, Reg b) { return both<PsOps::div>(a, b); }
  static Reg splat(uint64_t d) { return {PsOps::splat(d), PsOps::splat(d)}; }
};

struct F64 {
  using Elem = double;
  using Reg = __m256d;
  static constexpr size_t kLanes = 4;
  static Reg load(const Elem* p) { return _mm256_loadu_pd(p); }
  static void store(Elem* p, Reg v) { _mm256_storeu_pd(p, v); }
  static Reg sum(Reg a, Reg b) { return _mm256_add_pd(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm256_mul_pd(a, b); }
  static Reg min(Reg a, Reg b) {
    return _mm256_blendv_pd(_mm256_min_pd(b, a), b, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  }
  static Reg max(Reg a, Reg b) {
    return _mm256_blendv_pd(_mm256_max_pd(b, a), b, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  }
  static Reg div(Reg a, Reg b) { return _mm256_div_pd(a, b); }
  static Reg splat(uint64_t d) { return _mm256_set1_pd(static_cast<double>(d)); }
};

template <class T>
struct IntLanes {
  using Elem = T;
  using Reg = __m256i;
  static constexpr size_t kLanes = 32 / sizeof(T);
  static Reg load(const Elem* p) { return _mm256_loadu_si256(reinterpret_cast<const Reg*>(p)); }
  static void store(Elem* p, Reg v) { _mm256_storeu_si256(reinterpret_cast<Reg*>(p), v); }
};

// No 8-bit multiply: multiply the even and the odd bytes as 16-bit lanes and keep the low byte
// of each product (the same for signed and unsigned).
__m256i mullo_epi8(__m256i a, __m256i b) {
  __m256i even = _mm256_mullo_epi16(a, b);
  __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xFF)),
                         _mm256_slli_epi16(odd, 8));
}

// No 64-bit multiply: lo*lo + ((hi*lo + lo*hi) << 32), modulo 2^64.
__m256i mullo_epi64(__m256i a, __m256i b) {
  __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                   _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
  return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

struct I8 : IntLanes<int8_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epi8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epi8(a, b); }
};
struct U8 : IntLanes<uint8_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epu8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epu8(a, b); }
};
struct I32 : IntLanes<int32_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm256_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epi32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epi32(a, b); }
};
struct U32 : IntLanes<uint32_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm256_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_epu32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_epu32(a, b); }
};
// No 64-bit min/max: select on a signed compare (unsigned after flipping the sign bits).
struct I64 : IntLanes<int64_t> {
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi64(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi64(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
  static Reg max(Reg a, Reg b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a)); }
};
struct U64 : IntLanes<uint64_t> {
  static Reg flip(Reg v) { return _mm256_xor_si256(v, _mm256_set1_epi64x(INT64_MIN)); }
  static Reg sum(Reg a, Reg b) { return _mm256_add_epi64(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi64(a, b); }
  static Reg min(Reg a, Reg b) {
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(flip(a), flip(b)));
  }
  static Reg max(Reg a, Reg b) {
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(flip(b), flip(a)));
  }
};

// One lane type per DataType, for lanes::reduce_any / divide_any.
struct Lanes {
  using I8 = detail::I8;
  using U8 = detail::U8;
  using I32 = detail::I32;
  using U32 = detail::U32;
  using I64 = detail::I64;
  using U64 = detail::U64;
  using F16 = detail::F16;
  using Bf16 = detail::Bf16;
  using F32 = detail::F32;
  using F64 = detail::F64;
};

}  // namespace

void reduce_avx2(void* dst, const void* a, const void* b, size_t count, DataType type,
                 ReduceOp op) {
  lanes::reduce_any<Lanes>(dst, a, b, count, type, op);
}

void divide_avx2(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  lanes::divide_any<Lanes>(dst, src, count, type, divisor);
}

}  // namespace roce::coll::detail
