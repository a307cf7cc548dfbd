// The reduction kernels: every ISA this CPU has, for every type and operation, against the
// scalar kernel and against an independent reference written here (exact arithmetic in double,
// rounded once by a field-by-field encoder), bit for bit. NaN payloads of sums, products and
// quotients are not specified (x86 keeps the first operand's, and compilers may swap operands),
// so there only NaN-ness is compared with the reference, and with the scalar kernel when both
// inputs are NaN; min and max select an input, so their NaNs are compared bit for bit.
#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/error.h"
#include "collectives/reduce_isa.h"
#include "collectives/types.h"

namespace roce::coll {

// Test parameters by name in gtest's messages.
void PrintTo(Isa isa, std::ostream* os) { *os << name(isa); }
void PrintTo(DataType t, std::ostream* os) { *os << name(t); }

namespace {

constexpr Isa kIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
constexpr size_t kCounts[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 4099};
constexpr uint64_t kDivisors[] = {1, 2, 3, 7, 255, 1000};

// ---- The independent reference --------------------------------------------------------------

// An IEEE 754 binary format by its field widths.
struct Format {
  int ebits;
  int mbits;
};

bool is_float(DataType t) { return t >= DataType::kFloat16; }
bool is_signed_int(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}
bool is_minmax(ReduceOp op) { return op == ReduceOp::kMin || op == ReduceOp::kMax; }
uint64_t mask_of(DataType t) { return size_of(t) == 8 ? ~0ull : (1ull << (8 * size_of(t))) - 1; }
Format format_of(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return {5, 10};
    case DataType::kBfloat16:
      return {8, 7};
    case DataType::kFloat32:
      return {8, 23};
    default:
      return {11, 52};
  }
}
int64_t sext(DataType t, uint64_t bits) {
  int shift = 64 - 8 * static_cast<int>(size_of(t));
  return static_cast<int64_t>(bits << shift) >> shift;
}
uint64_t inf_bits(Format f) { return ((1ull << f.ebits) - 1) << f.mbits; }
uint64_t sign_bit(Format f) { return 1ull << (f.ebits + f.mbits); }
bool is_nan(DataType t, uint64_t bits) {
  Format f = format_of(t);
  return is_float(t) && (bits & ~sign_bit(f)) > inf_bits(f);
}

double decode(DataType t, uint64_t bits) {
  if (t == DataType::kFloat64) return std::bit_cast<double>(bits);
  Format f = format_of(t);
  int bias = (1 << (f.ebits - 1)) - 1;
  uint64_t mant = bits & ((1ull << f.mbits) - 1);
  int exp = static_cast<int>((bits >> f.mbits) & ((1u << f.ebits) - 1));
  double mag;
  if (exp == (1 << f.ebits) - 1) {
    mag = mant != 0 ? NAN : INFINITY;
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<double>(mant), 1 - bias - f.mbits);
  } else {
    mag = std::ldexp(static_cast<double>(mant | (1ull << f.mbits)), exp - bias - f.mbits);
  }
  return (bits & sign_bit(f)) != 0 ? -mag : mag;
}

// Rounds d to the type, to nearest even, by scaling to an integer significand (one rounding).
uint64_t encode(DataType t, double d) {
  if (t == DataType::kFloat64) return std::bit_cast<uint64_t>(d);
  Format f = format_of(t);
  uint64_t sign = std::signbit(d) ? sign_bit(f) : 0;
  if (std::isnan(d)) return sign | inf_bits(f) | (1ull << (f.mbits - 1));
  double x = std::fabs(d);
  if (std::isinf(x)) return sign | inf_bits(f);
  if (x == 0) return sign;
  int e;
  std::frexp(x, &e);
  int emin = 2 - (1 << (f.ebits - 1));
  e = std::max(e - 1, emin);  // x is in [2^e, 2^(e+1)), or subnormal
  auto q = static_cast<uint64_t>(std::nearbyint(std::ldexp(x, f.mbits - e)));
  uint64_t bits = (static_cast<uint64_t>(e - emin) << f.mbits) + q;
  return sign | std::min(bits, inf_bits(f));
}

