// AVX-512 kernels (built with -mavx512f -mavx512bw -mavx512vl; reduce.cc calls them only on
// such CPUs). The same shape as reduce_avx2.cc with 512-bit registers: each lane type loads a
// register's worth of elements (widening float16 / bfloat16 to float32), combines and stores;
// the tail is the scalar kernel's, which defines the results these must equal bit for bit.
// AVX512DQ is not required, so 64-bit multiplies are emulated.
// GCC 12's AVX-512 headers initialise their "undefined" registers from themselves, which
// -Wmaybe-uninitialized reports at every inlined use (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "collectives/reduce_isa.h"
#include "collectives/reduce_lanes.h"

namespace roce::coll::detail {
namespace {

// float32 lanes, also the arithmetic of float16 and bfloat16.
struct PsOps {
  static __m512 sum(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 prod(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  // vminps(b, a) is b < a ? b : a, so it returns a when either is NaN; a NaN b is then moved
  // in, which is the scalar kernel's selection exactly.
  static __m512 min(__m512 a, __m512 b) {
    return _mm512_mask_mov_ps(_mm512_min_ps(b, a), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), b);
  }
  static __m512 max(__m512 a, __m512 b) {
    return _mm512_mask_mov_ps(_mm512_max_ps(b, a), _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), b);
  }
  static __m512 div(__m512 a, __m512 b) { return _mm512_div_ps(a, b); }
  static __m512 splat(uint64_t d) { return _mm512_set1_ps(static_cast<float>(d)); }
};

struct F32 : PsOps {
  using Elem = float;
  using Reg = __m512;
  static constexpr size_t kLanes = 16;
  static Reg load(const Elem* p) { return _mm512_loadu_ps(p); }
  static void store(Elem* p, Reg v) { _mm512_storeu_ps(p, v); }
};

struct F16 : PsOps {
  using Elem = uint16_t;
  using Reg = __m512;
  static constexpr size_t kLanes = 16;
  static Reg load(const Elem* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(Elem* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

// bfloat16 is a float32 with the low 16 bits dropped, so it widens and narrows without
// shuffles: a register of 32 elements is two of float32, the even elements (shifted up) and
// the odd ones (masked in place); narrowed, the odd ones stay in the high halves and the even
// ones are shifted back down and blended between them.
struct Bf16 {
  using Elem = uint16_t;
  struct Reg {
    __m512 even, odd;
  };
  static constexpr size_t kLanes = 32;
  static Reg load(const Elem* p) {
    __m512i x = _mm512_loadu_si512(p);
    return {_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
            _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(-0x10000)))};
  }
  // Rounded to nearest even, in the high half of each 32-bit lane. Adding 0x8000 rounds up
  // whatever is above the midpoint and the ties whose last kept bit is odd; a tie whose last
  // kept bit is even (low 17 bits exactly 0x08000) takes 1 less. NaN is made quiet instead, as
  // rounding could carry its payload into infinity.
  static __m512i narrow_high(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __mmask16 even_tie = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x1FFFF)),
                                                 _mm512_set1_epi32(0x8000));
    __m512i r = _mm512_add_epi32(u, _mm512_set1_epi32(0x8000));
    r = _mm512_mask_sub_epi32(r, even_tie, r, _mm512_set1_epi32(1));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
  }
  static void store(Elem* p, Reg v) {
    __m512i even = _mm512_srli_epi32(narrow_high(v.even), 16);
    _mm512_storeu_si512(p, _mm512_mask_blend_epi16(0xAAAAAAAA, even, narrow_high(v.odd)));
  }
  template <__m512 (*F)(__m512, __m512)>
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
  using Reg = __m512d;
  static constexpr size_t kLanes = 8;
  static Reg load(const Elem* p) { return _mm512_loadu_pd(p); }
  static void store(Elem* p, Reg v) { _mm512_storeu_pd(p, v); }
  static Reg sum(Reg a, Reg b) { return _mm512_add_pd(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm512_mul_pd(a, b); }
  static Reg min(Reg a, Reg b) {
    return _mm512_mask_mov_pd(_mm512_min_pd(b, a), _mm512_cmp_pd_mask(b, b, _CMP_UNORD_Q), b);
  }
  static Reg max(Reg a, Reg b) {
    return _mm512_mask_mov_pd(_mm512_max_pd(b, a), _mm512_cmp_pd_mask(b, b, _CMP_UNORD_Q), b);
  }
  static Reg div(Reg a, Reg b) { return _mm512_div_pd(a, b); }
  static Reg splat(uint64_t d) { return _mm512_set1_pd(static_cast<double>(d)); }
};

template <class T>
struct IntLanes {
  using Elem = T;
  using Reg = __m512i;
  static constexpr size_t kLanes = 64 / sizeof(T);
  static Reg load(const Elem* p) { return _mm512_loadu_si512(p); }
  static void store(Elem* p, Reg v) { _mm512_storeu_si512(p, v); }
};

// No 8-bit multiply: multiply the even and the odd bytes as 16-bit lanes and keep the low byte
// of each product (the same for signed and unsigned).
__m512i mullo_epi8(__m512i a, __m512i b) {
  __m512i even = _mm512_mullo_epi16(a, b);
  __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
  return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0xFF)),
                         _mm512_slli_epi16(odd, 8));
}

// vpmullq is AVX512DQ: lo*lo + ((hi*lo + lo*hi) << 32), modulo 2^64.
__m512i mullo_epi64(__m512i a, __m512i b) {
  __m512i cross = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(a, 32), b),
                                   _mm512_mul_epu32(a, _mm512_srli_epi64(b, 32)));
  return _mm512_add_epi64(_mm512_mul_epu32(a, b), _mm512_slli_epi64(cross, 32));
}

struct I8 : IntLanes<int8_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epi8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epi8(a, b); }
};
struct U8 : IntLanes<uint8_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi8(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi8(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epu8(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epu8(a, b); }
};
struct I32 : IntLanes<int32_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm512_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epi32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epi32(a, b); }
};
struct U32 : IntLanes<uint32_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi32(a, b); }
  static Reg prod(Reg a, Reg b) { return _mm512_mullo_epi32(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epu32(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epu32(a, b); }
};
struct I64 : IntLanes<int64_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi64(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi64(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epi64(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epi64(a, b); }
};
struct U64 : IntLanes<uint64_t> {
  static Reg sum(Reg a, Reg b) { return _mm512_add_epi64(a, b); }
  static Reg prod(Reg a, Reg b) { return mullo_epi64(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_epu64(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_epu64(a, b); }
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

void reduce_avx512(void* dst, const void* a, const void* b, size_t count, DataType type,
                   ReduceOp op) {
  lanes::reduce_any<Lanes>(dst, a, b, count, type, op);
}

void divide_avx512(void* dst, const void* src, size_t count, DataType type, uint64_t divisor) {
  lanes::divide_any<Lanes>(dst, src, count, type, divisor);
}

}  // namespace roce::coll::detail
