#pragma once
// Element types and PyTorch's type-promotion lattice.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// X(Enum, text name, bytes, is_floating, is_integral)
#define KILN_FOR_EACH_DTYPE(X)   \
  X(Bool, "bool", 1, false, false) \
  X(I32, "i32", 4, false, true)    \
  X(I64, "i64", 8, false, true)    \
  X(F16, "f16", 2, true, false)    \
  X(BF16, "bf16", 2, true, false)  \
  X(F32, "f32", 4, true, false)    \
  X(F64, "f64", 8, true, false)

enum class DType : uint8_t {
#define X(E, name, bytes, fl, in) E,
  KILN_FOR_EACH_DTYPE(X)
#undef X
};

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
int64_t dtype_size(DType t);
bool is_floating(DType t);
// The largest finite value of a floating dtype (f16 65504, bf16 3.39e38, f32 3.40e38, f64
// 1.80e308): nan_to_num's default for +inf.
double max_finite(DType t);
// The gap between 1 and the next value of a floating dtype (torch.finfo(dt).eps): rms_norm's
// default eps.
double machine_epsilon(DType t);
bool is_integral(DType t);  // i32, i64 (not bool)

// The kind of a dtype in PyTorch's promotion: bool < integral < floating.
enum class DTypeKind { Bool = 0, Integral = 1, Floating = 2 };
DTypeKind dtype_kind(DType t);

// torch.promote_types: the smallest type both convert to (f16 with bf16 gives f32).
DType promote_types(DType a, DType b);

// The default float type PyTorch picks when an integer input needs a float result.
inline constexpr DType kDefaultFloat = DType::F32;

}  // namespace kiln