uint64_t ref_reduce(DataType t, ReduceOp op, uint64_t a, uint64_t b) {
  if (!is_float(t)) {
    if (op == ReduceOp::kProd) return (a * b) & mask_of(t);
    if (!is_minmax(op)) return (a + b) & mask_of(t);
    bool less = is_signed_int(t) ? sext(t, b) < sext(t, a) : b < a;
    bool greater = is_signed_int(t) ? sext(t, b) > sext(t, a) : b > a;
    return (op == ReduceOp::kMin ? less : greater) ? b : a;
  }
  double x = decode(t, a), y = decode(t, b);
  if (op == ReduceOp::kProd) return encode(t, x * y);
  if (!is_minmax(op)) return encode(t, x + y);
  // The documented selection: b if it is NaN or strictly better, else a.
  bool pick_b = std::isnan(y) || (op == ReduceOp::kMin ? y < x : y > x);
  uint64_t r = pick_b ? b : a;
  // float16 and bfloat16 pass through float32, which makes a signalling NaN quiet.
  if (size_of(t) == 2 && is_nan(t, r)) r |= 1ull << (format_of(t).mbits - 1);
  return r;
}

uint64_t ref_divide(DataType t, uint64_t x, uint64_t d) {
  if (is_float(t)) return encode(t, decode(t, x) / static_cast<double>(d));
  if (is_signed_int(t))
    return static_cast<uint64_t>(sext(t, x) / static_cast<int64_t>(d)) & mask_of(t);
  return x / d;
}

// ---- Buffers --------------------------------------------------------------------------------

// count elements that start one element past a 64-byte boundary (no kernel may assume more
// alignment than the element's), between guard elements that must survive every call.
class Buffer {
 public:
  static constexpr uint64_t kGuard = 0xA5A5A5A5A5A5A5A5ull;
  Buffer(DataType t, size_t count)
      : t_(t), size_(size_of(t)), count_(count), bytes_((count + 2) * size_ + 64) {
    auto addr = reinterpret_cast<uintptr_t>(bytes_.data());
    base_ = bytes_.data() + ((64 - addr % 64) % 64);
    set_raw(0, kGuard);
    set_raw(count + 1, kGuard);
  }
  // A copy is laid out afresh: base_ points into its own bytes.
  Buffer(const Buffer& o) : Buffer(o.t_, o.count_) {
    std::memcpy(base_, o.base_, (count_ + 2) * size_);
  }
  Buffer(Buffer&&) = default;
  Buffer& operator=(const Buffer&) = delete;
  void* data() { return base_ + size_; }
  const void* data() const { return base_ + size_; }
  size_t count() const { return count_; }
  uint64_t get(size_t i) const { return get_raw(i + 1); }
  void set(size_t i, uint64_t bits) { set_raw(i + 1, bits); }
  bool guards_intact() const {
    return get_raw(0) == (kGuard & mask_of(t_)) && get_raw(count_ + 1) == (kGuard & mask_of(t_));
  }

 private:
  uint64_t get_raw(size_t i) const {
    uint64_t v = 0;
    std::memcpy(&v, base_ + i * size_, size_);
    return v;
  }
  void set_raw(size_t i, uint64_t bits) { std::memcpy(base_ + i * size_, &bits, size_); }

  DataType t_;
  size_t size_;
  size_t count_;
  std::vector<uint8_t> bytes_;
  uint8_t* base_;
};

// Mostly values of varied magnitude (their sums and products round, overflow and underflow);
// one in eight is an arbitrary bit pattern (subnormals, infinities, NaNs).
uint64_t random_element(DataType t, std::mt19937_64& rng) {
  uint64_t r = rng();
  if (!is_float(t) || r % 8 == 0) return rng() & mask_of(t);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  int exp = static_cast<int>(r >> 32) % 40 - 25;
  return encode(t, std::ldexp(unit(rng), exp));
}

