// The prelude of every generated C++ module: fixed-width types, the runtime's C ABI
// (runtime/cpu/kernel_abi.h, declared again here because generated code includes no
// headers), f16/bf16 conversions (the same rounding as ir/half.h), the math helpers the
// pointwise table (codegen/pointwise_exprs.def) names, and Philox4x32-10 (ir/random.h).
//
// Numerics policy: no fast-math. NaN and infinities keep IEEE semantics (a running max
// starts at -inf; maximum/minimum propagate NaN), so results match the reference
// interpreter's rules. f32 exp, log, log1p and tanh (so sigmoid and silu too) are inline,
// branch-free code that vectorizes (a few ulp); the other transcendentals and all of f64 are
// clang builtins (libm calls at -O3, so their loops stay scalar); clang's
// default -ffp-contract=on may fuse a*b+c into an FMA (more accurate, not bit-identical
// across CPUs). Sums reassociate only inside reduction loops (`#pragma clang fp
// reassociate(on)`), which is what lets clang vectorize them.
#include "codegen/cpp_emitter.h"

namespace kiln::codegen {

std::string_view cpp_prelude() {
  return R"PRELUDE(// ---- kiln prelude (codegen/cpp_prelude.cpp)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;

extern "C" {
typedef void (*kiln_loop_body)(void* ctx, int64_t begin, int64_t end);
void kiln_parallel_for(int64_t n, int64_t grain, kiln_loop_body body, void* ctx);
void kiln_report_index_error(int64_t index, int64_t size);
}

// Runs f(begin, end) over [0, n) on the runtime's pool; inline when n <= grain.
template <class F>
static void kiln_run_chunk(void* f, int64_t begin, int64_t end) { (*static_cast<F*>(f))(begin, end); }
template <class F>
static inline void kiln_parallel(int64_t n, int64_t grain, F f) {
  if (n <= grain) f(0, n);
  else kiln_parallel_for(n, grain, &kiln_run_chunk<F>, &f);
}

// ---- f16 / bf16 (round to nearest even, as ir/half.h). With F16C (-march=native on x86)
// clang's storage-only __fp16 converts in hardware and vectorizes; elsewhere, bit arithmetic.
#if defined(__F16C__)
static inline float kiln_h2f(uint16_t h) { return (float)__builtin_bit_cast(__fp16, h); }
static inline uint16_t kiln_f2h(float f) { return __builtin_bit_cast(uint16_t, (__fp16)f); }
#else
static inline float kiln_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else {
      int e = -1;
      do { ++e; mant <<= 1; } while (!(mant & 0x400u));
      bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 112) << 23) | (mant << 13);
  return __builtin_bit_cast(float, bits);
}
static inline uint16_t kiln_f2h(float f) {
  uint32_t x = __builtin_bit_cast(uint32_t, f), sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    if (abs < 0x33000000u) return (uint16_t)sign;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 113 - (int)(abs >> 23) + 13;
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t r = abs - 0x38000000u, half = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return (uint16_t)(sign | half);
}
#endif
static inline float kiln_bf2f(uint16_t b) { return __builtin_bit_cast(float, (uint32_t)b << 16); }
static inline uint16_t kiln_f2bf(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float kiln_round_f16(float x) { return kiln_h2f(kiln_f2h(x)); }
static inline float kiln_round_bf16(float x) { return kiln_bf2f(kiln_f2bf(x)); }

// ---- float -> int: truncation; NaN and out-of-range give the minimum (as x86, and the reference)
static inline int64_t kiln_f2i64(double v) {
  const double lo = -9223372036854775808.0, hi = 9223372036854775808.0;
  if (!(v > lo - 1 && v < hi)) return (-9223372036854775807L - 1);
  return (int64_t)v;
}
static inline int64_t kiln_f2i32(double v) {
  const double lo = -2147483648.0, hi = 2147483648.0;
  if (!(v > lo - 1 && v < hi)) return -2147483648L;
  return (int64_t)(int32_t)v;
}

// ---- integer arithmetic wraps (two's complement), as in PyTorch
static inline int64_t kiln_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t kiln_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t kiln_wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t kiln_ipow(int64_t base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? ((exp & 1) ? -1 : 1) : 0;
  int64_t r = 1;
  for (; exp; exp >>= 1, base = kiln_wrap_mul(base, base))
    if (exp & 1) r = kiln_wrap_mul(r, base);
  return r;
}
static inline int64_t kiln_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t kiln_imax(int64_t a, int64_t b) { return a < b ? b : a; }
static inline int64_t kiln_sign(int64_t x) { return (0 < x) - (x < 0); }

// ---- float math (builtins: libm at -O3; no fast-math, see the header comment)
// exp in f32 without a libm call, so loops over it vectorize: Cody-Waite reduction
// x = n*ln2 + r, a degree-6 polynomial for exp(r) (Cephes expf, ~1 ulp), and 2^n applied in
// two halves so that subnormal results and overflow to inf come out right. exp(-inf) = 0,
// exp(inf) = inf, exp(NaN) = NaN.
static inline float kiln_exp(float x) {
  float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
  float n = __builtin_floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t ni = (int32_t)n, n1 = ni / 2, n2 = ni - n1;
  float s1 = __builtin_bit_cast(float, (uint32_t)(n1 + 127) << 23), s2 = __builtin_bit_cast(float, (uint32_t)(n2 + 127) << 23);
  float out = y * s1 * s2;
  return x != x ? x : out;
}
static inline double kiln_exp(double x) { return __builtin_exp(x); }
// log in f32 without a libm call (musl's logf reduction and polynomial, < 1 ulp): x = 2^k * m
// with m in [sqrt(1/2), sqrt(2)), log(m) from s = f / (2 + f), f = m - 1. Subnormals are
// scaled by 2^23 first; the special cases are selects: log(0) = -inf, log(<0) = NaN,
// log(inf) = inf, log(NaN) = NaN.
static inline float kiln_log(float x) {
  bool sub = x < 1.17549435e-38f;
  float xs = sub ? x * 8388608.0f : x;
  uint32_t ix = __builtin_bit_cast(uint32_t, xs) + (0x3f800000u - 0x3f3504f3u);
  int32_t k = (int32_t)(ix >> 23) - 0x7f - (sub ? 23 : 0);
  float f = __builtin_bit_cast(float, (ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  float s = f / (2.0f + f), z = s * s, w = z * z;
  float t1 = w * (0.40000972152f + w * 0.24279078841f), t2 = z * (0.66666662693f + w * 0.28498786688f);
  float hfsq = 0.5f * f * f, dk = (float)k;
  float out = s * (hfsq + t1 + t2) + dk * 9.0580006145e-06f - hfsq + f + dk * 6.9313812256e-01f;
  out = x == __builtin_inff() ? x : out;
  out = x == 0.0f ? -__builtin_inff() : out;
  return x < 0.0f || x != x ? __builtin_nanf("") : out;
}
static inline double kiln_log(double x) { return __builtin_log(x); }
// log1p from log: u = 1 + x rounds, and log(u) * x / (u - 1) cancels that rounding error
// (Goldberg's trick); u == 1 means x is below half an ulp of 1, where log1p(x) = x.
static inline float kiln_log1p(float x) {
  float u = 1.0f + x, d = u - 1.0f;
  float out = d == 0.0f ? x : kiln_log(u) * (x / d);
  return x == __builtin_inff() ? x : out;
}
static inline double kiln_log1p(double x) { return __builtin_log1p(x); }
static inline float kiln_sqrt(float x) { return __builtin_sqrtf(x); }
static inline double kiln_sqrt(double x) { return __builtin_sqrt(x); }
static inline float kiln_sin(float x) { return __builtin_sinf(x); }
static inline double kiln_sin(double x) { return __builtin_sin(x); }
static inline float kiln_cos(float x) { return __builtin_cosf(x); }
static inline double kiln_cos(double x) { return __builtin_cos(x); }
// tanh in f32 without a libm call: an odd polynomial below |x| = 0.625 (Cephes tanhf), else
// 1 - 2 / (exp(2|x|) + 1) with the sign of x; both are computed and one selected, so loops
// vectorize. exp overflowing to inf gives exactly +-1; NaN stays NaN; tanh(-0) = -0.
static inline float kiln_tanh(float x) {
  float a = __builtin_fabsf(x), z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float big = 1.0f - 2.0f / (kiln_exp(2.0f * a) + 1.0f);
  big = __builtin_copysignf(big, x);
  return a < 0.625f || x != x ? (x == 0.0f ? x : small) : big;
}
static inline double kiln_tanh(double x) { return __builtin_tanh(x); }
static inline float kiln_erf(float x) { return __builtin_erff(x); }
static inline double kiln_erf(double x) { return __builtin_erf(x); }
static inline float kiln_fabs(float x) { return __builtin_fabsf(x); }
static inline double kiln_fabs(double x) { return __builtin_fabs(x); }
static inline float kiln_pow(float a, float b) { return __builtin_powf(a, b); }
static inline double kiln_pow(double a, double b) { return __builtin_pow(a, b); }
template <class T> static inline T kiln_sign(T x) { return (T)((T(0) < x) - (x < T(0))); }
// NaN-propagating maximum/minimum (std::max would drop a NaN second operand).
template <class T> static inline T kiln_maximum(T a, T b) { return a != a ? a : b != b ? b : a < b ? b : a; }
template <class T> static inline T kiln_minimum(T a, T b) { return a != a ? a : b != b ? b : b < a ? b : a; }
template <class T> static inline T kiln_gelu(T x) { return T(0.5) * x * (T(1) + kiln_erf(x * T(0.70710678118654752440))); }
template <class T> static inline T kiln_gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + kiln_tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}

// ---- reduction steps: a NaN wins a max/min; argmax keeps the first maximum, NaN above all
template <class T> static inline T kiln_max_step(T acc, T v) { return (v > acc || v != v) ? v : acc; }
template <class T> static inline T kiln_min_step(T acc, T v) { return (v < acc || v != v) ? v : acc; }
template <class T> static inline bool kiln_argmax_wins(T v, T best) { return (v != v && best == best) || (best == best && v > best); }

// Integer keys in the order of the floats (-inf lowest, +inf highest; -0 just below +0), so
// max/min reductions over them vectorize; NaNs are tracked apart by the caller.
static inline int32_t kiln_order_key(float x) { int32_t i = __builtin_bit_cast(int32_t, x); return i < 0 ? i ^ 0x7fffffff : i; }
static inline int64_t kiln_order_key(double x) { int64_t i = __builtin_bit_cast(int64_t, x); return i < 0 ? i ^ 0x7fffffffffffffffL : i; }
static inline float kiln_from_order_key(int32_t k) { return __builtin_bit_cast(float, k < 0 ? k ^ 0x7fffffff : k); }
static inline double kiln_from_order_key(int64_t k) { return __builtin_bit_cast(double, k < 0 ? k ^ 0x7fffffffffffffffL : k); }

// ---- gather / scatter_add index check: wraps negatives; reports and reads 0 when out of range
static inline int64_t kiln_check_index(int64_t i, int64_t size) {
  if (i < -size || i >= size) {
    kiln_report_index_error(i, size);
    return 0;
  }
  return i < 0 ? i + size : i;
}

// ---- Philox4x32-10 uniform in [0, 1) with 24 bits, as ir/random.h
static inline float kiln_rand_uniform(int64_t seed, int64_t index) {
  uint32_t c0 = (uint32_t)index, c1 = (uint32_t)((uint64_t)index >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)((uint64_t)seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return (float)(c0 >> 8) * (1.0f / 16777216.0f);
}
// ---- end of prelude
)PRELUDE";
}

}  // namespace kiln::codegen
