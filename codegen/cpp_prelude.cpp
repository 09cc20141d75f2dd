// The prelude of every generated C++ module: the CPU's ABI — fixed-width types, the runtime's
// C ABI (runtime/cpu/kernel_abi.h, declared again here because generated code includes no
// headers), the thread-pool helper, f16 conversions (the same rounding as ir/half.h) — and
// the macros codegen/prelude_math.h asks for, then the math shared with CUDA
// (codegen/prelude_math.cpp), then the CPU's own helpers for vectorized max/min.
//
// Numerics policy: no fast-math (see codegen/prelude_math.cpp). f32 exp, log, log1p and tanh
// are the shared inline polynomials, which clang vectorizes; the other transcendentals and all
// of f64 are clang builtins (libm calls at -O3, so their loops stay scalar); clang's default
// -ffp-contract=on may fuse a*b+c into an FMA (more accurate, not bit-identical across CPUs).
// Sums reassociate only inside reduction loops (`#pragma clang fp reassociate(on)`), which is
// what lets clang vectorize them.
#include <string>

#include "codegen/attention.h"
#include "codegen/cpp_emitter.h"
#include "codegen/prelude_math.h"
#include "codegen/sort.h"

namespace kiln::codegen {

namespace {

constexpr std::string_view kAbi = R"PRELUDE(// ---- kiln prelude (codegen/cpp_prelude.cpp)
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
void kiln_report_index_error_at(int64_t index, int64_t size, int64_t site);
}

// Runs f(begin, end) over [0, n) on the runtime's pool; inline when n <= grain.
template <class F>
static void kiln_run_chunk(void* f, int64_t begin, int64_t end) { (*static_cast<F*>(f))(begin, end); }
template <class F>
static inline void kiln_parallel(int64_t n, int64_t grain, F f) {
  if (n <= grain) f(0, n);
  else kiln_parallel_for(n, grain, &kiln_run_chunk<F>, &f);
}

// ---- what codegen/prelude_math.h asks of a target
#define KILN_FN static inline
#define KILN_F32_AS_U32(x) __builtin_bit_cast(uint32_t, (x))
#define KILN_U32_AS_F32(u) __builtin_bit_cast(float, (u))
#define KILN_F64_AS_I64(x) __builtin_bit_cast(int64_t, (x))
#define KILN_I64_AS_F64(i) __builtin_bit_cast(double, (i))
#define KILN_INFF __builtin_inff()
#define KILN_NANF __builtin_nanf("")
#define KILN_INF __builtin_inf()
#define KILN_NAN __builtin_nan("")
#define KILN_LIBMF(fn) __builtin_##fn##f
#define KILN_LIBM(fn) __builtin_##fn
// libm's f32 exp/log/tanh are calls that keep loops scalar: the inline polynomials vectorize.
#define KILN_F32_LIBM_TRANSCENDENTALS 0

// 1/x (the GPU's prelude uses its hardware reciprocal).
KILN_FN float kiln_rcp(float x) { return 1.0f / x; }
KILN_FN double kiln_rcp(double x) { return 1.0 / x; }
// 1 / (1 + e) for sigmoid and silu (e = exp(-x) >= 0, inf or NaN): a division here.
KILN_FN float kiln_inv_1p(float e) { return 1.0f / (1.0f + e); }
KILN_FN double kiln_inv_1p(double e) { return 1.0 / (1.0 + e); }

// ---- f16 (round to nearest even, as ir/half.h). With F16C (-march=native on x86) clang's
// storage-only __fp16 converts in hardware and vectorizes; elsewhere, bit arithmetic.
#if defined(__F16C__)
KILN_FN float kiln_h2f(uint16_t h) { return (float)__builtin_bit_cast(__fp16, h); }
KILN_FN uint16_t kiln_f2h(float f) { return __builtin_bit_cast(uint16_t, (__fp16)f); }
#else
KILN_FN float kiln_h2f(uint16_t h) {
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
  return KILN_U32_AS_F32(bits);
}
KILN_FN uint16_t kiln_f2h(float f) {
  uint32_t x = KILN_F32_AS_U32(f), sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
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

)PRELUDE";

constexpr std::string_view kCpuTail = R"PRELUDE(
// ---- the CPU's own: integer keys in the order of the floats (-inf lowest, +inf highest; -0
// just below +0), so max/min reductions over them vectorize; NaNs are tracked apart by the caller.
KILN_FN int32_t kiln_order_key(float x) { int32_t i = __builtin_bit_cast(int32_t, x); return i < 0 ? i ^ 0x7fffffff : i; }
KILN_FN int64_t kiln_order_key(double x) { int64_t i = __builtin_bit_cast(int64_t, x); return i < 0 ? i ^ (int64_t)0x7fffffffffffffff : i; }
KILN_FN float kiln_from_order_key(int32_t k) { return __builtin_bit_cast(float, k < 0 ? k ^ 0x7fffffff : k); }
KILN_FN double kiln_from_order_key(int64_t k) { return __builtin_bit_cast(double, k < 0 ? k ^ (int64_t)0x7fffffffffffffff : k); }

)PRELUDE";

}  // namespace

std::string_view cpp_prelude() {
  static const std::string text = std::string(kAbi) + std::string(prelude_math()) + std::string(kCpuTail) +
                                 std::string(cpp_attention_prelude()) + std::string(cpp_sort_prelude()) + "\n// ---- end of prelude\n";
  return text;
}

}  // namespace kiln::codegen