Buffer random_buffer(DataType t, size_t count, std::mt19937_64& rng) {
  Buffer b(t, count);
  for (size_t i = 0; i < count; ++i) b.set(i, random_element(t, rng));
  return b;
}

Buffer from_bits(DataType t, const std::vector<uint64_t>& bits) {
  Buffer b(t, bits.size());
  for (size_t i = 0; i < bits.size(); ++i) b.set(i, bits[i] & mask_of(t));
  return b;
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// got[i] against the scalar kernel's and the reference's results for inputs a[i] (b[i]); an
// empty string if all agree, else the first disagreement.
std::string check(DataType t, ReduceOp op, const Buffer& got, const Buffer& scalar,
                  const std::vector<uint64_t>& ref, const Buffer& a, const Buffer* b) {
  if (!got.guards_intact()) return "wrote outside [dst, dst + count)";
  for (size_t i = 0; i < got.count(); ++i) {
    uint64_t g = got.get(i), s = scalar.get(i), r = ref[i];
    bool any_nan = !is_minmax(op) && is_nan(t, g);
    bool both_in_nan = is_nan(t, a.get(i)) && (b == nullptr || is_nan(t, b->get(i)));
    bool scalar_ok = g == s || (any_nan && both_in_nan && is_nan(t, s));
    bool ref_ok = g == r || (any_nan && is_nan(t, r));
    if (scalar_ok && ref_ok) continue;
    return "element " + std::to_string(i) + ": a=" + hex(a.get(i)) +
           (b != nullptr ? " b=" + hex(b->get(i)) : "") + " got " + hex(g) + ", scalar " + hex(s) +
           ", reference " + hex(r);
  }
  return "";
}

std::string check_same(const Buffer& got, const Buffer& want) {
  if (!got.guards_intact()) return "wrote outside [dst, dst + count)";
  for (size_t i = 0; i < got.count(); ++i) {
    if (got.get(i) != want.get(i)) return "element " + std::to_string(i) + " differs";
  }
  return "";
}

// Runs one reduction on the ISA, in place both ways too, and checks everything.
void expect_reduce(Isa isa, DataType t, ReduceOp op, const Buffer& a, const Buffer& b) {
  size_t n = a.count();
  Buffer got(t, n), scalar(t, n), in_a = a, in_b = b;
  reduce_with(isa, got.data(), a.data(), b.data(), n, t, op);
  reduce_with(Isa::kScalar, scalar.data(), a.data(), b.data(), n, t, op);
  std::vector<uint64_t> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = ref_reduce(t, op, a.get(i), b.get(i));
  EXPECT_EQ(check(t, op, got, scalar, ref, a, &b), "") << name(op) << " count " << n;
  reduce_with(isa, in_a.data(), in_a.data(), b.data(), n, t, op);
  EXPECT_EQ(check_same(in_a, got), "") << name(op) << " dst == a, count " << n;
  reduce_with(isa, in_b.data(), a.data(), in_b.data(), n, t, op);
  EXPECT_EQ(check_same(in_b, got), "") << name(op) << " dst == b, count " << n;
}

void expect_divide(Isa isa, DataType t, const Buffer& src, uint64_t divisor) {
  size_t n = src.count();
  Buffer got(t, n), scalar(t, n), in_place = src;
  divide_with(isa, got.data(), src.data(), n, t, divisor);
  divide_with(Isa::kScalar, scalar.data(), src.data(), n, t, divisor);
  std::vector<uint64_t> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = ref_divide(t, src.get(i), divisor);
  EXPECT_EQ(check(t, ReduceOp::kAvg, got, scalar, ref, src, nullptr), "")
      << "divisor " << divisor << " count " << n;
  divide_with(isa, in_place.data(), in_place.data(), n, t, divisor);
  EXPECT_EQ(check_same(in_place, got), "") << "in place, divisor " << divisor << " count " << n;
}

// Edge values of each type: for floats zeros, ones, the extremes of each range, infinities and
// quiet and signalling NaNs of both signs, and a tie (1 + half an ulp) for rounding.
std::vector<uint64_t> special_values(DataType t) {
  if (!is_float(t)) {
    uint64_t m = mask_of(t), top = (m >> 1) + 1;  // the sign bit, or INT_MIN's bits
    return {0, 1, 2, 3, m, m - 1, top, top - 1, top + 1, m / 3, 0x5A & m, top >> 1};
  }
  Format f = format_of(t);
  uint64_t inf = inf_bits(f), sign = sign_bit(f), one = encode(t, 1.0);
  uint64_t quiet = 1ull << (f.mbits - 1);
  std::vector<uint64_t> v = {0,       1,   3,           1ull << f.mbits, inf - 1,        one,
                             one + 1, inf, inf | quiet, inf | 1,         inf | quiet | 5};
  for (double d : {0.5, 3.0, std::ldexp(1.0, -f.mbits - 1)}) v.push_back(encode(t, d));
  size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(v[i] | sign);
  return v;
}

// ---- Parameterised by ISA and type ----------------------------------------------------------

class KernelTest : public testing::TestWithParam<std::tuple<Isa, DataType>> {
 protected:
  void SetUp() override {
    if (!cpu_supports(isa())) GTEST_SKIP() << "this CPU lacks " << name(isa());
  }
  Isa isa() const { return std::get<0>(GetParam()); }
  DataType type() const { return std::get<1>(GetParam()); }
};

TEST_P(KernelTest, ReduceRandomMatchesScalarAndReference) {
  std::mt19937_64 rng(static_cast<uint64_t>(type()) * 977 + 1);
  for (ReduceOp op : kOps) {
    for (size_t count : kCounts) {
      Buffer a = random_buffer(type(), count, rng), b = random_buffer(type(), count, rng);
      expect_reduce(isa(), type(), op, a, b);
    }
  }
}

// Every pair of edge values (enough of them to fill several registers): NaN and infinities in
// min and max, signed zeros, wrapping integer sums and products, overflow and underflow.
TEST_P(KernelTest, ReduceSpecialValuePairs) {
  std::vector<uint64_t> v = special_values(type()), xs, ys;
  for (uint64_t x : v) {
    for (uint64_t y : v) {
      xs.push_back(x);
      ys.push_back(y);
    }
  }
  for (ReduceOp op : kOps)
    expect_reduce(isa(), type(), op, from_bits(type(), xs), from_bits(type(), ys));
}

TEST_P(KernelTest, DivideMatchesScalarAndReference) {
  std::mt19937_64 rng(static_cast<uint64_t>(type()) * 131 + 7);
  for (uint64_t divisor : kDivisors) {
    for (size_t count : kCounts)
      expect_divide(isa(), type(), random_buffer(type(), count, rng), divisor);
    expect_divide(isa(), type(), from_bits(type(), special_values(type())), divisor);
  }
}

std::string param_name(const testing::TestParamInfo<std::tuple<Isa, DataType>>& info) {
  return std::string(name(std::get<0>(info.param))) + "_" +
         std::string(name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(AllIsasAndTypes, KernelTest,
                         testing::Combine(testing::ValuesIn(kIsas),
                                          testing::Values(DataType::kInt8, DataType::kUint8,
                                                          DataType::kInt32, DataType::kUint32,
                                                          DataType::kInt64, DataType::kUint64,
                                                          DataType::kFloat16, DataType::kBfloat16,
                                                          DataType::kFloat32, DataType::kFloat64)),
                         param_name);

// ---- Parameterised by ISA -------------------------------------------------------------------

class IsaTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!cpu_supports(GetParam())) GTEST_SKIP() << "this CPU lacks " << name(GetParam());
  }
};

