// The math of both preludes (see codegen/prelude_math.h for the macros each target defines
// first). Semantics follow the reference interpreter (ir/reference/pointwise.cpp).
//
// Numerics policy: no fast-math. NaN and infinities keep IEEE semantics (a running max starts
// at -inf; maximum/minimum propagate NaN). Where KILN_F32_LIBM_TRANSCENDENTALS is 0 (the CPU),
// f32 exp, log, log1p, tanh and erf (so sigmoid, silu and exact gelu too) are inline,
// branch-free code that vectorizes (a few ulp); elsewhere and for all of f64 they are the
// library's.
#include "codegen/prelude_math.h"

namespace kiln::codegen {

std::string_view prelude_math() {
  return R"PRELUDE(// ---- kiln prelude math, shared by the C++ and CUDA preludes (codegen/prelude_math.cpp)
// ---- bf16 (round to nearest even, as ir/half.h; a NaN stays a quiet NaN)
KILN_FN float kiln_bf2f(uint16_t b) { return KILN_U32_AS_F32((uint32_t)b << 16); }
#if !KILN_HARDWARE_F2BF  // (the CUDA prelude's is one cvt on sm_80 and later)
KILN_FN uint16_t kiln_f2bf(float f) {
  uint32_t u = KILN_F32_AS_U32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
#endif
KILN_FN float kiln_round_f16(float x) { return kiln_h2f(kiln_f2h(x)); }
KILN_FN float kiln_round_bf16(float x) { return kiln_bf2f(kiln_f2bf(x)); }
// The bits of a float already rounded to bf16 (kiln_round_bf16's result): its top half.
KILN_FN uint16_t kiln_bf16_bits(float exact) { return (uint16_t)(KILN_F32_AS_U32(exact) >> 16); }

// ---- float -> int: truncation; NaN and out-of-range give the minimum (as x86, and the reference)
KILN_FN int64_t kiln_f2i64(double v) {
  const double lo = -9223372036854775808.0, hi = 9223372036854775808.0;
  if (!(v > lo - 1 && v < hi)) return -(int64_t)9223372036854775807 - 1;
  return (int64_t)v;
}
KILN_FN int64_t kiln_f2i32(double v) {
  const double lo = -2147483648.0, hi = 2147483648.0;
  if (!(v > lo - 1 && v < hi)) return -(int64_t)2147483647 - 1;
  return (int64_t)(int32_t)v;
}

// ---- integer arithmetic wraps (two's complement), as in PyTorch
KILN_FN int64_t kiln_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
KILN_FN int64_t kiln_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
KILN_FN int64_t kiln_wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
KILN_FN int64_t kiln_ipow(int64_t base, int64_t n) {
  if (n < 0) return base == 1 ? 1 : base == -1 ? ((n & 1) ? -1 : 1) : 0;
  int64_t r = 1;
  for (; n; n >>= 1, base = kiln_wrap_mul(base, base))
    if (n & 1) r = kiln_wrap_mul(r, base);
  return r;
}
KILN_FN int64_t kiln_imin(int64_t a, int64_t b) { return a < b ? a : b; }
KILN_FN int64_t kiln_imax(int64_t a, int64_t b) { return a < b ? b : a; }
KILN_FN int64_t kiln_sign(int64_t x) { return (0 < x) - (x < 0); }

// ---- f32 exp, log, log1p, tanh
#if KILN_F32_LIBM_TRANSCENDENTALS
KILN_FN float kiln_exp(float x) { return KILN_LIBMF(exp)(x); }
KILN_FN float kiln_log(float x) { return KILN_LIBMF(log)(x); }
KILN_FN float kiln_log1p(float x) { return KILN_LIBMF(log1p)(x); }
KILN_FN float kiln_tanh(float x) { return KILN_LIBMF(tanh)(x); }
KILN_FN float kiln_erf(float x) { return KILN_LIBMF(erf)(x); }
#else
// exp without a library call, so loops over it vectorize: Cody-Waite reduction
// x = n*ln2 + r, a degree-6 polynomial for exp(r) (Cephes expf, ~1 ulp), and 2^n applied in
// two halves so that subnormal results and overflow to inf come out right. exp(-inf) = 0,
// exp(inf) = inf, exp(NaN) = NaN.
KILN_FN float kiln_exp(float x) {
  float xc = x < -104.0f ? -104.0f : x > 89.0f ? 89.0f : x;
  float n = KILN_LIBMF(floor)(xc * 1.44269504088896341f + 0.5f);
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
  float s1 = KILN_U32_AS_F32((uint32_t)(n1 + 127) << 23), s2 = KILN_U32_AS_F32((uint32_t)(n2 + 127) << 23);
  float out = y * s1 * s2;
  return x != x ? x : out;
}
// log without a library call (musl's logf reduction and polynomial, < 1 ulp): x = 2^k * m
// with m in [sqrt(1/2), sqrt(2)), log(m) from s = f / (2 + f), f = m - 1. Subnormals are
// scaled by 2^23 first; the special cases are selects: log(0) = -inf, log(<0) = NaN,
// log(inf) = inf, log(NaN) = NaN.
KILN_FN float kiln_log(float x) {
  bool sub = x < 1.17549435e-38f;
  float xs = sub ? x * 8388608.0f : x;
  uint32_t ix = KILN_F32_AS_U32(xs) + (0x3f800000u - 0x3f3504f3u);
  int32_t k = (int32_t)(ix >> 23) - 0x7f - (sub ? 23 : 0);
  float f = KILN_U32_AS_F32((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
  float s = f / (2.0f + f), z = s * s, w = z * z;
  float t1 = w * (0.40000972152f + w * 0.24279078841f), t2 = z * (0.66666662693f + w * 0.28498786688f);
  float hfsq = 0.5f * f * f, dk = (float)k;
  float out = s * (hfsq + t1 + t2) + dk * 9.0580006145e-06f - hfsq + f + dk * 6.9313812256e-01f;
  out = x == KILN_INFF ? x : out;
  out = x == 0.0f ? -KILN_INFF : out;
  return x < 0.0f || x != x ? KILN_NANF : out;
}
// log1p from log: u = 1 + x rounds, and log(u) * x / (u - 1) cancels that rounding error
// (Goldberg's trick); u == 1 means x is below half an ulp of 1, where log1p(x) = x.
KILN_FN float kiln_log1p(float x) {
  float u = 1.0f + x, d = u - 1.0f;
  float out = d == 0.0f ? x : kiln_log(u) * (x / d);
  return x == KILN_INFF ? x : out;
}
// tanh: an odd polynomial below |x| = 0.625 (Cephes tanhf), else 1 - 2 / (exp(2|x|) + 1)
// with the sign of x; both are computed and one selected, so loops vectorize. exp
// overflowing to inf gives exactly +-1; NaN stays NaN; tanh(-0) = -0.
KILN_FN float kiln_tanh(float x) {
  float a = KILN_LIBMF(fabs)(x), z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float big = 1.0f - 2.0f / (kiln_exp(2.0f * a) + 1.0f);
  big = KILN_LIBMF(copysign)(big, x);
  return a < 0.625f || x != x ? (x == 0.0f ? x : small) : big;
}
// erf without a library call (exact GELU's), so loops over it vectorize: the odd/even rational
// approximation Eigen and XLA use, x*P(x^2)/Q(x^2) on x clamped to [-4, 4] (beyond, erf is
// +-1 in f32); in f32 arithmetic within 6 ulps of erf (4e-7 near +-1; the library's is ~1
// ulp, and it does not vectorize). NaN stays NaN (the clamp keeps it), erf(-0) = -0.
KILN_FN float kiln_erf(float x) {
  float c = x < -4.0f ? -4.0f : x > 4.0f ? 4.0f : x, z = c * c;
  float p = -2.72614225801306e-10f;
  p = p * z + 2.77068142495902e-08f;
  p = p * z - 2.10102402082508e-06f;
  p = p * z - 5.69250639462346e-05f;
  p = p * z - 7.34990630326855e-04f;
  p = p * z - 2.95459980854025e-03f;
  p = p * z - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * z - 2.13374055278905e-04f;
  q = q * z - 1.68282697438203e-03f;
  q = q * z - 7.37332916720468e-03f;
  q = q * z - 1.42647390514189e-02f;
  return c * (p / q);  // p/q first: c * p would lose a subnormal c's digits
}
#endif

// ---- the rest of the float math: the library's, f32 and f64
KILN_FN double kiln_exp(double x) { return KILN_LIBM(exp)(x); }
KILN_FN double kiln_log(double x) { return KILN_LIBM(log)(x); }
KILN_FN double kiln_log1p(double x) { return KILN_LIBM(log1p)(x); }
KILN_FN double kiln_tanh(double x) { return KILN_LIBM(tanh)(x); }
KILN_FN float kiln_sqrt(float x) { return KILN_LIBMF(sqrt)(x); }
KILN_FN double kiln_sqrt(double x) { return KILN_LIBM(sqrt)(x); }
KILN_FN float kiln_sin(float x) { return KILN_LIBMF(sin)(x); }
KILN_FN double kiln_sin(double x) { return KILN_LIBM(sin)(x); }
KILN_FN float kiln_cos(float x) { return KILN_LIBMF(cos)(x); }
KILN_FN double kiln_cos(double x) { return KILN_LIBM(cos)(x); }
KILN_FN double kiln_erf(double x) { return KILN_LIBM(erf)(x); }
KILN_FN float kiln_fabs(float x) { return KILN_LIBMF(fabs)(x); }
KILN_FN double kiln_fabs(double x) { return KILN_LIBM(fabs)(x); }
// erf's inverse: Giles' single-precision approximation ("Approximating the erfinv function",
// GPU Computing Gems, 2011; a few f32 ulps, branch on the tail); in f64 that as the start of
// three Newton steps on erf(x) = |y|, or on erfc(x) = 1 - |y| past 0.5, where 1 - |y| is exact
// and erfc keeps the tail's relative precision (ir/reference/pointwise.cpp's is the same).
template <class T> KILN_FN T kiln_erfinv_start(T a) {
  T w = -kiln_log((T(1) - a) * (T(1) + a)), p;
  if (w < T(5)) {
    w = w - T(2.5);
    p = T(2.81022636e-08);
    p = T(3.43273939e-07) + p * w;
    p = T(-3.5233877e-06) + p * w;
    p = T(-4.39150654e-06) + p * w;
    p = T(0.00021858087) + p * w;
    p = T(-0.00125372503) + p * w;
    p = T(-0.00417768164) + p * w;
    p = T(0.246640727) + p * w;
    p = T(1.50140941) + p * w;
  } else {
    w = kiln_sqrt(w) - T(3);
    p = T(-0.000200214257);
    p = T(0.000100950558) + p * w;
    p = T(0.00134934322) + p * w;
    p = T(-0.00367342844) + p * w;
    p = T(0.00573950773) + p * w;
    p = T(-0.0076224613) + p * w;
    p = T(0.00943887047) + p * w;
    p = T(1.00167406) + p * w;
    p = T(2.83297682) + p * w;
  }
  return p * a;
}
KILN_FN float kiln_erfinv(float y) {
  const float a = kiln_fabs(y);
  if (!(a < 1.0f)) return a == 1.0f ? y * KILN_INFF : KILN_NANF;
  const float x = kiln_erfinv_start(a);
  return y < 0 ? -x : x;
}
KILN_FN double kiln_erfinv(double y) {
  const double a = kiln_fabs(y);
  if (!(a < 1.0)) return a == 1.0 ? y * KILN_INF : KILN_NAN;
  double x = kiln_erfinv_start(a);
  for (int step = 0; step < 3; ++step) {
    const double residual = a <= 0.5 ? kiln_erf(x) - a : (1.0 - a) - KILN_LIBM(erfc)(x);
    x -= residual / (1.1283791670955126 * kiln_exp(-x * x));
  }
  return y < 0 ? -x : x;
}
KILN_FN float kiln_pow(float a, float b) { return KILN_LIBMF(pow)(a, b); }
KILN_FN double kiln_pow(double a, double b) { return KILN_LIBM(pow)(a, b); }
// Rounding to an integral value (rint: the default rounding mode's, half to even, as
// torch.round), log2, exp2, fmod (exact) and atan2: the library's, on both targets.
KILN_FN float kiln_floor(float x) { return KILN_LIBMF(floor)(x); }
KILN_FN double kiln_floor(double x) { return KILN_LIBM(floor)(x); }
KILN_FN float kiln_ceil(float x) { return KILN_LIBMF(ceil)(x); }
KILN_FN double kiln_ceil(double x) { return KILN_LIBM(ceil)(x); }
KILN_FN float kiln_rint(float x) { return KILN_LIBMF(rint)(x); }
KILN_FN double kiln_rint(double x) { return KILN_LIBM(rint)(x); }
KILN_FN float kiln_trunc(float x) { return KILN_LIBMF(trunc)(x); }
KILN_FN double kiln_trunc(double x) { return KILN_LIBM(trunc)(x); }
KILN_FN float kiln_log2(float x) { return KILN_LIBMF(log2)(x); }
KILN_FN double kiln_log2(double x) { return KILN_LIBM(log2)(x); }
KILN_FN float kiln_exp2(float x) { return KILN_LIBMF(exp2)(x); }
KILN_FN double kiln_exp2(double x) { return KILN_LIBM(exp2)(x); }
KILN_FN float kiln_fmod(float a, float b) { return KILN_LIBMF(fmod)(a, b); }
KILN_FN double kiln_fmod(double a, double b) { return KILN_LIBM(fmod)(a, b); }
KILN_FN float kiln_atan2(float a, float b) { return KILN_LIBMF(atan2)(a, b); }
KILN_FN double kiln_atan2(double a, double b) { return KILN_LIBM(atan2)(a, b); }
// remainder (Python's %): fmod's remainder moved to the divisor's sign, as PyTorch computes it.
template <class T> KILN_FN T kiln_remainder(T a, T b) {
  T m = kiln_fmod(a, b);
  return m != T(0) && ((b < T(0)) != (m < T(0))) ? m + b : m;
}
template <class T> KILN_FN T kiln_sign(T x) { return (T)((T(0) < x) - (x < T(0))); }
// NaN-propagating maximum/minimum (std::max would drop a NaN second operand).
template <class T> KILN_FN T kiln_maximum(T a, T b) { return a != a ? a : b != b ? b : a < b ? b : a; }
template <class T> KILN_FN T kiln_minimum(T a, T b) { return a != a ? a : b != b ? b : b < a ? b : a; }
// clamp's bounds, a NaN input staying NaN. The NaN test comes first and in the open: from the
// selects alone (x < lo ? lo : x, then hi < y ? hi : y), NVRTC 13.0 made clamp(x, c, c) the
// constant c for a NaN x (found by kiln fuzz on the H100; NVRTC 11.8 kept the NaN).
template <class T> KILN_FN T kiln_clamp_min(T x, T lo) { return x != x ? x : x < lo ? lo : x; }
template <class T> KILN_FN T kiln_clamp_max(T x, T hi) { return x != x ? x : hi < x ? hi : x; }
template <class T> KILN_FN T kiln_gelu(T x) { return T(0.5) * x * (T(1) + kiln_erf(x * T(0.70710678118654752440))); }
template <class T> KILN_FN T kiln_gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + kiln_tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}

// ---- reduction steps: a NaN wins a max/min; argmax keeps the first maximum, NaN above all
template <class T> KILN_FN T kiln_max_step(T acc, T v) { return (v > acc || v != v) ? v : acc; }
template <class T> KILN_FN T kiln_min_step(T acc, T v) { return (v < acc || v != v) ? v : acc; }
template <class T> KILN_FN bool kiln_argmax_wins(T v, T best) { return (v != v && best == best) || (best == best && v > best); }
// Online softmax statistics: m the running max, s the sum of exp(x - m). A larger x rescales
// s; x - x + 1 is 1, or NaN for an infinite x (as exp(inf - inf) in the two-pass form); a NaN
// poisons both. -inf elements add nothing (their exp(x - m) is 0 once any element is finite;
// a row of -inf alone is made NaN by the caller, as the two-pass form gives).
template <class T> KILN_FN void kiln_sumexp_step(T& s, T& m, T x) {
  if (x > m) {
    s = s * kiln_exp(m - x) + (x - x + T(1));
    m = x;
  } else if (x != x) {
    s = x;
    m = x;
  } else if (m == m && x - x == T(0)) {
    s += kiln_exp(x - m);
  } else if (x == m && x > T(0)) {
    s += kiln_exp(x - m);  // +inf after +inf: NaN, as the two-pass form
  }
}
// a / b as (a * kiln_rcp_scaled(b)) * kiln_rcp_scale(b), for a divisor the same across a loop
// (codegen/invariant_division.h): the scale brings b where its reciprocal is a normal number,
// so a subnormal or huge b still gives the quotient; 0, inf and NaN give what a / b gives.
KILN_FN float kiln_rcp_scale(float b) {
  const float m = kiln_fabs(b);
  return m < 0x1p-126f ? 0x1p24f : (m > 0x1p126f ? 0x1p-24f : 1.0f);
}
KILN_FN float kiln_rcp_scaled(float b) { return kiln_rcp(b * kiln_rcp_scale(b)); }
// Welford's running statistics of the values seen: n of them, their mean, and m2 the sum of
// their squared deviations from it.
template <class T> KILN_FN void kiln_welford_step(T& m2, T& mean, T& n, T x) {
  n += T(1);
  const T d = x - mean;
  mean += d * kiln_rcp(n);
  m2 += d * (x - mean);
}
// Merges the statistics (m2b, meanb, nb) of other values into (m2, mean, n) (Chan et al.).
template <class T> KILN_FN void kiln_welford_merge(T& m2, T& mean, T& n, T m2b, T meanb, T nb) {
  if (nb == T(0)) return;
  if (n == T(0)) {
    m2 = m2b;
    mean = meanb;
    n = nb;
    return;
  }
  const T total = n + nb, d = meanb - mean, w = nb / total;
  mean += d * w;
  m2 += m2b + d * d * n * w;
  n = total;
}
// Merges the statistics (s2, m2) of other elements into (s, m).
template <class T> KILN_FN void kiln_sumexp_merge(T& s, T& m, T s2, T m2) {
  if (m != m || m2 != m2) {
    m = m != m ? m : m2;
    s = m;  // NaN
    return;
  }
  const T mx = m2 > m ? m2 : m;
  const T a = m == mx ? s : s * kiln_exp(m - mx), b = m2 == mx ? s2 : s2 * kiln_exp(m2 - mx);
  s = a + b;
  m = mx;
}

// ---- gather / scatter_add index check: wraps negatives; reports and reads 0 when out of range
KILN_FN int64_t kiln_check_index(int64_t i, int64_t size, int64_t site) {
  if (i < -size || i >= size) {
    kiln_report_index_error_at(i, size, site);
    return 0;
  }
  return i < 0 ? i + size : i;
}

// ---- Philox4x32-10 uniform in [0, 1) with 24 bits, as ir/random.h
KILN_FN float kiln_rand_uniform(int64_t seed, int64_t index) {
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
// ---- end of prelude math
)PRELUDE";
}

}  // namespace kiln::codegen
