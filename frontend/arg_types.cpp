#include "frontend/arg_types.h"

namespace kiln {

double Scalar::to_double() const {
  return std::visit([](auto v) { return static_cast<double>(v); }, value_);
}

AttrValue Scalar::attr() const {
  if (is_floating()) return std::get<double>(value_);
  if (is_bool()) return static_cast<int64_t>(std::get<bool>(value_));
  return std::get<int64_t>(value_);
}

}  // namespace kiln