// Every float16 and bfloat16 through widening, max and narrowing: itself (a NaN made quiet).
TEST_P(IsaTest, SixteenBitRoundTripIsExact) {
  std::vector<uint64_t> all(1 << 16);
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16}) {
    Buffer a = from_bits(t, all);
    expect_reduce(GetParam(), t, ReduceOp::kMax, a, a);
  }
}

// For every normal h: h + ulp(h)/2 (a tie, to even) and h plus that addend's neighbours (just
// below and above the tie), including the carry into the exponent and into infinity.
TEST_P(IsaTest, SixteenBitSumsRoundToNearestEven) {
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16}) {
    Format f = format_of(t);
    std::vector<uint64_t> xs, ys;
    for (uint64_t h = 1ull << f.mbits; h < inf_bits(f); ++h) {
      double ulp =
          h + 1 < inf_bits(f) ? decode(t, h + 1) - decode(t, h) : decode(t, h) - decode(t, h - 1);
      uint64_t tie = encode(t, ulp / 2);
      for (uint64_t y : {tie - 1, tie, tie + 1}) {
        xs.push_back(h);
        ys.push_back(y);
      }
    }
    expect_reduce(GetParam(), t, ReduceOp::kSum, from_bits(t, xs), from_bits(t, ys));
  }
}

