#pragma once
// The math both emitters' generated code calls, written once (codegen/prelude_math.cpp) in
// the subset of C++ that clang (the CPU JIT, -O3) and NVRTC (CUDA C) both compile. Each
// target's prelude defines its ABI and a few macros first, then includes this text:
//
//   KILN_FN                   function specifiers: `static inline` (C++),
//                             `__device__ __forceinline__` (CUDA)
//   KILN_F32_AS_U32(x), KILN_U32_AS_F32(u), KILN_F64_AS_I64(x), KILN_I64_AS_F64(i)
//                             bit casts: __builtin_bit_cast (C++), __float_as_uint,
//                             __uint_as_float, __double_as_longlong, __longlong_as_double (CUDA)
//   KILN_INFF, KILN_NANF, KILN_INF, KILN_NAN
//                             f32 and f64 infinity and quiet NaN (NVRTC has no INFINITY)
//   KILN_LIBMF(f), KILN_LIBM(f)
//                             the library function f of f32 / f64: KILN_LIBMF(sqrt) is
//                             __builtin_sqrtf (C++: libm or an instruction at -O3) or sqrtf
//                             (CUDA's device library, no header needed)
//   KILN_F32_LIBM_TRANSCENDENTALS
//                             1: f32 exp, log, log1p and tanh call the library (CUDA: fast and
//                             accurate there); 0: inline branch-free polynomials that clang
//                             vectorizes (the CPU: libm calls keep loops scalar)
//   kiln_rcp, kiln_inv_1p     1/x and 1/(1+e) (a division on the CPU; the GPU's hardware
//                             reciprocal, and div.full.f32 for f32 sigmoid and silu)
//   kiln_h2f, kiln_f2h        f16 bits <-> float (F16C or bit arithmetic on the CPU, PTX cvt on
//                             CUDA), and kiln_report_index_error_at(int64_t index, int64_t size, int64_t site)
//                             (the CPU runtime's callback; CUDA's device error record)
//
// and fixed-width typedefs (int32_t, int64_t, uint16_t, uint32_t, uint64_t, ...).
#include <array>
#include <string_view>

namespace kiln::codegen {

// Every prelude function generated code may call, on either target: those of
// codegen/pointwise_exprs.def and those the emitters print (conversions, accumulator steps,
// index checks). Both preludes define each (tests/codegen/test_prelude_math.cpp checks it);
// the first five are the targets' own (see above), the rest are prelude_math()'s.
inline constexpr std::array<std::string_view, 56> kPreludeMathFunctions = {
    "kiln_h2f",        "kiln_f2h",         "kiln_report_index_error_at", "kiln_rcp",  "kiln_inv_1p",
    "kiln_bf2f",       "kiln_f2bf",        "kiln_round_f16",   "kiln_round_bf16",  "kiln_bf16_bits",
    "kiln_f2i64",      "kiln_f2i32",
    "kiln_wrap_add",   "kiln_wrap_sub",    "kiln_wrap_mul",    "kiln_ipow",
    "kiln_imin",       "kiln_imax",        "kiln_sign",
    "kiln_exp",        "kiln_log",         "kiln_log1p",       "kiln_sqrt",
    "kiln_sin",        "kiln_cos",         "kiln_tanh",        "kiln_erf",
    "kiln_erfinv",     "kiln_fabs",       "kiln_pow",         "kiln_maximum",     "kiln_minimum",
    "kiln_floor",      "kiln_ceil",        "kiln_rint",        "kiln_trunc",
    "kiln_log2",       "kiln_exp2",        "kiln_fmod",        "kiln_atan2",       "kiln_remainder",
    "kiln_clamp_min",  "kiln_clamp_max",
    "kiln_gelu",       "kiln_gelu_tanh",
    "kiln_rcp_scale",  "kiln_rcp_scaled",
    "kiln_max_step",   "kiln_min_step",    "kiln_argmax_wins", "kiln_sumexp_step", "kiln_sumexp_merge",
    "kiln_welford_step", "kiln_welford_merge",
    "kiln_check_index", "kiln_rand_uniform",
};

// The shared math as source text (no includes; needs the macros and functions above).
std::string_view prelude_math();

}  // namespace kiln::codegen
