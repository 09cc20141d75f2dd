#include "ir/dtype.h"

#include <array>

#include "ir/error.h"

namespace kiln {
namespace {
struct DTypeInfo {
  std::string_view name;
  int64_t bytes;
  bool floating;
  bool integral;
};
constexpr std::array kDTypes = {
#define X(E, name, bytes, fl, in) DTypeInfo{name, bytes, fl, in},
    KILN_FOR_EACH_DTYPE(X)
#undef X
};
const DTypeInfo& info(DType t) { return kDTypes[static_cast<size_t>(t)]; }
}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }
int64_t dtype_size(DType t) { return info(t).bytes; }
double max_finite(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: return 3.4028234663852886e38;
    case DType::F64: return 1.7976931348623157e308;
    default: fail("max_finite: {} is not a floating dtype", dtype_name(t));
  }
}

double machine_epsilon(DType t) {
  switch (t) {
    case DType::F16: return 0x1p-10;
    case DType::BF16: return 0x1p-7;
    case DType::F32: return 0x1p-23;
    case DType::F64: return 0x1p-52;
    default: fail("machine_epsilon: {} is not a floating dtype", dtype_name(t));
  }
}

bool is_floating(DType t) { return info(t).floating; }
bool is_integral(DType t) { return info(t).integral; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kDTypes.size(); ++i)
    if (kDTypes[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

DTypeKind dtype_kind(DType t) {
  if (t == DType::Bool) return DTypeKind::Bool;
  return is_floating(t) ? DTypeKind::Floating : DTypeKind::Integral;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;  // float wins over any integer type
  if (!fa) return dtype_size(a) >= dtype_size(b) ? a : b;
  // Both floating: f16 and bf16 have no common 16-bit type.
  if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

}  // namespace kiln