struct Case {
  DataType t;
  ReduceOp op;
  uint64_t a, b, want;
  const char* what;
};

constexpr Case kCases[] = {
    {DataType::kFloat16, ReduceOp::kSum, 0x3C00, 0x1000, 0x3C00, "1 + 2^-11: tie, down to even"},
    {DataType::kFloat16, ReduceOp::kSum, 0x3C01, 0x1000, 0x3C02, "tie, up to even"},
    {DataType::kFloat16, ReduceOp::kSum, 0x7BFF, 0x4C00, 0x7C00, "65504 + 16: tie, to inf"},
    {DataType::kFloat16, ReduceOp::kSum, 0x7BFF, 0x4800, 0x7BFF, "65504 + 8: stays finite"},
    {DataType::kFloat16, ReduceOp::kProd, 0x5C00, 0x5C00, 0x7C00, "256 * 256 overflows"},
    {DataType::kFloat16, ReduceOp::kProd, 0x0C00, 0x0800, 0x0000, "2^-25: tie, to even 0"},
    {DataType::kFloat16, ReduceOp::kProd, 0x0E00, 0x0C00, 0x0002, "1.5 * 2^-24: tie, to 2"},
    {DataType::kFloat16, ReduceOp::kSum, 0x03FF, 0x0001, 0x0400, "subnormal to normal"},
    {DataType::kFloat16, ReduceOp::kSum, 0x7C00, 0x3C00, 0x7C00, "inf + 1"},
    {DataType::kFloat16, ReduceOp::kMax, 0x7C01, 0x3C00, 0x7E01, "sNaN: quiet, payload kept"},
    {DataType::kFloat16, ReduceOp::kMin, 0x3C00, 0x7E00, 0x7E00, "NaN b propagates"},
    {DataType::kFloat16, ReduceOp::kMin, 0x3C00, 0xFC00, 0xFC00, "min with -inf"},
    {DataType::kFloat16, ReduceOp::kMin, 0x8000, 0x0000, 0x8000, "-0, +0: a"},
    {DataType::kBfloat16, ReduceOp::kSum, 0x3F80, 0x3B80, 0x3F80, "1 + 2^-8: tie, down"},
    {DataType::kBfloat16, ReduceOp::kSum, 0x3F81, 0x3B80, 0x3F82, "tie, up to even"},
    {DataType::kBfloat16, ReduceOp::kSum, 0x7F7F, 0x7B00, 0x7F80, "max + 2^119: tie, to inf"},
    {DataType::kBfloat16, ReduceOp::kSum, 0x7F7F, 0x7A80, 0x7F7F, "max + 2^118: stays"},
    {DataType::kBfloat16, ReduceOp::kProd, 0x0001, 0x3F00, 0x0000, "2^-134: tie, to even 0"},
    {DataType::kBfloat16, ReduceOp::kProd, 0x0003, 0x3F00, 0x0002, "1.5 quanta: tie, to 2"},
    {DataType::kBfloat16, ReduceOp::kMax, 0x7F81, 0x3F80, 0x7FC1, "sNaN: quiet, payload kept"},
    {DataType::kBfloat16, ReduceOp::kMax, 0x7FC0, 0x7F80, 0x7FC0, "NaN a propagates"},
    {DataType::kFloat32, ReduceOp::kMax, 0x3F800000, 0x7FA00001, 0x7FA00001, "NaN b as is"},
    {DataType::kFloat32, ReduceOp::kMax, 0x7F800000, 0x3F800000, 0x7F800000, "max with inf"},
    {DataType::kFloat64, ReduceOp::kMin, 0x7FF8000000000001, 0, 0x7FF8000000000001, "NaN a"},
    {DataType::kInt8, ReduceOp::kSum, 0x7F, 0x01, 0x80, "127 + 1 wraps"},
    {DataType::kUint8, ReduceOp::kSum, 0xFF, 0x01, 0x00, "255 + 1 wraps"},
    {DataType::kInt8, ReduceOp::kProd, 0x80, 0xFF, 0x80, "-128 * -1 wraps"},
    {DataType::kUint8, ReduceOp::kProd, 0x10, 0x10, 0x00, "16 * 16 wraps"},
    {DataType::kInt32, ReduceOp::kSum, 0x7FFFFFFF, 1, 0x80000000, "INT32_MAX + 1"},
    {DataType::kUint32, ReduceOp::kProd, 0x10000, 0x10000, 0, "2^16 * 2^16"},
    {DataType::kInt64, ReduceOp::kSum, 0x7FFFFFFFFFFFFFFF, 1, 1ull << 63, "INT64_MAX + 1"},
    {DataType::kInt64, ReduceOp::kProd, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFE00000001, "hi bits"},
    {DataType::kUint64, ReduceOp::kProd, ~0ull, ~0ull, 1, "(2^64 - 1)^2 wraps to 1"},
    {DataType::kInt64, ReduceOp::kMin, 1ull << 63, 1, 1ull << 63, "signed min"},
    {DataType::kUint64, ReduceOp::kMin, 1ull << 63, 1, 1, "unsigned min"},
};

