#pragma once
// Argument types of the builder API that the op schemas need and C++ lacks:
//   Scalar: a Python number (int, float or bool) -- keeps int vs float apart, because
//           PyTorch's result type depends on it (t + 2 vs t + 2.0).
//   Dims:   an `int[]?` argument that defaults to None (sum(x) reduces every dim), written
//           as `{0, 1}`, a single int, or left out.
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <variant>

#include "ir/attr.h"

namespace kiln {

class Scalar {
 public:
  template <typename T>
    requires std::is_arithmetic_v<T>
  Scalar(T v) {  // NOLINT: implicit on purpose, like a Python number
    if constexpr (std::is_same_v<T, bool>) value_ = v;
    else if constexpr (std::is_floating_point_v<T>) value_ = static_cast<double>(v);
    else value_ = static_cast<int64_t>(v);
  }
  bool is_floating() const { return std::holds_alternative<double>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  double to_double() const;
  // The attribute value: a double stays a float attribute, an int or bool an int one.
  AttrValue attr() const;

 private:
  std::variant<int64_t, double, bool> value_;
};

class Dims {
 public:
  Dims() = default;  // None
  Dims(std::nullopt_t) {}
  Dims(std::initializer_list<int64_t> dims) : dims_(IntList(dims)) {}
  Dims(IntList dims) : dims_(std::move(dims)) {}
  template <std::integral T>
    requires(!std::is_same_v<T, bool>)
  Dims(T dim) : dims_(IntList{static_cast<int64_t>(dim)}) {}
  const std::optional<IntList>& get() const { return dims_; }

 private:
  std::optional<IntList> dims_;
};

}  // namespace kiln