// Each case in every element of a buffer long enough for the vector loops and a tail.
TEST_P(IsaTest, NamedCases) {
  for (const Case& c : kCases) {
    size_t n = 300;
    Buffer a = from_bits(c.t, std::vector<uint64_t>(n, c.a));
    Buffer b = from_bits(c.t, std::vector<uint64_t>(n, c.b)), got(c.t, n);
    reduce_with(GetParam(), got.data(), a.data(), b.data(), n, c.t, c.op);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(hex(got.get(i)), hex(c.want)) << name(c.t) << " " << name(c.op) << ": " << c.what;
    }
  }
}

TEST_P(IsaTest, DivideNamedCases) {
  struct Div {
    DataType t;
    uint64_t x, divisor, want;
  };
  const Div cases[] = {
      {DataType::kInt8, 0xF9, 2, 0xFD},  // -7 / 2 = -3: toward zero
      {DataType::kInt8, 0x80, 200, 0},   // a divisor beyond the type's range
      {DataType::kInt32, 0x80000000, 1, 0x80000000},
      {DataType::kInt64, 1ull << 63, 1ull << 63, ~0ull},  // INT64_MIN / 2^63 = -1
      {DataType::kInt64, 1ull << 63, (1ull << 63) + 1, 0},
      {DataType::kUint64, ~0ull, ~0ull, 1},
      {DataType::kUint32, 0xFFFFFFFF, 1ull << 40, 0},
      {DataType::kFloat16, 0x3C00, 3, 0x3555},  // 1/3, rounded once
      {DataType::kBfloat16, 0x3F80, 3, 0x3EAB},
      {DataType::kFloat32, 0x3F800000, 3, 0x3EAAAAAB},
      {DataType::kFloat64, 0x3FF0000000000000, 3, 0x3FD5555555555555},
  };
  for (const Div& c : cases) {
    size_t n = 100;
    Buffer x = from_bits(c.t, std::vector<uint64_t>(n, c.x)), got(c.t, n);
    divide_with(GetParam(), got.data(), x.data(), n, c.t, c.divisor);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hex(got.get(i)), hex(c.want)) << name(c.t);
  }
  int32_t v = 1;
  EXPECT_THROW(divide_with(GetParam(), &v, &v, 1, DataType::kInt32, 0), Error);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, IsaTest, testing::ValuesIn(kIsas),
                         [](const testing::TestParamInfo<Isa>& info) {
                           return std::string(name(info.param));
                         });

// ---- The scalar conversions -----------------------------------------------------------------

TEST(Conversions, SixteenBitWidenExactly) {
  for (uint32_t h = 0; h < (1u << 16); ++h) {
    auto bits = static_cast<uint16_t>(h);
    float f = half_to_float(bits), g = bfloat16_to_float(bits);
    if (is_nan(DataType::kFloat16, h)) {
      uint32_t want = (h & 0x8000) << 16 | 0x7FC00000 | (h & 0x3FF) << 13;
      ASSERT_EQ(hex(std::bit_cast<uint32_t>(f)), hex(want)) << "quiet, payload kept";
    } else {
      ASSERT_EQ(std::bit_cast<uint64_t>(static_cast<double>(f)),
                std::bit_cast<uint64_t>(decode(DataType::kFloat16, h)));
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(g), h << 16);
  }
}

// Every midpoint between neighbouring values, and the floats either side of it; then random
// floats of every kind.
TEST(Conversions, FloatNarrowsToNearestEven) {
  std::mt19937_64 rng(5);
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16}) {
    auto narrow = t == DataType::kFloat16 ? float_to_half : float_to_bfloat16;
    auto expect = [&](float x) {
      uint64_t want = encode(t, x);
      if (std::isnan(x)) {  // quiet, the top of the payload kept
        uint32_t u = std::bit_cast<uint32_t>(x);
        Format g = format_of(t);
        want |= (u & 0x7FFFFF) >> (23 - g.mbits);
      }
      ASSERT_EQ(hex(narrow(x)), hex(want)) << "float " << hex(std::bit_cast<uint32_t>(x));
    };
    for (uint64_t h = 0; h + 1 < inf_bits(format_of(t)); ++h) {
      auto mid = static_cast<float>((decode(t, h) + decode(t, h + 1)) / 2);
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        expect(x);
        expect(-x);
      }
    }
    for (int i = 0; i < 1000000; ++i) expect(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  }
}

// ---- Names, parsing, dispatch ---------------------------------------------------------------

TEST(Types, NamesRoundTripAndAliasesParse) {
  const char* names[] = {"int8",   "uint8", "int32",    "uint32", "int64",
                         "uint64", "half",  "bfloat16", "float",  "double"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
  for (int i = 0; i < kDataTypeCount; ++i) {
    auto t = static_cast<DataType>(i);
    EXPECT_EQ(name(t), names[i]);
    EXPECT_EQ(size_of(t), sizes[i]);
    EXPECT_EQ(parse_data_type(names[i]), t);
  }
  EXPECT_EQ(parse_data_type("float16"), DataType::kFloat16);
  EXPECT_EQ(parse_data_type("fp16"), DataType::kFloat16);
  EXPECT_EQ(parse_data_type("bf16"), DataType::kBfloat16);
  EXPECT_EQ(parse_data_type("float32"), DataType::kFloat32);
  EXPECT_EQ(parse_data_type("float64"), DataType::kFloat64);
  EXPECT_EQ(parse_data_type("int16"), std::nullopt);
  EXPECT_EQ(parse_data_type("Float"), std::nullopt);
  EXPECT_EQ(parse_data_type(""), std::nullopt);
  const char* ops[] = {"sum", "prod", "min", "max", "avg"};
  for (int i = 0; i < kReduceOpCount; ++i) {
    EXPECT_EQ(name(static_cast<ReduceOp>(i)), ops[i]);
    EXPECT_EQ(parse_reduce_op(ops[i]), static_cast<ReduceOp>(i));
  }
  EXPECT_EQ(parse_reduce_op("mean"), std::nullopt);
}

std::string isa_env_error(const char* value) {
  try {
    detail::parse_isa_env(value);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(IsaEnv, ParsesNamesAndRefusesOthersInOneLine) {
  EXPECT_EQ(name(Isa::kScalar), "scalar");
  EXPECT_EQ(name(Isa::kAvx2), "avx2");
  EXPECT_EQ(name(Isa::kAvx512), "avx512");
  EXPECT_TRUE(cpu_supports(Isa::kScalar));
  Isa best = cpu_supports(Isa::kAvx512) ? Isa::kAvx512
             : cpu_supports(Isa::kAvx2) ? Isa::kAvx2
                                        : Isa::kScalar;
  EXPECT_EQ(detail::parse_isa_env(nullptr), best);
  EXPECT_EQ(detail::parse_isa_env(""), best);
  EXPECT_TRUE(cpu_supports(active_isa()));
  for (Isa isa : kIsas) {
    std::string value(name(isa));
    if (cpu_supports(isa)) {
      EXPECT_EQ(detail::parse_isa_env(value.c_str()), isa);
    } else {
      EXPECT_EQ(
          isa_env_error(value.c_str()).rfind("ROCE_COLL_ISA=" + value + ": this CPU lacks ", 0),
          0u);
    }
  }
  EXPECT_EQ(isa_env_error("sse"),
            "ROCE_COLL_ISA=sse: unknown ISA (expected scalar, avx2 or avx512)");
  EXPECT_EQ(isa_env_error("AVX2"),
            "ROCE_COLL_ISA=AVX2: unknown ISA (expected scalar, avx2 or avx512)");
}

// active_isa() reads the variable once per process, so each case runs in a fresh one.
TEST(IsaEnv, ActiveIsaFollowsTheEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("ROCE_COLL_ISA", "scalar", 1);
        std::_Exit(active_isa() == Isa::kScalar ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("ROCE_COLL_ISA", "avx", 1);
        try {
          active_isa();
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(2);
        }
        std::_Exit(0);
      },
      testing::ExitedWithCode(2), "ROCE_COLL_ISA=avx: unknown ISA");
}

TEST(Dispatch, ReduceAndDivideUseTheActiveIsaAndCheckArguments) {
  std::mt19937_64 rng(9);
  Buffer a = random_buffer(DataType::kFloat32, 1000, rng),
         b = random_buffer(DataType::kFloat32, 1000, rng);
  Buffer got(DataType::kFloat32, 1000), want(DataType::kFloat32, 1000);
  reduce(got.data(), a.data(), b.data(), 1000, DataType::kFloat32, ReduceOp::kMin);
  reduce_with(active_isa(), want.data(), a.data(), b.data(), 1000, DataType::kFloat32,
              ReduceOp::kMin);
  EXPECT_EQ(check_same(got, want), "");
  divide(got.data(), a.data(), 1000, DataType::kFloat32, 3);
  divide_with(active_isa(), want.data(), a.data(), 1000, DataType::kFloat32, 3);
  EXPECT_EQ(check_same(got, want), "");
  float x = 1;
  EXPECT_THROW(reduce(&x, &x, &x, 1, static_cast<DataType>(kDataTypeCount), ReduceOp::kSum), Error);
  EXPECT_THROW(reduce(&x, &x, &x, 1, DataType::kFloat32, static_cast<ReduceOp>(kReduceOpCount)),
               Error);
  EXPECT_THROW(divide(&x, &x, 1, DataType::kFloat32, 0), Error);
  reduce(nullptr, nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum);  // count 0: no access
}

}  // namespace
}  // namespace roce::coll
